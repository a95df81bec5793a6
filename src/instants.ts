/**
 * The instants Switchboard takes from a request: years 0001 to 9999, in UTC. Postgres's
 * timestamptz reads what `Date.toISOString` writes only within them (year 0000 is not one of
 * its years, and a year past 9999 comes out as "+010000"), so a time outside, such as
 * `0000-06-01T00:00:00Z` or `9999-12-31T23:00:00-05:00` (10000 in UTC), failed its statement:
 * a 500 for bad input. Every schema and parser of a time checks it here.
 *
 * @example
 * isStorableInstant(Date.parse('9999-12-31T23:00:00-05:00')); // false
 */
export const EARLIEST_INSTANT = '0001-01-01T00:00:00.000Z';
export const LATEST_INSTANT = '9999-12-31T23:59:59.999Z';
const EARLIEST_MS = Date.parse(EARLIEST_INSTANT);
const LATEST_MS = Date.parse(LATEST_INSTANT);

/** What the rule says, for error messages. */
export const INSTANT_RULE = `between ${EARLIEST_INSTANT} and ${LATEST_INSTANT} (UTC)`;

export function isStorableInstant(ms: number): boolean {
  return ms >= EARLIEST_MS && ms <= LATEST_MS;
}

/**
 * A deadline computed from what a request gave (a send time plus a TTL), kept within the span:
 * a life that would end past year 9999 ends at its last instant, which is as good as never.
 *
 * @example
 * new Date(latestAtMost(Date.parse('9999-12-31T23:59:59Z') + 86_400_000)).toISOString(); // LATEST_INSTANT
 */
export function latestAtMost(ms: number): number {
  return Number.isNaN(ms) ? ms : Math.min(ms, LATEST_MS);
}
