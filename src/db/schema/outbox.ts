import { bigserial, index, integer, pgTable, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import { messages } from './messages.ts';

/**
 * Messages waiting to be sent. A row is written in the same transaction as its message, and
 * deleted in the same transaction that records the provider's answer, so a crash anywhere in
 * between leaves the row in place and the message is sent again with the same
 * customerMessageId (which the provider deduplicates).
 */
export const outbox = pgTable(
  'outbox',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    messageId: uuid('message_id')
      .notNull()
      .unique()
      .references(() => messages.id, { onDelete: 'cascade' }),
    /** not before this time: scheduled sends and retry backoff */
    availableAt: timestamp('available_at', { withTimezone: true, mode: 'date' })
      .notNull()
      .defaultNow(),
    attempts: integer('attempts').notNull().default(0),
    lastError: text('last_error'),
    /**
     * the W3C trace context of what queued the message (tracing on, src/tracing.ts), so the
     * round that sends it links back to it; null when tracing is off
     */
    traceParent: text('trace_parent'),
    /**
     * bytes of the message's payload as the dispatcher sends it (`octet_length(payload::text)`),
     * written with the row (migration 0032): a round fits its list to MESSAGELIST_BYTES on this
     * column, so it reads (and detoasts) only the payloads it sends. Before, every locked row's
     * payload was read to be measured: a backlog of calls (20-45 KB each, 30 to a list) read
     * up to 5000 of them a round to send 30.
     */
    payloadBytes: integer('payload_bytes').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  },
  // the dispatcher's claim query walks this index in order
  (t) => [index('outbox_available_idx').on(t.availableAt, t.id)],
);
