import { sql } from 'drizzle-orm';
import { bigint, index, integer, jsonb, pgTable, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import { timestamps } from './columns.ts';

/**
 * One row per message Switchboard was asked to send (the read model's head row).
 * `status` is the current status; it only moves up a rank (see messages/status.ts), the
 * full history is in `message_events`.
 */
export const messages = pgTable(
  'messages',
  {
    // UUIDv7: time-ordered, so the id doubles as a stable list cursor.
    id: uuid('id').primaryKey(),
    // looked up through message_customer_ids (its key keeps it to one message) and
    // message_provider_ids, written once, not through indexes here: a status move cannot be
    // HOT, so every index of messages takes an entry at each (src/db/schema/message-keys.ts)
    customerMessageId: text('customer_message_id').notNull(),
    providerMessageId: text('provider_message_id'),
    messagelistId: bigint('messagelist_id', { mode: 'number' }),
    type: text('type').notNull(),
    from: text('from').notNull(),
    to: text('to').notNull(),
    /**
     * the message object as it will be sent to the provider
     * (docs/provider.md, "Sending: POST /bat/messagelist")
     */
    payload: jsonb('payload').notNull(),
    status: text('status').notNull(),
    parts: integer('parts'),
    callId: uuid('call_id'),
    /** 'call' for a call's own speechcall message, 'follow-up' for what a flow sends */
    role: text('role'),
    /** the channel (message type) that finally delivered, when fallbacks were involved */
    deliveredVia: text('delivered_via'),
    error: jsonb('error'),
    /** when the status poller last asked the provider about it */
    lastPolledAt: timestamp('last_polled_at', { withTimezone: true, mode: 'date' }),
    /** how many times the poller has asked about it: the wait before the next grows with it */
    pollCount: integer('poll_count').notNull().default(0),
    /**
     * when the message's life ends (dtExpire, or its TTLs from dispatch, fallbacks' included):
     * one still without a final status some margin after this is marked expired
     */
    expiresAt: timestamp('expires_at', { withTimezone: true, mode: 'date' }),
    /** when retention removed the texts from `payload` (which then says `redacted`) */
    contentRemovedAt: timestamp('content_removed_at', { withTimezone: true, mode: 'date' }),
    ...timestamps,
  },
  (t) => [
    // list filters, each ending in id so the cursor walks the index (by phone number and by
    // type: message_recipients, written once instead of at every status move)
    index('messages_status_id_idx').on(t.status, t.id),
    // partial: most messages belong to no call, and every index on messages costs each send
    // and each callback an entry (the dispatcher's update cannot be HOT)
    index('messages_call_id_idx').on(t.callId, t.id).where(sql`${t.callId} is not null`),
  ],
);

export type MessageRow = typeof messages.$inferSelect;
export type NewMessageRow = typeof messages.$inferInsert;
