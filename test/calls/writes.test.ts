/**
 * What a speech webhook's transaction writes, row for row (writePlan writes it all in
 * one statement): the follow-up with its first event and outbox row, the call's events in
 * order with the follow-up's id (or `duplicate` when its customerMessageId was taken), the
 * timers, the snapshot, and the statistics, also when one batch holds many calls.
 */
import { asc, eq, inArray } from 'drizzle-orm';
import { beforeAll, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import { createCallPlan, dropTimers, setTimer } from '../../src/calls/plan.ts';
import { writePlan } from '../../src/calls/write-plan.ts';
import {
  callEvents,
  calls,
  callTimers,
  flowStats,
  messageEvents,
  messages,
  outbox,
} from '../../src/db/schema/index.ts';
import { signNodeToken } from '../../src/flows/index.ts';
import { uuidv7 } from '../../src/ids.ts';
import { buildTestApp, json, phone, readJson } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';

const REMINDER = {
  flow: 'appointment-reminder',
  from: 'Clinic',
  vars: { name: 'Ann', date: 'Monday 10:00' },
};

describeEachEngine('call writes', (ctx) => {
  let app: App;
  let built: ReturnType<typeof buildTestApp>;
  const db = () => ctx.database().db;

  const start = async (): Promise<string> => {
    const res = await app.request('/v1/calls', json({ ...REMINDER, to: phone() }));
    expect(res.status).toBe(202);
    return (await readJson(res)).id;
  };
  const hook = (callId: string, node: string, key: string) =>
    app.request(
      '/hooks/speechcall',
      json({
        from: 'Clinic',
        action: { token: signNodeToken({ callId, node, key }, built.calls.signingSecret) },
      }),
    );
  const eventsOf = (callId: string) =>
    db().select().from(callEvents).where(eq(callEvents.callId, callId)).orderBy(asc(callEvents.id));
  const confirmed = async () =>
    (
      await db()
        .select({ count: flowStats.count })
        .from(flowStats)
        .where(eq(flowStats.subject, 'confirmed'))
    )[0]?.count ?? 0;

  beforeAll(() => {
    built = buildTestApp(ctx.database());
    app = built.app;
  });

  it('writes the follow-up, its event and outbox row, the call events in order, and the snapshot', async () => {
    const id = await start();
    const before = await confirmed();
    expect((await hook(id, 'main', '1')).status).toBe(200);
    const cmid = `${id}:main:1:1`;
    const [msg] = await db().select().from(messages).where(eq(messages.customerMessageId, cmid));
    expect(msg).toMatchObject({
      type: 'sms',
      status: 'queued',
      role: 'follow-up',
      callId: id,
      parts: 1,
    });
    expect(msg!.createdAt).toEqual(msg!.updatedAt);
    const timeline = await db()
      .select()
      .from(messageEvents)
      .where(eq(messageEvents.messageId, msg!.id));
    expect(timeline).toEqual([
      expect.objectContaining({ status: 'queued', source: 'api', detail: { parts: 1 } }),
    ]);
    expect(await db().select().from(outbox).where(eq(outbox.messageId, msg!.id))).toHaveLength(1);
    const events = await eventsOf(id);
    expect(events.map((e) => e.kind)).toEqual([
      'timer-started',
      'key',
      'timer-cancelled',
      'outcome',
      'follow-up',
      'hangup',
    ]);
    expect(events[1]).toMatchObject({ node: 'main', menu: 'main', attempt: 1, key: '1' });
    expect(events[4]!.detail).toEqual({
      id: 'main:1:1',
      customerMessageId: cmid,
      type: 'sms',
      messageId: msg!.id,
    });
    const [row] = await db().select().from(calls).where(eq(calls.id, id));
    expect(row).toMatchObject({ state: 'ended', outcome: 'confirmed' });
    expect(row!.endedAt).toEqual(row!.updatedAt);
    expect((row!.snapshot as { value: string }).value).not.toBe('main');
    expect(await db().select().from(callTimers).where(eq(callTimers.callId, id))).toEqual([]);
    expect(await confirmed()).toBe(before + 1);
  });

  it('marks a follow-up whose customerMessageId is taken as a duplicate, and queues nothing', async () => {
    const id = await start();
    const cmid = `${id}:main:1:1`;
    const now = new Date();
    const taken = uuidv7();
    await db().insert(messages).values({
      id: taken,
      customerMessageId: cmid,
      type: 'sms',
      from: 'Clinic',
      to: '+380501234567',
      payload: {},
      status: 'delivered',
      createdAt: now,
      updatedAt: now,
    });
    expect((await hook(id, 'main', '1')).status).toBe(200);
    const stored = await db().select().from(messages).where(eq(messages.customerMessageId, cmid));
    expect(stored.map((m) => m.id)).toEqual([taken]);
    expect(await db().select().from(outbox).where(eq(outbox.messageId, taken))).toEqual([]);
    const followUp = (await eventsOf(id)).find((e) => e.kind === 'follow-up');
    expect(followUp!.detail).toEqual({
      id: 'main:1:1',
      customerMessageId: cmid,
      type: 'sms',
      duplicate: true,
    });
  });

  it('writes a batch of many calls (held, applied, duplicate) as each alone would', async () => {
    const ids = await Promise.all(Array.from({ length: 6 }, () => start()));
    const before = await confirmed();
    // all at once: they share transactions; the first call's later node arrives first (held)
    const answers = await Promise.all([
      hook(ids[0]!, 'reschedule', '1'),
      ...ids.map((id) => hook(id, 'main', ids.indexOf(id) === 0 ? '2' : '1')),
      hook(ids[1]!, 'main', '1'),
    ]);
    expect(answers.map((r) => r.status)).toEqual(Array(8).fill(200));
    const results = await Promise.all(answers.map((r) => readJson(r)));
    expect(results.filter((r) => r.duplicate)).toHaveLength(1);
    const rows = await db().select().from(calls).where(inArray(calls.id, ids));
    const byId = new Map(rows.map((r) => [r.id, r]));
    expect(byId.get(ids[0]!)).toMatchObject({ state: 'ended', outcome: 'reschedule-requested' });
    for (const id of ids.slice(1)) {
      expect(byId.get(id)).toMatchObject({ state: 'ended', outcome: 'confirmed' });
      const followUps = await db()
        .select()
        .from(messages)
        .where(eq(messages.customerMessageId, `${id}:main:1:1`));
      expect(followUps).toHaveLength(1);
    }
    const first = (await eventsOf(ids[0]!)).map((e) => e.kind);
    // held or not depends on which transaction took which webhook; the path does not
    expect(first.filter((k) => k === 'key')).toHaveLength(2);
    expect(first.at(-1)).toBe('hangup');
    expect(await confirmed()).toBe(before + 5);
  });
  it('sets a timer, replaces its fire time when set again, and drops it', async () => {
    const id = await start();
    const timersOf = () =>
      db()
        .select({ timer: callTimers.timer, fireAt: callTimers.fireAt })
        .from(callTimers)
        .where(eq(callTimers.callId, id))
        .orderBy(asc(callTimers.timer));
    const write = (fill: (plan: ReturnType<typeof createCallPlan>) => void) =>
      db().transaction(async (tx) => {
        const plan = createCallPlan(new Date());
        fill(plan);
        await writePlan(tx, plan);
      });
    const first = new Date('2030-01-01T10:00:00Z');
    const later = new Date('2030-01-01T10:05:00Z');
    await write((plan) => dropTimers(plan, id));
    await write((plan) => setTimer(plan, id, 'answer', first));
    expect(await timersOf()).toEqual([{ timer: 'answer', fireAt: first }]);
    await write((plan) => setTimer(plan, id, 'answer', later));
    expect(await timersOf()).toEqual([{ timer: 'answer', fireAt: later }]);
    await write((plan) => setTimer(plan, id, 'answer', null));
    expect(await timersOf()).toEqual([]);
  });
});
