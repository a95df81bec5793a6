import {
  bigserial,
  index,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  text,
  timestamp,
} from 'drizzle-orm/pg-core';
import { bytea } from './bytea.ts';

/**
 * Every callback body as received, committed before the 2xx (rule 2). Unparseable bodies are
 * kept too, with what went wrong. Partitioned by `received_at`, one partition per UTC day
 * (migration 0019, src/db/partitions.ts): retention drops a whole day of bodies at once.
 *
 * No foreign key refers to it (a day could then only go by DETACH, which checks every row of
 * it under the table's lock): the rows that point at a body (pending events, inbound
 * messages, held webhooks: `inboxRefs` in src/messages/inbox.ts) are deleted with it by the
 * code that deletes it. A body is found by its id through the primary key (id, received_at).
 */
export const inbox = pgTable(
  'inbox',
  {
    id: bigserial('id', { mode: 'number' }).notNull(),
    /** delivery, viber, speechcall */
    kind: text('kind').notNull(),
    /** `inbox_keys`'s key of this body (src/messages/inbox.ts `dedupKey`) */
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
  // partitioned by received_at: the key must be in it. No other index: a day goes whole, and
  // nothing reads bodies by kind or time (the default partition's few rows are scanned)
  (t) => [primaryKey({ columns: [t.id, t.receivedAt] })],
);

/**
 * The dedup keys of the bodies in the inbox: a hash of the kind and the exact body (the 32
 * bytes of the SHA-256 the inbox holds in hex: half the size in the table and its index, which
 * a lookup probes at random), unique across every day of it (a unique index on the partitioned inbox would have to hold the day
 * too, and a provider's retry arrives on another day). A retry of the same callback conflicts
 * here and changes nothing. Written with its body, in the same statement; deleted with it
 * (erasure), or by retention once older than RETENTION_DAYS, a batch at a time: narrow rows,
 * whose space new keys reuse.
 */
export const inboxKeys = pgTable(
  'inbox_keys',
  {
    dedupKey: bytea('dedup_key').primaryKey(),
    receivedAt: timestamp('received_at', { withTimezone: true, mode: 'date' }).notNull(),
  },
  (t) => [index('inbox_keys_received_idx').on(t.receivedAt)],
);
