/**
 * The docs dialect: what the sandbox reports is what the provider's public docs show
 * (docs/api/smsbat/*.md of the provider's help repository, and its help site's
 * incoming-messages page), nothing more. Each test names the file and section it follows.
 * Placeholders of the docs' examples are filled with valid values: `+380XXXXXXXXX` with
 * +380501234567.
 *
 * Everything runs on the sandbox's manual clock, over real HTTP, with a receiver that records
 * what the sandbox posts.
 */
import { afterEach, describe, expect, test } from 'vitest';
import type { CreateSandboxOptions } from '../../src/sandbox/app.ts';
import { createSandbox } from '../../src/sandbox/app.ts';
import { postJson } from '../support/http.ts';
import { API_KEY, json, type Served, serveSandbox, sms } from './helpers.ts';

const TO = '+380501234567';
const T0 = Date.parse('2030-01-01T00:00:00.000Z');
const at = (ms: number) => new Date(T0 + ms).toISOString();
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

let s: Served;
afterEach(async () => {
  await s?.close();
});

async function start(opts: CreateSandboxOptions = {}): Promise<Served> {
  s = await serveSandbox({ dialect: 'docs', ...opts });
  return s;
}

const post = (path: string, body: unknown, headers: Record<string, string> = API_KEY) =>
  postJson(`${s.baseUrl}${path}`, body, headers);

async function send(messages: unknown[]) {
  const res = await post('/bat/messagelist', { messages });
  expect(res.status).toBe(200);
  return json(res);
}

const lookup = (id: string) => json(fetch(`${s.baseUrl}/bat/message/${id}`, { headers: API_KEY }));
const script = async (body: unknown) =>
  expect((await post('/_control/scripts', body, {})).status).toBe(201);
const webhooks = () =>
  s.receiver.received.filter((r) => r.path === '/hooks/delivery').map((r) => r.body);

