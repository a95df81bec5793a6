/**
 * A limit on failed console sign-ins per client address: after SIGN_IN_LIMIT.failures wrong
 * tokens within SIGN_IN_LIMIT.windowMs, that address is refused (429) until the oldest of
 * them leaves the window, whatever token it sends, so the form stops answering guesses.
 * Successful sign-ins do not count.
 *
 * The client address is requestOrigin's (the socket peer, or what a trusted proxy forwarded);
 * requests made in-process share one bucket, and an IPv6 client counts by its /64, which one
 * host usually has whole. The state is in this process (each instance keeps its own count)
 * and bounded: at most SIGN_IN_LIMIT.addresses buckets, the least recently failing dropped
 * first, so cycling addresses costs an attacker a fresh bucket each, never our memory.
 *
 * @example
 * const limit = signInLimiter(clock);
 * const wait = limit.retryAfter(address); // seconds; 0: may try
 * if (wrongToken) limit.fail(address);
 */
import { isIP } from 'node:net';
import type { Clock } from '../clock.ts';

export const SIGN_IN_LIMIT = {
  /** failed attempts allowed per address within the window */
  failures: 10,
  windowMs: 15 * 60_000,
  /** addresses tracked at once */
  addresses: 10_000,
};

export type SignInLimit = typeof SIGN_IN_LIMIT;

export interface SignInLimiter {
  /** Seconds until `address` may try again; 0 when it may try now. */
  retryAfter(address: string | undefined): number;
  /** Counts a failed attempt from `address`. */
  fail(address: string | undefined): void;
  /** how many addresses are tracked now */
  readonly size: number;
}

/** The 16-bit groups of an IPv6 address, `::` expanded and an embedded IPv4 counted as two. */
function ipv6Groups(address: string): string[] {
  const [head = '', tail] = address.split('%')[0]!.split('::');
  const split = (part: string) =>
    part === ''
      ? []
      : part
          .split(':')
          .flatMap((g) => (g.includes('.') ? ['v4', 'v4'] : [String(parseInt(g, 16))]));
  const front = split(head);
  if (tail === undefined) return front;
  const back = split(tail);
  return [...front, ...Array<string>(8 - front.length - back.length).fill('0'), ...back];
}

/** The bucket an address counts in: itself, its IPv6 /64, or the in-process one. */
export function bucketOf(address: string | undefined): string {
  if (address === undefined) return 'in-process';
  if (isIP(address.split('%')[0]!) !== 6) return address;
  return `${ipv6Groups(address).slice(0, 4).join(':')}::/64`;
}

export function signInLimiter(clock: Clock, limit: SignInLimit = SIGN_IN_LIMIT): SignInLimiter {
  // failure times per bucket, oldest first (at most limit.failures); Map order: least recent first
  const failures = new Map<string, number[]>();

  const recent = (bucket: string, now: number): number[] => {
    const times = (failures.get(bucket) ?? []).filter((t) => t > now - limit.windowMs);
    if (times.length === 0) failures.delete(bucket);
    return times;
  };

  return {
    retryAfter(address) {
      const now = clock.now().getTime();
      const times = recent(bucketOf(address), now);
      if (times.length < limit.failures) return 0;
      return Math.max(1, Math.ceil((times[0]! + limit.windowMs - now) / 1000));
    },
    fail(address) {
      const bucket = bucketOf(address);
      const now = clock.now().getTime();
      const times = [...recent(bucket, now), now].slice(-limit.failures);
      failures.delete(bucket); // re-inserted last: the most recent
      failures.set(bucket, times);
      while (failures.size > limit.addresses) {
        const oldest = failures.keys().next().value;
        if (oldest === undefined) break;
        failures.delete(oldest);
      }
    },
    get size() {
      return failures.size;
    },
  };
}
