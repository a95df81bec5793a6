/**
 * Contract tests: the provider clients of src/provider against the sandbox, over real HTTP,
 * for every endpoint, and a negative test for every documented error (seed 7: 400, 401,
 * 403, 429, 500; the per-message identifiers INVALID_RECIPIENT, INVALID_SENDER,
 * MESSAGE_TOO_LONG, INVALID_ENCODING).
 *
 * The clients run on the sandbox's manual clock: their sleeps (rate-limit spacing,
 * Retry-After, backoff) advance it, so nothing here waits in real time.
 */
import { afterEach, describe, expect, test } from 'vitest';
import { createBotsClient } from '../../src/provider/bots.ts';
import { createCascadeClient } from '../../src/provider/cascade.ts';
import { createChatClient } from '../../src/provider/chat.ts';
import {
  type ClientOptions,
  createProviderClient,
  type ProviderAuth,
} from '../../src/provider/client.ts';
import { ProviderError, type TransportEvent } from '../../src/provider/http.ts';
import type { Message } from '../../src/provider/message.ts';
import type { CreateSandboxOptions } from '../../src/sandbox/app.ts';
import { type Served, serveSandbox } from './helpers.ts';

const TO = '+380501234567';
let s: Served;
afterEach(async () => {
  await s?.close();
});

async function start(opts: CreateSandboxOptions = {}): Promise<Served> {
  s = await serveSandbox(opts);
  return s;
}

/** Client options on the sandbox's clock. */
function on(served: Served, extra: Partial<ClientOptions> = {}): ClientOptions {
  return {
    baseUrl: served.baseUrl,
    clock: { now: () => served.clock.now() },
    sleep: (ms) => served.clock.advance(Math.ceil(ms)),
    random: () => 0.5,
    ...extra,
  };
}

async function rejection(promise: Promise<unknown>): Promise<ProviderError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ProviderError);
  return error as ProviderError;
}

const sms = (extra: Partial<Message> = {}): Message =>
  ({ from: 'Acme', to: TO, type: 'sms', text: 'hello', ...extra }) as Message;

