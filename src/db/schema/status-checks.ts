import { index, pgTable, timestamp, uuid } from 'drizzle-orm/pg-core';
import { messages } from './messages.ts';

/**
 * Messages whose status record the poller is to read once more: a message with fallbacks
 * whose final status came from a callback that names no channel (the provider's webhook),
 * so that which channel delivered, and what became of each (`extendedStatuses`), reaches
 * its timeline.
 */
export const statusChecks = pgTable(
  'status_checks',
  {
    messageId: uuid('message_id')
      .primaryKey()
      .references(() => messages.id, { onDelete: 'cascade' }),
    dueAt: timestamp('due_at', { withTimezone: true, mode: 'date' }).notNull(),
  },
  (t) => [index('status_checks_due_idx').on(t.dueAt)],
);
