/**
 * Whether an event's claimed time is believed. A callback (or a status record) states when
 * its event happened, and timelines are sorted by that time, so a time from before the message
 * existed, or from well after the moment it reached Switchboard, would reorder a timeline and
 * misdate it (anyone holding the callback token can write any year). Such an event is recorded
 * at the time it was received instead, with the claimed time and the reason kept beside it.
 *
 * One rule for every source of a claimed time: delivery callbacks, pending events when they are
 * attached, status polls (delivery-plan.ts `toNewEvent`) and incoming Viber messages (inbound.ts,
 * which have no message to be created before). Two comparisons, no query: the message's
 * creation time comes with the row locked for the timeline (message-lock.ts).
 *
 * @example
 * timeRejected(new Date('1999-01-01'), now, message.createdAt); // 'before-created'
 */

/** How far ahead of its receipt an event may claim to be: clocks drift, not by minutes. */
export const FUTURE_MARGIN_MS = 5 * 60_000;

export type TimeRejected = 'before-created' | 'future';

/**
 * Why `claimed` is not believed, or undefined when it is: before `createdAt` (the message's
 * creation; undefined when there is no message, as for an incoming message), or more than
 * `FUTURE_MARGIN_MS` after `receivedAt`. A time exactly at either bound is believed.
 */
export function timeRejected(
  claimed: Date,
  receivedAt: Date,
  createdAt?: Date | string,
): TimeRejected | undefined {
  const t = claimed.getTime();
  // a creation time that does not parse (NaN) compares false: the claim is judged on the rest
  if (createdAt !== undefined && t < new Date(createdAt).getTime()) return 'before-created';
  if (t - receivedAt.getTime() > FUTURE_MARGIN_MS) return 'future';
  return undefined;
}
