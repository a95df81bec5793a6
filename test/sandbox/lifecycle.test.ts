import { afterEach, describe, expect, test } from 'vitest';
import { API_KEY, json, type Served, serveSandbox, sms } from './helpers.ts';

const TO = '+380501234567';
const T0 = Date.parse('2030-01-01T00:00:00.000Z');
let s: Served;

afterEach(async () => {
  await s?.close();
});

async function send(messages: unknown[]) {
  const res = await fetch(`${s.baseUrl}/bat/messagelist`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...API_KEY },
    body: JSON.stringify({ messages }),
  });
  expect(res.status).toBe(200);
  return (await json(res)) as {
    messagelistId: number;
    messages: { messageId: string; status: string }[];
  };
}

async function script(body: unknown) {
  const res = await fetch(`${s.baseUrl}/_control/scripts`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  expect(res.status).toBe(201);
}

type Cb = {
  status: string;
  timestamp: string;
  messageId: string;
  customerMessageId: string | null;
  fallbackIndex: number | null;
  type: string;
  channel: string;
  error: { code: string } | null;
};
const callbacks = () =>
  s.receiver.received.filter((r) => r.path === '/hooks/delivery').map((r) => r.body as Cb);
const statuses = () => callbacks().map((c) => c.status);

describe('lifecycles', () => {
  test('an SMS is sent after 0.5 s and delivered after 1 s, each step called back keyed by customerMessageId', async () => {
    s = await serveSandbox();
    const res = await send([sms(TO, { customerMessageId: 'c-1' })]);
    const id = res.messages[0]!.messageId;
    await s.clock.advance(499);
    expect(callbacks()).toHaveLength(0);
    await s.clock.advance(1);
    expect(statuses()).toEqual(['sent']);
    await s.clock.advance(10_000);
    expect(callbacks()).toEqual([
      expect.objectContaining({
        customerMessageId: 'c-1',
        messageId: id,
        messagelistId: res.messagelistId,
        status: 'sent',
        timestamp: new Date(T0 + 500).toISOString(),
        type: 'sms',
        channel: 'sms',
        fallbackIndex: null,
        error: null,
      }),
      expect.objectContaining({
        customerMessageId: 'c-1',
        messageId: id,
        status: 'delivered',
        timestamp: new Date(T0 + 1000).toISOString(),
      }),
    ]);
  });

  test('a Viber message is also read', async () => {
    s = await serveSandbox();
    await send([{ from: 'Acme', to: TO, type: 'viber_service', text: 'hi' }]);
    await s.clock.advance(10_000);
    expect(statuses()).toEqual(['sent', 'delivered', 'read']);
    expect(callbacks()[2]).toMatchObject({ channel: 'viber', type: 'viber_service' });
  });

  test('a script "delivered" stops a Viber message before read; "read" on an SMS means delivered', async () => {
    s = await serveSandbox();
    await script({ to: TO, outcome: 'delivered' });
    await script({ to: TO, outcome: 'read' });
    await send([{ from: 'Acme', to: TO, type: 'viber_service', text: 'hi' }, sms(TO)]);
    await s.clock.advance(10_000);
    expect(statuses().sort()).toEqual(['delivered', 'delivered', 'sent', 'sent']);
  });

  test('a failed primary sends its fallbacks in order until one is delivered, each tracked', async () => {
    s = await serveSandbox();
    await script([
      { to: TO, outcome: 'failed', reason: 'no Viber on this phone' },
      { to: TO, outcome: 'expired' },
    ]);
    const res = await send([
      {
        from: 'Acme',
        to: TO,
        type: 'viber_service',
        text: 'primary',
        customerMessageId: 'fb-1',
        fallbacks: [
          { from: 'Acme', to: TO, type: 'viber_promo', text: 'first fallback' },
          { from: 'Acme', to: TO, type: 'sms', text: 'second fallback' },
        ],
      },
    ]);
    const primary = res.messages[0]!.messageId;
    await s.clock.advance(60_000);
    expect(callbacks().map((c) => [c.fallbackIndex, c.status, c.customerMessageId])).toEqual([
      [null, 'sent', 'fb-1'],
      [null, 'failed', 'fb-1'],
      [0, 'sent', 'fb-1'],
      [0, 'expired', 'fb-1'],
      [1, 'sent', 'fb-1'],
      [1, 'delivered', 'fb-1'],
    ]);
    expect(callbacks()[1]?.error).toMatchObject({
      code: 'DELIVERY_FAILED',
      message: 'no Viber on this phone',
    });
    const lookup = await json(fetch(`${s.baseUrl}/bat/message/${primary}`, { headers: API_KEY }));
    expect(lookup.status).toBe('failed');
    expect(lookup.fallbacks).toEqual([
      { index: 0, messageId: callbacks()[2]!.messageId, type: 'viber_promo', status: 'expired' },
      { index: 1, messageId: callbacks()[4]!.messageId, type: 'sms', status: 'delivered' },
    ]);
    // the fallback is looked up by its own id too
    const fb = await json(
      fetch(`${s.baseUrl}/bat/message/${callbacks()[4]!.messageId}`, { headers: API_KEY }),
    );
    expect(fb).toMatchObject({ parentMessageId: primary, fallbackIndex: 1, status: 'delivered' });
  });

  test('dtSend schedules the message', async () => {
    s = await serveSandbox();
    const dtSend = new Date(T0 + 3_600_000).toISOString();
    await send([sms(TO, { dtSend })]);
    await s.clock.advance(3_600_000);
    expect(callbacks()).toHaveLength(0);
    await s.clock.advance(1000);
    expect(callbacks().map((c) => [c.status, c.timestamp])).toEqual([
      ['sent', new Date(T0 + 3_600_500).toISOString()],
      ['delivered', new Date(T0 + 3_601_000).toISOString()],
    ]);
  });

  test('dtExpire expires a message not delivered by then', async () => {
    s = await serveSandbox();
    const dtExpire = new Date(T0 + 700).toISOString();
    await send([
      sms(TO, { dtExpire, fallbacks: [{ from: 'Acme', to: TO, type: 'sms', text: 'fb' }] }),
    ]);
    await s.clock.advance(10_000);
    expect(callbacks().map((c) => [c.fallbackIndex, c.status, c.timestamp])).toEqual([
      [null, 'sent', new Date(T0 + 500).toISOString()],
      [null, 'expired', dtExpire],
      [0, 'sent', new Date(T0 + 1200).toISOString()],
      [0, 'delivered', new Date(T0 + 1700).toISOString()],
    ]);
    expect(callbacks()[1]?.error?.code).toBe('EXPIRED');
  });

  test('ttl expires an undelivered message at dispatch time + ttl', async () => {
    s = await serveSandbox();
    await script({ to: TO, outcome: 'expired' });
    await send([sms(TO, { ttl: 120 })]);
    await s.clock.advance(119_999);
    expect(statuses()).toEqual(['sent']);
    await s.clock.advance(1);
    expect(callbacks()[1]).toMatchObject({
      status: 'expired',
      timestamp: new Date(T0 + 120_000).toISOString(),
    });
  });

  test('a scheduled message whose ttl is shorter than the sending delay expires without being sent', async () => {
    s = await serveSandbox({ timings: { sentAfterMs: 5000, deliveredAfterMs: 6000 } });
    await send([sms(TO, { ttl: 1 })]);
    await s.clock.advance(10_000);
    expect(callbacks().map((c) => [c.status, c.timestamp])).toEqual([
      ['expired', new Date(T0 + 1000).toISOString()],
    ]);
  });
});

describe('callback delivery', () => {
  test('a non-2xx answer is retried with exponential backoff until a 2xx', async () => {
    // delivered comes late, so only the `sent` callback meets the failing answers
    s = await serveSandbox({ timings: { deliveredAfterMs: 100_000 } });
    s.receiver.respondWith('/hooks/delivery', [500, 503, 404]);
    await send([sms(TO)]);
    await s.clock.advance(500);
    const record = s.sandbox.callbacks.list()[0]!;
    expect(record.attempts.map((a) => a.status)).toEqual([500]);
    await s.clock.advance(1000); // + 1 s
    expect(record.attempts.map((a) => a.status)).toEqual([500, 503]);
    await s.clock.advance(2000); // + 2 s
    expect(record.attempts.map((a) => a.status)).toEqual([500, 503, 404]);
    await s.clock.advance(4000); // + 4 s
    expect(record.attempts.map((a) => [a.status, a.at])).toEqual([
      [500, new Date(T0 + 500).toISOString()],
      [503, new Date(T0 + 1500).toISOString()],
      [404, new Date(T0 + 3500).toISOString()],
      [200, new Date(T0 + 7500).toISOString()],
    ]);
    expect(record.state).toBe('delivered');
    expect(s.receiver.received.filter((r) => (r.body as Cb).status === 'sent')).toHaveLength(1);
  });

  test('a callback is given up after maxAttempts, and an unreachable receiver is retried too', async () => {
    s = await serveSandbox({
      callbackUrl: 'http://127.0.0.1:1/hooks/delivery',
      options: { maxAttempts: 3 },
    });
    await send([sms(TO)]);
    await s.clock.advance(60_000);
    const records = s.sandbox.callbacks.list();
    expect(records).toHaveLength(2);
    for (const r of records) {
      expect(r.state).toBe('failed');
      expect(r.attempts).toHaveLength(3);
      expect(r.attempts[0]?.error).toEqual(expect.any(String));
    }
  });

  test('duplicateCallbacks delivers every callback twice, with the same body', async () => {
    s = await serveSandbox({ options: { duplicateCallbacks: true } });
    await send([sms(TO, { customerMessageId: 'd-1' })]);
    await s.clock.advance(5000);
    expect(statuses()).toEqual(['sent', 'sent', 'delivered', 'delivered']);
    expect(callbacks()[0]).toEqual(callbacks()[1]);
  });

  test('failFirstCallback: each callback arrives only after a first (simulated) 503', async () => {
    s = await serveSandbox({ options: { failFirstCallback: true } });
    await send([sms(TO)]);
    await s.clock.advance(500);
    expect(callbacks()).toHaveLength(0);
    expect(s.sandbox.callbacks.list()[0]?.attempts[0]).toMatchObject({
      status: 503,
      simulated: true,
    });
    await s.clock.advance(1000);
    expect(statuses()).toEqual(['sent']);
    await s.clock.advance(5000);
    expect(statuses()).toEqual(['sent', 'delivered']);
  });

  test('shuffleCallbacks delivers all callbacks, some out of order', async () => {
    s = await serveSandbox({ options: { shuffleCallbacks: true, shuffleWindowMs: 3000 } });
    const res = await send(Array.from({ length: 10 }, () => sms(TO)));
    await s.clock.advance(30_000);
    const got = callbacks();
    expect(got).toHaveLength(20);
    const outOfOrder = res.messages.filter((m) => {
      const order = got.filter((c) => c.messageId === m.messageId).map((c) => c.status);
      return order[0] === 'delivered';
    });
    // a bound: how many the (seeded) shuffle turns round is an artefact of its draws
    expect(outOfOrder.length).toBeGreaterThan(0);
    const times = got.map((c) => Date.parse(c.timestamp));
    expect(times).not.toEqual([...times].sort((a, b) => a - b));
  });

  test('options can be changed through the control API, and a callback token is sent along', async () => {
    s = await serveSandbox({ callbackToken: 'secret-1' });
    const res = await fetch(`${s.baseUrl}/_control/options`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ duplicateCallbacks: true }),
    });
    expect(await json(res)).toMatchObject({ duplicateCallbacks: true, shuffleCallbacks: false });
    await send([sms(TO)]);
    await s.clock.advance(600);
    expect(s.receiver.received).toHaveLength(2);
    expect(s.receiver.received[0]?.headers['x-callback-token']).toBe('secret-1');
    const bad = await fetch(`${s.baseUrl}/_control/options`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ duplicateCallbacks: 'yes' }),
    });
    expect(bad.status).toBe(400);
  });

  test('a TTL that would run past year 9999 is accepted and runs to its end, not a 500', async () => {
    s = await serveSandbox();
    const res = await send([sms(TO, { customerMessageId: 'c-far', ttl: 9_000_000_000_000_000 })]);
    expect(res.messages[0]!.status).toBe('accepted');
    await s.clock.advance(10_000);
    expect(statuses()).toEqual(['sent', 'delivered']);
  });
});
