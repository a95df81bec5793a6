/**
 * Events recorded with the change they report, through the real paths (the app's routes, the
 * dispatcher, the poller, pending callbacks): each change writes its event and one delivery
 * per enabled endpoint that wants its type, in the change's own transaction; an endpoint that
 * does not want the type, or is disabled, gets no delivery; with no endpoint nothing at all
 * is written to outgoing_events. Endpoint rows are inserted directly.
 */
import { randomBytes } from 'node:crypto';
import { asc, eq, sql } from 'drizzle-orm';
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import { startCall } from '../../src/calls/start.ts';
import { systemClock } from '../../src/clock.ts';
import { type Db, rowsOf } from '../../src/db/client.ts';
import {
  endpoints,
  eventDeliveries,
  messageEvents,
  messages,
  outgoingEvents,
} from '../../src/db/schema/index.ts';
import { recordEvents } from '../../src/events/record.ts';
import { subscriptionsOf } from '../../src/events/subscriptions.ts';
import { EVENT_CATALOG, type EventType, isEventType } from '../../src/events/types.ts';
import { signNodeToken } from '../../src/flows/index.ts';
import { createLogger } from '../../src/logger.ts';
import { dispatchOnce } from '../../src/messages/dispatcher.ts';
import { attachPending } from '../../src/messages/ingest.ts';
import { expireOverdue } from '../../src/messages/poller.ts';
import { buildTestApp, json, phone, readJson, uniq } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';

const REMINDER = {
  flow: 'appointment-reminder',
  from: 'Clinic',
  vars: { name: 'Ann', date: 'Monday 10:00' },
};

interface Stored {
  id: string;
  type: string;
  subject: string;
  data: Record<string, unknown>;
  endpoints: string[];
}

/** Inserts an endpoint row and tells this process's cache (what the endpoints store does). */
async function addEndpoint(
  db: Db,
  fields: { name?: string; eventTypes?: string[] | null; enabled?: boolean } = {},
): Promise<string> {
  const id = `ep_${randomBytes(6).toString('hex')}`;
  await db.insert(endpoints).values({
    id,
    name: fields.name ?? null,
    url: 'https://receiver.example.org/hook',
    eventTypes: fields.eventTypes ?? null,
    enabled: fields.enabled ?? true,
    secrets: [{ secret: `whsec_${randomBytes(24).toString('base64')}`, expiresAt: null }],
  });
  subscriptionsOf(db).changed();
  await subscriptionsOf(db).ready();
  return id;
}

/** Every event of `subject`, in the order recorded, each with the endpoints it goes to. */
async function eventsOf(db: Db, subject: string): Promise<Stored[]> {
  const rows = await db
    .select({
      id: outgoingEvents.id,
      type: outgoingEvents.type,
      subject: outgoingEvents.subject,
      data: outgoingEvents.data,
    })
    .from(outgoingEvents)
    .where(eq(outgoingEvents.subject, subject));
  const deliveries = await db
    .select({ eventId: eventDeliveries.eventId, endpointId: eventDeliveries.endpointId })
    .from(eventDeliveries)
    .where(eq(eventDeliveries.subject, subject))
    .orderBy(asc(eventDeliveries.id));
  // in delivery order: the order one subject's events go out in
  const order = [...new Set(deliveries.map((d) => d.eventId))];
  return rows
    .sort((a, b) => order.indexOf(a.id) - order.indexOf(b.id))
    .map((r) => ({
      ...r,
      data: r.data as Record<string, unknown>,
      endpoints: deliveries
        .filter((d) => d.eventId === r.id)
        .map((d) => d.endpointId)
        .sort(),
    }));
}

async function count(db: Db, table: 'outgoing_events' | 'event_deliveries'): Promise<number> {
  const [row] = rowsOf<{ n: string | number }>(
    await db.execute(sql`select count(*) as n from ${sql.identifier(table)}`),
  );
  return Number(row!.n);
}

/** The data matches its type's schema in the catalog. */
function expectValid(e: Stored): void {
  expect(isEventType(e.type), e.type).toBe(true);
  const parsed = EVENT_CATALOG[e.type as EventType].data.safeParse(e.data);
  expect(parsed.error?.issues ?? [], `${e.type} ${JSON.stringify(e.data)}`).toEqual([]);
}

