/**
 * The delivery loop as the server runs it (src/workers.ts): an event recorded with
 * recordEvents reaches a real receiver, signed, with nothing but the server running; and the
 * rules of schedule.ts at their edges.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock.ts';
import { recordEvents } from '../../src/events/record.ts';
import {
  nextStep,
  RETRY_SCHEDULE_MS,
  retryAfterMs,
  shouldDisable,
} from '../../src/events/schedule.ts';
import type { RunningServer } from '../../src/server.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { eventually, startTestServer } from '../support/server.ts';
import { deliveryRow, insertEndpoint, type Receiver, receiver } from './delivery-helpers.ts';

describe('the delivery loop in a running server', () => {
  let test: TestDatabase;
  let server: RunningServer;
  let recv: Receiver;
  let secret = '';

  beforeAll(async () => {
    test = await createTestDatabase('pglite');
    server = await startTestServer(test.database, { env: { OUTBOUND_ALLOW_PRIVATE: 'true' } });
    recv = await receiver(() => secret, systemClock);
  });
  afterAll(async () => {
    await server?.stop();
    await recv?.close();
    await test?.drop();
  });

  it('sends a recorded event without being asked', async () => {
    const db = test.database.db;
    const ep = await insertEndpoint(db, { url: recv.url });
    secret = ep.secret;
    const at = new Date();
    const written = await db.transaction((tx) =>
      recordEvents(tx, [
        {
          type: 'call.ended',
          subject: 'call:c1',
          data: { callId: 'c1' },
          at,
        },
      ]),
    );
    expect(written).toBe(1);
    const got = await eventually(async () => recv.received[0], 10_000, 'the event at the receiver');
    expect(got.verified).toBe(true);
    expect(JSON.parse(got.body)).toEqual({
      type: 'call.ended',
      timestamp: at.toISOString(),
      data: { callId: 'c1' },
    });
    const [row] = await db.query.eventDeliveries.findMany();
    await eventually(async () => (await deliveryRow(db, row!.id)).state === 'delivered');
  });
});

describe('the schedule rules', () => {
  const now = new Date('2030-01-01T12:00:00.000Z');
  const half = () => 0.5;

  it('reads Retry-After as seconds or an HTTP date, and ignores what it cannot read', () => {
    expect(retryAfterMs('30', now)).toBe(30_000);
    expect(retryAfterMs(' 0 ', now)).toBe(0);
    expect(retryAfterMs('Tue, 01 Jan 2030 12:01:00 GMT', now)).toBe(60_000);
    expect(retryAfterMs('Tue, 01 Jan 2030 11:00:00 GMT', now)).toBe(0);
    expect(retryAfterMs('soon', now)).toBeUndefined();
    expect(retryAfterMs('-5', now)).toBeUndefined();
    expect(retryAfterMs(null, now)).toBeUndefined();
  });

  it('never retries sooner than the schedule, whatever Retry-After says', () => {
    const step = nextStep(3, { kind: 'response', status: 503, retryAfter: '1' }, now, half);
    expect(step).toEqual({
      state: 'pending',
      nextAt: new Date(now.getTime() + RETRY_SCHEDULE_MS[3]!),
    });
  });

  it('treats every non-2xx answer as a failure, 2xx as success', () => {
    for (const status of [301, 400, 401, 404, 429, 500, 502]) {
      expect(nextStep(1, { kind: 'response', status }, now, half).state).toBe('pending');
    }
    expect(nextStep(1, { kind: 'response', status: 204 }, now, half).state).toBe('delivered');
    expect(nextStep(1, { kind: 'unreachable' }, now, half).state).toBe('pending');
    expect(nextStep(1, { kind: 'refused', reason: 'x' }, now, half).state).toBe('exhausted');
    expect(nextStep(RETRY_SCHEDULE_MS.length, { kind: 'timeout' }, now, half).state).toBe(
      'exhausted',
    );
  });

  it('disables only after both the period and the number of attempts', () => {
    const sixDaysAgo = new Date(now.getTime() - 6 * 86_400_000);
    const fourDaysAgo = new Date(now.getTime() - 4 * 86_400_000);
    expect(shouldDisable(sixDaysAgo, 10, now)).toBe(true);
    expect(shouldDisable(sixDaysAgo, 9, now)).toBe(false);
    expect(shouldDisable(fourDaysAgo, 100, now)).toBe(false);
    expect(shouldDisable(null, 100, now)).toBe(false);
  });
});
