/**
 * Token buckets, one per limit class (docs/provider.md, "Limits"), shared by every client
 * given the same limiter: create one per process and pass it to each client so that, together,
 * they stay under the provider's limits.
 *
 * The provider counts requests when they *arrive*, which the client never sees: it only
 * knows that a request arrived somewhere between its send and its response. A bucket that
 * counts send times is fooled by latency: a burst of 150 that reaches the server spread over
 * half a second leaves the server's bucket 50 tokens lower than the client believes, and the
 * next requests get 429s. So each bucket here assumes the worst arrival: a request in flight
 * may arrive at any moment until its response comes back (`Permit.release`).
 *
 * The rule (GCRA written over windows): with interval T = 1/rate and tolerance
 * tau = (burst - 1) T, arrivals conform when every window [x, y] holding n of them has
 * (n - 1) T <= tau + (y - x). A new request may go at t when, for every x <= t, the requests
 * that could still arrive at or after x, plus itself, fit: with I requests in flight that
 * means I + 1 <= burst, and for each completed request k (k-th completion, at e_k),
 * t >= e_k - k T + (C + I + 1) T - tau, with C completions so far. The largest e_k - k T
 * is a running maximum, so a bucket is four numbers and a FIFO queue of waiters.
 *
 * The cost of the guarantee: throughput drops below the rate only when a request takes
 * longer than (burst - 1) / rate (1.49 s for messaging) to be answered.
 */

/**
 * Milliseconds since the epoch, a number with sub-millisecond precision (clock.ts's `Clock`
 * gives a `Date`); injectable so tests can drive time.
 */
export interface MillisClock {
  now(): number;
}

export type Sleep = (ms: number, signal?: AbortSignal) => Promise<void>;

export interface RateLimit {
  /** Sustained requests per second. */
  ratePerSecond: number;
  /** Requests that may go at once after a quiet period. */
  burst: number;
}

/**
 * Limit classes: `messaging` (/bat/messagelist, cascade, bot upload) and `data` (status,
 * balance, info) from the condensed interface; `chat` is the chat operator API, a separate
 * service at its own address, with the messaging default (100/s, burst 150), which the
 * condensed interface applies to every API unless a contract says otherwise.
 */
export const DEFAULT_LIMITS = {
  messaging: { ratePerSecond: 100, burst: 150 },
  data: { ratePerSecond: 50, burst: 75 },
  chat: { ratePerSecond: 100, burst: 150 },
} as const satisfies Record<string, RateLimit>;

export type LimitClass = keyof typeof DEFAULT_LIMITS;

/** Sub-millisecond wall clock, so spacing of 10 ms is not rounded away. */
export const performanceClock: MillisClock = {
  now: () => performance.timeOrigin + performance.now(),
};

/** setTimeout as a promise; rejects with the signal's reason when aborted. */
export const realSleep: Sleep = (ms, signal) =>
  new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(
      () => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      },
      // setTimeout may fire up to a millisecond early; never let a wait end before its time.
      Math.max(0, Math.ceil(ms) + (ms > 0 ? 1 : 0)),
    );
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });

/** A slot taken from a bucket; release it when the response (or the failure) is in. */
export interface Permit {
  release(): void;
}

export interface RateLimiter {
  readonly limits: Readonly<Record<LimitClass, RateLimit>>;
  /** Waits (FIFO) until a request of this class may go, and takes its slot. */
  acquire(limitClass: LimitClass, signal?: AbortSignal): Promise<Permit>;
  /** Holds the class back until `untilMs` (e.g. after a 429 with Retry-After). */
  pauseUntil(limitClass: LimitClass, untilMs: number): void;
  /** Until when (this limiter's clock, ms) the class is held back; -Infinity when it is not. */
  pausedUntil(limitClass: LimitClass): number;
  /** Requests of the class sent and not yet answered. */
  inFlight(limitClass: LimitClass): number;
}

interface Bucket {
  interval: number;
  tolerance: number;
  burst: number;
  /** max over completions of (e_k - k * interval) */
  maxLag: number;
  completed: number;
  inFlight: number;
  pausedUntil: number;
  /** FIFO of waiters; the head is the only one allowed to take a slot. */
  queue: Array<() => void>;
  /** Resolvers woken by the next completion (a head blocked by a full burst). */
  onRelease: Array<() => void>;
}

