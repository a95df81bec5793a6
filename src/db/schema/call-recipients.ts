import { pgTable, primaryKey, text, uuid } from 'drizzle-orm/pg-core';

/**
 * Which calls went to a phone number: `GET /v1/calls?to=` (newest first) and an erasure's
 * lookup read it. Written once, when a call is made, and never updated. As an index of `calls`
 * it took an entry at a random page on every update that could not be HOT (a call's state
 * moves, and a snapshot that no longer fits its page: about three of a call's five updates);
 * here a call costs one entry. Triggers on `calls` keep it (migration 0029): a row for each
 * call inserted, gone with it.
 */
export const callRecipients = pgTable(
  'call_recipients',
  {
    to: text('to').notNull(),
    callId: uuid('call_id').notNull(),
  },
  // ends in the call id, so a list's cursor walks it
  (t) => [primaryKey({ columns: [t.to, t.callId] })],
);
