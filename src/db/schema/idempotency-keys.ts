import { index, integer, pgTable, primaryKey, text, timestamp } from 'drizzle-orm/pg-core';

/**
 * `Idempotency-Key`s of POST requests (src/http/idempotency.ts): the first answer to a key,
 * kept until `expiresAt` (24 h) so that a retry gets it again instead of a second creation.
 * A row with no `status` is a request still running under its key. Keys belong to the
 * caller that sent them: `caller` is the hex SHA-256 of its bearer token (what api_tokens
 * keeps too), or `open`. The stored answer is encrypted with a key derived from the bearer
 * token itself (which is not stored), so a copy of this table shows no answer, and no API
 * token made through POST /v1/tokens.
 */
export const idempotencyKeys = pgTable(
  'idempotency_keys',
  {
    caller: text('caller').notNull(),
    /** the header's value: 1-255 printable ASCII characters */
    key: text('key').notNull(),
    /** hex SHA-256 of the request: method, path and body bytes */
    fingerprint: text('fingerprint').notNull(),
    /** the stored answer's HTTP status; null while the first request is running */
    status: integer('status'),
    /** the stored answer's JSON body, encrypted (AES-256-GCM), base64 */
    body: text('body'),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull(),
    expiresAt: timestamp('expires_at', { withTimezone: true, mode: 'date' }).notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.caller, t.key] }),
    // the cleanup walks expired keys oldest first
    index('idempotency_keys_expires_at_idx').on(t.expiresAt),
  ],
);
