import {
  bigserial,
  index,
  integer,
  jsonb,
  pgTable,
  text,
  timestamp,
  uniqueIndex,
} from 'drizzle-orm/pg-core';

/**
 * Every callback body as received, committed before the 2xx (rule 2). `dedupKey` is a hash
 * of the kind and the exact body: a provider's retry of the same callback conflicts and
 * changes nothing. Unparseable bodies are kept too, with what went wrong.
 */
export const inbox = pgTable(
  'inbox',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    /** delivery, viber, speechcall */
    kind: text('kind').notNull(),
    dedupKey: text('dedup_key').notNull(),
    contentType: text('content_type'),
    body: text('body'),
    /** what the parser made of it: events, matched/unmatched counts, errors */
    outcome: jsonb('outcome'),
    /** events of this body that are still waiting for their message */
    pending: integer('pending').notNull().default(0),
    receivedAt: timestamp('received_at', { withTimezone: true, mode: 'date' })
      .notNull()
      .defaultNow(),
  },
  (t) => [
    uniqueIndex('inbox_dedup_idx').on(t.dedupKey),
    index('inbox_kind_received_idx').on(t.kind, t.receivedAt),
  ],
);