describe('messaging: POST /bat/messagelist, GET /bat/message/{id}', () => {
  test.each<[string, ProviderAuth]>([
    ['login and password', { login: 'sandbox', password: 'sandbox' }],
    ['X-Authorization-Key', { apiKey: 'sandbox-key' }],
    ['@ and the API key', { apiKey: 'sandbox-key', scheme: 'basic' }],
  ])('sends a messagelist with %s and follows the message to delivered', async (_, auth) => {
    await start();
    const client = createProviderClient({ ...on(s), auth });
    const [res] = await client.sendMessagelist([
      sms({ customerMessageId: 'k-1', text: 'x'.repeat(200) }),
    ]);
    expect(res).toMatchObject({ shape: 'sms', messagelistId: expect.any(Number) });
    expect(res?.messages).toEqual([
      {
        messageId: expect.any(String),
        status: 'accepted',
        accepted: true,
        customerMessageId: 'k-1',
        to: TO,
        parts: 2,
      },
    ]);
    const id = res!.messages[0]!.messageId!;
    expect((await client.getMessage(id)).status).toBe('accepted');
    await s.clock.advance(2000);
    const status = await client.getMessage(id);
    expect(status.status).toBe('delivered');
    expect(status.raw).toMatchObject({
      customerMessageId: 'k-1',
      messagelistId: res!.messagelistId,
    });
  });

  test("per-message rejections carry the seed's identifiers; the rest is accepted", async () => {
    await start();
    const client = createProviderClient({ ...on(s), auth: { apiKey: 'sandbox-key' } });
    const [res] = await client.sendMessagelist([
      sms({ to: '0501234567' }),
      sms({ from: 'Not An Alpha Name' }),
      sms({ text: 'x'.repeat(1531) }),
      sms({ text: 'broken \ud800' }),
      sms(),
    ]);
    expect(res?.messages.map((m) => (m.accepted ? 'accepted' : m.error?.code))).toEqual([
      'INVALID_RECIPIENT',
      'INVALID_SENDER',
      'MESSAGE_TOO_LONG',
      'INVALID_ENCODING',
      'accepted',
    ]);
  });

  test('a flash call without text gets its code in the synchronous response', async () => {
    await start();
    const client = createProviderClient({ ...on(s), auth: { apiKey: 'sandbox-key' } });
    const raw = await client.transport.request({
      method: 'POST',
      path: '/bat/messagelist',
      json: { messages: [{ from: 'Acme', to: TO, type: 'flashcall' }] },
    });
    expect((raw.json as { messages: { text: string }[] }).messages[0]?.text).toMatch(/^\d{4}$/);
  });

  test('401: wrong credentials', async () => {
    await start();
    for (const auth of [
      { login: 'sandbox', password: 'nope' },
      { apiKey: 'nope' },
      { apiKey: 'nope', scheme: 'basic' as const },
    ]) {
      const client = createProviderClient({ ...on(s), auth });
      const error = await rejection(client.sendMessagelist([sms()]));
      expect(error).toMatchObject({ kind: 'unauthorized', status: 401 });
      expect(error.body).toMatchObject({ error: 'UNAUTHORIZED', status: 401 });
    }
  });

  test('400: more than 5000 messages in one request', async () => {
    await start();
    const client = createProviderClient({ ...on(s), auth: { apiKey: 'sandbox-key' } });
    const error = await rejection(
      client.transport.request({
        method: 'POST',
        path: '/bat/messagelist',
        json: { messages: Array.from({ length: 5001 }, () => sms()) },
      }),
    );
    expect(error).toMatchObject({ kind: 'bad_request', status: 400 });
    expect(error.body).toMatchObject({ error: 'TOO_MANY_MESSAGES', status: 400 });
  });

  test('404: an unknown messageId', async () => {
    await start();
    const client = createProviderClient({ ...on(s), auth: { apiKey: 'sandbox-key' } });
    expect(await rejection(client.getMessage('no-such-id'))).toMatchObject({
      kind: 'not_found',
      status: 404,
    });
  });

  test('429: beyond the limit the client waits for Retry-After, then gets through', async () => {
    await start({
      rateLimits: { messaging: { perSecond: 1, burst: 2 }, data: { perSecond: 1, burst: 1 } },
    });
    const events: TransportEvent[] = [];
    // the client believes in the seed's limits; the sandbox here is stricter
    const client = createProviderClient({
      ...on(s),
      auth: { apiKey: 'sandbox-key' },
      onEvent: (e) => events.push(e),
    });
    for (let i = 0; i < 4; i++) await client.sendMessagelist([sms()]);
    const retries = events.filter((e) => e.type === 'retry');
    // burst 2, then 1/s on the manual clock: the 3rd and the 4th each wait one Retry-After
    expect(retries.length).toBe(2);
    expect(
      retries.every((e) => e.type === 'retry' && e.reason === 'rate_limited' && e.delayMs === 1000),
    ).toBe(true);
    expect(s.sandbox.messages.list()).toHaveLength(4);
  });

  test("a client on the seed's limits stays under the sandbox's: 200 lookups, no 429", async () => {
    await start();
    const events: TransportEvent[] = [];
    const client = createProviderClient({
      ...on(s),
      auth: { apiKey: 'sandbox-key' },
      onEvent: (e) => events.push(e),
    });
    for (let i = 0; i < 200; i++) await rejection(client.getMessage(`m-${i}`));
    expect(events.filter((e) => e.type === 'response' && e.status === 429)).toHaveLength(0);
    expect(events.filter((e) => e.type === 'response' && e.status === 404)).toHaveLength(200);
  });

  test('429: the seed body and Retry-After reach the caller when retries are off', async () => {
    await start({ rateLimits: { data: { perSecond: 1, burst: 1 } } });
    const client = createProviderClient({
      ...on(s),
      auth: { apiKey: 'sandbox-key' },
      retry: { maxRateLimitRetries: 0 },
    });
    await rejection(client.getMessage('x')); // 404, uses the one token
    const error = await rejection(client.getMessage('x'));
    expect(error).toMatchObject({ kind: 'rate_limited', status: 429 });
    expect(error.body).toEqual({ error: 'RATE_LIMITED', message: expect.any(String), status: 429 });
  });

  test('500: a server error is retried by the client; past its retries it surfaces', async () => {
    await start();
    await fetch(`${s.baseUrl}/_control/faults`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ path: '/bat/messagelist', status: 500, count: 1 }),
    });
    const client = createProviderClient({ ...on(s), auth: { apiKey: 'sandbox-key' } });
    const [res] = await client.sendMessagelist([sms()]);
    expect(res?.messages[0]?.accepted).toBe(true);

    await fetch(`${s.baseUrl}/_control/faults`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ path: '/bat/messagelist', status: 503, count: 10 }),
    });
    const error = await rejection(client.sendMessagelist([sms()]));
    expect(error).toMatchObject({ kind: 'server', status: 503, attempts: 4 });
    expect(s.sandbox.messages.list()).toHaveLength(1);
  });
});

