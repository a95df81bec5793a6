import { pgTable, text, timestamp } from 'drizzle-orm/pg-core';

/**
 * Values Switchboard generates once and every instance must agree on (the webhook signing
 * secret when WEBHOOK_SECRET is unset). Written with ON CONFLICT DO NOTHING and read back, so
 * instances starting together end up with the same value.
 */
export const settings = pgTable('settings', {
  key: text('key').primaryKey(),
  value: text('value').notNull(),
  createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
});