/**
 * @example
 * const limiter = createRateLimiter();
 * const messaging = createProviderClient({ baseUrl, auth, limiter });
 * const cascade = createCascadeClient({ baseUrl, auth, limiter }); // same buckets
 */
export function createRateLimiter(
  opts: {
    limits?: Partial<Record<LimitClass, RateLimit>>;
    clock?: MillisClock;
    sleep?: Sleep;
  } = {},
): RateLimiter {
  const clock = opts.clock ?? performanceClock;
  const sleep = opts.sleep ?? realSleep;
  const limits = { ...DEFAULT_LIMITS, ...opts.limits } as Record<LimitClass, RateLimit>;
  const buckets = new Map<LimitClass, Bucket>();
  for (const [name, limit] of Object.entries(limits) as Array<[LimitClass, RateLimit]>) {
    if (!(limit.ratePerSecond > 0) || !(limit.burst >= 1) || !Number.isInteger(limit.burst)) {
      throw new RangeError(`limit ${name}: ratePerSecond must be > 0 and burst an integer >= 1`);
    }
    const interval = 1000 / limit.ratePerSecond;
    buckets.set(name, {
      interval,
      tolerance: (limit.burst - 1) * interval,
      burst: limit.burst,
      maxLag: Number.NEGATIVE_INFINITY,
      completed: 0,
      inFlight: 0,
      pausedUntil: Number.NEGATIVE_INFINITY,
      queue: [],
      onRelease: [],
    });
  }
  const bucket = (limitClass: LimitClass) => {
    const b = buckets.get(limitClass);
    if (!b) throw new RangeError(`unknown limit class ${limitClass}`);
    return b;
  };

  /** Earliest start for the next request, or undefined while the burst is all in flight. */
  const earliest = (b: Bucket): number | undefined => {
    if (b.inFlight + 1 > b.burst) return undefined;
    const byRate = b.maxLag + (b.completed + b.inFlight + 1) * b.interval - b.tolerance;
    return Math.max(byRate, b.pausedUntil);
  };

  const take = (b: Bucket): Permit => {
    b.inFlight++;
    let released = false;
    return {
      release() {
        if (released) return;
        released = true;
        b.inFlight--;
        b.completed++;
        b.maxLag = Math.max(b.maxLag, clock.now() - b.completed * b.interval);
        for (const wake of b.onRelease.splice(0)) wake();
      },
    };
  };

  /** Resolves when `register`'s callback is called, or rejects when the signal aborts. */
  const until = (register: (wake: () => void) => () => void, signal?: AbortSignal) =>
    new Promise<void>((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const onAbort = () => {
        unregister();
        reject(signal?.reason);
      };
      const unregister = register(() => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      });
      signal?.addEventListener('abort', onAbort, { once: true });
    });

  const waitIn = (list: Array<() => void>) => (wake: () => void) => {
    list.push(wake);
    return () => {
      const i = list.indexOf(wake);
      if (i !== -1) list.splice(i, 1);
    };
  };

  async function waitTurn(b: Bucket, signal?: AbortSignal): Promise<void> {
    // The head of the queue holds a placeholder; the others wait to be woken in order.
    if (b.queue.length === 0) b.queue.push(() => {});
    else await until(waitIn(b.queue), signal);
  }

  const leaveTurn = (b: Bucket) => {
    b.queue.shift();
    b.queue[0]?.();
  };

  return {
    limits,
    inFlight: (limitClass) => bucket(limitClass).inFlight,
    pauseUntil(limitClass, untilMs) {
      const b = bucket(limitClass);
      b.pausedUntil = Math.max(b.pausedUntil, untilMs);
    },
    pausedUntil: (limitClass) => bucket(limitClass).pausedUntil,
    async acquire(limitClass, signal) {
      const b = bucket(limitClass);
      await waitTurn(b, signal);
      try {
        for (;;) {
          signal?.throwIfAborted();
          const at = earliest(b);
          if (at === undefined) {
            await until(waitIn(b.onRelease), signal);
            continue;
          }
          const wait = at - clock.now();
          if (wait <= 0) return take(b);
          // Completions and pauses only push `at` later, so sleep and look again.
          await sleep(wait, signal);
        }
      } finally {
        leaveTurn(b);
      }
    },
  };
}
