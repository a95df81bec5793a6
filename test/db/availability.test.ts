/**
 * The breaker in front of the pool (src/db/availability.ts), with a fake probe and fake
 * timers: which failures open it, that it probes only while open and one probe at a time,
 * and that a probe that answers closes it.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createAvailability, databaseDown } from '../../src/db/availability.ts';
import { isDatabaseUnavailable } from '../../src/db/errors.ts';
import { OutboundUnreachableError } from '../../src/http/outbound.ts';
import { ProviderError } from '../../src/provider/http.ts';

/** A probe whose every call waits until the test settles it. */
function fakeProbe() {
  const calls: { timeoutMs: number; answer(): void; fail(): void }[] = [];
  const probe = (timeoutMs: number) =>
    new Promise<void>((resolve, reject) => {
      calls.push({ timeoutMs, answer: resolve, fail: () => reject(new Error('not answering')) });
    });
  return { probe, calls };
}

const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), {
  code: 'ECONNREFUSED',
});

describe('database availability', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('opens on an outage, not on other errors', () => {
    const { probe } = fakeProbe();
    const availability = createAvailability(probe);
    expect(availability.up).toBe(true);
    availability.failed(new Error('syntax error at or near "selec"'));
    availability.failed(Object.assign(new Error('duplicate key'), { code: '23505' }));
    availability.failed(undefined);
    expect(availability.up).toBe(true);
    availability.failed(new Error('query failed', { cause: refused }));
    expect(availability.up).toBe(false);
    availability.stop();
  });

  it('sends no probe while up', async () => {
    const { probe, calls } = fakeProbe();
    const availability = createAvailability(probe);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(calls).toHaveLength(0);
    availability.stop();
  });

  it('probes one at a time while down, and closes when a probe answers', async () => {
    const { probe, calls } = fakeProbe();
    const availability = createAvailability(probe);
    availability.failed(refused);
    expect(calls).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(250);
    expect(calls).toHaveLength(1);
    expect(calls[0]!.timeoutMs).toBe(1000);

    // the probe hangs: more failures and more time start no second one
    availability.failed(refused);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(calls).toHaveLength(1);

    // it fails: the next one comes a probe interval later, still down meanwhile
    calls[0]!.fail();
    await vi.advanceTimersByTimeAsync(0);
    expect(availability.up).toBe(false);
    expect(calls).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(250);
    expect(calls).toHaveLength(2);

    calls[1]!.answer();
    await vi.advanceTimersByTimeAsync(0);
    expect(availability.up).toBe(true);
    // up: no probe traffic any more
    await vi.advanceTimersByTimeAsync(60_000);
    expect(calls).toHaveLength(2);

    // and the next outage opens it again
    availability.failed(refused);
    expect(availability.up).toBe(false);
    await vi.advanceTimersByTimeAsync(250);
    expect(calls).toHaveLength(3);
    availability.stop();
  });

  it('stops probing when stopped', async () => {
    const { probe, calls } = fakeProbe();
    const availability = createAvailability(probe);
    availability.failed(refused);
    availability.stop();
    await vi.advanceTimersByTimeAsync(60_000);
    expect(calls).toHaveLength(0);
    // a failure after the stop starts nothing either
    availability.failed(refused);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(calls).toHaveLength(0);
  });

  it('refuses with an error onError answers as an outage (503)', () => {
    expect(isDatabaseUnavailable(databaseDown())).toBe(true);
  });

  it("never reads another system's refused connection as the database down", () => {
    // alone, or wrapped as drizzle wraps a driver's error, it may be the database's
    expect(isDatabaseUnavailable(refused)).toBe(true);
    expect(isDatabaseUnavailable(new Error('Failed query: select 1', { cause: refused }))).toBe(
      true,
    );
    const fetchFailed = new TypeError('fetch failed', { cause: refused });
    expect(
      isDatabaseUnavailable(new ProviderError('network', 'fetch failed', { cause: fetchFailed })),
    ).toBe(false);
    expect(isDatabaseUnavailable(new OutboundUnreachableError({ cause: fetchFailed }))).toBe(false);
  });
});
