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

const press = (ref: string, keys: string[]) => post(`/_control/calls/${ref}/keys`, { keys }, {});

function speechcall(base: string, customerMessageId = 'call-1') {
  const hook = (name: string) => ({ action: 'webhook', url: `${base}/ivr/${name}` });
  return {
    from: 'Acme',
    to: TO,
    type: 'speechcall',
    text: 'ivr',
    customerMessageId,
    menu: [
      {
        introUrl: 'https://cdn.example.com/main.mp3',
        idleTimeoutMsec: 4000,
        dtmfActions: {
          d1: [hook('confirm'), { action: 'hangup' }],
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

const webhooks = () =>
  s.receiver.received.filter((r) => r.path.startsWith('/ivr/')).map((r) => r.path);

async function theCall() {
  return (await json(fetch(`${s.baseUrl}/_control/calls`)))[0];
}

describe('live calls: keys pressed while the call plays (POST /_control/calls/{ref}/keys)', () => {
  test('a menu waits for a live key past the scripted cap, and takes it at once', async () => {
    s = await serveSandbox();
    await post('/_control/scripts', { to: TO, live: true }, {});
    const sent = await json(post('/bat/messagelist', { messages: [speechcall(s.receiver.url)] }));
    const mid = sent.messages[0].messageId;

    // pressed while ringing: queued, taken keyPressMs (500) after the first menu starts
    expect((await press(mid, ['2'])).status).toBe(202);
    await s.clock.advance(1000);
    expect((await theCall()).state).toBe('in-progress');
    expect(webhooks()).toEqual([]);
    await s.clock.advance(500);
    expect(webhooks()).toEqual(['/ivr/more']);

    // menu 1 sets no idleTimeoutMsec: a live call waits the default 5 s, not the 2 s cap
    await s.clock.advance(4000);
    expect(webhooks()).toEqual(['/ivr/more']);
    const pressed = await press(mid, ['#']);
    expect(pressed.status).toBe(202);
    expect((await json(pressed)).call.live).toBe(true);
    await s.clock.runDue();
    expect(webhooks()).toEqual(['/ivr/more', '/ivr/back']);

    // by customerMessageId too
    expect((await press('call-1', ['1'])).status).toBe(202);
    await s.clock.runDue();
    expect(webhooks()).toEqual(['/ivr/more', '/ivr/back', '/ivr/confirm']);
    const call = await theCall();
    expect(call).toMatchObject({
      messageId: mid,
      live: true,
      state: 'ended',
      endReason: 'hangup-action',
      keys: ['2', '#', '1'],
    });
    expect(call.path.map((p: { menu: number; runs: string }) => [p.menu, p.runs])).toEqual([
      [0, 'd2'],
      [1, 'd#'],
      [0, 'd1'],
    ]);
    expect(call.answeredAt).toBe(new Date(T0 + 1000).toISOString());

    const late = await press(mid, ['1']);
    expect(late.status).toBe(409);
    expect((await json(late)).error).toBe('CALL_ENDED');
  });

  test('with no key a live menu times out after its idleTimeoutMsec and runs wrong', async () => {
    s = await serveSandbox();
    await post('/_control/scripts', { to: TO, live: true }, {});
    await post('/bat/messagelist', { messages: [speechcall(s.receiver.url)] });
    await s.clock.advance(1000 + 3999);
    expect(webhooks()).toEqual([]);
    await s.clock.advance(1);
    expect(webhooks()).toEqual(['/ivr/wrong']);
    expect((await theCall()).path).toHaveLength(2);
  });

  test('a timeout that lost the race to a key does nothing', async () => {
    s = await serveSandbox();
    await post('/_control/scripts', { to: TO, live: true }, {});
    const sent = await json(post('/bat/messagelist', { messages: [speechcall(s.receiver.url)] }));
    await s.clock.advance(1000 + 3000);
    await press(sent.messages[0].messageId, ['2']);
    await s.clock.advance(1500); // past menu 0's 4 s timeout
    expect(webhooks()).toEqual(['/ivr/more']);
    expect((await theCall()).path.map((p: { menu: number }) => p.menu)).toEqual([0, 1]);
  });

  test('unknown calls are 404, scripted calls 409 NOT_LIVE, bad keys 400; scripted calls are unchanged', async () => {
    s = await serveSandbox();
    expect((await press('nope', ['1'])).status).toBe(404);
    await post('/_control/scripts', { to: TO, keys: ['1'] }, {});
    const sent = await json(post('/bat/messagelist', { messages: [speechcall(s.receiver.url)] }));
    const mid = sent.messages[0].messageId;
    const scripted = await press(mid, ['2']);
    expect(scripted.status).toBe(409);
    expect((await json(scripted)).error).toBe('NOT_LIVE');
    expect((await press(mid, ['x'])).status).toBe(400);
    expect((await post(`/_control/calls/${mid}/keys`, { keys: [] }, {})).status).toBe(400);
    await s.clock.advance(10_000);
    expect(webhooks()).toEqual(['/ivr/confirm']);
    expect((await theCall()).live).toBeUndefined();
  });
});
