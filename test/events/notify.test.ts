/**
 * A flow's `notify:` through the app: a call is started from a flow file, its key's webhook
 * posted, and the `flow.notify` event is recorded with the call's data and delivered to the
 * named endpoint only, in the transaction of the step (a rolled-back step leaves none). No
 * enabled endpoint of that name: no event, and a problem on the call's timeline.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { and, eq } from 'drizzle-orm';
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import { lockCall, readHeld } from '../../src/calls/call-rows.ts';
import { decideKey } from '../../src/calls/decide.ts';
import { createCallPlan } from '../../src/calls/plan.ts';
import { writePlan } from '../../src/calls/write-plan.ts';
import type { Queryable } from '../../src/db/client.ts';
import { endpoints, eventDeliveries, outgoingEvents } from '../../src/db/schema/index.ts';
import { EVENT_CATALOG } from '../../src/events/types.ts';
import { signNodeToken } from '../../src/flows/index.ts';
import { buildTestApp, json, phone, readJson, uniq } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';

const FLOW = `
params:
  name: string
assert: { outcomeOnEveryPath: false }
menus:
  main:
    intro: ivr_1
    keys:
      '1':
        - notify: { endpoint: crm, data: { note: 'confirmed by {{name}}' } }
        - outcome: confirmed
        - hangup
      '2':
        - notify: nobody
        - outcome: declined
        - hangup
      '3':
        - notify: off
        - hangup
`;

const dir = mkdtempSync(join(tmpdir(), 'notify-flows-'));
writeFileSync(join(dir, 'notify.yaml'), FLOW);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The ids of a call's deliveries, to any endpoint. */
const deliveriesOf = async (q: Queryable, callId: string) =>
  (
    await q
      .select({ id: eventDeliveries.id })
      .from(eventDeliveries)
      .where(eq(eventDeliveries.subject, `call:${callId}`))
  )
    .map((d) => d.id)
    .sort((a, b) => a - b);

