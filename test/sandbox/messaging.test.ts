import { describe, expect, test } from 'vitest';
import { createSandbox } from '../../src/sandbox/app.ts';
import { createManualClock } from '../../src/sandbox/clock.ts';
import { API_KEY, basic, json, post, sms } from './helpers.ts';

const TO = '+380501234567';

function make() {
  const clock = createManualClock(Date.parse('2030-01-01T00:00:00Z'));
  return { clock, sandbox: createSandbox({ dialect: 'compact', clock, seed: 1 }) };
}

describe('POST /bat/messagelist', () => {
  test('401 without credentials, or with wrong ones, in the seed body', async () => {
    const { sandbox } = make();
    for (const headers of [{}, basic('sandbox', 'wrong'), { 'X-Authorization-Key': 'wrong' }]) {
      const res = await post(sandbox.app, '/bat/messagelist', { messages: [sms(TO)] }, headers);
      expect(res.status).toBe(401);
      expect(await json(res)).toMatchObject({ error: 'UNAUTHORIZED', status: 401 });
    }
    expect(sandbox.messages.list()).toHaveLength(0);
  });

  test.each([
    ['login and password', basic('sandbox', 'sandbox')],
    ['X-Authorization-Key', API_KEY],
    ['@ and the API key', basic('@', 'sandbox-key')],
  ])('accepts %s', async (_, headers) => {
    const { sandbox } = make();
    const res = await post(sandbox.app, '/bat/messagelist', { messages: [sms(TO)] }, headers);
    expect(res.status).toBe(200);
  });

  test('answers messagelistId and, per message, messageId, accepted and parts', async () => {
    const { sandbox } = make();
    const long = 'x'.repeat(161); // GSM 7-bit: two parts
    const res = await post(sandbox.app, '/bat/messagelist', {
      messages: [sms(TO, { customerMessageId: 'a-1' }), sms(TO, { text: long })],
    });
    const body = await json(res);
    expect(body.messagelistId).toEqual(expect.any(Number));
    expect(body.messages).toEqual([
      {
        messageId: expect.any(String),
        status: 'accepted',
        parts: 1,
        to: TO,
        customerMessageId: 'a-1',
      },
      { messageId: expect.any(String), status: 'accepted', parts: 2, to: TO },
    ]);
    const second = await post(sandbox.app, '/bat/messagelist', { messages: [sms(TO)] });
    expect((await json(second)).messagelistId).toBe(body.messagelistId + 1);
  });

  test("rejects a message with the seed's identifiers and accepts the rest", async () => {
    const { sandbox } = make();
    const res = await post(sandbox.app, '/bat/messagelist', {
      messages: [
        sms('0501234567'),
        sms(TO, { from: 'Acme Shop Ltd' }),
        sms(TO, { text: 'x'.repeat(153 * 10 + 1) }),
        sms(TO, { text: 'bad \ud800 surrogate' }),
        sms(TO),
        { from: 'Acme', to: TO, type: 'pigeon' },
      ],
    });
    expect(res.status).toBe(200);
    const { messages } = await json(res);
    expect(
      messages.map((m: { status: string; error?: { code: string } }) => m.error?.code ?? m.status),
    ).toEqual([
      'INVALID_RECIPIENT',
      'INVALID_SENDER',
      'MESSAGE_TOO_LONG',
      'INVALID_ENCODING',
      'accepted',
      'INVALID_MESSAGE',
    ]);
    expect(messages[0].error.details[0]).toMatchObject({
      path: 'messages[0].to',
      code: 'INVALID_RECIPIENT',
    });
    expect(messages[0].messageId).toBeUndefined();
    expect(sandbox.messages.list()).toHaveLength(1);
  });

  test('rejects a customerMessageId that was already used, naming the message holding it', async () => {
    const { sandbox } = make();
    const first = await json(
      post(sandbox.app, '/bat/messagelist', { messages: [sms(TO, { customerMessageId: 'dup' })] }),
    );
    const again = await json(
      post(sandbox.app, '/bat/messagelist', {
        messages: [
          sms(TO, { customerMessageId: 'dup' }),
          sms(TO, { customerMessageId: 'fresh' }),
          sms(TO, { customerMessageId: 'fresh' }),
        ],
      }),
    );
    expect(again.messages[0]).toMatchObject({
      status: 'rejected',
      error: { code: 'DUPLICATE_CUSTOMER_MESSAGE_ID' },
      existingMessageId: first.messages[0].messageId,
    });
    expect(again.messages[1].status).toBe('accepted');
    expect(again.messages[2].error.code).toBe('DUPLICATE_CUSTOMER_MESSAGE_ID');
  });

  test('a flash call with no text gets a random code, returned at messages/text', async () => {
    const { sandbox } = make();
    const res = await post(sandbox.app, '/bat/messagelist', {
      messages: [
        { from: 'Acme', to: TO, type: 'flashcall' },
        { from: 'Acme', to: TO, type: 'flashcall', text: '1234' },
      ],
    });
    const { messages } = await json(res);
    expect(messages[0].text).toMatch(/^\d{4}$/);
    expect(messages[1].text).toBeUndefined();
    expect(sandbox.messages.get(messages[0].messageId)?.text).toBe(messages[0].text);
  });

  test('400 for more than 5000 messages, none, no array, and a body that is not JSON', async () => {
    const { sandbox } = make();
    const tooMany = await post(sandbox.app, '/bat/messagelist', {
      messages: Array.from({ length: 5001 }, () => sms(TO)),
    });
    expect(tooMany.status).toBe(400);
    expect(await json(tooMany)).toMatchObject({ error: 'TOO_MANY_MESSAGES', status: 400 });
    for (const body of [{ messages: [] }, { messages: 'x' }, {}, '{not json']) {
      const res = await post(sandbox.app, '/bat/messagelist', body);
      expect(res.status).toBe(400);
      expect((await json(res)).status).toBe(400);
    }
    const wrongType = await sandbox.app.request('/bat/messagelist', {
      method: 'POST',
      headers: { ...API_KEY, 'content-type': 'text/plain' },
      body: JSON.stringify({ messages: [sms(TO)] }),
    });
    expect(wrongType.status).toBe(400);
    expect(sandbox.messages.list()).toHaveLength(0);
  });

  test('exactly 5000 messages are accepted in one request', async () => {
    const { sandbox } = make();
    const res = await post(sandbox.app, '/bat/messagelist', {
      messages: Array.from({ length: 5000 }, () => sms(TO)),
    });
    expect(res.status).toBe(200);
    expect((await json(res)).messages).toHaveLength(5000);
  });
});