describe('POST /bat/messagelist answers', () => {
  test('messagelistId and, per message, messageId, status, parts, customerMessageId and to', async () => {
    await start();
    // docs/api/smsbat/send-message.md, "Request Structure" (the request) and "Success
    // Response" (the answer)
    const body = await send([
      {
        from: 'YourSender',
        to: TO,
        type: 'sms',
        text: 'Your message text',
        customerMessageId: 'your-internal-id',
        ttl: 3600,
      },
    ]);
    expect(body).toEqual({
      messagelistId: 1001,
      messages: [
        {
          messageId: expect.stringMatching(UUID),
          status: 'accepted',
          parts: 1,
          customerMessageId: 'your-internal-id',
          to: TO,
        },
      ],
    });
  });

  test('a long SMS counts its parts; no customerMessageId, no such field', async () => {
    await start();
    // docs/api/smsbat/sms.md, "Multi-part SMS" (the 201-character example: 2 parts) and
    // "Response"
    const text =
      "This is a very long message that will be split into multiple parts. Each part will be delivered separately but will appear as a single message on the recipient's phone. The system automatically handles the splitting and reassembly.";
    const body = await send([{ from: 'YourBrand', to: TO, type: 'sms', text }]);
    expect(body.messages).toEqual([
      { messageId: expect.stringMatching(UUID), status: 'accepted', parts: 2, to: TO },
    ]);
  });

  test('a rejected message names no messageId and says why in the docs error object', async () => {
    await start();
    // docs/api/smsbat/sms.md, "Response Fields" (status accepted or rejected) and "Common
    // Errors" (INVALID_RECIPIENT); the reason in send-message.md's "Error Response" object
    const body = await send([
      sms('0501234567', { customerMessageId: 'bad-1' }),
      sms(TO, { customerMessageId: 'dup' }),
      sms(TO, { customerMessageId: 'dup' }),
    ]);
    expect(body.messages[0]).toEqual({
      status: 'rejected',
      customerMessageId: 'bad-1',
      to: '0501234567',
      error: { code: 'INVALID_RECIPIENT', message: expect.stringContaining('to') },
    });
    expect(body.messages[2]).toEqual({
      status: 'rejected',
      customerMessageId: 'dup',
      to: TO,
      error: {
        code: 'DUPLICATE_CUSTOMER_MESSAGE_ID',
        message: expect.stringContaining(body.messages[1].messageId),
      },
    });
  });

  test('a flash call answers its callerId, the pattern of its last 6 digits and its ttl', async () => {
    await start();
    // docs/api/smsbat/flashcall.md, "2. Request Flash Call" (the request) and "Response
    // Format" (the answer)
    const body = await send([
      {
        from: 'YourApp',
        to: TO,
        type: 'flashcall',
        messageData: { callerId: '+380123456789' },
        ttl: 60,
      },
    ]);
    expect(body.messages).toEqual([
      {
        messageId: expect.stringMatching(UUID),
        status: 'accepted',
        parts: 1,
        callerId: '+380123456789',
        pattern: '***456789',
        to: TO,
        ttl: 60,
      },
    ]);
  });

  test('a flash call without callerId gets a sandbox number (ending in its code) and ttl 60', async () => {
    await start();
    // docs/api/smsbat/flashcall.md, "Parameters" (ttl "default: 60") and "Pattern Matching"
    // (asterisks, then the digits to match)
    const body = await send([
      { from: 'YourApp', to: TO, type: 'flashcall', text: '4821' },
      { from: 'YourApp', to: TO, type: 'flashcall' },
    ]);
    const [coded, bare] = body.messages;
    expect(coded.callerId).toMatch(/^\+380\d{5}4821$/);
    expect(coded).toEqual({
      messageId: expect.stringMatching(UUID),
      status: 'accepted',
      parts: 1,
      callerId: coded.callerId,
      pattern: `***${coded.callerId.slice(-6)}`,
      to: TO,
      ttl: 60,
    });
    expect(bare.callerId).toMatch(/^\+380\d{9}$/);
    expect(bare.pattern).toBe(`***${bare.callerId.slice(-6)}`);
    expect(bare.ttl).toBe(60);
  });
});

describe('request errors: {"error": {"code", "message"}} with the HTTP status', () => {
  // docs/api/smsbat/send-message.md, "Error Response" (the body) and "HTTP Status Codes"
  const docsError = (code: string) => ({ error: { code, message: expect.any(String) } });

  test('401 without credentials, 400 for a body that is not a messagelist, 404 for an unknown id', async () => {
    await start();
    const unauthorized = await post('/bat/messagelist', { messages: [sms(TO)] }, {});
    expect(unauthorized.status).toBe(401);
    expect(unauthorized.headers.get('www-authenticate')).toMatch(/^Basic/);
    expect(await json(unauthorized)).toEqual(docsError('UNAUTHORIZED'));

    const notJson = await post('/bat/messagelist', 'this is not json');
    expect(notJson.status).toBe(400);
    expect(await json(notJson)).toEqual(docsError('BAD_REQUEST'));

    const empty = await post('/bat/messagelist', { messages: [] });
    expect(empty.status).toBe(400);
    expect(await json(empty)).toEqual(docsError('BAD_REQUEST'));

    const unknown = await fetch(`${s.baseUrl}/bat/message/no-such-id`, { headers: API_KEY });
    expect(unknown.status).toBe(404);
    expect(await json(unknown)).toEqual(docsError('NOT_FOUND'));
  });

  test('429 with Retry-After beyond the rate limit; 500 for a server error', async () => {
    await start({ rateLimits: { messaging: { perSecond: 1, burst: 1 } } });
    expect((await post('/bat/messagelist', { messages: [sms(TO)] })).status).toBe(200);
    const limited = await post('/bat/messagelist', { messages: [sms(TO)] });
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('1');
    expect(await json(limited)).toEqual(docsError('RATE_LIMITED'));

    await s.clock.advance(1000);
    await post('/_control/faults', { path: '/bat/messagelist', status: 500 }, {});
    const failed = await post('/bat/messagelist', { messages: [sms(TO)] });
    expect(failed.status).toBe(500);
    expect(await json(failed)).toEqual(docsError('INTERNAL'));
  });

  test('the control API, not the provider, answers its own errors alike in both dialects', async () => {
    await start();
    const res = await fetch(`${s.baseUrl}/_control/messages/none`);
    expect(res.status).toBe(404);
    expect(await json(res)).toEqual({
      error: 'NOT_FOUND',
      message: expect.any(String),
      status: 404,
    });
  });
});