describeEachEngine('flow notify:', (ctx) => {
  let app: App;
  let built: ReturnType<typeof buildTestApp>;
  const db = () => ctx.database().db;
  const ids = { crm: uniq('ep_crm'), all: uniq('ep_all'), off: uniq('ep_off') };

  const start = async () => {
    const to = phone();
    const res = await app.request(
      '/v1/calls',
      json({ flow: 'notify', to, from: 'Shop', vars: { name: 'Ann' } }),
    );
    expect(res.status).toBe(202);
    return { ...(await readJson(res)), to } as { id: string; flowVersion: string; to: string };
  };
  const hook = (callId: string, node: string, key: string) =>
    app.request(
      '/hooks/speechcall',
      json({
        from: 'Shop',
        mid: 'm',
        action: { token: signNodeToken({ callId, node, key }, built.calls.signingSecret) },
      }),
    );
  const notifyEvents = (callId: string) =>
    db()
      .select()
      .from(outgoingEvents)
      .where(eq(outgoingEvents.subject, `call:${callId}`))
      .then((rows) => rows.filter((r) => r.type === 'flow.notify'));
  const timeline = async (callId: string) =>
    (await readJson(await app.request(`/v1/calls/${callId}`))) as {
      state: string;
      outcome: string | null;
      path: unknown[];
      timeline: Array<{ kind: string; node: string | null; detail?: Record<string, unknown> }>;
    };

  beforeAll(async () => {
    built = buildTestApp(ctx.database(), { env: { FLOWS_DIR: dir } });
    app = built.app;
    const secrets = [{ secret: 'whsec_dGVzdHRlc3R0ZXN0dGVzdHRlc3R0ZXN0', expiresAt: null }];
    await db()
      .insert(endpoints)
      .values([
        { id: ids.crm, name: 'crm', url: 'https://crm.example.org/hook', secrets },
        // wants every type: flow.notify still goes to the endpoint the flow names only
        { id: ids.all, name: 'everything', url: 'https://all.example.org/hook', secrets },
        // named by key 3, but disabled
        {
          id: ids.off,
          name: 'off',
          url: 'https://off.example.org/hook',
          secrets,
          enabled: false,
        },
      ]);
  });

  beforeEach(async () => {
    // no foreign key cascades from the events to their deliveries (src/db/schema/endpoints.ts)
    await db().delete(eventDeliveries);
    await db().delete(outgoingEvents);
  });

  it("records one flow.notify with the call's data, delivered to crm only", async () => {
    const call = await start();
    expect((await hook(call.id, 'main', '1')).status).toBe(200);

    const events = await notifyEvents(call.id);
    expect(events).toHaveLength(1);
    const [event] = events;
    expect(event!.data).toEqual({
      callId: call.id,
      flow: 'notify',
      flowVersion: call.flowVersion,
      node: 'main',
      endpoint: 'crm',
      to: call.to,
      vars: { name: 'Ann' },
      data: { note: 'confirmed by Ann' },
      path: [{ node: 'main', menu: 'main', attempt: 1, key: '1' }],
      outcome: 'confirmed',
      at: expect.any(String),
    });
    // what the catalog promises receivers
    expect(EVENT_CATALOG['flow.notify'].data.safeParse(event!.data).success).toBe(true);

    const deliveries = await db()
      .select()
      .from(eventDeliveries)
      .where(eq(eventDeliveries.eventId, event!.id));
    expect(deliveries.map((d) => [d.endpointId, d.state, d.subject])).toEqual([
      [ids.crm, 'pending', `call:${call.id}`],
    ]);
    // after the step's own events: an ordered endpoint gets the key, then the notify
    const toCrm = await db()
      .select({ type: outgoingEvents.type })
      .from(eventDeliveries)
      .innerJoin(outgoingEvents, eq(outgoingEvents.id, eventDeliveries.eventId))
      .where(
        and(
          eq(eventDeliveries.subject, `call:${call.id}`),
          eq(eventDeliveries.endpointId, ids.crm),
        ),
      )
      .orderBy(eventDeliveries.id)
      .then((rows) =>
        rows.map((r) => r.type).filter((t) => t === 'call.key' || t === 'flow.notify'),
      );
    expect(toCrm.slice(-2)).toEqual(['call.key', 'flow.notify']);
    // "everything" gets no flow.notify at all (other types it may get are not this test's)
    const toAll = await db()
      .select({ eventId: eventDeliveries.eventId })
      .from(eventDeliveries)
      .where(eq(eventDeliveries.endpointId, ids.all));
    const notifyIds = new Set(events.map((e) => e.id));
    expect(toAll.filter((d) => notifyIds.has(d.eventId))).toEqual([]);

    const view = await timeline(call.id);
    expect(view).toMatchObject({ state: 'ended', outcome: 'confirmed' });
    expect(view.timeline.filter((e) => e.kind.startsWith('notify'))).toEqual([
      expect.objectContaining({ kind: 'notify', node: 'main', detail: { endpoint: 'crm' } }),
    ]);
  });

  it('a repeated webhook records nothing twice', async () => {
    const call = await start();
    expect((await hook(call.id, 'main', '1')).status).toBe(200);
    expect((await hook(call.id, 'main', '1')).status).toBe(200);
    expect(await notifyEvents(call.id)).toHaveLength(1);
  });

  it.each([
    ['no endpoint has the name', '2', 'nobody', 'declined'],
    ['the endpoint of that name is disabled', '3', 'off', null],
  ])('%s: no event, a problem on the call, and the call goes on', async (_, key, name, outcome) => {
    const call = await start();
    expect((await hook(call.id, 'main', key)).status).toBe(200);

    expect(await notifyEvents(call.id)).toEqual([]);
    const view = await timeline(call.id);
    expect(view).toMatchObject({ state: 'ended', outcome });
    expect(view.path).toHaveLength(1);
    expect(view.timeline.filter((e) => e.kind.startsWith('notify'))).toEqual([
      expect.objectContaining({
        kind: 'notify-skipped',
        node: 'main',
        detail: { endpoint: name, reason: `no enabled endpoint is named "${name}"` },
      }),
    ]);
  });

  it('a webhook refused (a forged token) records nothing', async () => {
    const call = await start();
    const forged = signNodeToken(
      { callId: call.id, node: 'main', key: '1' },
      { id: 'local', key: Buffer.from('not the secret') },
    );
    const res = await app.request(
      '/hooks/speechcall',
      json({ from: 'Shop', mid: 'm', action: { token: forged } }),
    );
    expect(res.status).toBe(401);
    expect(await notifyEvents(call.id)).toEqual([]);
  });

  it('is written in the transaction of the step: a step rolled back leaves no event', async () => {
    const call = await start();
    const before = await deliveriesOf(db(), call.id);
    const rolledBack = new Error('rolled back');
    await expect(
      db().transaction(async (tx) => {
        const locked = await lockCall(tx, call.id);
        const held = await readHeld(tx, [call.id]);
        const plan = createCallPlan(new Date());
        const result = decideKey(
          built.calls,
          plan,
          { ...locked!, held },
          { node: 'main', key: '1', inboxId: 0 },
          new Date(),
        );
        expect(result).toBe('applied');
        await writePlan(tx, plan);
        // inside the transaction, the event and its delivery are there
        const seen = await tx
          .select({ type: outgoingEvents.type })
          .from(outgoingEvents)
          .where(eq(outgoingEvents.subject, `call:${call.id}`));
        expect(seen.filter((e) => e.type === 'flow.notify')).toHaveLength(1);
        expect((await deliveriesOf(tx, call.id)).length).toBeGreaterThan(before.length);
        throw rolledBack;
      }),
    ).rejects.toBe(rolledBack);
    expect(await notifyEvents(call.id)).toEqual([]);
    // nor any delivery of it (the call's other events, call.started, are the same as before)
    expect(await deliveriesOf(db(), call.id)).toEqual(before);
    expect((await timeline(call.id)).path).toEqual([]);
    // and the real webhook afterwards applies it once
    expect((await hook(call.id, 'main', '1')).status).toBe(200);
    expect(await notifyEvents(call.id)).toHaveLength(1);
  });
});
