import { sql } from 'drizzle-orm';
import { pgTable, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';

/**
 * API tokens with scopes (src/http/api-auth.ts), made through `POST /v1/tokens` or
 * `switchboard tokens create`. Only the token's hash is kept: the token itself is shown once,
 * in the answer that made it. API_TOKEN (the environment's) is not here: it has every scope.
 */
export const apiTokens = pgTable(
  'api_tokens',
  {
    /** tok_... */
    id: text('id').primaryKey(),
    /** unique among tokens not revoked; written to the audit log with each change it makes */
    name: text('name').notNull(),
    /** hex SHA-256 of the token */
    hash: text('hash').notNull().unique(),
    /** read, send, admin */
    scopes: text('scopes').array().notNull(),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
    /** the name of the token that made this one */
    createdBy: text('created_by').notNull(),
    lastUsedAt: timestamp('last_used_at', { withTimezone: true, mode: 'date' }),
    revokedAt: timestamp('revoked_at', { withTimezone: true, mode: 'date' }),
  },
  (t) => [uniqueIndex('api_tokens_live_name_idx').on(t.name).where(sql`revoked_at is null`)],
);
