import { expect, test } from 'vitest';
import { createManualClock } from '../../src/sandbox/clock.ts';
import { createTokenBucket, DEFAULT_RATE_LIMITS } from '../../src/sandbox/rate-limit.ts';

test('the messaging bucket lets a burst of 150 through, then refills at 100/s', async () => {
  const clock = createManualClock(0);
  const bucket = createTokenBucket(DEFAULT_RATE_LIMITS.messaging, clock);
  for (let i = 0; i < 150; i++) expect(bucket.take().ok).toBe(true);
  const refused = bucket.take();
  expect(refused).toEqual({ ok: false, retryAfterMs: 10 });
  await clock.advance(10);
  expect(bucket.take().ok).toBe(true);
  expect(bucket.take().ok).toBe(false);
  await clock.advance(1000);
  let taken = 0;
  while (bucket.take().ok) taken++;
  expect(taken).toBe(100);
});

test('the data bucket holds 75 and refills at 50/s; it never exceeds the burst', async () => {
  const clock = createManualClock(0);
  const bucket = createTokenBucket(DEFAULT_RATE_LIMITS.data, clock);
  await clock.advance(60_000);
  let taken = 0;
  while (bucket.take().ok) taken++;
  expect(taken).toBe(75);
  const refused = bucket.take();
  expect(refused.ok).toBe(false);
  if (!refused.ok) expect(refused.retryAfterMs).toBe(20);
});

test('reset refills the bucket', () => {
  const clock = createManualClock(0);
  const bucket = createTokenBucket({ perSecond: 1, burst: 1 }, clock);
  expect(bucket.take().ok).toBe(true);
  expect(bucket.take().ok).toBe(false);
  bucket.reset();
  expect(bucket.take().ok).toBe(true);
});