describe('cascade: both endpoints, the three auth headers', () => {
  test.each([
    ['X-Authorization-Key', { apiKey: 'sandbox-key' }],
    ['X-Viber-Auth-Token', { viberBotToken: 'vb-token' }],
    ['X-Tg-Bot-Key', { tgBotKey: '123:abc' }],
  ] as const)('sends with %s and gets messageId and trackinId', async (_, auth) => {
    await start();
    const client = createCascadeClient({ ...on(s), auth });
    const results = await client.send([
      { recipient: TO, text: 'Hi %name=1%', variables: [{ id: 1, value: 'Ann' }] },
    ]);
    expect(results).toEqual([{ messageId: expect.any(String), trackingId: expect.any(String) }]);
    expect(s.sandbox.cascade.get(results[0]!.messageId)).toMatchObject({
      text: 'Hi Ann',
      route: 'general',
    });
    const tg = await client.send([{ recipient: TO, text: 'x' }], { endpoint: 'tg-viber' });
    expect(s.sandbox.cascade.get(tg[0]!.messageId)?.route).toBe('tg-viber');
  });

  test('401 for a wrong key; 400 for a body the sandbox refuses', async () => {
    await start({ credentials: { tgBotKeys: ['good'] } });
    const wrong = createCascadeClient({ ...on(s), auth: { apiKey: 'nope' } });
    expect(await rejection(wrong.send([{ recipient: TO, text: 'x' }]))).toMatchObject({
      kind: 'unauthorized',
      status: 401,
    });
    const unknownBot = createCascadeClient({ ...on(s), auth: { tgBotKey: 'bad' } });
    expect(await rejection(unknownBot.send([{ recipient: TO, text: 'x' }]))).toMatchObject({
      status: 401,
    });
    // the cascade client checks placeholders itself, so the bad body goes through its transport
    const { transport } = createProviderClient({ ...on(s), auth: { apiKey: 'sandbox-key' } });
    const error = await rejection(
      transport.request({
        method: 'POST',
        path: '/api/CascadeMessage/send_message/async',
        json: { messages: [{ recipient: TO, text: 'Hi %name=4%' }] },
      }),
    );
    expect(error).toMatchObject({ kind: 'bad_request', status: 400 });
  });
});

describe('bot users', () => {
  test('Telegram and Viber users are uploaded per bot token', async () => {
    await start();
    const bots = createBotsClient(on(s));
    expect(
      await bots.uploadTelegramUser('123:abc', { id: 1, userName: 'ann', phone: TO }),
    ).toMatchObject({ status: 'ok', created: true });
    expect(await bots.uploadViberUser('vb-1', { id: 'u1', name: 'Vic' })).toMatchObject({
      status: 'ok',
      created: true,
    });
    expect(s.sandbox.bots.users().map((u) => [u.kind, u.token, u.id])).toEqual([
      ['tg', '123:abc', '1'],
      ['viber', 'vb-1', 'u1'],
    ]);
  });

  test('401 for an unknown bot token', async () => {
    await start({ credentials: { viberBotTokens: ['vb-1'] } });
    const bots = createBotsClient(on(s));
    expect(await rejection(bots.uploadViberUser('other', { id: 'u1', name: 'Vic' }))).toMatchObject(
      { kind: 'unauthorized', status: 401 },
    );
  });
});