describe('GET /bat/message/{messageId}', () => {
  test('scheduled, processing, then delivered with its parts and cost', async () => {
    await start();
    // docs/api/smsbat/status.md, "Basic Response" (the fields), "Scheduled", "Processing"
    // and "Delivered" (the words along the way)
    const id = (await send([sms(TO)])).messages[0].messageId;
    const record = (deliverystatus: string, cost: number) => ({
      messagelistId: 1001,
      messageId: id,
      deliverystatus,
      partscount: 1,
      cost,
    });
    expect(await lookup(id)).toEqual(record('scheduled', 0));
    await s.clock.advance(500);
    expect(await lookup(id)).toEqual(record('processing', 0));
    await s.clock.advance(500);
    expect(await lookup(id)).toEqual(record('delivered', 0.05));
  });

  test('undeliverable and permanenterror cost nothing', async () => {
    await start();
    // docs/api/smsbat/status.md, "Undeliverable" and "Permanent Error"
    await script([
      { to: TO, outcome: 'failed' },
      { to: TO, outcome: 'expired' },
    ]);
    const body = await send([sms(TO), sms(TO, { ttl: 60 })]);
    const [failed, expired] = body.messages.map((m: { messageId: string }) => m.messageId);
    await s.clock.advance(60_000);
    expect(await lookup(failed)).toEqual({
      messagelistId: 1001,
      messageId: failed,
      deliverystatus: 'undeliverable',
      partscount: 1,
      cost: 0,
    });
    expect(await lookup(expired)).toMatchObject({ deliverystatus: 'permanenterror', cost: 0 });
  });

  test('with a fallback configured and not needed: the extended response, the fallback not_used', async () => {
    await start();
    // docs/api/smsbat/status.md, "Extended Response (with Fallback)"; the request is
    // docs/api/smsbat/viber.md, "Fallback to SMS", with a viber_trans primary
    const id = (
      await send([
        {
          from: 'YourBrand',
          to: TO,
          type: 'viber_trans',
          text: 'Your Viber message',
          fallback: { type: 'sms', text: 'Your SMS fallback message (image not included)' },
        },
      ])
    ).messages[0].messageId;
    await s.clock.advance(10_000);
    expect(await lookup(id)).toEqual({
      messagelistId: 1001,
      messageId: id,
      deliverystatus: 'delivered',
      partscount: 1,
      cost: 0.05,
      fallbacks: [{ type: 'sms', status: 'not_used' }],
      extendedStatuses: { viber: 'delivered', sms: 'not_used' },
      rate: 0.05,
      rateAmount: 0.05,
      rateCurrency: 'USD',
      billAmount: 0.05,
      billCurrency: 'USD',
    });
  });

  test('a fallback used: one messageId, one status for the whole message, each channel in extendedStatuses', async () => {
    await start();
    // docs/api/smsbat/status.md, "Extended Response (with Fallback)"
    await script({ to: TO, outcome: 'failed' });
    const body = await send([
      {
        from: 'Acme',
        to: TO,
        type: 'viber_trans',
        text: 'primary',
        fallbacks: [{ from: 'Acme', to: TO, type: 'sms', text: 'fallback' }],
      },
    ]);
    expect(body.messages).toHaveLength(1);
    const id = body.messages[0].messageId;
    // the Viber message fails at 1 s; the SMS goes out then, sent at 1.5 s, delivered at 2 s
    await s.clock.advance(1200);
    expect(await lookup(id)).toMatchObject({
      deliverystatus: 'processing',
      fallbacks: [{ type: 'sms', status: 'scheduled' }],
      extendedStatuses: { viber: 'undeliverable', sms: 'scheduled' },
    });
    await s.clock.advance(10_000);
    expect(await lookup(id)).toEqual({
      messagelistId: 1001,
      messageId: id,
      deliverystatus: 'delivered',
      partscount: 1,
      cost: 0.05,
      fallbacks: [{ type: 'sms', status: 'delivered' }],
      extendedStatuses: { viber: 'undeliverable', sms: 'delivered' },
      rate: 0.05,
      rateAmount: 0.05,
      rateCurrency: 'USD',
      billAmount: 0.05,
      billCurrency: 'USD',
    });
    // the fallback has no messageId of its own: the sandbox's own id for it is unknown here
    const all = await json(fetch(`${s.baseUrl}/_control/messages`));
    const fallback = all.find((m: { parentMessageId: string | null }) => m.parentMessageId === id);
    const res = await fetch(`${s.baseUrl}/bat/message/${fallback.messageId}`, { headers: API_KEY });
    expect(res.status).toBe(404);
  });

  test('every channel failed: undeliverable; each fallback tried in order', async () => {
    await start();
    // docs/api/smsbat/status.md, "Extended Response (with Fallback)" and "Undeliverable"
    await script([
      { to: TO, outcome: 'failed' },
      { to: TO, outcome: 'expired' },
      { to: TO, outcome: 'failed' },
    ]);
    const id = (
      await send([
        {
          from: 'Acme',
          to: TO,
          type: 'flashcall',
          text: '4821',
          fallbacks: [
            { from: 'Acme', to: TO, type: 'viber_trans', text: 'second' },
            { from: 'Acme', to: TO, type: 'sms', text: 'third' },
          ],
        },
      ])
    ).messages[0].messageId;
    await s.clock.advance(60_000);
    expect(await lookup(id)).toMatchObject({
      deliverystatus: 'undeliverable',
      cost: 0,
      fallbacks: [
        { type: 'viber_trans', status: 'permanenterror' },
        { type: 'sms', status: 'undeliverable' },
      ],
      extendedStatuses: {
        flashcall: 'undeliverable',
        viber: 'permanenterror',
        sms: 'undeliverable',
      },
      billAmount: 0,
    });
  });
});

