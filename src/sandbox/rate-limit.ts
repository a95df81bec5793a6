/**
 * Token buckets for the provider's rate limits (docs/provider.md, "Limits"): the limit counts
 * HTTP requests, not messages. A bucket holds up to `burst` tokens and refills at `perSecond`,
 * on the sandbox clock, so a test can exhaust it and then advance time to refill it.
 *
 * @example
 * const bucket = createTokenBucket({ perSecond: 100, burst: 150 }, clock);
 * const r = bucket.take(); // { ok: true } or { ok: false, retryAfterMs: 10 }
 */
import type { SandboxClock } from './clock.ts';

/** A token bucket's size (`burst`) and refill rate (`perSecond`). */
export interface BucketLimit {
  perSecond: number;
  burst: number;
}

/**
 * The condensed interface's categories: messaging (messagelist, cascade, bot users) and data
 * (status). The chat operator API is a service of its own ({chat_url}), so it gets its own
 * bucket, with the messaging default (100/s, burst 150): the condensed interface applies its
 * default limits to the chat API too, unless a contract says otherwise.
 */
export const DEFAULT_RATE_LIMITS = {
  messaging: { perSecond: 100, burst: 150 },
  data: { perSecond: 50, burst: 75 },
  chat: { perSecond: 100, burst: 150 },
} as const satisfies Record<string, BucketLimit>;

export type RateCategory = keyof typeof DEFAULT_RATE_LIMITS;

export type TakeResult = { ok: true; remaining: number } | { ok: false; retryAfterMs: number };

export interface TokenBucket {
  take(): TakeResult;
  reset(): void;
}

export function createTokenBucket(
  limit: BucketLimit,
  clock: Pick<SandboxClock, 'now'>,
): TokenBucket {
  let tokens = limit.burst;
  let updatedAt = clock.now();

  function refill(): void {
    const now = clock.now();
    const elapsed = Math.max(0, now - updatedAt);
    tokens = Math.min(limit.burst, tokens + (elapsed * limit.perSecond) / 1000);
    updatedAt = now;
  }

  return {
    take() {
      refill();
      if (tokens >= 1) {
        tokens -= 1;
        return { ok: true, remaining: Math.floor(tokens) };
      }
      return { ok: false, retryAfterMs: Math.ceil(((1 - tokens) * 1000) / limit.perSecond) };
    },
    reset() {
      tokens = limit.burst;
      updatedAt = clock.now();
    },
  };
}
