import { pgTable, primaryKey, text, uuid } from 'drizzle-orm/pg-core';

/**
 * Which messages went to a phone number: `GET /v1/messages?to=` (newest first) and an
 * erasure's lookup read it. Written once, when a message is made, and never updated. The same
 * lookup as an index of `messages` took an entry at a random page (it is by phone) on every
 * status move, since those updates cannot be HOT; here a message costs one. Triggers on
 * `messages` keep it (migration 0024): a row for each message inserted, gone with it.
 */
export const messageRecipients = pgTable(
  'message_recipients',
  {
    to: text('to').notNull(),
    messageId: uuid('message_id').notNull(),
  },
  // ends in the message id, so a list's cursor walks the key
  (t) => [primaryKey({ columns: [t.to, t.messageId] })],
);