describe('status webhooks: {messageId, deliverystatus, timestamp, cost}, one per change', () => {
  // docs/api/smsbat/status.md, "Webhook Alternative" (the body) and "Status Lifecycle"
  const hook = (messageId: string, deliverystatus: string, ms: number, cost = 0) => ({
    messageId,
    deliverystatus,
    timestamp: at(ms),
    cost,
  });

  test('an SMS: processing, then delivered', async () => {
    await start();
    const id = (await send([sms(TO, { customerMessageId: 'c-1' })])).messages[0].messageId;
    await s.clock.advance(499);
    expect(webhooks()).toEqual([]);
    await s.clock.advance(10_000);
    expect(webhooks()).toEqual([hook(id, 'processing', 500), hook(id, 'delivered', 1000, 0.05)]);
  });

  test('a Viber message is not reported read (the docs have no such word)', async () => {
    await start();
    const id = (await send([{ from: 'Acme', to: TO, type: 'viber_trans', text: 'hi' }])).messages[0]
      .messageId;
    await s.clock.advance(10_000);
    expect(webhooks()).toEqual([hook(id, 'processing', 500), hook(id, 'delivered', 1000, 0.05)]);
    // underneath, it was read as before
    expect(s.sandbox.messages.get(id)?.status).toBe('read');
  });

  test("a primary that fails with a fallback left reports nothing; the fallback's progress is the message's", async () => {
    await start();
    await script({ to: TO, outcome: 'failed' });
    const id = (
      await send([
        {
          from: 'Acme',
          to: TO,
          type: 'viber_trans',
          text: 'primary',
          fallbacks: [{ from: 'Acme', to: TO, type: 'sms', text: 'x'.repeat(161) }],
        },
      ])
    ).messages[0].messageId;
    await s.clock.advance(60_000);
    // the SMS fallback needs 2 parts: the message costs them
    expect(webhooks()).toEqual([hook(id, 'processing', 500), hook(id, 'delivered', 2000, 0.1)]);
  });

  test('every channel failed: undeliverable; expired: permanenterror', async () => {
    await start();
    await script([
      { to: TO, outcome: 'failed' },
      { to: TO, outcome: 'failed' },
    ]);
    const failed = (
      await send([
        {
          from: 'Acme',
          to: TO,
          type: 'viber_trans',
          text: 'primary',
          fallbacks: [{ from: 'Acme', to: TO, type: 'sms', text: 'fallback' }],
        },
      ])
    ).messages[0].messageId;
    await s.clock.advance(60_000);
    expect(webhooks()).toEqual([
      hook(failed, 'processing', 500),
      hook(failed, 'undeliverable', 2000),
    ]);

    s.receiver.received.length = 0;
    await script({ to: TO, outcome: 'expired' });
    const expired = (await send([sms(TO, { ttl: 30 })])).messages[0].messageId;
    await s.clock.advance(60_000);
    expect(webhooks()).toEqual([
      hook(expired, 'processing', 60_500),
      hook(expired, 'permanenterror', 90_000),
    ]);
  });

  test('a message whose deadline passes before it goes out: permanenterror alone', async () => {
    await start({ timings: { sentAfterMs: 5000, deliveredAfterMs: 6000 } });
    const id = (await send([sms(TO, { ttl: 1 })])).messages[0].messageId;
    await s.clock.advance(60_000);
    expect(webhooks()).toEqual([hook(id, 'permanenterror', 1000)]);
  });

  test('scheduled only while the message waits for its dtSend', async () => {
    await start();
    // docs/api/smsbat/status.md, "Scheduled" ("queued for sending")
    const id = (await send([sms(TO, { dtSend: at(60_000) })])).messages[0].messageId;
    await s.clock.advance(0);
    expect(webhooks()).toEqual([hook(id, 'scheduled', 0)]);
    await s.clock.advance(120_000);
    expect(webhooks()).toEqual([
      hook(id, 'scheduled', 0),
      hook(id, 'processing', 60_500),
      hook(id, 'delivered', 61_000, 0.05),
    ]);
  });

  test("a speech call's action webhooks are the same {from, to, mid, action} as in the compact dialect", async () => {
    await start();
    await script({ to: TO, keys: ['1'] });
    const base = s.receiver.url;
    const id = (
      await send([
        {
          from: 'Acme',
          to: TO,
          type: 'speechcall',
          menu: [
            {
              introUrl: 'https://cdn.example.com/main.mp3',
              dtmfActions: {
                d1: [
                  {
                    action: 'webhook',
                    url: `${base}/ivr/confirm`,
                    body: { node: 'confirm' },
                    headers: { 'X-Source': 's3' },
                  },
                  { action: 'hangup' },
                ],
              },
            },
          ],
        },
      ])
    ).messages[0].messageId;
    await s.clock.advance(60_000);
    const ivr = s.receiver.received.filter((r) => r.path === '/ivr/confirm');
    expect(ivr.map((r) => r.body)).toEqual([
      { from: 'Acme', to: TO, mid: id, action: { node: 'confirm' } },
    ]);
    expect(ivr[0]?.headers['x-source']).toBe('s3');
    expect(webhooks()).toEqual([hook(id, 'processing', 500), hook(id, 'delivered', 1000, 0.05)]);
  });
});

