/**
 * The published delivery rules for events, as data and pure functions (the worker in
 * deliver.ts applies them; docs/events.md "Delivery" publishes them; the tests walk them):
 *
 * - **Schedule.** Eight attempts: at once, then 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h after
 *   the one before (Svix's schedule, the Standard Webhooks example's first eight steps): the last
 *   attempt is about 27 h 35 min after the first. Each wait but the first is spread by ±20 %
 *   (jitter), so that a receiver that fell over under load is not hit by every retry at once.
 * - **What counts.** A 2xx answer is a success; anything else is a failed attempt, retried on the
 *   schedule: no answer within 15 s, a connection that fails, 5xx, 429, 3xx (redirects are not
 *   followed: change the URL instead) and the other 4xx too (a receiver that answers 400 or 401
 *   while it is being deployed or misconfigured usually recovers; the attempts show why).
 * - **Retry-After.** On a failed answer carrying it (429, 503...), in seconds or as an HTTP date,
 *   the next attempt waits for it, but never less than the schedule's own wait and never more
 *   than the schedule's longest step (10 h).
 * - **Final at once.** A URL the outbound policy refuses (a private address without
 *   OUTBOUND_ALLOW_PRIVATE, say) sends nothing and would refuse again: the delivery is
 *   exhausted at once (replay it once the URL is fixed). `410 Gone` disables the endpoint, as
 *   the specification asks: the receiver said it wants no more.
 * - **Disable.** An endpoint all of whose attempts failed for 5 days, with at least 10 failed
 *   attempts in that time, is disabled (enabled false, disabled_reason says why) and an
 *   `endpoint.disabled` event is recorded for the other endpoints.
 *
 * @example
 * nextStep(1, { kind: 'response', status: 500 }, now, () => 0.5) // { state: 'pending', nextAt: now + 5 s }
 * nextStep(8, { kind: 'timeout' }, now, Math.random)              // { state: 'exhausted' }
 */

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/** The wait before each attempt, after the one before it; its length is the number of attempts. */
export const RETRY_SCHEDULE_MS: readonly number[] = [
  0,
  5 * SECOND,
  5 * MINUTE,
  30 * MINUTE,
  2 * HOUR,
  5 * HOUR,
  10 * HOUR,
  10 * HOUR,
];

/** Attempts per delivery (per replay), the first included. */
export const MAX_ATTEMPTS = RETRY_SCHEDULE_MS.length;

/** Each wait is multiplied by a random factor in [1 - JITTER, 1 + JITTER]. */
export const JITTER = 0.2;

/** The longest wait; also the cap on a Retry-After. */
export const LONGEST_STEP_MS = Math.max(...RETRY_SCHEDULE_MS);

/** No answer (headers) within this: the attempt failed. The specification says 15 to 30 s. */
export const REQUEST_TIMEOUT_MS = 15 * SECOND;

/** The start of an answer's body kept in delivery_attempts (bytes); the rest is not read. */
export const RESPONSE_BODY_CAP = 4096;

/** An endpoint failing this long (every attempt) and at least DISABLE_MIN_ATTEMPTS times is disabled. */
export const DISABLE_AFTER_MS = 5 * DAY;
export const DISABLE_MIN_ATTEMPTS = 10;

/** What became of one attempt. */
export type AttemptOutcome =
  | { kind: 'response'; status: number; retryAfter?: string | null }
  | { kind: 'timeout' }
  | { kind: 'unreachable' }
  | { kind: 'refused'; reason: string };

/** What the delivery becomes after an attempt. */
export type NextStep =
  | { state: 'delivered' }
  | { state: 'pending'; nextAt: Date }
  | { state: 'exhausted' };

export function succeeded(outcome: AttemptOutcome): boolean {
  return outcome.kind === 'response' && outcome.status >= 200 && outcome.status < 300;
}

/** Why this outcome disables its endpoint at once (410 Gone), or undefined. */
export function disablesAtOnce(outcome: AttemptOutcome): string | undefined {
  return outcome.kind === 'response' && outcome.status === 410
    ? 'the endpoint answered 410 Gone'
    : undefined;
}

/**
 * A Retry-After value in milliseconds from `now`: delay-seconds or an HTTP date; undefined when
 * absent or unreadable; never negative.
 *
 * @example
 * retryAfterMs('120', now)                           // 120000
 * retryAfterMs('Wed, 01 Jan 2030 12:01:00 GMT', now) // 60000 when now is 12:00:00
 */
export function retryAfterMs(value: string | null | undefined, now: Date): number | undefined {
  const v = value?.trim();
  if (!v) return undefined;
  if (/^\d+$/.test(v)) return Number(v) * SECOND;
  // an HTTP date starts with the day's name (`Wed, 01 Jan 2030 ...`); Date.parse takes far more
  const at = /^[A-Za-z]{3}/.test(v) ? Date.parse(v) : Number.NaN;
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - now.getTime());
}

/** The wait before attempt `attempt + 1` (after `attempt` failed ones), jittered. */
export function scheduledWaitMs(attempt: number, random: () => number): number {
  const base = RETRY_SCHEDULE_MS[attempt] ?? LONGEST_STEP_MS;
  return Math.round(base * (1 - JITTER + 2 * JITTER * random()));
}

/**
 * The delivery's next state after an attempt, `attempts` counting it. A failure is retried
 * while attempts remain, at the scheduled wait or the Retry-After if later (capped at the
 * longest step); a policy refusal exhausts it at once.
 */
export function nextStep(
  attempts: number,
  outcome: AttemptOutcome,
  now: Date,
  random: () => number,
): NextStep {
  if (succeeded(outcome)) return { state: 'delivered' };
  if (outcome.kind === 'refused' || attempts >= MAX_ATTEMPTS) return { state: 'exhausted' };
  let wait = scheduledWaitMs(attempts, random);
  if (outcome.kind === 'response') {
    const asked = retryAfterMs(outcome.retryAfter, now);
    // later than the schedule if asked, but a receiver cannot park a delivery beyond the longest step
    if (asked !== undefined) wait = Math.max(wait, Math.min(asked, LONGEST_STEP_MS));
  }
  return { state: 'pending', nextAt: new Date(now.getTime() + wait) };
}

/** Whether an endpoint failing since `failingSince`, `failed` times, is to be disabled now. */
export function shouldDisable(failingSince: Date | null, failed: number, now: Date): boolean {
  return (
    failingSince !== null &&
    now.getTime() - failingSince.getTime() >= DISABLE_AFTER_MS &&
    failed >= DISABLE_MIN_ATTEMPTS
  );
}

/** disabled_reason for an endpoint disabled by the rule above. */
export function disableReason(failingSince: Date, failed: number): string {
  return `every attempt failed since ${failingSince.toISOString()} (${failed} attempts, ${DISABLE_AFTER_MS / DAY} days or more)`;
}
