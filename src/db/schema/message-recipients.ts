import { index, pgTable, primaryKey, text, uuid } from 'drizzle-orm/pg-core';

/**
 * Which messages went to a phone number, and which are of a type: `GET /v1/messages?to=` and
 * `?type=` (newest first) and an erasure's lookup read it. Written once, when a message is
 * made, and never updated. The same lookups as indexes of `messages` took an entry on every
 * status move, since those updates cannot be HOT (by phone at a random page; by type, measured,
 * 2-8 % more Postgres CPU per callback and per message dispatched); here a message costs one
 * entry in each. Triggers on `messages` keep it (migrations 0024, 0026): a row for each message
 * inserted, gone with it.
 */
export const messageRecipients = pgTable(
  'message_recipients',
  {
    to: text('to').notNull(),
    messageId: uuid('message_id').notNull(),
    type: text('type').notNull(),
  },
  // each ends in the message id, so a list's cursor walks it
  (t) => [
    primaryKey({ columns: [t.to, t.messageId] }),
    index('message_recipients_type_message_id_idx').on(t.type, t.messageId),
  ],
);
