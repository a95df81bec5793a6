import { afterEach, describe, expect, test } from 'vitest';
import { postJson } from '../support/http.ts';
import { API_KEY, json, type Served, serveSandbox } from './helpers.ts';

const TO = '+380501234567';
const T0 = Date.parse('2030-01-01T00:00:00.000Z');
let s: Served;

afterEach(async () => {
  await s?.close();
});

const post = (path: string, body: unknown, headers: Record<string, string> = API_KEY) =>
  postJson(`${s.baseUrl}${path}`, body, headers);

function speechcall(base: string) {
  const hook = (name: string, headers?: Record<string, string>) => ({
    action: 'webhook',
    url: `${base}/ivr/${name}`,
    body: { node: name },
    ...(headers && { headers }),
  });
  return {
    from: 'Acme',
    to: TO,
    type: 'speechcall',
    text: 'ivr',
    customerMessageId: 'call-1',
    menu: [
      {
        introUrl: 'https://cdn.example.com/main.mp3',
        idleTimeoutMsec: 4000,
        dtmfActions: {
          d1: [hook('confirm', { 'X-Source': 's3' }), { action: 'hangup' }],
          d2: [hook('more'), { action: 'gotoMenu', menu: 1 }],
          wrong: [hook('wrong'), { action: 'gotoMenu', menu: 0 }],
        },
      },
      {
        introUrl: 'https://cdn.example.com/more.mp3',
        dtmfActions: { 'd#': [hook('back'), { action: 'gotoMenu', menu: '0' }] },
      },
    ],
  };
}

const webhooks = () => s.receiver.received.filter((r) => r.path.startsWith('/ivr/'));

