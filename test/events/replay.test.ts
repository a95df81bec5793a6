/**
 * Replay through the API (src/events/replay.ts): one event again to every endpoint it went
 * to or to one (queued anew where it never went), 404 for an unknown event or endpoint, and
 * the bulk replay of what failed for one endpoint since a time, leaving the rest alone. Each
 * is checked on the event_deliveries rows the worker claims from, then through the worker
 * itself: a replayed delivery goes out again with the same webhook-id.
 */
import { eq } from 'drizzle-orm';
import { beforeAll, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import type { Db } from '../../src/db/client.ts';
import { eventDeliveries } from '../../src/db/schema/index.ts';
import { deliverOnce } from '../../src/events/deliver.ts';
import { webhookId } from '../../src/events/sign.ts';
import { createOutboundPolicy } from '../../src/http/outbound.ts';
import { buildTestApp, json, readJson, uniq } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';
import {
  attemptsOf,
  deliveryRow,
  insertEndpoint,
  insertEvent,
  receiver,
  stillClock,
} from './delivery-helpers.ts';

const URL = 'https://crm.example.com/hooks';
const HOUR = 3_600_000;

describeEachEngine('replay', (ctx) => {
  let app: App;
  let db: Db;
  const clock = stillClock(new Date('2030-01-10T12:00:00Z'));

  const post = (path: string, body?: unknown) =>
    app.request(path, body === undefined ? { method: 'POST' } : json(body));
  /** A delivery as the worker left it after giving up, or while retrying. */
  const setState = (id: number, state: string, attempts: number) =>
    db
      .update(eventDeliveries)
      .set({
        state,
        attempts,
        nextAt: new Date(clock.now().getTime() + 10 * HOUR),
        lastAttemptAt: clock.now(),
      })
      .where(eq(eventDeliveries.id, id));

  beforeAll(() => {
    db = ctx.database().db;
    app = buildTestApp(ctx.database(), { clock }).app;
  });

  it('requeues every delivery of an event: pending, attempts 0, due now', async () => {
    const a = await insertEndpoint(db, { url: URL });
    const b = await insertEndpoint(db, { url: URL });
    const { eventId, deliveryIds } = await insertEvent(db, [a.id, b.id], {
      at: new Date(clock.now().getTime() - 48 * HOUR),
    });
    await setState(deliveryIds[0]!, 'exhausted', 8);
    await setState(deliveryIds[1]!, 'delivered', 1);

    const res = await post(`/v1/events/${webhookId(eventId)}/replay`);
    expect(res.status).toBe(202);
    const answer = await readJson(res);
    expect(answer.eventId).toBe(webhookId(eventId));
    expect(answer.requeued).toEqual([
      { endpointId: a.id, deliveryId: deliveryIds[0] },
      { endpointId: b.id, deliveryId: deliveryIds[1] },
    ]);
    for (const id of deliveryIds) {
      expect(await deliveryRow(db, id)).toMatchObject({
        state: 'pending',
        attempts: 0,
        nextAt: clock.now(),
        deliveredAt: null,
      });
    }
  });

  it('requeues to one endpoint only, by id or name, and queues anew where it never went', async () => {
    const a = await insertEndpoint(db, { url: URL });
    const b = await insertEndpoint(db, { url: URL });
    const name = uniq('late').toLowerCase();
    const late = await insertEndpoint(db, { url: URL });
    const { endpoints } = await import('../../src/db/schema/index.ts');
    await db.update(endpoints).set({ name }).where(eq(endpoints.id, late.id));
    const { eventId, deliveryIds } = await insertEvent(db, [a.id, b.id], {
      at: clock.now(),
      subject: 'call:x',
    });
    await setState(deliveryIds[0]!, 'exhausted', 8);
    await setState(deliveryIds[1]!, 'exhausted', 8);

    const res = await post(`/v1/events/${webhookId(eventId)}/replay`, { endpoint: a.id });
    expect(res.status).toBe(202);
    expect((await readJson(res)).requeued).toEqual([
      { endpointId: a.id, deliveryId: deliveryIds[0] },
    ]);
    expect((await deliveryRow(db, deliveryIds[0]!)).state).toBe('pending');
    expect((await deliveryRow(db, deliveryIds[1]!)).state).toBe('exhausted');

    const anew = await readJson(
      await post(`/v1/events/${webhookId(eventId)}/replay`, { endpoint: name }),
    );
    expect(anew.requeued).toEqual([{ endpointId: late.id, deliveryId: expect.any(Number) }]);
    expect(await deliveryRow(db, anew.requeued[0].deliveryId)).toMatchObject({
      endpointId: late.id,
      subject: 'call:x',
      state: 'pending',
      attempts: 0,
    });
  });

  it('answers 404 for an unknown event or endpoint, and changes nothing', async () => {
    const a = await insertEndpoint(db, { url: URL });
    const { eventId, deliveryIds } = await insertEvent(db, [a.id], { at: clock.now() });
    await setState(deliveryIds[0]!, 'exhausted', 8);
    for (const id of [
      'evt_00000000000040008000000000000000',
      'evt_nothex',
      eventId, // the uuid itself is not the id the receiver saw
    ]) {
      const res = await post(`/v1/events/${id}/replay`);
      expect(res.status, id).toBe(404);
      expect((await readJson(res)).error.code).toBe('NOT_FOUND');
    }
    const noEndpoint = await post(`/v1/events/${webhookId(eventId)}/replay`, {
      endpoint: 'ep_nope',
    });
    expect(noEndpoint.status).toBe(404);
    expect((await readJson(noEndpoint)).error.message).toMatch(/no endpoint/);
    expect((await deliveryRow(db, deliveryIds[0]!)).state).toBe('exhausted');
  });

  it('replays what failed for one endpoint since a time, and nothing else', async () => {
    const a = await insertEndpoint(db, { url: URL });
    const other = await insertEndpoint(db, { url: URL });
    const now = clock.now().getTime();
    const since = new Date(now - 24 * HOUR);
    const old = await insertEvent(db, [a.id], { at: new Date(now - 30 * HOUR) });
    const exhausted = await insertEvent(db, [a.id, other.id], { at: new Date(now - 2 * HOUR) });
    const retrying = await insertEvent(db, [a.id], { at: new Date(now - HOUR) });
    const delivered = await insertEvent(db, [a.id], { at: new Date(now - HOUR) });
    const fresh = await insertEvent(db, [a.id], { at: new Date(now - HOUR) });
    await setState(old.deliveryIds[0]!, 'exhausted', 8);
    await setState(exhausted.deliveryIds[0]!, 'exhausted', 8);
    await setState(exhausted.deliveryIds[1]!, 'exhausted', 8);
    await setState(retrying.deliveryIds[0]!, 'pending', 3);
    await setState(delivered.deliveryIds[0]!, 'delivered', 2);
    const freshBefore = await deliveryRow(db, fresh.deliveryIds[0]!);

    const res = await post(`/v1/endpoints/${a.id}/replay`, { since: since.toISOString() });
    expect(res.status).toBe(202);
    expect(await readJson(res)).toEqual({ endpointId: a.id, requeued: 2, more: false });
    for (const id of [exhausted.deliveryIds[0]!, retrying.deliveryIds[0]!]) {
      expect(await deliveryRow(db, id)).toMatchObject({
        state: 'pending',
        attempts: 0,
        nextAt: clock.now(),
      });
    }
    expect((await deliveryRow(db, old.deliveryIds[0]!)).state).toBe('exhausted');
    expect((await deliveryRow(db, exhausted.deliveryIds[1]!)).state).toBe('exhausted');
    expect((await deliveryRow(db, delivered.deliveryIds[0]!)).state).toBe('delivered');
    expect(await deliveryRow(db, fresh.deliveryIds[0]!)).toEqual(freshBefore);

    // asked again: what was requeued no longer counts as failed
    const again = await readJson(
      await post(`/v1/endpoints/${a.id}/replay`, { since: since.toISOString() }),
    );
    expect(again.requeued).toBe(0);
    expect(
      (await post('/v1/endpoints/ep_nope/replay', { since: since.toISOString() })).status,
    ).toBe(404);
    const bad = await post(`/v1/endpoints/${a.id}/replay`, { since: 'yesterday' });
    expect(bad.status).toBe(400);
    expect((await readJson(bad)).error.details[0].path).toBe('since');
  });

  it('sends a replayed event again through the worker, with the same webhook-id', async () => {
    const wall = { now: () => new Date() };
    const endpointSecret = { value: '' };
    const got = await receiver(() => endpointSecret.value, wall);
    const outbound = createOutboundPolicy({ allowPrivate: true });
    try {
      const ep = await insertEndpoint(db, { url: got.url });
      endpointSecret.value = ep.secret;
      const { eventId, deliveryIds } = await insertEvent(db, [ep.id], { at: new Date() });
      await setState(deliveryIds[0]!, 'exhausted', 8);
      // exhausted: the worker leaves it alone
      await deliverOnce({ db, clock: wall, outbound: outbound.send });
      expect(got.received.filter((r) => r.id === webhookId(eventId))).toHaveLength(0);

      const replayApp = buildTestApp(ctx.database()).app;
      const res = await replayApp.request(
        `/v1/events/${webhookId(eventId)}/replay`,
        json({ endpoint: ep.id }),
      );
      expect(res.status).toBe(202);
      const deadline = Date.now() + 10_000;
      while (got.received.every((r) => r.id !== webhookId(eventId)) && Date.now() < deadline) {
        await deliverOnce({ db, clock: wall, outbound: outbound.send });
      }
      const mine = got.received.filter((r) => r.id === webhookId(eventId));
      expect(mine).toHaveLength(1);
      expect(mine[0]!.verified).toBe(true);
      expect((await deliveryRow(db, deliveryIds[0]!)).state).toBe('delivered');
      const attempts = await attemptsOf(db, deliveryIds[0]!);
      expect(attempts.at(-1)).toMatchObject({ status: 'succeeded', trigger: 'replay' });
    } finally {
      await outbound.close();
      await got.close();
    }
  });
});
