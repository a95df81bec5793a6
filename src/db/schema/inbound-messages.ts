import { bigint, index, jsonb, pgTable, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import { inbox } from './inbox.ts';

/** Incoming Viber messages (GET /v1/inbound). */
export const inboundMessages = pgTable(
  'inbound_messages',
  {
    id: uuid('id').primaryKey(),
    inboxId: bigint('inbox_id', { mode: 'number' })
      .notNull()
      .references(() => inbox.id, { onDelete: 'cascade' }),
    channel: text('channel').notNull().default('viber'),
    from: text('from').notNull(),
    to: text('to'),
    text: text('text'),
    providerMessageId: text('provider_message_id'),
    /** the rest of the payload, as sent */
    data: jsonb('data'),
    at: timestamp('at', { withTimezone: true, mode: 'date' }).notNull(),
    receivedAt: timestamp('received_at', { withTimezone: true, mode: 'date' })
      .notNull()
      .defaultNow(),
  },
  (t) => [index('inbound_from_id_idx').on(t.from, t.id), index('inbound_at_idx').on(t.at)],
);
