/**
 * Tells "the database is not answering" apart from every other failure, so that the HTTP
 * layer can answer 503 (retry later) instead of 500, and callers can tell the provider to
 * retry rather than believing something was stored.
 */

const CONNECTION_CODES = new Set([
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

export function isDatabaseUnavailable(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e && depth < 5; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && (CONNECTION_CODES.has(code) || code.startsWith('08'))) {
      return true;
    }
    const message = (e as { message?: unknown }).message;
    if (typeof message === 'string' && /did not answer within|PGlite is closed/i.test(message)) {
      return true;
    }
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/**
 * Whether `err` (or what it wraps) is a unique violation on `constraint`: the key was
 * stored meanwhile. postgres.js names the constraint `constraint_name`, PGlite `constraint`.
 *
 * @example
 * if (isUniqueViolation(err, 'inbox_dedup_idx')) return runAgain();
 */
export function isUniqueViolation(err: unknown, constraint: string): boolean {
  for (let e: unknown = err, depth = 0; e && depth < 5; depth++) {
    const { code, constraint_name, constraint: named } = e as Record<string, unknown>;
    if (code === '23505' && (constraint_name ?? named) === constraint) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}