describe('incoming Viber messages', () => {
  // https://smsbat.com/help/api/smsbat/incoming-messages/: {idUuid, alphaName, phoneNumber,
  // text, dt}, the sender's number in digits without "+"
  test('reach the Viber callback URL in the documented shape', async () => {
    await start();
    const res = await post(
      '/_control/viber/inbound',
      { from: '+380936670003', text: 'Hello', to: 'AcmeBot' },
      {},
    );
    expect(res.status).toBe(202);
    const answer = await json(res);
    expect(answer.callback.state).toBe('delivered');
    const got = s.receiver.received.filter((r) => r.path === '/hooks/viber');
    expect(got.map((r) => r.body)).toEqual([
      {
        idUuid: answer.messageId,
        alphaName: 'AcmeBot',
        phoneNumber: '380936670003',
        text: 'Hello',
        dt: at(0),
      },
    ]);
    expect(answer.callback.body).toEqual(got[0]?.body);
  });

  test('written to no named account, alphaName is the sandbox business name; listed', async () => {
    await start();
    await post('/_control/viber/inbound', { from: TO, text: 'STOP' }, {});
    const got = s.receiver.received.filter((r) => r.path === '/hooks/viber');
    expect(got[0]?.body).toMatchObject({ alphaName: 'Sandbox', phoneNumber: '380501234567' });
    const list = await json(fetch(`${s.baseUrl}/_control/viber/inbound`));
    expect(list).toEqual([
      expect.objectContaining({ from: TO, to: 'Sandbox', text: 'STOP', timestamp: at(0) }),
    ]);
  });
});

