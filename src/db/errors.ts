/**
 * Tells "the database is not answering" apart from every other failure, so that the HTTP
 * layer can answer 503 (retry later) instead of 500, and callers can tell the provider to
 * retry rather than believing something was stored.
 */

import { NOT_THE_DATABASE } from '../errors.ts';

/** The code of the error a request gets while the database is known down (db/availability.ts). */
export const DATABASE_DOWN = 'DATABASE_DOWN';

const CONNECTION_CODES = new Set([
  DATABASE_DOWN,
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'CONNECT_TIMEOUT',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  '57P01', // admin_shutdown
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now
]);

/**
 * `err` and what it wraps (`cause`, as drizzle wraps a driver's error), at most five deep,
 * stopping at an error about another system (NOT_THE_DATABASE, src/errors.ts).
 */
function* causes(err: unknown): Generator<Record<string, unknown>> {
  for (let e: unknown = err, depth = 0; e && depth < 5; depth++) {
    if ((e as { [NOT_THE_DATABASE]?: boolean })[NOT_THE_DATABASE] === true) return;
    yield e as Record<string, unknown>;
    e = (e as { cause?: unknown }).cause;
  }
}

/**
 * `work`, or after `ms` the error "`what` did not answer within `ms` ms", which
 * `isDatabaseUnavailable` knows. A late end of `work` is ignored: its result goes nowhere, its
 * error is not unhandled. With `expire`, the deadline also aborts it (with the same error), so
 * that work that can stop (a statement on Postgres: pipelinedTransaction) stops.
 *
 * @example
 * await withTimeout(sql`select 1`, 2000, 'the replica');
 */
export function withTimeout<T>(
  work: Promise<T>,
  ms: number,
  what: string,
  expire?: AbortController,
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const err = new Error(`${what} did not answer within ${ms} ms`);
      reject(err);
      expire?.abort(err);
    }, ms);
  });
  return Promise.race([work, expired]).finally(() => clearTimeout(timer));
}

export function isDatabaseUnavailable(err: unknown): boolean {
  for (const { code, message } of causes(err)) {
    if (typeof code === 'string' && (CONNECTION_CODES.has(code) || code.startsWith('08'))) {
      return true;
    }
    if (typeof message === 'string' && /did not answer within|PGlite is closed/i.test(message)) {
      return true;
    }
  }
  return false;
}

/**
 * Whether `err` (or what it wraps) is a unique violation on `constraint`: the key was
 * stored meanwhile. postgres.js names the constraint `constraint_name`, PGlite `constraint`.
 *
 * @example
 * if (isUniqueViolation(err, 'inbox_keys_pkey')) return runAgain();
 */
export function isUniqueViolation(err: unknown, constraint: string): boolean {
  for (const { code, constraint_name, constraint: named } of causes(err)) {
    if (code === '23505' && (constraint_name ?? named) === constraint) return true;
  }
  return false;
}

/**
 * One character Postgres cannot store: U+0000 (in text or jsonb), or a UTF-16 surrogate
 * without its pair (in jsonb). Input checks refuse it (src/http/input.ts); raw callbacks
 * keep U+FFFD in its place (src/messages/inbox.ts).
 */
export const UNSTORABLE_CHAR =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: U+0000 is exactly what it looks for
  /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Postgres's words for "this text cannot be stored": U+0000, or an unpaired surrogate in jsonb. */
const UNSTORABLE_TEXT_CODES = new Set([
  '22021', // character_not_in_repertoire: a 0x00 byte in text
  '22P05', // untranslatable_character: \u0000 in jsonb
]);

/**
 * Whether `err` (or what it wraps) is Postgres refusing a character it cannot store, which
 * only input can carry: the HTTP layer answers 400 for it, never 500.
 */
export function isUnstorableText(err: unknown): boolean {
  for (const { code } of causes(err)) {
    if (typeof code === 'string' && UNSTORABLE_TEXT_CODES.has(code)) return true;
  }
  return false;
}

/**
 * Whether `err` (or what it wraps) is Postgres's 55P03: a lock not granted within
 * lock_timeout (or NOWAIT). Maintenance that gives way to the hot paths retries later.
 */
export function isLockNotAvailable(err: unknown): boolean {
  for (const { code } of causes(err)) if (code === '55P03') return true;
  return false;
}

/**
 * Whether `err` (or what it wraps) is Postgres's 42P01, undefined_table: a statement named a
 * table that is not there (a day partition dropped since it was listed, db/partition-map.ts).
 */
export function isUndefinedTable(err: unknown): boolean {
  for (const { code } of causes(err)) if (code === '42P01') return true;
  return false;
}

/** What Postgres said of a failed statement, as a log line carries it (errorFields). */
export interface DatabaseErrorFields {
  /** SQLSTATE, e.g. 23505 */
  code: string;
  message: string;
  constraint?: string;
  table?: string;
  column?: string;
}

const SQLSTATE = /^[0-9A-Z]{5}$/;

/** postgres.js's field (`constraint_name`, ...) or PGlite's (`constraint`, ...), whichever is set. */
function named(...fields: unknown[]): string | undefined {
  for (const f of fields) if (typeof f === 'string' && f) return f;
  return undefined;
}

/**
 * What a log line says of a failure: its message and, when the database refused a statement,
 * Postgres's own words (`db`): drizzle's message names only the query ("Failed query: ..."),
 * not why it failed. postgres.js names the fields `constraint_name`, `table_name`,
 * `column_name`, PGlite `constraint`, `table`, `column`. Postgres's `detail` is left out: it
 * quotes the row's values ("Key (to)=(...) already exists"). The logger scrubs the rest as it
 * scrubs every line (src/logger.ts).
 *
 * @example
 * logger.warn({ err: errorFields(err) }, 'worker step failed');
 * // {"err":{"message":"Failed query: ...","db":{"code":"23505","message":"duplicate key ...","constraint":"inbox_keys_pkey","table":"inbox_keys"}}}
 */
export function errorFields(err: unknown): { message: string; db?: DatabaseErrorFields } {
  const message = err instanceof Error ? err.message : String(err);
  for (const e of causes(err)) {
    // Postgres's error (both drivers give its severity), not a system's (EPIPE has five letters)
    if (typeof e.severity !== 'string' || typeof e.code !== 'string' || !SQLSTATE.test(e.code))
      continue;
    const constraint = named(e.constraint_name, e.constraint);
    const table = named(e.table_name, e.table);
    const column = named(e.column_name, e.column);
    const db: DatabaseErrorFields = {
      code: e.code,
      message: String(e.message),
      ...(constraint && { constraint }),
      ...(table && { table }),
      ...(column && { column }),
    };
    return { message, db };
  }
  return { message };
}
