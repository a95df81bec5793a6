/**
 * Group commit's deadline (src/db/group-commit.ts), with a fake transaction and fake timers: a
 * transaction the driver never settles (a connection lost at an unlucky moment) fails its
 * callers as "database unavailable" after BATCH_DEADLINE_MS, frees the lane for the items
 * behind it, and its late end changes nothing.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { isDatabaseUnavailable } from '../../src/db/errors.ts';
import { BATCH_DEADLINE_MS, groupCommit } from '../../src/db/group-commit.ts';

/** A transaction per call, each waiting until the test settles it. */
function fakeTransactions() {
  const calls: { items: string[]; commit(): void; fail(err: unknown): void }[] = [];
  const batch = (items: string[]) =>
    new Promise<string[]>((resolve, reject) => {
      calls.push({
        items,
        commit: () => resolve(items.map((i) => `stored ${i}`)),
        fail: reject,
      });
    });
  return { batch, calls };
}

/** How a caller's promise ended, readable without awaiting it. */
function outcome<R>(p: Promise<R>) {
  const seen: { value?: R; error?: unknown; settled: boolean } = { settled: false };
  p.then(
    (value) => Object.assign(seen, { value, settled: true }),
    (error) => Object.assign(seen, { error, settled: true }),
  );
  return seen;
}

describe('group commit deadline', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('fails a transaction that never ends as unavailable, and runs the next one', async () => {
    const { batch, calls } = fakeTransactions();
    const submit = groupCommit({ batch, maxBatch: 10, concurrency: 1 });
    const a = outcome(submit('a'));
    const b = outcome(submit('b'));
    await vi.advanceTimersByTimeAsync(0);
    // 'a' alone in the lane's transaction, 'b' queued behind it
    expect(calls.map((c) => c.items)).toEqual([['a']]);

    await vi.advanceTimersByTimeAsync(BATCH_DEADLINE_MS - 1);
    expect(a.settled).toBe(false);
    expect(calls).toHaveLength(1);

    await vi.advanceTimersByTimeAsync(1);
    expect(a.settled).toBe(true);
    expect(isDatabaseUnavailable(a.error)).toBe(true);
    // the lane is free: 'b' has its own transaction, and its commit answers it
    expect(calls.map((c) => c.items)).toEqual([['a'], ['b']]);
    calls[1]!.commit();
    await vi.advanceTimersByTimeAsync(0);
    expect(b).toMatchObject({ settled: true, value: 'stored b' });

    // the lost transaction's driver gives up at last: nobody is told twice, nothing unhandled
    calls[0]!.fail(new Error('connection lost'));
    await vi.advanceTimersByTimeAsync(0);
    expect(isDatabaseUnavailable(a.error)).toBe(true);
  });

  it('keeps one transaction in flight when a timed-out one commits late', async () => {
    const { batch, calls } = fakeTransactions();
    const submit = groupCommit({ batch, maxBatch: 10, concurrency: 1 });
    const a = outcome(submit('a'));
    await vi.advanceTimersByTimeAsync(0);
    const b = outcome(submit('b'));
    await vi.advanceTimersByTimeAsync(BATCH_DEADLINE_MS);
    expect(isDatabaseUnavailable(a.error)).toBe(true);
    expect(calls.map((c) => c.items)).toEqual([['a'], ['b']]);

    // 'a' commits after all (its caller got 503 and the provider's retry is deduplicated):
    // its caller keeps its 503, and the lane is not freed a second time
    calls[0]!.commit();
    await vi.advanceTimersByTimeAsync(0);
    expect(a.value).toBeUndefined();
    const c = outcome(submit('c'));
    await vi.advanceTimersByTimeAsync(0);
    // 'b' is still in flight: 'c' waits for it, as concurrency 1 says
    expect(calls).toHaveLength(2);

    calls[1]!.commit();
    await vi.advanceTimersByTimeAsync(0);
    expect(b.value).toBe('stored b');
    expect(calls.map((x) => x.items)).toEqual([['a'], ['b'], ['c']]);
    calls[2]!.commit();
    await vi.advanceTimersByTimeAsync(0);
    expect(c.value).toBe('stored c');
  });

  it('holds the one-per-transaction retries of a failed batch to the deadline too', async () => {
    const { batch, calls } = fakeTransactions();
    const submit = groupCommit({ batch, maxBatch: 10, concurrency: 1 });
    const first = outcome(submit('first'));
    await vi.advanceTimersByTimeAsync(0);
    const x = outcome(submit('x'));
    const y = outcome(submit('y'));
    calls[0]!.commit();
    await vi.advanceTimersByTimeAsync(0);
    expect(first.value).toBe('stored first');
    expect(calls.map((c) => c.items)).toEqual([['first'], ['x', 'y']]);

    // a poisonous item, not an outage: each item again in a transaction of its own
    calls[1]!.fail(new Error('value too long'));
    await vi.advanceTimersByTimeAsync(0);
    expect(calls.map((c) => c.items)).toEqual([['first'], ['x', 'y'], ['x'], ['y']]);
    calls[2]!.commit();
    // the one of 'y' never ends
    await vi.advanceTimersByTimeAsync(BATCH_DEADLINE_MS);
    expect(x.value).toBe('stored x');
    expect(isDatabaseUnavailable(y.error)).toBe(true);

    // and the lane is free again
    const z = outcome(submit('z'));
    await vi.advanceTimersByTimeAsync(0);
    expect(calls.at(-1)!.items).toEqual(['z']);
    calls.at(-1)!.commit();
    await vi.advanceTimersByTimeAsync(0);
    expect(z.value).toBe('stored z');
  });
});
