/**
 * The sandbox keeps its own copies of numbers and texts: erasing a person forgets every
 * message, call, callback, cascade message, incoming message, script and bot user that
 * mentions their number in any form, stops what it would still send about them, and keeps
 * everyone else. Through the control API (`DELETE /_control/subjects/{phone}`) of a
 * standalone sandbox, and through Switchboard's `DELETE /v1/subjects/{phone}` when the
 * sandbox is built in (a real server, callbacks over real HTTP).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it, test } from 'vitest';
import type { RunningServer } from '../../src/server.ts';
import { API_KEY, json, type Served, serveSandbox, sms } from '../sandbox/helpers.ts';
import { json as jsonInit, phone, readJson, uniq } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';
import { eventually, startTestServer } from '../support/server.ts';

const P = '+380501234567';
const Q = '+380671112233';
const NATIONAL = '050 123 45 67';

describe('the sandbox forgets a person', () => {
  let s: Served;
  afterEach(async () => {
    await s?.close();
  });

  const post = (path: string, body: unknown, headers: Record<string, string> = API_KEY) =>
    fetch(`${s.baseUrl}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });
  const erase = (p: string) =>
    fetch(`${s.baseUrl}/_control/subjects/${encodeURIComponent(p)}`, { method: 'DELETE' });
  const aboutIds = (ids: Set<string>) =>
    s.receiver.received.filter((r) => {
      const body = r.body as { messageId?: string; mid?: string };
      return ids.has(body.messageId ?? '') || ids.has(body.mid ?? '');
    });

  test('messages, calls, callbacks, cascade, inbound, scripts and bot users, in any form; nothing more is sent about them', async () => {
    s = await serveSandbox();
    // the first P message fails (its fallback goes out); the speech call presses 1
    expect(
      (
        await post(
          '/_control/scripts',
          [
            { to: P, outcome: 'failed' },
            { to: P, keys: ['1'] },
          ],
          {},
        )
      ).status,
    ).toBe(201);
    const hook = `${s.receiver.url}/ivr/confirm`;
    const sent = await json(
      post('/bat/messagelist', {
        messages: [
          sms(P, {
            customerMessageId: 'p-sms',
            fallbacks: [{ from: 'Acme', to: P, type: 'sms', text: 'fallback' }],
          }),
          {
            from: 'Acme',
            to: P,
            type: 'speechcall',
            text: 'ivr',
            customerMessageId: 'p-call',
            menu: [
              {
                introUrl: 'https://cdn.example.com/main.mp3',
                idleTimeoutMsec: 4000,
                dtmfActions: { d1: [{ action: 'webhook', url: hook, body: { node: 1 } }] },
              },
            ],
          },
          sms(Q, { customerMessageId: 'q-plain' }),
          sms(Q, { customerMessageId: 'q-mentions', text: `call my friend on ${NATIONAL}` }),
        ],
      }),
    );
    const [pSms, pCall, qPlain, qMentions] = sent.messages.map(
      (m: { messageId: string }) => m.messageId,
    ) as string[];
    s.sandbox.cascade.send('general', {
      recipient: NATIONAL,
      messageType: 'transaction',
      fromName: 'Acme',
      text: 'hi',
    });
    s.sandbox.bots.upsert('tg', 'bot-token', { id: 1, phone: P.slice(1) });
    s.sandbox.bots.upsert('tg', 'bot-token', { id: 2, phone: Q });
    expect((await post('/_control/viber/inbound', { from: P, text: 'STOP' }, {})).status).toBe(202);
    await s.clock.advance(1200); // sent, the SMS failed and its fallback started, call answered
    expect((await post('/_control/scripts', { to: NATIONAL, outcome: 'failed' }, {})).status).toBe(
      201,
    );

    const fallback = s.sandbox.messages.get(pSms!)!.fallbacks[0]!.messageId;
    const cascaded = s.sandbox.cascade.list()[0]!.messageId;
    const gone = new Set([pSms!, pCall!, qMentions!, fallback, cascaded]);
    const callbacksAbout = s.sandbox.callbacks
      .list()
      .filter((r) => gone.has(r.messageId ?? '') || r.kind === 'viber').length;
    expect(callbacksAbout).toBeGreaterThan(3);

    const res = await erase(P);
    expect(res.status).toBe(200);
    expect(await json(res)).toEqual({
      phone: P,
      removed: {
        messages: 4, // the SMS and its fallback, the call, Q's message that names P
        calls: 1,
        cascade: 1,
        callbacks: callbacksAbout,
        inbound: 1,
        scripts: 1,
        botUsers: 1,
        other: 0,
      },
    });

    expect(s.sandbox.messages.list().map((m) => m.messageId)).toEqual([qPlain]);
    expect(s.sandbox.messages.calls()).toEqual([]);
    expect(s.sandbox.cascade.list()).toEqual([]);
    expect(s.sandbox.scripts.list()).toEqual([]);
    expect(s.sandbox.bots.users().map((u) => u.id)).toEqual(['2']);
    expect(await json(fetch(`${s.baseUrl}/_control/viber/inbound`))).toEqual([]);
    expect(new Set(s.sandbox.callbacks.list().map((r) => r.messageId))).toEqual(new Set([qPlain]));

    // the lifecycles stopped: nothing more about the forgotten, the rest goes on
    const receivedBefore = aboutIds(gone).length;
    await s.clock.advance(60_000);
    expect(aboutIds(gone)).toHaveLength(receivedBefore);
    expect(s.receiver.received.filter((r) => r.path.startsWith('/ivr/'))).toEqual([]);
    expect(aboutIds(new Set([qPlain!])).map((r) => (r.body as { status: string }).status)).toEqual([
      'sent',
      'delivered',
    ]);
    expect(s.sandbox.callbacks.list().every((r) => r.messageId === qPlain)).toBe(true);

    // again: nothing left
    expect((await json(erase(P))).removed.messages).toBe(0);
  });

  test("the docs dialect's status webhooks, which name only the message, go too", async () => {
    s = await serveSandbox({ dialect: 'docs' });
    const sent = await json(post('/bat/messagelist', { messages: [sms(P), sms(Q)] }));
    const [pId, qId] = sent.messages.map((m: { messageId: string }) => m.messageId);
    await s.clock.advance(600);
    const aboutP = s.sandbox.callbacks.list().filter((r) => r.messageId === pId);
    expect(aboutP.map((r) => r.body)).toEqual([expect.objectContaining({ messageId: pId })]);
    expect(JSON.stringify(aboutP[0]!.body)).not.toContain(P.slice(4));
    expect((await json(erase(P))).removed).toMatchObject({ messages: 1, callbacks: 1 });
    expect(s.sandbox.callbacks.list().map((r) => r.messageId)).toEqual([qId]);
  });

  test('refuses what is not an E.164 number, naming the field', async () => {
    s = await serveSandbox();
    for (const bad of ['0501234567', 'abc', '+1']) {
      const res = await erase(bad);
      expect(res.status, bad).toBe(400);
      expect((await json(res)).details).toEqual([expect.objectContaining({ path: 'phone' })]);
    }
  });
});

describeEachEngine('DELETE /v1/subjects/{phone} with the built-in sandbox', (ctx) => {
  let server: RunningServer;
  const R = phone();
  const S = phone();
  const cm = { r: uniq('r'), s: uniq('s') };
  const api = (path: string, init?: RequestInit) => fetch(`${server.url}${path}`, init);
  const status = async (cmid: string) => (await readJson(await api(`/v1/messages/${cmid}`))).status;

  beforeAll(async () => {
    server = await startTestServer(ctx.database());
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("forgets the number in the sandbox too, reports how much, and keeps everyone else's", async () => {
    const sandbox = server.sandbox!;
    const res = await api(
      '/v1/messages',
      jsonInit({
        messages: [
          { from: 'Acme', to: R, type: 'sms', text: 'hi', customerMessageId: cm.r },
          { from: 'Acme', to: S, type: 'sms', text: 'hi', customerMessageId: cm.s },
        ],
      }),
    );
    expect(res.status).toBe(202);
    // both sent by the dispatcher, played by the sandbox, and called back over HTTP
    await eventually(
      async () => (await status(cm.r)) === 'delivered' && (await status(cm.s)) === 'delivered',
      20_000,
      'both messages delivered',
    );
    const inSandbox = (to: string) => sandbox.messages.list({ to }).map((m) => m.messageId);
    const [rId] = inSandbox(R);
    const [sId] = inSandbox(S);
    const callbacksOf = (id: string | undefined) =>
      sandbox.callbacks.list().filter((c) => c.messageId === id).length;
    const rCallbacks = callbacksOf(rId);
    expect(rCallbacks).toBeGreaterThan(0);
    const sCallbacks = callbacksOf(sId);

    const erased = await api(`/v1/subjects/${encodeURIComponent(R)}`, { method: 'DELETE' });
    expect(erased.status).toBe(200);
    const report = await readJson(erased);
    // in the sandbox: the message and every callback it made about it
    expect(report.removed).toMatchObject({ messages: 1, sandbox: 1 + rCallbacks });

    expect(inSandbox(R)).toEqual([]);
    expect(callbacksOf(rId)).toBe(0);
    expect(JSON.stringify(sandbox.callbacks.list())).not.toContain(R.slice(1));
    expect(inSandbox(S)).toEqual([sId]);
    expect(callbacksOf(sId)).toBe(sCallbacks);
    expect(await status(cm.s)).toBe('delivered');
  });
});
