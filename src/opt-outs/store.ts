/**
 * The opt-out list: numbers that asked not to be contacted (issue 26). Every send honours it:
 * POST /v1/messages and /v1/calls(/batch) ask `optedOutAmong` once per request, campaigns
 * before each release. Entries come from the API, from an incoming reply that is an opt-out
 * word (words.ts), or from a flow's `opt-out` action; the first one stays (its source and
 * detail say where it came from), later ones change nothing.
 *
 * @example
 * await addOptOut(db, '+380501234567', 'api', null, clock.now()); // { created: true }
 * (await optedOutAmong(db, ['+380501234567', '+380671234567'])).has('+380501234567'); // true
 */
import { and, desc, eq, inArray, lt, or } from 'drizzle-orm';
import type { Queryable } from '../db/client.ts';
import { optOuts } from '../db/schema/index.ts';
import { AppError, type ErrorDetail } from '../errors.ts';
import { isStorableInstant } from '../instants.ts';

export type OptOutSource = 'api' | 'inbound' | 'flow';

export interface OptOutView {
  phone: string;
  source: OptOutSource;
  detail: Record<string, unknown> | null;
  createdAt: string;
}

/** Records the number's opt-out; `created: false` when it was already on the list. */
export async function addOptOut(
  db: Queryable,
  phone: string,
  source: OptOutSource,
  detail: Record<string, unknown> | null,
  now: Date,
): Promise<{ created: boolean }> {
  const rows = await db
    .insert(optOuts)
    .values({ phone, source, detail, createdAt: now })
    .onConflictDoNothing()
    .returning({ phone: optOuts.phone });
  return { created: rows.length > 0 };
}

/** Takes the number off the list; false when it was not on it. */
export async function removeOptOut(db: Queryable, phone: string): Promise<boolean> {
  const rows = await db
    .delete(optOuts)
    .where(eq(optOuts.phone, phone))
    .returning({ phone: optOuts.phone });
  return rows.length > 0;
}

/** Which of these numbers opted out: one query on the primary key, whatever their count. */
export async function optedOutAmong(
  db: Queryable,
  phones: readonly string[],
): Promise<Set<string>> {
  const unique = [...new Set(phones)];
  if (unique.length === 0) return new Set();
  const rows = await db
    .select({ phone: optOuts.phone })
    .from(optOuts)
    .where(inArray(optOuts.phone, unique));
  return new Set(rows.map((r) => r.phone));
}

function view(r: typeof optOuts.$inferSelect): OptOutView {
  return {
    phone: r.phone,
    source: r.source as OptOutSource,
    detail: (r.detail as Record<string, unknown> | null) ?? null,
    createdAt: r.createdAt.toISOString(),
  };
}

/** One number's opt-out, or undefined. */
export async function getOptOut(db: Queryable, phone: string): Promise<OptOutView | undefined> {
  const [row] = await db.select().from(optOuts).where(eq(optOuts.phone, phone));
  return row && view(row);
}

// A cursor names the last row of a page by (created_at, phone): newest first, ties by number.
function encodeCursor(r: { createdAt: Date; phone: string }): string {
  return Buffer.from(`${r.createdAt.toISOString()}|${r.phone}`, 'utf8').toString('base64url');
}

function decodeCursor(cursor: string): { at: Date; phone: string } {
  const [at, phone, ...rest] = Buffer.from(cursor, 'base64url').toString('utf8').split('|');
  const when = at ? new Date(at) : undefined;
  // a time Postgres cannot read back (src/instants.ts) is no cursor of ours either
  if (!when || !isStorableInstant(when.getTime()) || !phone || rest.length > 0) {
    throw new AppError('VALIDATION_ERROR', 'cursor is not one this API returned', [
      { path: 'cursor', code: 'INVALID_CURSOR', message: 'pass nextCursor from a previous page' },
    ]);
  }
  return { at: when, phone };
}

/** GET /v1/opt-outs: newest first, keyset pages. */
export async function listOptOuts(
  db: Queryable,
  opts: { cursor?: string | undefined; limit?: number | undefined },
): Promise<{ items: OptOutView[]; nextCursor: string | null }> {
  const limit = opts.limit ?? 50;
  const after = opts.cursor ? decodeCursor(opts.cursor) : undefined;
  const rows = await db
    .select()
    .from(optOuts)
    .where(
      after &&
        or(
          lt(optOuts.createdAt, after.at),
          and(eq(optOuts.createdAt, after.at), lt(optOuts.phone, after.phone)),
        ),
    )
    .orderBy(desc(optOuts.createdAt), desc(optOuts.phone))
    .limit(limit + 1);
  const page = rows.slice(0, limit);
  return {
    items: page.map(view),
    nextCursor: rows.length > limit && page.length > 0 ? encodeCursor(page.at(-1)!) : null,
  };
}

/**
 * The refusal of a send to a number on the list, naming the field (`to`, `calls[3].to`,
 * `messages[0].to`): the one wording every send path answers with.
 */
export function optedOutRejection(
  path: string,
  to: string,
): { code: 'OPTED_OUT'; message: string; details: ErrorDetail[] } {
  return {
    code: 'OPTED_OUT',
    message: `${path}: ${to} asked not to be contacted (it is on the opt-out list)`,
    details: [{ path, code: 'OPTED_OUT', message: 'is on the opt-out list' }],
  };
}
