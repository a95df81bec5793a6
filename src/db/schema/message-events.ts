import {
  bigserial,
  index,
  jsonb,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uuid,
} from 'drizzle-orm/pg-core';

/**
 * The append-only timeline of a message. `at` is the event's own time (as the source
 * reports it), `receivedAt` when Switchboard stored it: timelines sort by `at`, because
 * providers deliver callbacks out of order.
 */
export const messageEvents = pgTable(
  'message_events',
  {
    id: bigserial('id', { mode: 'number' }).notNull(),
    // no foreign key to messages: its check was ~6 us of Postgres CPU for each event the
    // dispatcher writes (one per message sent). Events are written for locked, existing
    // messages only, and the one place that deletes messages (privacy/erasure.ts) deletes
    // their events first.
    messageId: uuid('message_id').notNull(),
    status: text('status').notNull(),
    /** api, dispatch, provider, callback, poll */
    source: text('source').notNull(),
    detail: jsonb('detail'),
    at: timestamp('at', { withTimezone: true, mode: 'date' }).notNull(),
    receivedAt: timestamp('received_at', { withTimezone: true, mode: 'date' })
      .notNull()
      .defaultNow(),
  },
  (t) => [
    // partitioned by message_id (migration 0017, src/db/partitions.ts): the key must be in it
    primaryKey({ columns: [t.id, t.messageId] }),
    index('message_events_message_at_idx').on(t.messageId, t.at, t.id),
  ],
);

export type MessageEventRow = typeof messageEvents.$inferSelect;
