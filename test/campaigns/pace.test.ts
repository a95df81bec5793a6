/**
 * The rules of src/campaigns/scheduler.ts that need no database: the pace (a token bucket
 * kept as one instant) and how an attempt's end settles its recipient.
 */
import { describe, expect, it } from 'vitest';
import {
  messageAttemptEnd,
  paceAllows,
  settle,
  startingPace,
} from '../../src/campaigns/scheduler.ts';
import { MESSAGE_STATUSES } from '../../src/messages/status.ts';

describe('the pace', () => {
  it.each([
    [120, 1000],
    [7, 250],
    [1000, 3000],
  ])('holds %i a minute on a simulated clock, ticking every %i ms', (perMinute, tickMs) => {
    const start = new Date('2026-03-02T07:00:00Z');
    let pacedAt = startingPace(start, perMinute);
    let started = 0;
    const minutes = 30;
    for (let t = 0; t <= minutes * 60_000; t += tickMs) {
      const now = new Date(start.getTime() + t);
      const pace = paceAllows(pacedAt, perMinute, now);
      // the scheduler releases what the pace allows (recipients are plenty)
      started += pace.tokens;
      pacedAt = pace.after(pace.tokens);
    }
    const expected = perMinute * minutes + 1; // one call's worth at the start
    expect(Math.abs(started - expected) / expected).toBeLessThan(0.05);
  });

  it('allows at most a minute of calls after a long pause', () => {
    const now = new Date('2026-03-02T12:00:00Z');
    const pace = paceAllows(new Date('2026-03-02T07:00:00Z'), 30, now);
    expect(pace.tokens).toBe(30);
    // what is not used now is not saved up for later
    expect(pace.after(0).getTime()).toBe(now.getTime() - 60_000);
  });

  it('starts a campaign with its first call at once', () => {
    const at = new Date('2026-03-02T07:00:00Z');
    expect(paceAllows(startingPace(at, 2), 2, at).tokens).toBe(1);
  });
});

describe('settling an attempt', () => {
  const policy = { on: ['failed', 'no-outcome', 'no-input'], after: '2h', maxAttempts: 3 };
  const endedAt = new Date('2026-03-02T10:00:00Z');
  const base = { attempts: 1, outcome: null, bestId: null, retry: policy, cancelled: false };

  it('retries what the policy names, due `after` the end', () => {
    const s = settle({ ...base, attempt: { id: 'c1', state: 'failed', outcome: null, endedAt } });
    expect(s).toEqual({
      state: 'retry',
      outcome: null,
      bestId: 'c1',
      nextAt: new Date('2026-03-02T12:00:00Z'),
    });
    expect(
      settle({ ...base, attempt: { id: 'c1', state: 'ended', outcome: null, endedAt } }).state,
    ).toBe('retry');
    expect(
      settle({ ...base, attempt: { id: 'c1', state: 'ended', outcome: 'no-input', endedAt } })
        .state,
    ).toBe('retry');
  });

  it('is done with an outcome the policy does not name, at the last attempt, or cancelled', () => {
    const call = { id: 'c1', state: 'ended', outcome: 'confirmed', endedAt };
    expect(settle({ ...base, attempt: call })).toMatchObject({
      state: 'done',
      outcome: 'confirmed',
    });
    const failed = { id: 'c3', state: 'failed', outcome: null, endedAt };
    expect(settle({ ...base, attempts: 3, attempt: failed }).state).toBe('done');
    expect(settle({ ...base, cancelled: true, attempt: failed }).state).toBe('done');
  });

  it("reads a message attempt's end from its status: delivered or read is its outcome, a terminal failure is failed, the rest are not ended", () => {
    const ends = Object.fromEntries(MESSAGE_STATUSES.map((s) => [s, messageAttemptEnd(s)]));
    expect(ends).toEqual({
      queued: null,
      accepted: null,
      sent: null,
      delivered: { state: 'delivered', outcome: 'delivered' },
      read: { state: 'read', outcome: 'read' },
      rejected: { state: 'failed', outcome: null },
      failed: { state: 'failed', outcome: null },
      expired: { state: 'failed', outcome: null },
    });
    // a failed message is retried under `on: ['failed']`; a delivered one is done
    const messages = { ...base, retry: { on: ['failed'], after: '1h', maxAttempts: 2 } };
    const failed = { id: 'm1', ...ends.expired!, endedAt };
    expect(settle({ ...messages, attempt: failed }).state).toBe('retry');
    const delivered = { id: 'm1', ...ends.delivered!, endedAt };
    expect(settle({ ...messages, attempt: delivered })).toMatchObject({
      state: 'done',
      outcome: 'delivered',
    });
  });

  it('keeps the best attempt: an outcome beats none; among equals, the latest', () => {
    // an earlier outcome stays against a later attempt without one
    const kept = settle({
      ...base,
      attempts: 2,
      outcome: 'no-input',
      bestId: 'c1',
      attempt: { id: 'c2', state: 'failed', outcome: null, endedAt },
    });
    expect(kept).toMatchObject({ outcome: 'no-input', bestId: 'c1' });
    // a later outcome replaces an earlier one
    const later = settle({
      ...base,
      attempts: 2,
      outcome: 'no-input',
      bestId: 'c1',
      attempt: { id: 'c2', state: 'ended', outcome: 'confirmed', endedAt },
    });
    expect(later).toMatchObject({ outcome: 'confirmed', bestId: 'c2' });
    // none and none: the latest
    const none = settle({
      ...base,
      attempts: 2,
      bestId: 'c1',
      attempt: { id: 'c2', state: 'failed', outcome: null, endedAt },
    });
    expect(none.bestId).toBe('c2');
  });
});
