import { pgTable, primaryKey, text, uuid } from 'drizzle-orm/pg-core';

/**
 * Which message a customerMessageId names: callbacks, `GET /v1/messages/{ref}` and a submit's
 * idempotency read it, and its key is what keeps a customerMessageId to one message (a submit
 * claims the key first, ON CONFLICT DO NOTHING, then stores the messages whose key it got).
 * Written once, when a message is made. As an index of `messages` it took an entry at every
 * status move (those updates are not HOT), at a random page when clients' ids are random
 * (UUIDs), which outgrows memory as the table grows (docs/performance.md, "A status move with
 * random customer and provider ids"). Triggers on `messages` keep it (migration 0030). Its key
 * carries message_id too (`INCLUDE`, migration 0031, which drizzle cannot express), so a
 * lookup can read the key alone.
 */
export const messageCustomerIds = pgTable('message_customer_ids', {
  customerMessageId: text('customer_message_id').primaryKey(),
  messageId: uuid('message_id').notNull(),
});

/**
 * Which messages a provider id names (the provider answers GUIDs): callbacks and
 * `GET /v1/messages/{ref}` read it, newest message first. Written once, by the dispatch's own
 * statement when the provider answers (src/messages/dispatch-write.ts, the one place that
 * gives a message its provider id); triggers on `messages` keep it through inserts, deletes
 * and any other change of the id (migration 0030).
 */
export const messageProviderIds = pgTable(
  'message_provider_ids',
  {
    providerMessageId: text('provider_message_id').notNull(),
    messageId: uuid('message_id').notNull(),
  },
  (t) => [primaryKey({ columns: [t.providerMessageId, t.messageId] })],
);
