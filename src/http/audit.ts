/**
 * The audit log: one `audit_log` row per request that can change something through the API
 * (a `/v1` route whose method is not GET), written after its handler and awaited before the
 * answer goes out, so a 2xx means its row is stored. Refused and failed attempts by a known
 * token (or on an open API) are written too, with their status and no changes; requests with
 * no valid token (401) are not, so that no one without a token can fill the table.
 *
 * Handlers say what they did with `c.set('audit', ...)` (ids and counts, never texts or phone
 * numbers); `GET /v1/audit` reads the rows back.
 *
 * @example
 * c.set('audit', { created: { messages: auditItems(ids) }, rejected: { messages: 2 } });
 */
import { z } from '@hono/zod-openapi';
import { and, desc, eq, gte, lt, lte, type SQL } from 'drizzle-orm';
import type { MiddlewareHandler } from 'hono';
import type { Clock } from '../clock.ts';
import type { Queryable } from '../db/client.ts';
import { errorFields } from '../db/errors.ts';
import { auditLog } from '../db/schema/audit-log.ts';
import { decodeIdCursor, encodeIdCursor } from './cursor.ts';
import type { AppEnv } from './env.ts';
import { errorResponse } from './errors.ts';

/** At most this many ids are listed per kind; past it the count alone is kept. */
export const MAX_AUDIT_IDS = 20;

const AuditItems = z
  .object({
    count: z.number().int().min(0),
    ids: z
      .array(z.string())
      .optional()
      .meta({ description: `the ids, when there are at most ${MAX_AUDIT_IDS}` }),
    names: z.array(z.string()).optional(),
  })
  .meta({ id: 'AuditItems' });

export const AuditChanges = z
  .object({
    created: z.record(z.string(), AuditItems).optional(),
    removed: z.record(z.string(), AuditItems).optional(),
    changed: z.record(z.string(), AuditItems).optional().meta({
      description:
        "what it modified in place: an endpoint's settings or secret, deliveries queued again",
    }),
    rejected: z
      .record(z.string(), z.number().int().min(0))
      .optional()
      .meta({ description: 'items of the request refused one by one' }),
  })
  .meta({
    id: 'AuditChanges',
    description:
      'what the request created, changed or removed, by kind; empty when it changed nothing',
  });
export type AuditChanges = z.infer<typeof AuditChanges>;

/**
 * An audit row for a change made outside `/v1` (the console's forms): the same table, the
 * console's route, who made it (a token's name, or `console` for a signed-in session).
 */
export async function auditConsoleWrite(
  db: Queryable,
  clock: Clock,
  row: { token: string; route: string; status: number; requestId: string; changes: AuditChanges },
): Promise<void> {
  await db.insert(auditLog).values({
    at: clock.now(),
    token: row.token,
    method: 'POST',
    route: row.route,
    status: row.status,
    requestId: row.requestId,
    changes: row.changes,
  });
}

/** `ids` as audit items: the count, and the ids themselves when there are few. */
export function auditItems(ids: readonly string[], names?: readonly string[]) {
  return {
    count: ids.length,
    ...(ids.length <= MAX_AUDIT_IDS && { ids: [...ids] }),
    ...(names && names.length <= MAX_AUDIT_IDS && { names: [...names] }),
  };
}

/**
 * The middleware. Mount it before the API auth: the auth middleware names the route and the
 * caller (`apiRoute`, `principal`) or refuses without naming a caller.
 */
export function auditRequests(db: Queryable, clock: Clock): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    await next();
    const route = c.get('apiRoute');
    const principal = c.get('principal');
    if (!route || !principal || route.method === 'GET') return;
    const status = c.res.status;
    try {
      await db.insert(auditLog).values({
        // the clock's milliseconds, not now()'s microseconds: `at` as shown is `at` as filtered
        at: clock.now(),
        token: principal.name,
        method: route.method,
        route: route.path,
        status,
        requestId: c.get('requestId'),
        changes: status < 400 ? (c.get('audit') ?? {}) : {},
      });
    } catch (err) {
      c.get('logger')?.error(
        { err: errorFields(err), route: route.path, status },
        'audit row not written',
      );
      // a 2xx promises the row; a 500 (never retried by our clients, unlike a 503) says not
      if (status < 400) {
        c.res = errorResponse(
          c,
          'INTERNAL',
          'the request was carried out, but its audit row could not be written',
        );
      }
    }
  };
}

export const AuditEntry = z
  .object({
    id: z.number().int(),
    at: z.string(),
    token: z.string().meta({
      description:
        'the token\'s name: API_TOKEN for the environment\'s, "open" when none is needed',
    }),
    method: z.string().meta({ example: 'POST' }),
    route: z.string().meta({ example: '/v1/messages' }),
    status: z.number().int().meta({ example: 202 }),
    requestId: z.string(),
    changes: AuditChanges,
  })
  .meta({ id: 'AuditEntry' });
export type AuditEntry = z.infer<typeof AuditEntry>;

export const AuditPage = z
  .object({
    items: z.array(AuditEntry),
    nextCursor: z.string().nullable().meta({ description: 'pass as `cursor` for the next page' }),
  })
  .meta({ id: 'AuditPage' });
export type AuditPage = z.infer<typeof AuditPage>;

export interface AuditFilter {
  since?: Date | undefined;
  until?: Date | undefined;
  token?: string | undefined;
  /** a route pattern: /v1/subjects/{phone} */
  route?: string | undefined;
  limit?: number | undefined;
  cursor?: string | undefined;
}

/** Newest first, one page: rows are numbered in the order they were written. */
export async function listAudit(db: Queryable, filter: AuditFilter): Promise<AuditPage> {
  const limit = filter.limit ?? 50;
  const where: SQL[] = [];
  if (filter.since) where.push(gte(auditLog.at, filter.since));
  if (filter.until) where.push(lte(auditLog.at, filter.until));
  if (filter.token) where.push(eq(auditLog.token, filter.token));
  if (filter.route) where.push(eq(auditLog.route, filter.route));
  if (filter.cursor) where.push(lt(auditLog.id, decodeIdCursor(filter.cursor)));
  const rows = await db
    .select()
    .from(auditLog)
    .where(and(...where))
    .orderBy(desc(auditLog.id))
    .limit(limit + 1);
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  return {
    items: page.map((r) => ({
      id: r.id,
      at: r.at.toISOString(),
      token: r.token,
      method: r.method,
      route: r.route,
      status: r.status,
      requestId: r.requestId,
      changes: r.changes as AuditChanges,
    })),
    nextCursor: rows.length > limit && last ? encodeIdCursor(last.id) : null,
  };
}
