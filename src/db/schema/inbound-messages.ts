import { sql } from 'drizzle-orm';
import {
  bigint,
  index,
  jsonb,
  pgTable,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from 'drizzle-orm/pg-core';

/** Incoming Viber messages (GET /v1/inbound). */
export const inboundMessages = pgTable(
  'inbound_messages',
  {
    id: uuid('id').primaryKey(),
    /** its body in the inbox (no foreign key: src/db/schema/inbox.ts) */
    inboxId: bigint('inbox_id', { mode: 'number' }).notNull(),
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
  (t) => [
    index('inbound_from_id_idx').on(t.from, t.id),
    index('inbound_at_idx').on(t.at),
    // the messages of a body, when retention or erasure deletes it
    index('inbound_inbox_idx').on(t.inboxId),
    // the provider's id of an incoming message (its idUuid): a message it sends again, even
    // in a body that differs, is stored once
    uniqueIndex('inbound_channel_pmid_idx')
      .on(t.channel, t.providerMessageId)
      .where(sql`${t.providerMessageId} is not null`),
  ],
);
