/**
 * Calls in-process: starting them, the webhooks that advance them (forged, duplicated, out of
 * order), reactions to the call message's statuses, durable timers, and what is read back.
 */
import { eq, sql } from 'drizzle-orm';
import { beforeAll, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import { LIVE_CALL_STATES } from '../../src/calls/deps.ts';
import { fireDueTimers } from '../../src/calls/events.ts';
import { rowsOf } from '../../src/db/client.ts';
import { calls, callTimers, messages, outbox } from '../../src/db/schema/index.ts';
import { signNodeToken } from '../../src/flows/index.ts';
import { buildTestApp, json, phone, readJson } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';

const REMINDER = {
  flow: 'appointment-reminder',
  from: 'Clinic',
  vars: { name: 'Ann', date: 'Monday 10:00' },
};

describeEachEngine('calls', (ctx) => {
  let app: App;
  let built: ReturnType<typeof buildTestApp>;
  const db = () => ctx.database().db;

  const start = async (body: Record<string, unknown> = {}) => {
    const res = await app.request('/v1/calls', json({ ...REMINDER, to: phone(), ...body }));
    return { status: res.status, body: await readJson(res) };
  };
  const hook = (callId: string, node: string, key: string, extra: Record<string, unknown> = {}) =>
    app.request(
      '/hooks/speechcall',
      json({
        from: 'Clinic',
        mid: 'm',
        ...extra,
        action: { token: signNodeToken({ callId, node, key }, built.calls.signingSecret) },
      }),
    );
  const call = async (id: string) => readJson(await app.request(`/v1/calls/${id}`));

  beforeAll(() => {
    built = buildTestApp(ctx.database());
    app = built.app;
  });

  it('starts a call: call, speechcall message and outbox row, pinned to the flow version', async () => {
    const { status, body } = await start();
    expect(status).toBe(202);
    expect(body).toMatchObject({
      flow: 'appointment-reminder',
      state: 'queued',
      flowVersion: expect.any(String),
    });
    const [row] = await db().select().from(calls).where(eq(calls.id, body.id));
    expect(row).toMatchObject({
      flowVersion: body.flowVersion,
      state: 'queued',
      messageId: body.messageId,
    });
    const [msg] = await db().select().from(messages).where(eq(messages.id, body.messageId));
    expect(msg).toMatchObject({
      type: 'speechcall',
      role: 'call',
      callId: body.id,
      customerMessageId: body.customerMessageId,
    });
    const menu = (
      msg!.payload as {
        menu: { dtmfActions: Record<string, { action: string; url?: string }[]> }[];
      }
    ).menu;
    expect(menu[0]!.dtmfActions.d1![0]).toMatchObject({
      action: 'webhook',
      url: 'http://localhost:3000/hooks/speechcall',
    });
    expect(
      await db().select().from(outbox).where(eq(outbox.messageId, body.messageId)),
    ).toHaveLength(1);
    const view = await call(body.id);
    expect(view).toMatchObject({ id: body.id, state: 'queued', vars: REMINDER.vars, path: [] });
    expect(view.messages).toEqual([
      expect.objectContaining({ role: 'call', type: 'speechcall', status: 'queued' }),
    ]);
  });

  it.each([
    [{ flow: 'no-such-flow' }, 'flow', 'UNKNOWN_FLOW'],
    [{ vars: { name: 'Ann' } }, 'vars.date', 'INVALID_VARS'],
    [
      { vars: { name: 'Ann', date: 'x', clinicPhone: 'not a phone' } },
      'vars.clinicPhone',
      'INVALID_VARS',
    ],
    [{ vars: { name: 'Ann', date: 'x', surprise: 1 } }, 'vars.surprise', 'INVALID_VARS'],
    [{ to: '0501234567' }, 'to', 'INVALID_RECIPIENT'],
    [{ lang: 'fr' }, 'lang', 'INVALID_LANGUAGE'],
    [{ from: '' }, 'from', 'VALIDATION_ERROR'],
  ])('refuses %j naming %s', async (override, path, code) => {
    const { status, body } = await start(override);
    expect(status).toBe(400);
    expect(body.error.code).toBe(code);
    expect(body.error.details.map((d: { path: string }) => d.path)).toContain(path);
  });

  it('starts a batch with per-call results, all rejected too, each with the code it has alone', async () => {
    const res = await app.request(
      '/v1/calls/batch',
      json({
        flow: 'appointment-reminder',
        from: 'Clinic',
        calls: [
          { to: phone(), vars: { name: 'A', date: 'x' } },
          { to: 'nope', vars: { name: 'B', date: 'x' } },
          { to: phone(), vars: { name: 'C' } },
          { to: phone(), vars: { name: 'D', date: 'y' } },
        ],
      }),
    );
    expect(res.status).toBe(202);
    const body = await readJson(res);
    expect(body.queued).toBe(2);
    expect(body.calls.map((c: { status: string }) => c.status)).toEqual([
      'queued',
      'rejected',
      'rejected',
      'queued',
    ]);
    expect(body.calls[1].error.details[0].path).toBe('calls[1].to');
    expect(body.calls[2].error.details[0].path).toBe('calls[2].vars.date');
    expect(body.calls[1].error.code).toBe('INVALID_RECIPIENT');
    // no valid call, one of them not even of the right shape: still 202, one result each
    const none = await app.request(
      '/v1/calls/batch',
      json({
        flow: 'appointment-reminder',
        from: 'Clinic',
        calls: [{ to: '0501234567', vars: { name: 'A', date: 'x' } }, { to: 5 }],
      }),
    );
    expect(none.status).toBe(202);
    const rejected = await readJson(none);
    expect(rejected.queued).toBe(0);
    // the same bad number as a single call's (INVALID_RECIPIENT above)
    expect(rejected.calls[0]).toMatchObject({
      status: 'rejected',
      error: { code: 'INVALID_RECIPIENT' },
    });
    expect(rejected.calls[1]).toMatchObject({
      status: 'rejected',
      error: { code: 'VALIDATION_ERROR', details: [{ path: 'calls[1].to' }] },
    });
  });

  it('a webhook advances the call: path, outcome, follow-up with a deterministic id, hangup', async () => {
    const { body } = await start();
    const res = await hook(body.id, 'main', '1');
    expect(res.status).toBe(200);
    expect(await readJson(res)).toMatchObject({ duplicate: false, result: 'applied' });
    const view = await call(body.id);
    expect(view).toMatchObject({ state: 'ended', outcome: 'confirmed', node: null });
    expect(view.path).toEqual([expect.objectContaining({ menu: 'main', attempt: 1, key: '1' })]);
    const followUp = view.messages.find((m: { role: string }) => m.role === 'follow-up');
    expect(followUp).toMatchObject({ type: 'sms', customerMessageId: `${body.id}:main:1:1` });
    const [msg] = await db().select().from(messages).where(eq(messages.id, followUp.id));
    expect((msg!.payload as { text: string }).text).toBe('Thanks Ann, see you on Monday 10:00.');
    // the no-response timer was dropped when the caller answered
    expect(await db().select().from(callTimers).where(eq(callTimers.callId, body.id))).toEqual([]);
  });

  it('a forged, altered or foreign token gets 401 and changes nothing', async () => {
    const { body } = await start();
    const other = await start();
    const forged = signNodeToken(
      { callId: body.id, node: 'main', key: '1' },
      { id: 'x', key: 'guess' },
    );
    const good = signNodeToken(
      { callId: body.id, node: 'main', key: '1' },
      built.calls.signingSecret,
    );
    const altered = `${good.slice(0, -3)}${good.at(-3) === 'A' ? 'B' : 'A'}${good.slice(-2)}`;
    for (const token of [forged, altered, 'v1.k.x.y', '']) {
      const res = await app.request('/hooks/speechcall', json({ action: { token } }));
      expect(res.status, token).toBe(401);
      expect((await readJson(res)).error.code).toBe('UNAUTHORIZED');
    }
    expect((await app.request('/hooks/speechcall', json({ nothing: 1 }))).status).toBe(401);
    // a valid token of one call, inside a webhook about another call's callee: its body, stored
    // with the batch, is deleted again with its dedup key
    const stored = async () =>
      Number(
        rowsOf<{ n: number | string }>(
          await db().execute(sql`
            select (select count(*) from inbox where kind = 'speechcall')
              + (select count(*) from inbox_keys) as n`),
        )[0]!.n,
      );
    const before = await stored();
    const foreign = await hook(body.id, 'main', '1', { to: (await call(other.body.id)).to });
    expect(foreign.status).toBe(401);
    expect((await call(body.id)).path).toEqual([]);
    expect(await stored()).toBe(before);
  });

  it('duplicated and out-of-order webhooks give the same path as ordered ones', async () => {
    const ordered = await start();
    await hook(ordered.body.id, 'main', '2');
    await hook(ordered.body.id, 'reschedule', '1');
    const disordered = await start();
    const late = await hook(disordered.body.id, 'reschedule', '1');
    expect(await readJson(late)).toMatchObject({ result: 'held' });
    await hook(disordered.body.id, 'main', '2');
    await hook(disordered.body.id, 'main', '2'); // exact duplicate
    await hook(disordered.body.id, 'reschedule', '1');
    const a = await call(ordered.body.id);
    const b = await call(disordered.body.id);
    const keys = (v: { path: { menu: string; key: string }[] }) =>
      v.path.map((p) => `${p.menu}:${p.key}`);
    expect(keys(a)).toEqual(['main:2', 'reschedule:1']);
    expect(keys(b)).toEqual(keys(a));
    expect(b.outcome).toBe(a.outcome);
    expect(b.outcome).toBe('reschedule-requested');
    expect(b.state).toBe('ended');
  });

  it('concurrent webhooks (one transaction for many) answer each as if they came one by one', async () => {
    const plain = await start();
    const disordered = await start();
    const victim = await start();
    const duplicate = await start();
    const erased = await start();
    await db().delete(calls).where(eq(calls.id, erased.body.id));
    const foreignTo = (await call(plain.body.id)).to;
    // enough at once that later ones queue behind a transaction in flight and share the next
    const answers = await Promise.all([
      hook(plain.body.id, 'main', '1'),
      hook(disordered.body.id, 'reschedule', '1'),
      hook(victim.body.id, 'main', '1', { to: foreignTo }),
      hook(duplicate.body.id, 'main', '1'),
      hook(duplicate.body.id, 'main', '1'),
      hook(disordered.body.id, 'main', '2'),
      hook(erased.body.id, 'main', '1'),
      ...Array.from({ length: 8 }, (_, i) =>
        hook(plain.body.id, 'main', '1', { mid: `again-${i}` }),
      ),
    ]);
    const bodies = await Promise.all(answers.map((r) => readJson(r)));
    expect(answers.map((r) => r.status)).toEqual([
      200,
      200,
      401,
      200,
      200,
      200,
      200,
      ...Array(8).fill(200),
    ]);
    expect(bodies[2].error.code).toBe('UNAUTHORIZED');
    expect([bodies[3].duplicate, bodies[4].duplicate].sort()).toEqual([false, true]);
    expect(bodies[6]).toMatchObject({ duplicate: false, result: 'unknown-call' });
    // the same key in nine bodies: applied by one, recorded as ignored for the others
    const plainResults = [bodies[0], ...bodies.slice(7)].map((b) => b.result).sort();
    expect(plainResults).toEqual(['applied', ...Array(8).fill('duplicate')]);

    const a = await call(plain.body.id);
    expect(a).toMatchObject({ state: 'ended', outcome: 'confirmed' });
    expect(a.messages.filter((m: { role: string }) => m.role === 'follow-up')).toHaveLength(1);
    expect(a.timeline.filter((e: { kind: string }) => e.kind === 'ignored')).toHaveLength(8);
    // (held, when it came first) then applied once its node was reached: the path in order
    const b = await call(disordered.body.id);
    expect(b.path.map((p: { menu: string; key: string }) => `${p.menu}:${p.key}`)).toEqual([
      'main:2',
      'reschedule:1',
    ]);
    expect(b).toMatchObject({ state: 'ended', outcome: 'reschedule-requested' });
    // the refused one changed nothing; the duplicate body applied once
    expect((await call(victim.body.id)).path).toEqual([]);
    const d = await call(duplicate.body.id);
    expect(d.path).toHaveLength(1);
    expect(d.messages.filter((m: { role: string }) => m.role === 'follow-up')).toHaveLength(1);
    const held = rowsOf<{ n: string }>(
      await db().execute(
        sql`select count(*) as n from held_webhooks where call_id = ${disordered.body.id}`,
      ),
    );
    expect(Number(held[0]!.n)).toBe(0);
  });

  it('reacts to the call message failing: outcome, follow-up SMS, no timers left', async () => {
    const { body } = await start();
    const res = await app.request(
      '/hooks/delivery',
      json({ customerMessageId: body.customerMessageId, status: 'failed' }),
    );
    expect(res.status).toBe(200);
    const view = await call(body.id);
    expect(view.state).toBe('failed');
    const followUp = view.messages.find((m: { role: string }) => m.role === 'follow-up');
    expect(followUp).toMatchObject({ customerMessageId: `${body.id}:on:failed:0`, type: 'sms' });
    expect(await db().select().from(callTimers).where(eq(callTimers.callId, body.id))).toEqual([]);
  });

  it('fires a durable timer, also from a new process after a restart', async () => {
    const { body } = await start();
    await db()
      .update(callTimers)
      .set({ fireAt: new Date(Date.now() - 1000) })
      .where(eq(callTimers.callId, body.id));
    // a fresh app on the same database stands for the process after a restart
    const restarted = buildTestApp(ctx.database());
    const due = await db().select().from(callTimers).where(eq(callTimers.callId, body.id));
    // the call waits for its answer under one timer
    expect(due).toHaveLength(1);
    // only this call's timers are due (the other tests' are in the future): exactly they fire
    let fired = 0;
    for (
      let n = await fireDueTimers(restarted.calls);
      n > 0;
      n = await fireDueTimers(restarted.calls)
    )
      fired += n;
    expect(fired).toBe(due.length);
    const view = await call(body.id);
    expect(view.outcome).toBe('no-response');
    expect(view.timeline.map((e: { kind: string }) => e.kind)).toContain('timer-fired');
    expect(await db().select().from(callTimers).where(eq(callTimers.callId, body.id))).toEqual([]);
  });

  it('lists flows, shows one with its menu template and diagram, and counts in stats', async () => {
    const flows = await readJson(await app.request('/v1/flows'));
    const ids = flows.items.map((f: { id: string }) => f.id);
    expect(ids).toEqual(
      expect.arrayContaining([
        'appointment-reminder',
        'order-confirmation',
        'satisfaction-survey',
        'delivery-failure',
      ]),
    );
    const one = await readJson(await app.request('/v1/flows/appointment-reminder'));
    expect(one.mermaid).toContain('main');
    expect(Array.isArray(one.menuTemplate)).toBe(true);
    expect(one.params).toHaveProperty('date');
    expect((await app.request('/v1/flows/nope')).status).toBe(404);
    // the counters move by exactly this test's own calls: one confirmed, one failed
    const statsNow = async () =>
      readJson(await app.request('/v1/flows/appointment-reminder/stats'));
    const before = await statsNow();
    const confirmed = await start();
    expect((await hook(confirmed.body.id, 'main', '1')).status).toBe(200);
    const failed = await start();
    const failing = await app.request(
      '/hooks/delivery',
      json({ customerMessageId: failed.body.customerMessageId, status: 'failed' }),
    );
    expect(failing.status).toBe(200);
    const stats = await statsNow();
    expect(stats.started).toBe(before.started + 2);
    expect(stats.nodes.main.keys['1']).toBe((before.nodes.main?.keys['1'] ?? 0) + 1);
    expect(stats.outcomes.confirmed).toBe((before.outcomes.confirmed ?? 0) + 1);
    expect(stats.failures.failed).toBe((before.failures.failed ?? 0) + 1);
    // the list holds every confirmed call of the flow in this file's database, and no other
    const [confirmedCalls] = rowsOf<{ n: string }>(
      await db().execute(
        sql`select count(*) as n from calls
            where flow_id = 'appointment-reminder' and outcome = 'confirmed'`,
      ),
    );
    const page = await readJson(
      await app.request('/v1/calls?flow=appointment-reminder&outcome=confirmed'),
    );
    expect(page.items).toHaveLength(Number(confirmedCalls!.n));
    expect(page.items.map((c: { id: string }) => c.id)).toContain(confirmed.body.id);
    expect(page.items.every((c: { outcome: string }) => c.outcome === 'confirmed')).toBe(true);
  });

  it('reports the calls not over yet by state in /metrics, and not the ended ones', async () => {
    const text = await (await app.request('/metrics')).text();
    // exactly the calls of this file's database, by state
    const byState = rowsOf<{ state: string; n: string }>(
      await db().execute(sql`select state, count(*) as n from calls group by state`),
    );
    const n = (state: string) => Number(byState.find((r) => r.state === state)?.n ?? 0);
    expect(n('ended')).toBeGreaterThan(0);
    expect(n('queued')).toBeGreaterThan(0);
    for (const state of LIVE_CALL_STATES) {
      expect(text).toMatch(
        new RegExp(`^switchboard_calls\\{state="${state}"\\} ${n(state)}$`, 'm'),
      );
    }
    // ended and failed calls only accumulate: counting them read the whole table each scrape
    expect(text).not.toMatch(/^switchboard_calls\{state="(ended|failed)"\}/m);
  });

  it('stores compiled versions once', async () => {
    const rows = rowsOf<{ n: string }>(
      await db().execute(
        sql`select count(*) as n from flow_versions where flow_id = 'appointment-reminder'`,
      ),
    );
    expect(Number(rows[0]!.n)).toBe(1);
  });
});
