/**
 * Opt-outs honoured by every send (issue 26, points 4 and 5), through the app: the
 * /v1/opt-outs routes (scopes, validation, 201/200/404/204, the audit row without the
 * number); POST /v1/messages rejecting only the opted-out messages of a request; POST
 * /v1/calls refused with 409 and the batch per call; a Viber "Stop" reply opting its sender
 * out (a sentence with "stop" in it does not); a flow's `opt-out` action, by a key of a real
 * call and by an `on:` reaction; a flow's `send:` follow-up withheld from a number that opted
 * out during the call, or in the same step.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import { calls, messages } from '../../src/db/schema/index.ts';
import { signNodeToken } from '../../src/flows/index.ts';
import { buildTestApp, json, phone, readJson, uniq } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';

const ADMIN = 'env-token-optouts';
const FLOW = 'opt-out-line';
const FLOW_SOURCE = `title: Opt-out line
params:
  name: string
languages: [en]
assert: { outcomeOnEveryPath: false }
menus:
  main:
    intro: "https://cdn.example.com/en/main.mp3"
    keys:
      "1": [ { outcome: confirmed }, hangup ]
      "2": [ { outcome: texted }, { send: { type: sms, text: "Thanks {{name}}" } }, hangup ]
      "8": [ { outcome: stopped }, opt-out, { send: { type: sms, text: "Bye {{name}}" } }, hangup ]
      "9": [ { outcome: opted-out }, opt-out, hangup ]
on:
  failed: [ opt-out ]
`;

const bearer = (token: string, init: RequestInit = {}): RequestInit => ({
  ...init,
  headers: { ...(init.headers as Record<string, string>), authorization: `Bearer ${token}` },
});
const sms = (to: string, extra: Record<string, unknown> = {}) => ({
  type: 'sms',
  from: 'Shop',
  to,
  text: 'hi',
  ...extra,
});

describeEachEngine('opt-outs', (ctx) => {
  let app: App;
  let built: ReturnType<typeof buildTestApp>;
  let dir: string;
  const token: Record<'read' | 'send' | 'admin', string> = { read: '', send: '', admin: '' };
  const db = () => ctx.database().db;

  const req = async (path: string, init: RequestInit = {}, as = ADMIN) => {
    const res = await app.request(path, bearer(as, init));
    return { status: res.status, body: res.status === 204 ? null : await readJson(res) };
  };
  const optOut = (n: string, as = ADMIN) => req('/v1/opt-outs', json({ phone: n }), as);
  const entry = (n: string) => req(`/v1/opt-outs/${encodeURIComponent(n)}`);
  const startCall = (to: string) =>
    req('/v1/calls', json({ flow: FLOW, from: 'Clinic', to, vars: { name: 'Ann' } }));
  const callsTo = async (to: string) => db().select().from(calls).where(eq(calls.to, to));

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sb-opt-out-flows-'));
    writeFileSync(join(dir, `${FLOW}.yaml`), FLOW_SOURCE);
    built = buildTestApp(ctx.database(), { env: { API_TOKEN: ADMIN, FLOWS_DIR: dir } });
    app = built.app;
    for (const scope of ['read', 'send', 'admin'] as const) {
      const made = await req('/v1/tokens', json({ name: uniq(scope), scopes: [scope] }));
      expect(made.status).toBe(201);
      token[scope] = made.body.token;
    }
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('adds (201), adds again (200, the first entry), reads, lists, removes (204), then 404', async () => {
    const n = phone();
    const first = await optOut(n, token.send);
    expect(first).toMatchObject({ status: 201, body: { phone: n, source: 'api', detail: null } });
    const again = await optOut(n, token.send);
    expect(again).toEqual({ status: 200, body: first.body });
    expect(await entry(n)).toEqual({ status: 200, body: first.body });
    const list = await req('/v1/opt-outs?limit=500', {}, token.read);
    expect(list.status).toBe(200);
    expect(list.body.items).toContainEqual(first.body);

    expect((await req(`/v1/opt-outs/${encodeURIComponent(n)}`, { method: 'DELETE' })).status).toBe(
      204,
    );
    expect(await entry(n)).toMatchObject({ status: 404, body: { error: { code: 'NOT_FOUND' } } });
    const gone = await req(`/v1/opt-outs/${encodeURIComponent(n)}`, { method: 'DELETE' });
    expect(gone).toMatchObject({ status: 404, body: { error: { code: 'NOT_FOUND' } } });
  });

  it('takes send to add, admin to remove, read to read', async () => {
    const n = phone();
    const path = `/v1/opt-outs/${encodeURIComponent(n)}`;
    expect((await optOut(n, token.read)).body.error.code).toBe('INSUFFICIENT_SCOPE');
    expect((await optOut(n, token.send)).status).toBe(201);
    expect((await req(path, {}, token.read)).status).toBe(200);
    const bySender = await req(path, { method: 'DELETE' }, token.send);
    expect(bySender).toMatchObject({
      status: 403,
      body: { error: { code: 'INSUFFICIENT_SCOPE' } },
    });
    expect((await req(path, { method: 'DELETE' }, token.admin)).status).toBe(204);
    expect((await app.request('/v1/opt-outs')).status).toBe(401);
  });

  it('refuses a number that is not E.164, in the body and in the path', async () => {
    for (const bad of ['0501234567', '+380 50 123 4567', '', 42]) {
      const res = await req('/v1/opt-outs', json({ phone: bad }));
      expect(res.status, JSON.stringify(bad)).toBe(400);
      expect(res.body.error.code).toBe('VALIDATION_ERROR');
      expect(res.body.error.details[0].path).toBe('phone');
    }
    expect((await req('/v1/opt-outs', json({}))).status).toBe(400);
    const path = await req('/v1/opt-outs/0501234567');
    expect(path).toMatchObject({ status: 400, body: { error: { code: 'VALIDATION_ERROR' } } });
    expect((await req('/v1/opt-outs?cursor=nope')).body.error.details[0].code).toBe(
      'INVALID_CURSOR',
    );
  });

  it('audits the change by count, never the number', async () => {
    const n = phone();
    await optOut(n);
    const audit = await req('/v1/audit?limit=20');
    const row = audit.body.items.find(
      (r: { route: string; status: number }) => r.route === '/v1/opt-outs' && r.status === 201,
    );
    expect(row.changes).toEqual({ created: { optOuts: { count: 1 } } });
    expect(JSON.stringify(audit.body)).not.toContain(n.slice(1));
  });

  it('POST /v1/messages: an opted-out number is rejected in its own result; the others go', async () => {
    const [out, ok] = [phone(), phone()];
    await optOut(out);
    const res = await req(
      '/v1/messages',
      json({
        messages: [
          sms(ok, { customerMessageId: uniq('ok') }),
          sms(out, { customerMessageId: uniq('out') }),
          sms(out),
          { type: 'cascade', from: 'Shop', to: out, messageType: 'transaction', text: 'Hi' },
        ],
      }),
    );
    expect(res.status).toBe(202);
    const [first, second, third, fourth] = res.body.messages;
    expect(first).toMatchObject({ status: 'queued' });
    for (const [i, r] of [second, third, fourth].entries()) {
      expect(r).toMatchObject({
        status: 'rejected',
        error: {
          code: 'OPTED_OUT',
          details: [{ path: `messages[${i + 1}].to`, code: 'OPTED_OUT' }],
        },
      });
    }
    // the given customerMessageId is echoed; none is made up for one that was not given
    expect(second.customerMessageId).toMatch(/^out-/);
    expect(third.customerMessageId).toBeUndefined();
    expect(await db().select().from(messages).where(eq(messages.to, out))).toEqual([]);
    expect(await db().select().from(messages).where(eq(messages.to, ok))).toHaveLength(1);
  });

  it('POST /v1/calls: 409 OPTED_OUT and nothing stored; the batch refuses that call alone', async () => {
    const [out, ok] = [phone(), phone()];
    await optOut(out);
    const single = await startCall(out);
    expect(single).toEqual({
      status: 409,
      body: {
        error: {
          code: 'OPTED_OUT',
          message: expect.stringContaining('opt-out list'),
          details: [{ path: 'to', code: 'OPTED_OUT', message: 'is on the opt-out list' }],
        },
      },
    });
    expect(await callsTo(out)).toEqual([]);
    // a number that is not valid is still told so first
    expect((await startCall('0501234567')).body.error.code).toBe('INVALID_RECIPIENT');

    const batch = await req(
      '/v1/calls/batch',
      json({
        flow: FLOW,
        from: 'Clinic',
        calls: [
          { to: ok, vars: { name: 'Ann' } },
          { to: out, vars: { name: 'Bo' } },
        ],
      }),
    );
    expect(batch.status).toBe(202);
    expect(batch.body.queued).toBe(1);
    expect(batch.body.calls[0]).toMatchObject({ status: 'queued' });
    expect(batch.body.calls[1]).toMatchObject({
      status: 'rejected',
      error: { code: 'OPTED_OUT', details: [{ path: 'calls[1].to', code: 'OPTED_OUT' }] },
    });
    expect(await callsTo(out)).toEqual([]);
    expect(await callsTo(ok)).toHaveLength(1);
  });

  it('a Viber "Stop" reply opts its sender out; the next message to them is refused', async () => {
    const from = phone();
    const viber = (text: string) =>
      app.request(
        '/hooks/viber',
        json({
          idUuid: uniq('vb'),
          alphaName: 'Shop',
          phoneNumber: from.slice(1),
          text,
          dt: '2026-01-01 10:00:00',
        }),
      );
    expect((await viber('please stop calling me at night')).status).toBe(200);
    expect((await entry(from)).status).toBe(404);
    const sent = await req('/v1/messages', json({ messages: [sms(from)] }));
    expect(sent.body.messages[0].status).toBe('queued');

    expect((await viber(' Stop! ')).status).toBe(200);
    const inbound = await req(`/v1/inbound?from=${encodeURIComponent(from)}`);
    const stop = inbound.body.items.find((i: { text: string }) => i.text === ' Stop! ');
    expect(await entry(from)).toMatchObject({
      status: 200,
      body: { phone: from, source: 'inbound', detail: { inboundId: stop.id } },
    });
    const refused = await req('/v1/messages', json({ messages: [sms(from)] }));
    expect(refused.body.messages[0]).toMatchObject({
      status: 'rejected',
      error: { code: 'OPTED_OUT' },
    });
  });

  it('the flow action `opt-out`: the key that runs it puts the callee on the list', async () => {
    const to = phone();
    const started = await startCall(to);
    expect(started.status).toBe(202);
    const callId = started.body.id;
    const hook = await app.request(
      '/hooks/speechcall',
      json({
        from: 'Clinic',
        mid: 'm',
        action: {
          token: signNodeToken({ callId, node: 'main', key: '9' }, built.calls.signingSecret),
        },
      }),
    );
    expect(hook.status).toBe(200);
    expect(await entry(to)).toMatchObject({
      status: 200,
      body: { phone: to, source: 'flow', detail: { callId, node: 'main' } },
    });
    const view = await req(`/v1/calls/${callId}`);
    expect(view.body.outcome).toBe('opted-out');
    expect(view.body.timeline.map((e: { kind: string }) => e.kind)).toContain('opt-out');
    expect((await startCall(to)).body.error.code).toBe('OPTED_OUT');

    // key 1 of another call opts nobody out
    const other = phone();
    const second = await startCall(other);
    await app.request(
      '/hooks/speechcall',
      json({
        from: 'Clinic',
        mid: 'm',
        action: {
          token: signNodeToken(
            { callId: second.body.id, node: 'main', key: '1' },
            built.calls.signingSecret,
          ),
        },
      }),
    );
    expect((await entry(other)).status).toBe(404);
  });

  const pressKey = (callId: string, key: string) =>
    app.request(
      '/hooks/speechcall',
      json({
        from: 'Clinic',
        mid: 'm',
        action: { token: signNodeToken({ callId, node: 'main', key }, built.calls.signingSecret) },
      }),
    );
  const followUpEvent = async (callId: string) => {
    const view = await req(`/v1/calls/${callId}`);
    return {
      view: view.body,
      send: view.body.timeline.find((e: { kind: string }) => e.kind === 'follow-up'),
    };
  };

  it("a flow's `send:` follow-up goes to a number that did not opt out, and is withheld from one that did mid-call", async () => {
    // the control: the follow-up is sent
    const kept = await startCall(phone());
    expect((await pressKey(kept.body.id, '2')).status).toBe(200);
    const sent = await followUpEvent(kept.body.id);
    expect(sent.send.detail.messageId).toEqual(expect.any(String));
    expect(sent.view.messages.map((m: { role: string }) => m.role)).toEqual(['call', 'follow-up']);

    // opted out after the call started (by the API, a Viber reply...): nothing is sent
    const to = phone();
    const started = await startCall(to);
    expect((await optOut(to)).status).toBe(201);
    expect((await pressKey(started.body.id, '2')).status).toBe(200);
    const withheld = await followUpEvent(started.body.id);
    expect(withheld.view.outcome).toBe('texted');
    expect(withheld.send.detail).toMatchObject({ optedOut: true });
    expect(withheld.send.detail.messageId).toBeUndefined();
    expect(withheld.view.messages.map((m: { role: string }) => m.role)).toEqual(['call']);
    const stored = await db().select().from(messages).where(eq(messages.to, to));
    expect(stored.map((m) => m.role)).toEqual(['call']);
  });

  it("a flow's `send:` after its own `opt-out` in the same step is withheld", async () => {
    const to = phone();
    const started = await startCall(to);
    expect((await pressKey(started.body.id, '8')).status).toBe(200);
    const { view, send } = await followUpEvent(started.body.id);
    expect(view.outcome).toBe('stopped');
    expect(send.detail).toMatchObject({ optedOut: true });
    expect(view.messages.map((m: { role: string }) => m.role)).toEqual(['call']);
    expect((await entry(to)).body).toMatchObject({ phone: to, source: 'flow' });
  });

  it('the flow action `opt-out` in an `on:` reaction', async () => {
    const to = phone();
    const started = await startCall(to);
    const res = await app.request(
      '/hooks/delivery',
      json({ customerMessageId: started.body.customerMessageId, status: 'failed' }),
    );
    expect(res.status).toBe(200);
    expect(await entry(to)).toMatchObject({
      status: 200,
      body: { source: 'flow', detail: { callId: started.body.id, node: null } },
    });
  });
});
