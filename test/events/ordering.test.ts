/**
 * Order per subject (src/events/deliver.ts): to an `ordered` endpoint, one subject's later
 * event waits while an earlier one is pending (retried), and goes on once that one is
 * delivered or exhausted; other subjects do not wait. An unordered endpoint waits for nothing.
 */
import { afterAll, afterEach, beforeEach, expect, it } from 'vitest';
import type { Db } from '../../src/db/client.ts';
import { endpoints, eventDeliveries, outgoingEvents } from '../../src/db/schema/index.ts';
import { type DeliverDeps, deliverOnce } from '../../src/events/deliver.ts';
import { MAX_ATTEMPTS } from '../../src/events/schedule.ts';
import { webhookId } from '../../src/events/sign.ts';
import { createOutboundPolicy } from '../../src/http/outbound.ts';
import { describeEachEngine } from '../support/db.ts';
import {
  deliveryRow,
  insertEndpoint,
  insertEvent,
  type Receiver,
  receiver,
  stillClock,
} from './delivery-helpers.ts';

const T0 = new Date('2030-01-01T12:00:00.000Z');
const policy = createOutboundPolicy({ allowPrivate: true });
afterAll(() => policy.close());

describeEachEngine('event order', (ctx) => {
  let clock: ReturnType<typeof stillClock>;
  let recv: Receiver | undefined;
  const db = (): Db => ctx.database().db;
  const deps = (): DeliverDeps => ({
    db: db(),
    outbound: policy.send,
    clock,
    random: () => 0.5,
  });

  beforeEach(async () => {
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

  /**
   * Three events: call:a #1 (refused by the receiver until `firstOk` says), call:a #2 a
   * millisecond later, and call:b.
   */
  async function threeEvents(ordered: boolean, firstOk: () => boolean) {
    let secret = '';
    let first = '';
    recv = await receiver(
      () => secret,
      clock,
      (r) => ({ status: r.id === first && !firstOk() ? 500 : 200 }),
    );
    const ep = await insertEndpoint(db(), { url: recv.url, ordered });
    secret = ep.secret;
    const a1 = await insertEvent(db(), [ep.id], { at: clock.now(), subject: 'call:a' });
    first = webhookId(a1.eventId);
    const a2 = await insertEvent(db(), [ep.id], {
      at: new Date(T0.getTime() + 1),
      subject: 'call:a',
    });
    const b = await insertEvent(db(), [ep.id], { at: clock.now(), subject: 'call:b' });
    clock.advance(1);
    return {
      a1: { id: webhookId(a1.eventId), delivery: a1.deliveryIds[0]! },
      a2: { id: webhookId(a2.eventId), delivery: a2.deliveryIds[0]! },
      b: { id: webhookId(b.eventId), delivery: b.deliveryIds[0]! },
    };
  }

  it('ordered: a later event waits while the earlier one is retried, then goes on once it is exhausted', async () => {
    const { a1, a2, b } = await threeEvents(true, () => false);
    await deliverOnce(deps());
    // a1 failed, b (another subject) went, a2 waits for a1
    expect(recv!.received.map((r) => r.id).sort()).toEqual([a1.id, b.id].sort());
    for (let i = 1; i < MAX_ATTEMPTS; i++) {
      const row = await deliveryRow(db(), a1.delivery);
      expect(row.state).toBe('pending');
      expect((await deliveryRow(db(), a2.delivery)).state).toBe('pending');
      clock.set(row.nextAt);
      await deliverOnce(deps());
      expect(recv!.received.map((r) => r.id)).not.toContain(a2.id);
    }
    expect((await deliveryRow(db(), a1.delivery)).state).toBe('exhausted');
    expect(recv!.received.filter((r) => r.id === a1.id)).toHaveLength(MAX_ATTEMPTS);
    // a1 is exhausted: a2 goes, without waiting for another schedule step
    expect(await deliverOnce(deps())).toEqual({ attempted: 1 });
    expect(recv!.received.at(-1)!.id).toBe(a2.id);
    expect((await deliveryRow(db(), a2.delivery)).state).toBe('delivered');
    expect(recv!.received.every((r) => r.verified)).toBe(true);
  });

  it('ordered: once the earlier event is delivered on a retry, the later one follows it', async () => {
    let ok = false;
    const { a1, a2 } = await threeEvents(true, () => ok);
    await deliverOnce(deps());
    ok = true;
    clock.set((await deliveryRow(db(), a1.delivery)).nextAt);
    await deliverOnce(deps());
    expect((await deliveryRow(db(), a1.delivery)).state).toBe('delivered');
    await deliverOnce(deps());
    const order = recv!.received.map((r) => r.id);
    expect(order.lastIndexOf(a1.id)).toBeLessThan(order.indexOf(a2.id));
    expect((await deliveryRow(db(), a2.delivery)).state).toBe('delivered');
  });

  it('unordered: a later event of the subject does not wait', async () => {
    const { a1, a2, b } = await threeEvents(false, () => false);
    expect(await deliverOnce(deps())).toEqual({ attempted: 3 });
    expect(recv!.received.map((r) => r.id).sort()).toEqual([a1.id, a2.id, b.id].sort());
    expect((await deliveryRow(db(), a1.delivery)).state).toBe('pending');
    expect((await deliveryRow(db(), a2.delivery)).state).toBe('delivered');
  });
});