describe('chat operator API', () => {
  test('every endpoint, end to end', async () => {
    await start();
    const chat = createChatClient({
      ...on(s),
      baseUrl: `${s.baseUrl}/chat`,
      auth: { login: 'sandbox', password: 'sandbox' },
    });
    expect((await chat.companyToken()).split('.')).toHaveLength(3);
    expect(await chat.getOrganization()).toEqual([
      { id: 1, name: 'Sandbox organization' },
      { id: 2, name: 'Sandbox second organization' },
    ]);
    const created = await chat.synchronizeOperators([{ organizationId: 1, name: 'Olga' }]);
    expect(created).toEqual([{ id: 1, name: 'Olga', status: 0 }]);
    expect(await chat.listOperators(1)).toEqual([
      { id: 1, name: 'Olga', status: 0, organization: { id: 1, name: 'Sandbox organization' } },
    ]);
    const expiresAt = new Date(s.clock.now() + 3600_000);
    const token = await chat.getOperatorToken(1, expiresAt);
    expect(await chat.validateToken(token)).toEqual({
      isValid: true,
      operatorId: 1,
      clientId: expect.any(Number),
      expiresAt: expiresAt.toISOString(),
      error: null,
    });
    await chat.setOperatorStatus(1, 1);
    await chat.setOperatorStatus(1, 0);
    await chat.setOperatorStatus(1, 2);
    expect((await chat.listOperators(1))[0]?.status).toBe(2);
    expect((await chat.validateToken(token)).isValid).toBe(false);
  });

  test('the company token also works as X-Authorization-Key', async () => {
    await start();
    const chat = createChatClient({
      ...on(s),
      baseUrl: `${s.baseUrl}/chat`,
      auth: { login: 'sandbox', password: 'sandbox' },
      tokenHeader: 'x-authorization-key',
    });
    expect(await chat.synchronizeOperators([{ organizationId: 2, name: 'P' }])).toHaveLength(1);
  });

  test('401: a wrong login, and a token the sandbox did not sign', async () => {
    await start();
    const bad = createChatClient({
      ...on(s),
      baseUrl: `${s.baseUrl}/chat`,
      auth: { login: 'sandbox', password: 'nope' },
    });
    expect(await rejection(bad.companyToken())).toMatchObject({
      kind: 'unauthorized',
      status: 401,
    });
    const forged = createChatClient({
      ...on(s),
      baseUrl: `${s.baseUrl}/chat`,
      auth: { companyToken: 'eyJhbGciOiJIUzI1NiJ9.e30.x' },
    });
    expect(await rejection(forged.getOrganization())).toMatchObject({
      kind: 'unauthorized',
      status: 401,
    });
  });

  test('403: an operator token where a company token is needed', async () => {
    await start();
    const chat = createChatClient({
      ...on(s),
      baseUrl: `${s.baseUrl}/chat`,
      auth: { login: 'sandbox', password: 'sandbox' },
    });
    await chat.synchronizeOperators([{ organizationId: 1, name: 'Olga' }]);
    const operatorToken = await chat.getOperatorToken(1, new Date(s.clock.now() + 60_000));
    const asOperator = createChatClient({
      ...on(s),
      baseUrl: `${s.baseUrl}/chat`,
      auth: { companyToken: operatorToken },
    });
    expect(await rejection(asOperator.listOperators(1))).toMatchObject({
      kind: 'forbidden',
      status: 403,
    });
    expect(
      await rejection(asOperator.synchronizeOperators([{ organizationId: 1, name: 'x' }])),
    ).toMatchObject({ kind: 'forbidden', status: 403 });
  });

  test("400: expiresAt more than 24 hours ahead by the sandbox's clock; a move out of Deleted", async () => {
    await start();
    // a client whose clock runs an hour ahead of the sandbox's passes its own 24-hour check
    const ahead = createChatClient({
      ...on(s),
      clock: { now: () => s.clock.now() + 3600_000 },
      baseUrl: `${s.baseUrl}/chat`,
      auth: { login: 'sandbox', password: 'sandbox' },
    });
    await ahead.synchronizeOperators([{ organizationId: 1, name: 'Olga' }]);
    const error = await rejection(
      ahead.getOperatorToken(1, new Date(s.clock.now() + 24.5 * 3600_000)),
    );
    expect(error).toMatchObject({ kind: 'bad_request', status: 400 });
    expect(error.body).toMatchObject({ error: 'INVALID_EXPIRES_AT' });
    await ahead.setOperatorStatus(1, 2);
    const moved = await rejection(ahead.setOperatorStatus(1, 0));
    expect(moved).toMatchObject({ kind: 'bad_request', status: 400 });
    expect(moved.body).toMatchObject({
      error: 'INVALID_STATUS_MOVE',
      message: expect.stringContaining('Deleted is final'),
    });
  });

  test('404: an unknown operator', async () => {
    await start();
    const chat = createChatClient({
      ...on(s),
      baseUrl: `${s.baseUrl}/chat`,
      auth: { login: 'sandbox', password: 'sandbox' },
    });
    expect(await rejection(chat.setOperatorStatus(42, 1))).toMatchObject({
      kind: 'not_found',
      status: 404,
    });
  });
});
