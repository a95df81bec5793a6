import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createRateLimiter, DEFAULT_LIMITS, type RateLimit } from '../../src/provider/limiter.ts';
import { createRateMeter } from './helpers.ts';

/** Virtual time: sleeps are timers the test fires by advancing the clock. */
function virtualTime() {
  let now = 0;
  let seq = 0;
  const timers: Array<{ at: number; seq: number; fire: () => void }> = [];
  const flush = () => new Promise<void>((r) => setImmediate(r));
  return {
    clock: { now: () => now },
    at(t: number, fire: () => void) {
      timers.push({ at: t, seq: seq++, fire });
    },
    sleep(ms: number, signal?: AbortSignal) {
      return new Promise<void>((resolve, reject) => {
        signal?.addEventListener('abort', () => reject(signal.reason), { once: true });
        timers.push({ at: now + ms, seq: seq++, fire: resolve });
      });
    },
    /** Fires timers in time order until none is left (or `until` is reached). */
    async run(until = Number.POSITIVE_INFINITY) {
      for (;;) {
        await flush();
        timers.sort((a, b) => a.at - b.at || a.seq - b.seq);
        const next = timers[0];
        if (!next || next.at > until) break;
        timers.shift();
        now = Math.max(now, next.at);
        next.fire();
      }
      now = Math.max(now, Math.min(until, now));
    },
  };
}

/**
 * Requests asked for at `start[i]`, answered `rtt[i]` ms after they go; each "arrives" at
 * the server at a point `where[i]` in [0, 1] of its flight. Returns send and arrival times.
 */
async function simulate(
  limit: RateLimit,
  reqs: Array<{ start: number; rtt: number; where: number }>,
) {
  const vt = virtualTime();
  const limiter = createRateLimiter({
    clock: vt.clock,
    sleep: vt.sleep,
    limits: { messaging: limit },
  });
  const sends: number[] = [];
  const arrivals: number[] = [];
  const order: number[] = [];
  reqs.forEach((r, i) => {
    vt.at(r.start, () => {
      void limiter.acquire('messaging').then((permit) => {
        const s = vt.clock.now();
        sends.push(s);
        order.push(i);
        arrivals.push(s + r.where * r.rtt);
        vt.at(s + r.rtt, () => permit.release());
      });
    });
  });
  await vt.run();
  return { sends, arrivals, order };
}