describeEachEngine('events recorded with their change', (ctx) => {
  let app: App;
  let built: ReturnType<typeof buildTestApp>;
  const db = () => ctx.database().db;

  const start = async () => {
    const res = await app.request('/v1/calls', json({ ...REMINDER, to: phone() }));
    expect(res.status).toBe(202);
    return readJson(res);
  };
  const key = (callId: string, node: string, k: string) =>
    app.request(
      '/hooks/speechcall',
      json({
        from: 'Clinic',
        mid: 'm',
        action: { token: signNodeToken({ callId, node, key: k }, built.calls.signingSecret) },
      }),
    );
  const send = async () => {
    const customerMessageId = uniq('ev');
    const res = await app.request(
      '/v1/messages',
      json({
        messages: [{ from: 'Acme', to: phone(), type: 'sms', text: 'Hi', customerMessageId }],
      }),
    );
    expect(res.status).toBe(202);
    const [result] = (await readJson(res)).messages;
    return { id: result.id as string, customerMessageId };
  };

  beforeAll(() => {
    built = buildTestApp(ctx.database());
    app = built.app;
  });

  // each test starts with no endpoint and no event (the file's database is shared)
  beforeEach(async () => {
    await db().delete(endpoints);
    // no foreign key cascades from the events to their deliveries (src/db/schema/endpoints.ts)
    await db().delete(eventDeliveries);
    await db().delete(outgoingEvents);
    subscriptionsOf(db()).changed();
    await subscriptionsOf(db()).ready();
  });

  it('with no endpoint, writes nothing to outgoing_events and the cache wants nothing', async () => {
    for (const type of Object.keys(EVENT_CATALOG))
      expect(subscriptionsOf(db()).wants(type)).toBe(false);
    const call = await start();
    expect((await key(call.id, 'main', '1')).status).toBe(200);
    const message = await send();
    const cb = await app.request(
      '/hooks/delivery',
      json({ customerMessageId: message.customerMessageId, status: 'delivered' }),
    );
    expect(cb.status).toBe(200);
    // the changes themselves happened
    expect(
      (await db().select().from(messageEvents).where(eq(messageEvents.messageId, message.id))).map(
        (e) => e.status,
      ),
    ).toEqual(['queued', 'delivered']);
    expect(await count(db(), 'outgoing_events')).toBe(0);
    expect(await count(db(), 'event_deliveries')).toBe(0);
  });

  it("a call's start, key, outcome, follow-up and end: each event with one delivery per endpoint that wants it", async () => {
    const all = await addEndpoint(db());
    const outcomes = await addEndpoint(db(), { eventTypes: ['call.outcome', 'call.ended'] });
    const off = await addEndpoint(db(), { enabled: false });
    const call = await start();
    expect((await key(call.id, 'main', '1')).status).toBe(200);

    const events = await eventsOf(db(), `call:${call.id}`);
    expect(events.map((e) => e.type)).toEqual([
      'call.started',
      'call.key',
      'call.outcome',
      'call.ended',
    ]);
    for (const e of events) expectValid(e);
    const to = (type: string) => events.find((e) => e.type === type)!.endpoints;
    expect(to('call.started')).toEqual([all]);
    expect(to('call.key')).toEqual([all]);
    expect(to('call.outcome')).toEqual([all, outcomes].sort());
    expect(to('call.ended')).toEqual([all, outcomes].sort());
    for (const e of events) expect(e.endpoints).not.toContain(off);

    const view = await readJson(await app.request(`/v1/calls/${call.id}`));
    const [started, pressed, outcome, ended] = events.map((e) => e.data);
    expect(started).toMatchObject({
      callId: call.id,
      flow: 'appointment-reminder',
      flowVersion: view.flowVersion,
      to: view.to,
      vars: REMINDER.vars,
      messageId: call.messageId,
    });
    expect(pressed).toEqual({
      callId: call.id,
      flow: 'appointment-reminder',
      node: 'main',
      menu: 'main',
      attempt: 1,
      key: '1',
      input: '1',
      at: view.path[0].at,
    });
    expect(outcome).toMatchObject({ callId: call.id, outcome: 'confirmed' });
    const followUp = view.messages.find((m: { role: string }) => m.role === 'follow-up');
    expect(ended).toEqual({
      callId: call.id,
      flow: 'appointment-reminder',
      flowVersion: view.flowVersion,
      to: view.to,
      state: 'ended',
      outcome: 'confirmed',
      // what GET /v1/calls/{id} says, field for field
      path: view.path,
      followUps: [
        {
          id: followUp.id,
          customerMessageId: followUp.customerMessageId,
          type: 'sms',
          status: 'queued',
        },
      ],
      at: view.endedAt,
    });

    // the call's message and its follow-up: their `queued` steps, with the call named
    for (const m of view.messages) {
      const [queued] = await eventsOf(db(), `message:${m.id}`);
      expectValid(queued!);
      expect(queued!.data).toMatchObject({
        messageId: m.id,
        customerMessageId: m.customerMessageId,
        callId: call.id,
        status: 'queued',
        source: 'api',
      });
      expect(queued!.endpoints).toEqual([all]);
    }
  });

  it('a call whose message failed: call.ended (failed) with the follow-up its `on: failed` queued', async () => {
    const ep = await addEndpoint(db(), { eventTypes: ['call.ended', 'message.status'] });
    const call = await start();
    const res = await app.request(
      '/hooks/delivery',
      json({ customerMessageId: call.customerMessageId, status: 'failed' }),
    );
    expect(res.status).toBe(200);
    const view = await readJson(await app.request(`/v1/calls/${call.id}`));
    expect(view.state).toBe('failed');
    const events = await eventsOf(db(), `call:${call.id}`);
    expect(events.map((e) => e.type)).toEqual(['call.ended']);
    expectValid(events[0]!);
    const followUp = view.messages.find((m: { role: string }) => m.role === 'follow-up');
    expect(events[0]!.data).toMatchObject({
      state: 'failed',
      outcome: null,
      path: [],
      followUps: [{ id: followUp.id, customerMessageId: `${call.id}:on:failed:0`, type: 'sms' }],
      at: view.endedAt,
    });
    expect(events[0]!.endpoints).toEqual([ep]);
    // the call's message: queued, then failed, with the call named; the follow-up: queued
    const own = await eventsOf(db(), `message:${call.messageId}`);
    expect(own.map((e) => [e.data.status, e.data.callId])).toEqual([
      ['queued', call.id],
      ['failed', call.id],
    ]);
    expect((await eventsOf(db(), `message:${followUp.id}`)).map((e) => e.data.status)).toEqual([
      'queued',
    ]);
  });

  it("a delivery callback's status: message.status with the timeline step, to the endpoints that want it", async () => {
    const statuses = await addEndpoint(db(), { eventTypes: ['message.status'] });
    const calls = await addEndpoint(db(), { eventTypes: ['call.started'] });
    const message = await send();
    const at = '2025-01-01T10:00:05.000Z';
    const res = await app.request(
      '/hooks/delivery',
      json({ customerMessageId: message.customerMessageId, status: 'delivered', timestamp: at }),
    );
    expect(res.status).toBe(200);
    const events = await eventsOf(db(), `message:${message.id}`);
    expect(events.map((e) => [e.type, e.data.status, e.data.source])).toEqual([
      ['message.status', 'queued', 'api'],
      ['message.status', 'delivered', 'callback'],
    ]);
    for (const e of events) {
      expectValid(e);
      expect(e.endpoints).toEqual([statuses]);
      expect(e.endpoints).not.toContain(calls);
    }
    const view = await readJson(await app.request(`/v1/messages/${message.id}`));
    const step = view.timeline.find((t: { status: string }) => t.status === 'delivered');
    expect(events[1]!.data).toEqual({
      messageId: message.id,
      customerMessageId: message.customerMessageId,
      status: 'delivered',
      at: step.at,
      source: 'callback',
      ...(step.detail !== undefined && { detail: step.detail }),
    });
    expect(events[1]!.data).not.toHaveProperty('callId');
    // due at once, pending
    const [delivery] = await db()
      .select()
      .from(eventDeliveries)
      .where(eq(eventDeliveries.eventId, events[1]!.id));
    expect(delivery).toMatchObject({
      state: 'pending',
      attempts: 0,
      subject: `message:${message.id}`,
    });
  });

  it("the dispatcher's answer (here: given up, rejected) is a message.status step too", async () => {
    const all = await addEndpoint(db());
    const message = await send();
    const down = {
      sendMessagelist: async (): Promise<never> => {
        throw new Error('provider unreachable');
      },
    };
    const deps = { db: db(), provider: down, clock: systemClock, logger: createLogger('silent') };
    await dispatchOnce(deps, { maxAttempts: 1 });
    const events = await eventsOf(db(), `message:${message.id}`);
    expect(events.map((e) => [e.data.status, e.data.source])).toEqual([
      ['queued', 'api'],
      ['rejected', 'dispatch'],
    ]);
    for (const e of events) {
      expectValid(e);
      expect(e.endpoints).toEqual([all]);
    }
  });

  it('an expiry by the poller and a callback that waited for its message are message.status steps', async () => {
    await addEndpoint(db(), { eventTypes: ['message.status'] });
    // a callback before its message: waits in pending_events, attached when it appears
    const customerMessageId = uniq('early');
    await app.request('/hooks/delivery', json({ customerMessageId, status: 'delivered' }));
    const res = await app.request(
      '/v1/messages',
      json({
        messages: [{ from: 'Acme', to: phone(), type: 'sms', text: 'Hi', customerMessageId }],
      }),
    );
    const early = (await readJson(res)).messages[0].id as string;
    expect(await attachPending(built.ingest)).toBeGreaterThan(0);
    expect((await eventsOf(db(), `message:${early}`)).map((e) => e.data.status)).toEqual([
      'queued',
      'delivered',
    ]);

    const overdue = await send();
    await db()
      .update(messages)
      .set({ status: 'accepted', expiresAt: new Date(Date.now() - 3_600_000) })
      .where(eq(messages.id, overdue.id));
    expect(await expireOverdue({ db: db(), clock: systemClock }, { marginMs: 0 })).toBeGreaterThan(
      0,
    );
    const events = await eventsOf(db(), `message:${overdue.id}`);
    expect(events.map((e) => [e.data.status, e.data.source])).toEqual([
      ['queued', 'api'],
      ['expired', 'expiry'],
    ]);
    for (const e of events) expectValid(e);
  });

  it("a customer's Viber message: inbound.viber, once", async () => {
    const ep = await addEndpoint(db(), { eventTypes: ['inbound.viber'] });
    const from = phone();
    const body = {
      idUuid: uniq('vb'),
      alphaName: 'Acme',
      phoneNumber: from.slice(1),
      text: 'STOP',
      dt: '2025-01-01 10:00:00',
    };
    expect((await app.request('/hooks/viber', json(body))).status).toBe(200);
    // the same message again (another body): stored once, one event
    expect((await app.request('/hooks/viber', json({ ...body, extra: 1 }))).status).toBe(200);
    const events = await eventsOf(db(), `inbound:${from}`);
    expect(events).toHaveLength(1);
    expectValid(events[0]!);
    const listed = await readJson(
      await app.request(`/v1/inbound?from=${encodeURIComponent(from)}`),
    );
    expect(events[0]!.data).toEqual({ ...listed.items[0], channel: 'viber' });
    expect(events[0]!.endpoints).toEqual([ep]);
  });

  it('a change rolled back leaves no event and no delivery', async () => {
    await addEndpoint(db());
    const before = await count(db(), 'outgoing_events');
    const to = phone();
    await expect(
      startCall(built.calls, { ...REMINDER, to }, async () => {
        throw new Error('rolled back after the call was stored');
      }),
    ).rejects.toThrow('rolled back');
    expect(await count(db(), 'outgoing_events')).toBe(before);
    expect(await count(db(), 'event_deliveries')).toBe(0);
    // the same call, committed: its events are there (so the rollback is what removed them)
    await startCall(built.calls, { ...REMINDER, to });
    expect(await count(db(), 'outgoing_events')).toBe(before + 2);
  });

  describe('recordEvents', () => {
    it('to a named endpoint only, whatever its types; a name no enabled endpoint has writes none', async () => {
      const name = uniq('crm');
      const crm = await addEndpoint(db(), { name, eventTypes: ['message.status'] });
      await addEndpoint(db());
      await addEndpoint(db(), { name: uniq('off'), enabled: false });
      const subject = `call:${uniq('c')}`;
      const at = new Date();
      const event = { type: 'flow.notify', subject, data: { x: 1 }, at };
      const written = await db().transaction((tx) =>
        Promise.all([recordEvents(tx, [{ ...event, endpoint: name }])]),
      );
      expect(written).toEqual([1]);
      expect((await eventsOf(db(), subject)).map((e) => e.endpoints)).toEqual([[crm]]);
      const none = await db().transaction((tx) =>
        recordEvents(tx, [{ ...event, subject: `${subject}-2`, endpoint: 'nobody' }]),
      );
      expect(none).toBe(0);
      expect(await eventsOf(db(), `${subject}-2`)).toEqual([]);
    });

    it('writes only the events some enabled endpoint wants, one subject in the order given', async () => {
      const ep = await addEndpoint(db(), { eventTypes: ['call.key'] });
      const subject = `call:${uniq('c')}`;
      const at = new Date();
      const list = ['call.key', 'call.outcome', 'call.key', 'call.key'].map((type, n) => ({
        type,
        subject,
        data: { n },
        at,
      }));
      const written = await db().transaction((tx) => recordEvents(tx, list));
      expect(written).toBe(3);
      const events = await eventsOf(db(), subject);
      expect(events.map((e) => e.data.n)).toEqual([0, 2, 3]);
      expect(events.every((e) => e.endpoints.length === 1 && e.endpoints[0] === ep)).toBe(true);
      // uuidv7 ids, of the event's time
      for (const e of events) {
        expect(e.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab]/);
        expect(Number.parseInt(e.id.replace(/-/g, '').slice(0, 12), 16)).toBe(at.getTime());
      }
    });
  });
});