describe('the control API in the docs dialect', () => {
  test('GET /_control names the dialect; docs is the default', async () => {
    const sandbox = createSandbox();
    expect(sandbox.dialect).toBe('docs');
    expect(await json(sandbox.app.request('/_control'))).toMatchObject({ dialect: 'docs' });
    await sandbox.close();
    await start();
    expect(await json(fetch(`${s.baseUrl}/_control`))).toMatchObject({ dialect: 'docs' });
  });

  test('listings show every message with its own id and, for a primary, what the provider reports', async () => {
    await start();
    await script({ to: TO, outcome: 'failed' });
    const id = (
      await send([
        {
          from: 'Acme',
          to: TO,
          type: 'viber_trans',
          text: 'primary',
          customerMessageId: 'p-1',
          fallbacks: [{ from: 'Acme', to: TO, type: 'sms', text: 'fallback' }],
        },
      ])
    ).messages[0].messageId;
    await s.clock.advance(10_000);
    const all = await json(fetch(`${s.baseUrl}/_control/messages`));
    expect(all).toHaveLength(2);
    const [primary, fallback] = all;
    expect(primary).toMatchObject({
      messageId: id,
      customerMessageId: 'p-1',
      type: 'viber_trans',
      status: 'failed',
      parentMessageId: null,
      reported: await lookup(id),
    });
    expect(fallback).toMatchObject({
      parentMessageId: id,
      fallbackIndex: 0,
      type: 'sms',
      status: 'delivered',
      reported: null,
    });
    expect(await json(fetch(`${s.baseUrl}/_control/messages/${id}`))).toEqual(primary);
    const filtered = await json(fetch(`${s.baseUrl}/_control/messages?type=viber_trans`));
    expect(filtered.map((m: { messageId: string }) => m.messageId)).toEqual([id]);
    // the webhooks are listed under the message they are about: the primary
    const callbacks = await json(fetch(`${s.baseUrl}/_control/callbacks?messageId=${id}`));
    expect(
      callbacks.map((c: { body: { deliverystatus: string } }) => c.body.deliverystatus),
    ).toEqual(['processing', 'delivered']);
  });
});
