/**
 * The delivery worker (src/events/deliver.ts) against a real receiver on 127.0.0.1 that checks
 * every request with `standardwebhooks`: signed, retried on the published schedule with the
 * same webhook-id, Retry-After honoured, timeouts and refusals recorded, exhausted at the end,
 * replayed, and endpoints disabled when they keep failing.
 */
import { and, eq } from 'drizzle-orm';
import { afterAll, afterEach, beforeEach, expect, it } from 'vitest';
import type { Db } from '../../src/db/client.ts';
import { endpoints, eventDeliveries, outgoingEvents } from '../../src/db/schema/index.ts';
import {
  createEndpointRateLimiter,
  type DeliverDeps,
  deliverOnce,
  type EndpointRateLimiter,
  leaseMs,
  requeue,
} from '../../src/events/deliver.ts';
import {
  LONGEST_STEP_MS,
  MAX_ATTEMPTS,
  RESPONSE_BODY_CAP,
  RETRY_SCHEDULE_MS,
} from '../../src/events/schedule.ts';
import { webhookId } from '../../src/events/sign.ts';
import { createOutboundPolicy } from '../../src/http/outbound.ts';
import { describeEachEngine } from '../support/db.ts';
import {
  type Answer,
  attemptsOf,
  deliveryRow,
  endpointRow,
  insertEndpoint,
  insertEvent,
  type Receiver,
  receiver,
  stillClock,
} from './delivery-helpers.ts';

const T0 = new Date('2030-01-01T12:00:00.000Z');
const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const allowed = createOutboundPolicy({ allowPrivate: true });
const strict = createOutboundPolicy({ allowPrivate: false });

afterAll(async () => {
  await Promise.all([allowed.close(), strict.close()]);
});

