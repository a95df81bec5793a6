import { bigint, bigserial, index, jsonb, pgTable, text, timestamp } from 'drizzle-orm/pg-core';

/**
 * Delivery events whose message is not known yet (the callback outran the send, or the
 * provider's answer carrying its messageId is not recorded yet). They are attached when a
 * message with that customerMessageId or messageId appears.
 */
export const pendingEvents = pgTable(
  'pending_events',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    /** its body in the inbox (no foreign key: src/db/schema/inbox.ts) */
    inboxId: bigint('inbox_id', { mode: 'number' }).notNull(),
    customerMessageId: text('customer_message_id'),
    providerMessageId: text('provider_message_id'),
    status: text('status').notNull(),
    detail: jsonb('detail'),
    at: timestamp('at', { withTimezone: true, mode: 'date' }).notNull(),
    receivedAt: timestamp('received_at', { withTimezone: true, mode: 'date' })
      .notNull()
      .defaultNow(),
  },
  (t) => [
    index('pending_events_cmid_idx').on(t.customerMessageId),
    index('pending_events_pmid_idx').on(t.providerMessageId),
  ],
);
