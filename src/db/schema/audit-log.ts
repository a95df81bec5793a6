import { bigserial, index, integer, jsonb, pgTable, text, timestamp } from 'drizzle-orm/pg-core';

/**
 * One row per request that changed something through the API (GET /v1/audit): who (the
 * token's name), which route, its answer, and what it created or removed, with counts.
 *
 * It grows with the traffic (a row per changing request), so the filters of `GET /v1/audit`
 * (token, route) each have an index that hands out their newest rows first (migration 0027),
 * and AUDIT_RETENTION_DAYS removes old rows, oldest first. Not in day partitions, unlike the
 * timelines: it is kept forever by default, and a query through a partitioned parent that
 * cannot prune at plan time (a page, newest first) costs planning time per day kept
 * (docs/scaling.md, "Partitions").
 */
export const auditLog = pgTable(
  'audit_log',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    at: timestamp('at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
    /** the token's name: `API_TOKEN` for the environment's, `open` when no token is configured */
    token: text('token').notNull(),
    method: text('method').notNull(),
    /** the route's pattern, e.g. /v1/subjects/{phone} */
    route: text('route').notNull(),
    status: integer('status').notNull(),
    requestId: text('request_id').notNull(),
    /** what the request created or removed: ids and counts, never message texts */
    changes: jsonb('changes').notNull(),
  },
  (t) => [
    index('audit_log_at_idx').on(t.at, t.id),
    index('audit_log_token_idx').on(t.token, t.id),
    index('audit_log_route_idx').on(t.route, t.id),
  ],
);