describe('GET /bat/message/{id}', () => {
  test('answers the status and its history as time passes; 404 for an unknown id; 401 without auth', async () => {
    const { sandbox, clock } = make();
    const sent = await json(
      post(sandbox.app, '/bat/messagelist', { messages: [sms(TO, { customerMessageId: 'g-1' })] }),
    );
    const id = sent.messages[0].messageId;
    const read = async () => json(sandbox.app.request(`/bat/message/${id}`, { headers: API_KEY }));
    expect(await read()).toMatchObject({
      messageId: id,
      status: 'accepted',
      customerMessageId: 'g-1',
      parts: 1,
    });
    await clock.advance(5000);
    const after = await read();
    expect(after.status).toBe('delivered');
    expect(after.history.map((h: { status: string }) => h.status)).toEqual([
      'accepted',
      'sent',
      'delivered',
    ]);

    const missing = await sandbox.app.request('/bat/message/nope', { headers: API_KEY });
    expect(missing.status).toBe(404);
    expect(await json(missing)).toMatchObject({ error: 'NOT_FOUND', status: 404 });
    expect((await sandbox.app.request(`/bat/message/${id}`)).status).toBe(401);
  });
});

describe('rate limits (seed 8)', () => {
  test('messaging: 150 requests pass at once, the next gets 429 with Retry-After, time refills', async () => {
    const { sandbox, clock } = make();
    const statuses: number[] = [];
    for (let i = 0; i < 151; i++) {
      statuses.push((await post(sandbox.app, '/bat/messagelist', { messages: [sms(TO)] })).status);
    }
    expect(statuses.filter((s) => s === 200)).toHaveLength(150);
    const limited = await post(sandbox.app, '/bat/messagelist', { messages: [sms(TO)] });
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('1');
    const body = await json(limited);
    expect(body).toEqual({ error: expect.any(String), message: expect.any(String), status: 429 });
    await clock.advance(20);
    expect((await post(sandbox.app, '/bat/messagelist', { messages: [sms(TO)] })).status).toBe(200);
  });

  test('data: 75 lookups pass at once, the next gets 429; messaging is counted apart', async () => {
    const { sandbox } = make();
    const statuses: number[] = [];
    for (let i = 0; i < 76; i++) {
      statuses.push((await sandbox.app.request('/bat/message/x', { headers: API_KEY })).status);
    }
    expect(statuses.filter((s) => s === 404)).toHaveLength(75);
    expect(statuses[75]).toBe(429);
    expect((await post(sandbox.app, '/bat/messagelist', { messages: [sms(TO)] })).status).toBe(200);
  });
});

test('unknown paths answer 404 in the seed body', async () => {
  const { sandbox } = make();
  const res = await sandbox.app.request('/bat/nothing');
  expect(res.status).toBe(404);
  expect(await json(res)).toMatchObject({ error: 'NOT_FOUND', status: 404 });
});
