import { index, pgTable, text, timestamp } from 'drizzle-orm/pg-core';

/**
 * Console sign-ins (src/ui/auth.ts). The cookie holds a random secret; only its hash is kept,
 * so a copy of this table opens nothing. Signing out sets `revokedAt`; a session is also void
 * once `expiresAt` passes or the token it was opened with (`tokenHash`) leaves UI_TOKEN.
 */
export const consoleSessions = pgTable(
  'console_sessions',
  {
    /** hex SHA-256 of the cookie's secret */
    id: text('id').primaryKey(),
    /** HMAC of the token that signed in, so removing the token voids its sessions */
    tokenHash: text('token_hash').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
    expiresAt: timestamp('expires_at', { withTimezone: true, mode: 'date' }).notNull(),
    revokedAt: timestamp('revoked_at', { withTimezone: true, mode: 'date' }),
  },
  (t) => [index('console_sessions_expires_idx').on(t.expiresAt)],
);