describeEachEngine('event delivery', (ctx) => {
  let clock: ReturnType<typeof stillClock>;
  let recv: Receiver | undefined;
  let secret = '';
  const db = (): Db => ctx.database().db;
  const deps = (over: Partial<DeliverDeps> = {}): DeliverDeps => ({
    db: db(),
    outbound: allowed.send,
    clock,
    random: () => 0.5, // no jitter: waits exactly as the schedule says
    timeoutMs: 2000,
    ...over,
  });

  /** A receiver answering `answer`, an endpoint pointing at it, and one event to it. */
  async function setUp(answer?: (n: number) => Answer, endpointOpts: { ordered?: boolean } = {}) {
    recv = await receiver(() => secret, clock, answer && ((_r, n) => answer(n)));
    const ep = await insertEndpoint(db(), { url: recv.url, ...endpointOpts });
    secret = ep.secret;
    const ev = await insertEvent(db(), [ep.id], { at: clock.now() });
    return { ep, eventId: ev.eventId, deliveryId: ev.deliveryIds[0]! };
  }

  beforeEach(async () => {
    // each test on its own (its endpoints' deliveries only)
    // no foreign key cascades from the events to their deliveries (src/db/schema/endpoints.ts)
    await db().delete(eventDeliveries);
    await db().delete(outgoingEvents);
    await db().delete(endpoints);
    clock = stillClock(T0);
  });
  afterEach(async () => {
    await recv?.close();
    recv = undefined;
  });

  it('delivers once, signed, with the stored event as the body', async () => {
    const { ep, eventId, deliveryId } = await setUp();
    expect(await deliverOnce(deps())).toEqual({ attempted: 1 });
    expect(recv!.received).toHaveLength(1);
    const [req] = recv!.received;
    expect(req!.verified).toBe(true);
    expect(req!.id).toBe(webhookId(eventId));
    expect(req!.headers['content-type']).toBe('application/json');
    expect(req!.headers['user-agent']).toMatch(/Switchboard/);
    expect(req!.headers['webhook-timestamp']).toBe(String(T0.getTime() / 1000));
    expect(JSON.parse(req!.body)).toEqual({
      type: 'call.ended',
      timestamp: T0.toISOString(),
      data: { callId: eventId, outcome: 'done', note: 'é ✓' },
    });
    const row = await deliveryRow(db(), deliveryId);
    expect(row).toMatchObject({ state: 'delivered', attempts: 1, deliveredAt: T0 });
    const [a] = await attemptsOf(db(), deliveryId);
    expect(a).toMatchObject({
      status: 'succeeded',
      responseStatus: 200,
      responseBody: 'ok',
      endpointId: ep.id,
      eventId,
      trigger: 'scheduled',
      error: null,
    });
    // nothing more to do: delivered once
    expect(await deliverOnce(deps())).toEqual({ attempted: 0 });
    expect(recv!.received).toHaveLength(1);
    expect((await endpointRow(db(), ep.id)).failingSince).toBeNull();
  });

  it('leaves a delivery whose event is gone unclaimed, and sends the others of the round', async () => {
    // the claim reads the events by id after it took the deliveries (src/events/deliver.ts);
    // a delivery without its event (none should be) is neither sent nor leased
    const { ep, eventId, deliveryId } = await setUp();
    const other = await insertEvent(db(), [ep.id], { at: clock.now() });
    await db().delete(outgoingEvents).where(eq(outgoingEvents.id, eventId));
    expect(await deliverOnce(deps())).toEqual({ attempted: 1 });
    expect(recv!.received.map((r) => r.id)).toEqual([webhookId(other.eventId)]);
    expect(await deliveryRow(db(), deliveryId)).toMatchObject({
      state: 'pending',
      attempts: 0,
      nextAt: T0,
    });
  });

  it('retries a 500 on the schedule, with the same webhook-id, until a 200', async () => {
    const { ep, deliveryId } = await setUp((n) => ({ status: n === 1 ? 500 : 200 }));
    await deliverOnce(deps());
    let row = await deliveryRow(db(), deliveryId);
    expect(row).toMatchObject({ state: 'pending', attempts: 1 });
    expect(row.nextAt).toEqual(new Date(T0.getTime() + RETRY_SCHEDULE_MS[1]!));
    expect((await endpointRow(db(), ep.id)).failingSince).toEqual(T0);
    // not due yet
    clock.advance(RETRY_SCHEDULE_MS[1]! - 1);
    expect(await deliverOnce(deps())).toEqual({ attempted: 0 });
    clock.advance(1);
    expect(await deliverOnce(deps())).toEqual({ attempted: 1 });
    row = await deliveryRow(db(), deliveryId);
    expect(row).toMatchObject({ state: 'delivered', attempts: 2 });
    const ids = recv!.received.map((r) => r.id);
    expect(ids).toHaveLength(2);
    expect(new Set(ids).size).toBe(1);
    expect(recv!.received.every((r) => r.verified)).toBe(true);
    const attempts = await attemptsOf(db(), deliveryId);
    expect(attempts.map((a) => [a.status, a.responseStatus])).toEqual([
      ['failed', 500],
      ['succeeded', 200],
    ]);
    // a success ends the failing streak
    expect((await endpointRow(db(), ep.id)).failingSince).toBeNull();
  });

  it('honours Retry-After on a 429, in seconds or as a date, capped at the longest step', async () => {
    const answers: Answer[] = [
      { status: 429, headers: { 'retry-after': '120' } },
      {
        status: 429,
        headers: { 'retry-after': new Date(T0.getTime() + 7 * 60_000).toUTCString() },
      },
      { status: 429, headers: { 'retry-after': String(100 * 3600) } },
      { status: 200 },
    ];
    const { deliveryId } = await setUp((n) => answers[n - 1]!);
    await deliverOnce(deps());
    let row = await deliveryRow(db(), deliveryId);
    // 120 s, not the schedule's 5 s
    expect(row.nextAt).toEqual(new Date(T0.getTime() + 120_000));
    clock.set(row.nextAt);
    await deliverOnce(deps());
    row = await deliveryRow(db(), deliveryId);
    // 7 min from T0 is 5 min from now, no less than the schedule's 5 min
    expect(row.nextAt).toEqual(new Date(T0.getTime() + 7 * 60_000));
    clock.set(row.nextAt);
    await deliverOnce(deps());
    row = await deliveryRow(db(), deliveryId);
    // 100 h asked: capped at the longest step
    expect(row.nextAt).toEqual(new Date(clock.now().getTime() + LONGEST_STEP_MS));
    clock.set(row.nextAt);
    await deliverOnce(deps());
    expect((await deliveryRow(db(), deliveryId)).state).toBe('delivered');
    expect(recv!.received).toHaveLength(4);
  });

  it('counts no answer in time as a failed attempt, in words', async () => {
    const { deliveryId } = await setUp(() => ({ status: 200, hang: true }));
    await deliverOnce(deps({ timeoutMs: 300 }));
    const row = await deliveryRow(db(), deliveryId);
    expect(row).toMatchObject({ state: 'pending', attempts: 1 });
    const [a] = await attemptsOf(db(), deliveryId);
    expect(a).toMatchObject({
      status: 'failed',
      responseStatus: null,
      error: 'no answer within 0.3 s',
    });
    expect(a!.durationMs).toBeGreaterThanOrEqual(250);
  });

  it('keeps the start of a long answer only', async () => {
    const { deliveryId } = await setUp(() => ({ status: 400, body: 'é'.repeat(10_000) }));
    await deliverOnce(deps());
    const [a] = await attemptsOf(db(), deliveryId);
    expect(a!.responseStatus).toBe(400);
    expect(Buffer.byteLength(a!.responseBody!)).toBe(RESPONSE_BODY_CAP);
    expect(a!.responseBody).toBe('é'.repeat(RESPONSE_BODY_CAP / 2));
  });

  it('exhausts a delivery after the last attempt of the schedule, each wait as published', async () => {
    const { deliveryId } = await setUp(() => ({ status: 503 }));
    const times: number[] = [];
    for (let i = 0; i < MAX_ATTEMPTS; i++) {
      expect(await deliverOnce(deps())).toEqual({ attempted: 1 });
      times.push(clock.now().getTime());
      const row = await deliveryRow(db(), deliveryId);
      if (i < MAX_ATTEMPTS - 1) {
        expect(row.state).toBe('pending');
        clock.set(row.nextAt);
      } else {
        expect(row).toMatchObject({ state: 'exhausted', attempts: MAX_ATTEMPTS });
      }
    }
    expect(times.slice(1).map((t, i) => t - times[i]!)).toEqual(RETRY_SCHEDULE_MS.slice(1));
    clock.advance(30 * DAY);
    expect(await deliverOnce(deps())).toEqual({ attempted: 0 });
    expect(recv!.received).toHaveLength(MAX_ATTEMPTS);
    expect(new Set(recv!.received.map((r) => r.id)).size).toBe(1);
    expect(await attemptsOf(db(), deliveryId)).toHaveLength(MAX_ATTEMPTS);
  });

  it('spreads retries with jitter within ±20 %', async () => {
    const { deliveryId } = await setUp(() => ({ status: 500 }));
    await deliverOnce(deps({ random: () => 0 }));
    const low = await deliveryRow(db(), deliveryId);
    expect(low.nextAt.getTime() - T0.getTime()).toBe(RETRY_SCHEDULE_MS[1]! * 0.8);
    clock.set(low.nextAt);
    await deliverOnce(deps({ random: () => 0.999_999 }));
    const high = await deliveryRow(db(), deliveryId);
    expect(high.nextAt.getTime() - low.nextAt.getTime()).toBe(RETRY_SCHEDULE_MS[2]! * 1.2);
  });

  it('refuses a private address without the allowance: recorded, exhausted at once', async () => {
    const { deliveryId } = await setUp();
    await deliverOnce(deps({ outbound: strict.send }));
    expect(recv!.received).toHaveLength(0);
    expect(await deliveryRow(db(), deliveryId)).toMatchObject({ state: 'exhausted', attempts: 1 });
    const [a] = await attemptsOf(db(), deliveryId);
    expect(a).toMatchObject({ status: 'failed', responseStatus: null });
    expect(a!.error).toMatch(/^refused by the outbound policy: 127\.0\.0\.1 is a loopback address/);
  });

  it('replays a delivered event: pending again, sent again with the same id, trigger replay', async () => {
    const { eventId, deliveryId } = await setUp();
    await deliverOnce(deps());
    clock.advance(HOUR);
    const changed = await db().transaction((tx) => requeue(tx, [deliveryId], clock.now()));
    expect(changed).toBe(1);
    expect(await deliveryRow(db(), deliveryId)).toMatchObject({
      state: 'pending',
      attempts: 0,
      nextAt: clock.now(),
    });
    await deliverOnce(deps());
    expect(recv!.received.map((r) => r.id)).toEqual([webhookId(eventId), webhookId(eventId)]);
    const attempts = await attemptsOf(db(), deliveryId);
    expect(attempts.map((a) => a.trigger)).toEqual(['scheduled', 'replay']);
    expect(await deliveryRow(db(), deliveryId)).toMatchObject({ state: 'delivered', attempts: 1 });
  });

  it('leases what it claims: a crash mid-request is sent again after the lease, same id', async () => {
    const { eventId, deliveryId } = await setUp();
    // the first instance "crashes": its request never ends and it records nothing
    let reached!: () => void;
    const inFlight = new Promise<void>((r) => {
      reached = r;
    });
    void deliverOnce(
      deps({
        outbound: () => {
          reached();
          return new Promise<Response>(() => {});
        },
      }),
    );
    await inFlight;
    // one delivery, one wave of requests: the lease covers its timeout (deps: 2 s) and a margin
    const lease = leaseMs(1, 2000);
    expect((await deliveryRow(db(), deliveryId)).nextAt).toEqual(new Date(T0.getTime() + lease));
    // another instance finds nothing due while the lease holds
    expect(await deliverOnce(deps())).toEqual({ attempted: 0 });
    clock.advance(lease);
    expect(await deliverOnce(deps())).toEqual({ attempted: 1 });
    expect(recv!.received.map((r) => r.id)).toEqual([webhookId(eventId)]);
    expect(await deliveryRow(db(), deliveryId)).toMatchObject({ state: 'delivered' });
  });

  it('shares the work between instances: each delivery sent once', async () => {
    recv = await receiver(() => secret, clock);
    const ep = await insertEndpoint(db(), { url: recv.url });
    secret = ep.secret;
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) {
      ids.push((await insertEvent(db(), [ep.id], { at: clock.now() })).eventId);
    }
    const rounds = await Promise.all([1, 2, 3].map(() => deliverOnce(deps())));
    const more = await deliverOnce(deps());
    expect(rounds.reduce((n, r) => n + r.attempted, 0) + more.attempted).toBe(12);
    expect(recv.received.map((r) => r.id).sort()).toEqual(ids.map(webhookId).sort());
    expect(recv.received.every((r) => r.verified)).toBe(true);
  });

  it('signs with every live secret during a rotation, not with an expired one', async () => {
    recv = await receiver(() => secret, clock);
    const [newer, older, expired] = ['a', 'b', 'c'].map(() => ({
      secret: `whsec_${Buffer.from(crypto.getRandomValues(new Uint8Array(24))).toString('base64')}`,
    }));
    const ep = await insertEndpoint(db(), {
      url: recv.url,
      secrets: [
        { secret: newer!.secret, expiresAt: null },
        { secret: older!.secret, expiresAt: new Date(T0.getTime() + HOUR).toISOString() },
        { secret: expired!.secret, expiresAt: new Date(T0.getTime() - 1).toISOString() },
      ],
    });
    await insertEvent(db(), [ep.id], { at: clock.now() });
    secret = older!.secret;
    await deliverOnce(deps());
    expect(recv.received[0]!.verified).toBe(true);
    expect(String(recv.received[0]!.headers['webhook-signature']).split(' ')).toHaveLength(2);
    secret = newer!.secret;
    await db().update(eventDeliveries).set({ state: 'pending', nextAt: clock.now() });
    await deliverOnce(deps());
    expect(recv.received[1]!.verified).toBe(true);
    secret = expired!.secret;
    await db().update(eventDeliveries).set({ state: 'pending', nextAt: clock.now() });
    await deliverOnce(deps());
    expect(recv.received[2]!.verified).toBe(false);
  });

  it('disables an endpoint failing for 5 days and 10 attempts, and records endpoint.disabled', async () => {
    // a second endpoint that listens for endpoint.disabled
    const ops = await receiver(() => opsSecret, clock);
    const opsEp = await insertEndpoint(db(), { url: ops.url, eventTypes: ['endpoint.disabled'] });
    const opsSecret = opsEp.secret;
    try {
      const { ep, deliveryId } = await setUp(() => ({ status: 500 }));
      // 8 failed attempts over about 27.6 h
      for (let i = 0; i < MAX_ATTEMPTS; i++) {
        await deliverOnce(deps());
        const row = await deliveryRow(db(), deliveryId);
        if (row.state === 'pending') clock.set(row.nextAt);
      }
      expect((await deliveryRow(db(), deliveryId)).state).toBe('exhausted');
      expect((await endpointRow(db(), ep.id)).failingSince).toEqual(T0);
      // 5 days after the first failure: a 9th failed attempt is not enough
      clock.set(new Date(T0.getTime() + 5 * DAY));
      const second = await insertEvent(db(), [ep.id], { at: clock.now() });
      await deliverOnce(deps());
      expect(await endpointRow(db(), ep.id)).toMatchObject({ enabled: true, failingSince: T0 });
      // the 10th is
      clock.advance(RETRY_SCHEDULE_MS[1]!);
      await deliverOnce(deps());
      const disabled = await endpointRow(db(), ep.id);
      expect(disabled.enabled).toBe(false);
      expect(disabled.disabledReason).toMatch(
        /every attempt failed since 2030-01-01T12:00:00.000Z \(10 attempts/,
      );
      // what was waiting is exhausted (replayable), and nothing more is sent to it
      expect((await deliveryRow(db(), second.deliveryIds[0]!)).state).toBe('exhausted');
      const [event] = await db()
        .select()
        .from(outgoingEvents)
        .where(eq(outgoingEvents.type, 'endpoint.disabled'));
      expect(event).toMatchObject({ subject: `endpoint:${ep.id}` });
      expect(event!.data).toMatchObject({
        endpointId: ep.id,
        url: recv!.url,
        reason: disabled.disabledReason,
        failingSince: T0.toISOString(),
      });
      const toOps = await db()
        .select()
        .from(eventDeliveries)
        .where(and(eq(eventDeliveries.eventId, event!.id)));
      expect(toOps.map((d) => d.endpointId)).toEqual([opsEp.id]);
      const before = recv!.received.length;
      clock.advance(HOUR);
      await deliverOnce(deps());
      expect(recv!.received).toHaveLength(before);
      expect(ops.received).toHaveLength(1);
      expect(ops.received[0]!.verified).toBe(true);
      expect(JSON.parse(ops.received[0]!.body).type).toBe('endpoint.disabled');
    } finally {
      await ops.close();
    }
  });

  it('disables an endpoint at once when it answers 410 Gone', async () => {
    const { ep, deliveryId } = await setUp(() => ({ status: 410 }));
    await deliverOnce(deps());
    expect(await endpointRow(db(), ep.id)).toMatchObject({
      enabled: false,
      disabledReason: 'the endpoint answered 410 Gone',
    });
    expect((await deliveryRow(db(), deliveryId)).state).toBe('exhausted');
  });

  it('spaces requests to a rate-limited endpoint at its rate', async () => {
    // when each request may start, by the limiter deliverOnce uses for every request: arrival
    // at the receiver adds the network's own jitter (a new connection delays the first)
    const real = createEndpointRateLimiter();
    const asked: number[] = [];
    const starts: number[] = [];
    const limiter: EndpointRateLimiter = {
      async take(endpointId, rate) {
        asked.push(performance.now());
        await real.take(endpointId, rate);
        starts.push(performance.now());
      },
    };
    recv = await receiver(() => secret, clock);
    const ep = await insertEndpoint(db(), { url: recv.url, rateLimit: 10 });
    secret = ep.secret;
    for (let i = 0; i < 5; i++) await insertEvent(db(), [ep.id], { at: clock.now() });
    expect(await deliverOnce(deps({ limiter }))).toEqual({ attempted: 5 });
    expect(recv.received).toHaveLength(5);
    expect(starts).toHaveLength(5);
    // the i-th start no sooner than i × 100 ms after the first was asked for (the limiter
    // waits out a timer that fires early; 1e-6 for the sums' floating-point rounding)
    for (let i = 1; i < starts.length; i++)
      expect(starts[i]! - asked[0]!).toBeGreaterThanOrEqual(i * 100 - 1e-6);
  });
});