describe('createRateLimiter', () => {
  it('has the seed limits by default', () => {
    expect(createRateLimiter().limits).toMatchObject({
      messaging: { ratePerSecond: 100, burst: 150 },
      data: { ratePerSecond: 50, burst: 75 },
    });
  });

  it('lets a burst of 150 go at once, then one every 10 ms once answered', async () => {
    const { sends } = await simulate(
      DEFAULT_LIMITS.messaging,
      Array(153).fill({ start: 0, rtt: 0, where: 0 }),
    );
    expect(sends.slice(0, 150).every((t) => t === 0)).toBe(true);
    expect(sends.slice(150)).toEqual([10, 20, 30]);
  });

  it('data: burst 75, then one every 20 ms', async () => {
    const { sends } = await simulate(
      DEFAULT_LIMITS.data,
      Array(77).fill({ start: 0, rtt: 0, where: 0 }),
    );
    expect(sends.slice(74)).toEqual([0, 20, 40]);
  });

  it('holds the 151st request while the whole burst is in flight, then leaves room after it', async () => {
    const burst = Array(150).fill({ start: 0, rtt: 400, where: 1 });
    const reqs = [...burst, ...Array(3).fill({ start: 0, rtt: 0, where: 0 })];
    const { sends, arrivals } = await simulate(DEFAULT_LIMITS.messaging, reqs);
    // the burst may all arrive at 400 (here it does), so the rest follow at the rate after it
    expect(sends.slice(150)).toEqual([410, 420, 430]);
    const meter = createRateMeter({ ...DEFAULT_LIMITS.messaging, toleranceMs: 1e-6 });
    for (const a of [...arrivals].sort((x, y) => x - y)) meter.hit(a);
    expect(meter.violations).toBe(0);
  });

  it('refills at the rate, up to the burst', async () => {
    const reqs = [
      ...Array(150).fill({ start: 0, rtt: 0, where: 0 }),
      ...Array(51).fill({ start: 500, rtt: 0, where: 0 }), // 50 tokens back by then
      ...Array(151).fill({ start: 100_000, rtt: 0, where: 0 }), // full again, not more
    ];
    const { sends } = await simulate(DEFAULT_LIMITS.messaging, reqs);
    expect(sends.filter((t) => t === 500)).toHaveLength(50);
    expect(sends.filter((t) => t === 100_000)).toHaveLength(150);
  });

  it('serves waiters in the order they asked', async () => {
    const reqs = Array.from({ length: 40 }, (_, i) => ({ start: i % 7, rtt: 3, where: 0.5 }));
    const { order } = await simulate({ ratePerSecond: 100, burst: 5 }, reqs);
    const byStart = [...order.keys()].map((k) => reqs[order[k] ?? 0]?.start ?? 0);
    expect(byStart).toEqual([...byStart].sort((a, b) => a - b));
  });

  it('pauseUntil holds the class back, and only that class', async () => {
    const vt = virtualTime();
    const limiter = createRateLimiter({ clock: vt.clock, sleep: vt.sleep });
    expect(limiter.pausedUntil('messaging')).toBe(Number.NEGATIVE_INFINITY);
    limiter.pauseUntil('messaging', 2000);
    limiter.pauseUntil('messaging', 1500); // a pause only grows
    expect(limiter.pausedUntil('messaging')).toBe(2000);
    expect(limiter.pausedUntil('data')).toBe(Number.NEGATIVE_INFINITY);
    const got: Array<[string, number]> = [];
    void limiter.acquire('messaging').then(() => got.push(['messaging', vt.clock.now()]));
    void limiter.acquire('data').then(() => got.push(['data', vt.clock.now()]));
    await vt.run();
    expect(got).toEqual([
      ['data', 0],
      ['messaging', 2000],
    ]);
    expect(limiter.inFlight('messaging')).toBe(1);
  });

  it('an aborted waiter leaves the queue and the next one goes', async () => {
    const vt = virtualTime();
    const limiter = createRateLimiter({
      clock: vt.clock,
      sleep: vt.sleep,
      limits: { data: { ratePerSecond: 10, burst: 1 } },
    });
    const first = await limiter.acquire('data');
    const ctl = new AbortController();
    const aborted = limiter.acquire('data', ctl.signal);
    const third = limiter.acquire('data');
    ctl.abort(new Error('gone'));
    await expect(aborted).rejects.toThrow('gone');
    first.release();
    const done = third.then(() => vt.clock.now());
    await vt.run();
    expect(await done).toBe(100);
  });

  it('rejects unknown classes and bad limits', async () => {
    const limiter = createRateLimiter();
    await expect(limiter.acquire('nope' as 'data')).rejects.toThrow(/unknown limit class/);
    expect(() => createRateLimiter({ limits: { data: { ratePerSecond: 0, burst: 1 } } })).toThrow(
      RangeError,
    );
    expect(() => createRateLimiter({ limits: { data: { ratePerSecond: 1, burst: 0.5 } } })).toThrow(
      RangeError,
    );
  });

  it('property: wherever in its flight each request arrives, the server never sees the limit broken', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom<RateLimit>(DEFAULT_LIMITS.messaging, DEFAULT_LIMITS.data, {
          ratePerSecond: 20,
          burst: 3,
        }),
        fc.array(
          fc.record({
            start: fc.integer({ min: 0, max: 3000 }),
            rtt: fc.oneof(fc.integer({ min: 0, max: 30 }), fc.integer({ min: 0, max: 2500 })),
            where: fc.oneof(
              fc.constant(1),
              fc.constant(0),
              fc.double({ min: 0, max: 1, noNaN: true }),
            ),
          }),
          { minLength: 1, maxLength: 400 },
        ),
        async (limit, reqs) => {
          const { sends, arrivals } = await simulate(limit, reqs);
          expect(sends).toHaveLength(reqs.length); // everyone got through
          const meter = createRateMeter({ ...limit, toleranceMs: 1e-6 });
          for (const a of [...arrivals].sort((x, y) => x - y)) meter.hit(a);
          expect(meter.violations).toBe(0);
        },
      ),
      { numRuns: 40 },
    );
  });
});
