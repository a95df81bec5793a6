import { bigserial, index, jsonb, pgTable, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import { messages } from './messages.ts';

/**
 * The append-only timeline of a message. `at` is the event's own time (as the source
 * reports it), `receivedAt` when Switchboard stored it: timelines sort by `at`, because
 * providers deliver callbacks out of order.
 */
export const messageEvents = pgTable(
  'message_events',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    messageId: uuid('message_id')
      .notNull()
      .references(() => messages.id, { onDelete: 'cascade' }),
    status: text('status').notNull(),
    /** api, dispatch, provider, callback, poll */
    source: text('source').notNull(),
    detail: jsonb('detail'),
    at: timestamp('at', { withTimezone: true, mode: 'date' }).notNull(),
    receivedAt: timestamp('received_at', { withTimezone: true, mode: 'date' })
      .notNull()
      .defaultNow(),
  },
  (t) => [index('message_events_message_at_idx').on(t.messageId, t.at, t.id)],
);

export type MessageEventRow = typeof messageEvents.$inferSelect;
