import { pgTable, primaryKey, text, timestamp } from 'drizzle-orm/pg-core';

/**
 * Ids of erased messages and calls (DELETE /v1/subjects/{phone}), hashed: enough to
 * recognise a late callback about one and drop it, without keeping the ids themselves.
 */
export const erasedIds = pgTable(
  'erased_ids',
  {
    /** messageId (Switchboard's), customerMessageId, providerMessageId or callId */
    kind: text('kind').notNull(),
    /** hex SHA-256 of the id (the same as Postgres' `encode(sha256(...), 'hex')`) */
    hash: text('hash').notNull(),
    erasedAt: timestamp('erased_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.kind, t.hash] })],
);