describe('speech calls (seed 2.5, 2.9)', () => {
  test('the scripted keys walk the menu; each webhook posts {from,to,mid,action} with its headers', async () => {
    s = await serveSandbox();
    await post('/_control/scripts', { to: TO, keys: ['2', '#', '7', '1'] });
    const sent = await json(post('/bat/messagelist', { messages: [speechcall(s.receiver.url)] }));
    const mid = sent.messages[0].messageId;
    await s.clock.advance(60_000);
    expect(webhooks().map((w) => w.path)).toEqual([
      '/ivr/more',
      '/ivr/back',
      '/ivr/wrong',
      '/ivr/confirm',
    ]);
    expect(webhooks()[3]?.body).toEqual({ from: 'Acme', to: TO, mid, action: { node: 'confirm' } });
    expect(webhooks()[3]?.headers['x-source']).toBe('s3');
    expect(webhooks()[3]?.headers['content-type']).toBe('application/json');

    const calls = await json(fetch(`${s.baseUrl}/_control/calls`));
    expect(calls).toHaveLength(1);
    expect(calls[0]).toMatchObject({
      messageId: mid,
      state: 'ended',
      endReason: 'hangup-action',
      answeredAt: new Date(T0 + 1000).toISOString(),
    });
    expect(
      calls[0].path.map((p: { menu: number; input: string; runs: string }) => [
        p.menu,
        p.input,
        p.runs,
      ]),
    ).toEqual([
      [0, '2', 'd2'],
      [1, '#', 'd#'],
      [0, '7', 'wrong'],
      [0, '1', 'd1'],
    ]);
    // the call's own status: answered = delivered
    const statuses = s.receiver.received
      .filter((r) => r.path === '/hooks/delivery')
      .map((r) => (r.body as { status: string }).status);
    expect(statuses).toEqual(['sent', 'delivered']);
  });

  test('a timeout runs wrong after the idle timeout; with keys used up the callee stays silent', async () => {
    s = await serveSandbox({ timings: { maxIdleTimeoutMs: 10_000 } });
    await post('/_control/scripts', { to: TO, keys: ['timeout', '2'] });
    await post('/bat/messagelist', { messages: [speechcall(s.receiver.url)] });
    // answered at 1 s; the timeout fires 4 s later
    await s.clock.advance(1000 + 3999);
    expect(webhooks()).toHaveLength(0);
    await s.clock.advance(1);
    expect(webhooks().map((w) => w.path)).toEqual(['/ivr/wrong']);
    await s.clock.advance(600_000);
    const call = (await json(fetch(`${s.baseUrl}/_control/calls`)))[0];
    // menu 1 has no wrong: silence there hangs up
    expect(call.endReason).toBe('no-wrong');
    expect(webhooks().map((w) => w.path)).toEqual(['/ivr/wrong', '/ivr/more']);
  });

  test("a message of another type to the number leaves a call's keys for the call", async () => {
    s = await serveSandbox();
    // the call's keys, then an outcome for whatever comes next that is not a call
    await post('/_control/scripts', { to: TO, keys: ['1'] });
    await post('/_control/scripts', { to: TO, outcome: 'failed' });
    // an SMS sent in between (as a walk-through might): it takes the second script, not the keys
    await post('/bat/messagelist', {
      messages: [{ from: 'Acme', to: TO, type: 'sms', text: 'Hello' }],
    });
    await post('/bat/messagelist', { messages: [speechcall(s.receiver.url)] });
    await s.clock.advance(60_000);
    const events = s.receiver.received
      .filter((r) => r.path === '/hooks/delivery')
      .map((r) => r.body as { status: string; type: string });
    expect(events.filter((e) => e.type === 'sms').map((e) => e.status)).toEqual(['sent', 'failed']);
    expect(webhooks().map((w) => w.path)).toEqual(['/ivr/confirm']);
    expect(await json(fetch(`${s.baseUrl}/_control/scripts`))).toEqual([]);
    // with only a call's keys queued, an SMS takes nothing and goes its default way
    await post('/_control/scripts', { to: TO, keys: ['2'] });
    await post('/bat/messagelist', {
      messages: [{ from: 'Acme', to: TO, type: 'sms', text: 'Again' }],
    });
    await s.clock.advance(60_000);
    expect(
      s.receiver.received
        .filter((r) => r.path === '/hooks/delivery')
        .map((r) => r.body as { status: string; type: string })
        .filter((e) => e.type === 'sms')
        .map((e) => e.status),
    ).toEqual(['sent', 'failed', 'sent', 'delivered']);
    expect(await json(fetch(`${s.baseUrl}/_control/scripts`))).toEqual([{ to: TO, keys: ['2'] }]);
  });

  test('an unanswered call fails, plays nothing, and its fallback is sent', async () => {
    s = await serveSandbox();
    await post('/_control/scripts', { to: TO, keys: ['1'], outcome: 'failed' });
    const call = {
      ...speechcall(s.receiver.url),
      fallbacks: [{ from: 'Acme', to: TO, type: 'sms', text: 'We called' }],
    };
    await post('/bat/messagelist', { messages: [call] });
    await s.clock.advance(60_000);
    expect(webhooks()).toHaveLength(0);
    const events = s.receiver.received
      .filter((r) => r.path === '/hooks/delivery')
      .map((r) => r.body as { status: string; fallbackIndex: number | null; type: string });
    expect(events.map((e) => [e.type, e.status])).toEqual([
      ['speechcall', 'sent'],
      ['speechcall', 'failed'],
      ['sms', 'sent'],
      ['sms', 'delivered'],
    ]);
    const calls = await json(fetch(`${s.baseUrl}/_control/calls`));
    expect(calls[0].state).toBe('not-answered');
  });

  test('webhooks are retried on non-2xx like every callback', async () => {
    s = await serveSandbox();
    s.receiver.respondWith('/ivr/confirm', [502]);
    await post('/_control/scripts', { to: TO, keys: ['1'] });
    await post('/bat/messagelist', { messages: [speechcall(s.receiver.url)] });
    await s.clock.advance(1500);
    expect(webhooks()).toHaveLength(0);
    await s.clock.advance(1000);
    expect(webhooks().map((w) => w.path)).toEqual(['/ivr/confirm']);
    const record = s.sandbox.callbacks.list().find((r) => r.kind === 'webhook');
    expect(record?.attempts.map((a) => a.status)).toEqual([502, 200]);
  });

  test('a script with no outcome and no keys: the call is answered and times out', async () => {
    s = await serveSandbox();
    await post('/bat/messagelist', { messages: [speechcall(s.receiver.url)] });
    await s.clock.advance(3000);
    // default maxIdleTimeoutMs (2 s) caps the menu's 4 s
    expect(webhooks().map((w) => w.path)).toEqual(['/ivr/wrong']);
  });
});

describe('incoming Viber messages', () => {
  test('reach the Viber callback URL (derived from the delivery one) and are listed', async () => {
    s = await serveSandbox();
    const res = await post('/_control/viber/inbound', { from: TO, text: 'Hello there' }, {});
    expect(res.status).toBe(202);
    const body = await json(res);
    expect(body.callback.state).toBe('delivered');
    const got = s.receiver.received.filter((r) => r.path === '/hooks/viber');
    expect(got).toHaveLength(1);
    expect(got[0]?.body).toEqual({
      type: 'viber',
      channel: 'viber',
      messageId: body.messageId,
      from: TO,
      to: 'Sandbox',
      text: 'Hello there',
      timestamp: new Date(T0).toISOString(),
    });
    const list = await json(fetch(`${s.baseUrl}/_control/viber/inbound`));
    expect(list).toHaveLength(1);
  });

  test('go to an explicit Viber callback URL when one is given; a bad sender is 400', async () => {
    s = await serveSandbox((r) => ({ viberCallbackUrl: `${r.url}/elsewhere` }));
    const res = await post('/_control/viber/inbound', { from: TO, text: 'x' }, {});
    expect(res.status).toBe(202);
    expect(s.receiver.received.map((r) => r.path)).toEqual(['/elsewhere']);
    const bad = await post('/_control/viber/inbound', { from: '12', text: 'x' }, {});
    expect(bad.status).toBe(400);
    expect((await json(bad)).details[0]).toMatchObject({ path: 'from', code: 'INVALID_RECIPIENT' });
  });
});
