import { Hono } from 'hono';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createProviderClient,
  MessagelistError,
  messagingAuthHeaders,
} from '../../src/provider/client.ts';
import { ProviderError, parseRetryAfter } from '../../src/provider/http.ts';
import { createRateLimiter, realSleep } from '../../src/provider/limiter.ts';
import type { Message } from '../../src/provider/message.ts';
import { type LocalServer, listen } from './helpers.ts';

const servers: LocalServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});
async function start(app: Hono): Promise<string> {
  const s = await listen(app);
  servers.push(s);
  return s.url;
}

const sms = (i: number): Message => ({
  from: 'Acme',
  to: '+380501234567',
  type: 'sms',
  text: `message ${i}`,
  customerMessageId: `c-${i}`,
});
const many = (n: number, from = 0) => Array.from({ length: n }, (_, i) => sms(from + i));

/** A provider that answers the SMS form of 2.6 and records what it got. */
function smsProvider() {
  const seen: Array<{ auth: string | undefined; key: string | undefined; count: number }> = [];
  let nextList = 1;
  const app = new Hono();
  app.post('/bat/messagelist', async (c) => {
    const body = (await c.req.json()) as { messages: Message[] };
    seen.push({
      auth: c.req.header('authorization'),
      key: c.req.header('x-authorization-key'),
      count: body.messages.length,
    });
    return c.json({
      messagelistId: nextList++,
      messages: body.messages.map((m, i) => ({
        messageId: `m-${m.customerMessageId ?? i}`,
        status: 'accepted',
        parts: 1,
        customerMessageId: m.customerMessageId,
        to: m.to,
      })),
    });
  });
  return { app, seen };
}

/** Records sleeps instead of waiting, so retry timing is asserted without real delays. */
function fakeTime() {
  let now = 1_000_000;
  const sleeps: number[] = [];
  return {
    sleeps,
    clock: { now: () => now },
    sleep: async (ms: number) => {
      sleeps.push(ms);
      now += ms;
    },
  };
}

describe('auth', () => {
  it('sends each of the three methods of seed 5', async () => {
    const p = smsProvider();
    const baseUrl = await start(p.app);
    await createProviderClient({
      baseUrl,
      auth: { login: 'acme', password: 'pa:ss' },
    }).sendMessagelist(many(1));
    await createProviderClient({ baseUrl, auth: { apiKey: 'key-1' } }).sendMessagelist(many(1));
    await createProviderClient({
      baseUrl,
      auth: { apiKey: 'key-2', scheme: 'basic' },
    }).sendMessagelist(many(1));
    const decode = (h: string | undefined) =>
      Buffer.from((h ?? '').replace(/^Basic /, ''), 'base64').toString();
    expect(decode(p.seen[0]?.auth)).toBe('acme:pa:ss');
    expect(p.seen[0]?.key).toBeUndefined();
    expect(p.seen[1]).toMatchObject({ auth: undefined, key: 'key-1' });
    expect(decode(p.seen[2]?.auth)).toBe('@:key-2');
  });

  it('builds the headers without a request', () => {
    expect(messagingAuthHeaders({ apiKey: 'k', scheme: 'header' })).toEqual({
      'X-Authorization-Key': 'k',
    });
    expect(messagingAuthHeaders({ login: 'a', password: 'b' }).Authorization).toBe(
      `Basic ${Buffer.from('a:b').toString('base64')}`,
    );
  });
});

describe('messagelists', () => {
  it('chunks to at most 5000 messages, one response per chunk, in order', async () => {
    const p = smsProvider();
    const client = createProviderClient({ baseUrl: await start(p.app), auth: { apiKey: 'k' } });
    const responses = await client.sendMessagelist(many(12_001));
    expect(p.seen.map((s) => s.count).sort((a, b) => b - a)).toEqual([5000, 5000, 2001]);
    expect(responses.map((r) => r.messages.length)).toEqual([5000, 5000, 2001]);
    expect(responses[2]?.messages.at(-1)).toMatchObject({
      messageId: 'm-c-12000',
      accepted: true,
      parts: 1,
    });
    expect(new Set(responses.map((r) => r.messagelistId)).size).toBe(3);
    expect(await client.sendMessagelist([])).toEqual([]);
  });

  it('parses the generic response form too', async () => {
    const app = new Hono();
    app.post('/bat/messagelist', (c) =>
      c.json({ messages: [{ messageId: 'g1', status: 'sent', recipient: '+380501234567' }] }),
    );
    const client = createProviderClient({ baseUrl: await start(app), auth: { apiKey: 'k' } });
    expect(await client.sendMessagelist(many(1))).toEqual([
      {
        shape: 'generic',
        messages: [{ messageId: 'g1', status: 'sent', accepted: true, to: '+380501234567' }],
      },
    ]);
  });

  it('keeps a base path such as /sandbox', async () => {
    const p = smsProvider();
    const app = new Hono().route('/sandbox', p.app);
    const client = createProviderClient({
      baseUrl: `${await start(app)}/sandbox/`,
      auth: { apiKey: 'k' },
    });
    await client.sendMessagelist(many(2));
    expect(p.seen).toHaveLength(1);
  });

  it('an unrecognised 200 body is an invalid_response, not retried', async () => {
    let calls = 0;
    const app = new Hono();
    app.post('/bat/messagelist', (c) => {
      calls++;
      return c.text('OK');
    });
    const client = createProviderClient({ baseUrl: await start(app), auth: { apiKey: 'k' } });
    await expect(client.sendMessagelist(many(1))).rejects.toMatchObject({
      kind: 'invalid_response',
    });
    expect(calls).toBe(1);
  });

  it('says which chunks the provider took when one fails', async () => {
    const app = new Hono();
    app.post('/bat/messagelist', async (c) => {
      const body = (await c.req.json()) as { messages: Message[] };
      if (body.messages[0]?.customerMessageId === 'c-5000') {
        return c.json({ error: 'bad_request', message: 'broken list', status: 400 }, 400);
      }
      return c.json({
        messagelistId: 1,
        messages: body.messages.map(() => ({ messageId: 'x', status: 'accepted' })),
      });
    });
    const client = createProviderClient({ baseUrl: await start(app), auth: { apiKey: 'k' } });
    const err = await client.sendMessagelist(many(10_001)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MessagelistError);
    const results = (err as MessagelistError).results;
    expect(
      results.map((r) => [r.messages.length, r.response !== undefined, r.error?.kind]),
    ).toEqual([
      [5000, true, undefined],
      [5000, false, 'bad_request'],
      [1, true, undefined],
    ]);
    expect((err as MessagelistError).message).toContain('broken list');
  });

  /** A client of the sandbox that records each messagelist body, and 5001 stored SMS. */
  async function recordingClient() {
    const bodies: string[] = [];
    const p = smsProvider();
    const app = new Hono();
    app.use('/bat/messagelist', async (c, next) => {
      bodies.push(await c.req.raw.clone().text());
      await next();
    });
    app.route('/', p.app);
    const client = createProviderClient({ baseUrl: await start(app), auth: { apiKey: 'k' } });
    // as Postgres writes jsonb: spaces after the colons, keys in its own order
    const stored = many(5001).map(
      (m) =>
        `{"to": "${m.to}", "from": "${m.from}", "text": "${m.text}", "type": "sms", "customerMessageId": "${m.customerMessageId}"}`,
    );
    return { bodies, client, stored };
  }

  it('sends messages serialised already as they are, chunked, with the same answers', async () => {
    const { bodies, client, stored } = await recordingClient();
    const responses = await client.sendMessagelistJson(stored);
    expect(bodies.sort((a, b) => b.length - a.length)).toEqual([
      `{"messages":[${stored.slice(0, 5000).join(',')}]}`,
      `{"messages":[${stored[5000]}]}`,
    ]);
    expect(responses.map((r) => r.messages.length)).toEqual([5000, 1]);
    expect(responses[1]?.messages[0]).toMatchObject({ messageId: 'm-c-5000', accepted: true });
    const [same] = await client.sendMessagelist([sms(5000)]);
    expect(responses[1]?.messages).toEqual(same?.messages);
    expect(await client.sendMessagelistJson([])).toEqual([]);
  });

  it('sends messages joined as one text in one request, or split when they need more', async () => {
    const { bodies, client, stored } = await recordingClient();
    const list = stored.slice(0, 5000).join(',');
    const [one, ...none] = await client.sendMessagelistText(list, 5000);
    expect(none).toEqual([]);
    expect(bodies).toEqual([`{"messages":[${list}]}`]);
    expect(one?.messages.length).toBe(5000);
    bodies.length = 0;
    const split = await client.sendMessagelistText(stored.join(','), 5001);
    expect(split.map((r) => r.messages.length)).toEqual([5000, 1]);
    expect(bodies.length).toBe(2);
    expect(await client.sendMessagelistText('', 0)).toEqual([]);
  });

  it('a failed send of joined messages throws the provider error', async () => {
    const app = new Hono();
    app.post('/bat/messagelist', (c) =>
      c.json({ error: 'bad_request', message: 'broken list', status: 400 }, 400),
    );
    const client = createProviderClient({ baseUrl: await start(app), auth: { apiKey: 'k' } });
    await expect(
      client.sendMessagelistText([sms(1), sms(2)].map((m) => JSON.stringify(m)).join(','), 2),
    ).rejects.toMatchObject({ name: 'ProviderError', kind: 'bad_request' });
  });

  it('a failed chunk of serialised messages names the messages, parsed', async () => {
    const app = new Hono();
    app.post('/bat/messagelist', (c) =>
      c.json({ error: 'bad_request', message: 'broken list', status: 400 }, 400),
    );
    const client = createProviderClient({ baseUrl: await start(app), auth: { apiKey: 'k' } });
    const err = await client
      .sendMessagelistJson(many(5001).map((m) => JSON.stringify(m)))
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MessagelistError);
    const results = (err as MessagelistError).results;
    expect(results.map((r) => [r.messages.length, r.error?.kind])).toEqual([
      [5000, 'bad_request'],
      [1, 'bad_request'],
    ]);
    expect(results[1]?.messages).toEqual([sms(5000)]);
    // one chunk: the provider's own error, as sendMessagelist throws it
    await expect(client.sendMessagelistJson([JSON.stringify(sms(1))])).rejects.toMatchObject({
      name: 'ProviderError',
      kind: 'bad_request',
    });
  });
});

describe('status lookup', () => {
  it('GETs /bat/message/{id} and reads the status', async () => {
    const app = new Hono();
    app.get('/bat/message/:id', (c) =>
      c.req.param('id') === 'm 1'
        ? c.json({ messageId: 'm 1', status: 'DELIVERED' })
        : c.json({}, 404),
    );
    const client = createProviderClient({ baseUrl: await start(app), auth: { apiKey: 'k' } });
    expect(await client.getMessage('m 1')).toEqual({
      messageId: 'm 1',
      status: 'delivered',
      raw: { messageId: 'm 1', status: 'DELIVERED' },
    });
    await expect(client.getMessage('nope')).rejects.toMatchObject({
      kind: 'not_found',
      status: 404,
    });
  });
});

describe('errors and retries', () => {
  it.each([
    [400, 'bad_request'],
    [401, 'unauthorized'],
    [403, 'forbidden'],
    [422, 'bad_request'],
  ] as const)('HTTP %i is a final %s error, not retried', async (status, kind) => {
    let calls = 0;
    const app = new Hono();
    app.post('/bat/messagelist', (c) => {
      calls++;
      return c.json({ error: 'nope', message: 'refused' }, status);
    });
    const client = createProviderClient({ baseUrl: await start(app), auth: { apiKey: 'k' } });
    const err = await client.sendMessagelist(many(1)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProviderError);
    expect(err).toMatchObject({
      kind,
      status,
      attempts: 1,
      body: { error: 'nope', message: 'refused' },
    });
    expect(calls).toBe(1);
  });

  it('retries 5xx a bounded number of times with growing jittered delays', async () => {
    let calls = 0;
    const app = new Hono();
    app.post('/bat/messagelist', (c) => {
      calls++;
      return c.text('down', 503);
    });
    const t = fakeTime();
    const client = createProviderClient({
      baseUrl: await start(app),
      auth: { apiKey: 'k' },
      ...t,
      random: () => 0.5,
      retry: { maxRetries: 3, baseDelayMs: 200 },
    });
    await expect(client.sendMessagelist(many(1))).rejects.toMatchObject({
      kind: 'server',
      status: 503,
      attempts: 4,
    });
    expect(calls).toBe(4);
    expect(t.sleeps).toEqual([150, 300, 600]);
  });

  it('recovers when the 5xx passes', async () => {
    let calls = 0;
    const p = smsProvider();
    const app = new Hono();
    app.post('/bat/messagelist', (c, next) => (++calls <= 2 ? c.text('oops', 500) : next()));
    app.route('/', p.app);
    const t = fakeTime();
    const client = createProviderClient({ baseUrl: await start(app), auth: { apiKey: 'k' }, ...t });
    const [res] = await client.sendMessagelist(many(3));
    expect(res?.messages).toHaveLength(3);
    expect(calls).toBe(3);
  });

  it('retries network errors, then gives up with kind network', async () => {
    const closed = await listen(new Hono());
    await closed.close(); // nothing listens on that port any more
    const t = fakeTime();
    const client = createProviderClient({
      baseUrl: closed.url,
      auth: { apiKey: 'k' },
      ...t,
      retry: { maxRetries: 2 },
    });
    await expect(client.getMessage('m1')).rejects.toMatchObject({ kind: 'network', attempts: 3 });
    expect(t.sleeps).toHaveLength(2);
  });

  it('times out a hung request as a network error', async () => {
    const app = new Hono();
    app.get('/bat/message/:id', () => new Promise<Response>(() => {}));
    const client = createProviderClient({
      baseUrl: await start(app),
      auth: { apiKey: 'k' },
      timeoutMs: 100,
      retry: { maxRetries: 0 },
    });
    await expect(client.getMessage('m1')).rejects.toMatchObject({
      kind: 'network',
      message: /timed out/,
    });
  });

  it('honours Retry-After in seconds and as a date on 429', async () => {
    let calls = 0;
    const p = smsProvider();
    const app = new Hono();
    const t = fakeTime();
    app.post('/bat/messagelist', (c, next) => {
      calls++;
      if (calls === 1)
        return c.json({ error: 'Too Many Requests', message: 'slow down', status: 429 }, 429, {
          'Retry-After': '2',
        });
      if (calls === 2) {
        const at = new Date(t.clock.now() + 5000).toUTCString();
        return c.json({ error: 'Too Many Requests', message: 'slow down', status: 429 }, 429, {
          'Retry-After': at,
        });
      }
      return next();
    });
    app.route('/', p.app);
    const client = createProviderClient({ baseUrl: await start(app), auth: { apiKey: 'k' }, ...t });
    await client.sendMessagelist(many(1));
    // 2 s, then the date 5 s ahead (HTTP dates have whole seconds); the limiter held back too
    expect(t.sleeps[0]).toBe(2000);
    // the fake clock stands on a whole second, so the date is exactly 5 s ahead
    expect(t.sleeps.slice(1).reduce((a, b) => a + b, 0)).toBe(5000);
    expect(calls).toBe(3);
  });

  it('backs off exponentially with jitter on 429 without Retry-After, and gives up when bounded', async () => {
    const app = new Hono();
    app.post('/bat/messagelist', (c) =>
      c.json({ error: 'Too Many Requests', message: 'x', status: 429 }, 429),
    );
    const t = fakeTime();
    const random = [0, 0.99, 0.5];
    let r = 0;
    const client = createProviderClient({
      baseUrl: await start(app),
      auth: { apiKey: 'k' },
      ...t,
      random: () => random[r++ % 3] ?? 0,
      retry: { maxRateLimitRetries: 3, baseDelayMs: 100 },
    });
    await expect(client.sendMessagelist(many(1))).rejects.toMatchObject({
      kind: 'rate_limited',
      status: 429,
      attempts: 4,
    });
    expect(t.sleeps).toEqual([50, 200 / 2 + 0.99 * 100, 400 / 2 + 0.5 * 200]);
  });

  it('with maxRateLimitWaitMs waits a short Retry-After, gives a long one up, and sends nothing while held', async () => {
    let calls = 0;
    const p = smsProvider();
    const app = new Hono();
    app.post('/bat/messagelist', (c, next) => {
      calls++;
      const wait = calls === 1 ? '1' : calls === 2 ? '60' : undefined;
      if (wait === undefined) return next();
      return c.json({ error: 'Too Many Requests', message: 'slow down', status: 429 }, 429, {
        'Retry-After': wait,
      });
    });
    app.route('/', p.app);
    const t = fakeTime();
    const client = createProviderClient({ baseUrl: await start(app), auth: { apiKey: 'k' }, ...t });
    const budget = { maxRateLimitWaitMs: 2000 };
    // 1 s is within the budget and waited; 60 s is not: given up at once, naming the wait
    await expect(client.sendMessagelist(many(1), budget)).rejects.toMatchObject({
      kind: 'rate_limited',
      status: 429,
      attempts: 2,
      retryAfterMs: 60_000,
    });
    expect(t.sleeps).toEqual([1000]);
    expect(calls).toBe(2);
    // the provider's hold is the limiter's: the next budgeted request is not even sent
    const held = await client
      .sendMessagelistText(JSON.stringify(sms(2)), 1, budget)
      .catch((e: unknown) => e);
    expect(held).toBeInstanceOf(ProviderError);
    expect(held).toMatchObject({ kind: 'rate_limited', attempts: 0, retryAfterMs: 60_000 });
    expect(calls).toBe(2);
    expect(t.sleeps).toEqual([1000]);
    // without a budget a request waits the hold out, as before, and goes
    const [res] = await client.sendMessagelist(many(1, 3));
    expect(res?.messages).toHaveLength(1);
    expect(calls).toBe(3);
    expect(t.sleeps.slice(1).reduce((a, b) => a + b, 0)).toBe(60_000);
  });

  it("honours a 5xx's Retry-After up to the policy's longest backoff", async () => {
    let calls = 0;
    const p = smsProvider();
    const app = new Hono();
    app.post('/bat/messagelist', (c, next) =>
      ++calls === 1 ? c.text('maintenance', 503, { 'Retry-After': '3600' }) : next(),
    );
    app.route('/', p.app);
    const t = fakeTime();
    const client = createProviderClient({
      baseUrl: await start(app),
      auth: { apiKey: 'k' },
      ...t,
      retry: { maxDelayMs: 20_000 },
    });
    const [res] = await client.sendMessagelist(many(1));
    expect(res?.messages).toHaveLength(1);
    expect(t.sleeps).toEqual([20_000]);
  });

  it('parseRetryAfter reads seconds and dates, ignores junk', () => {
    expect(parseRetryAfter('3', 0)).toBe(3000);
    expect(parseRetryAfter('0.25', 0)).toBe(250);
    expect(parseRetryAfter(null, 0)).toBeUndefined();
    expect(parseRetryAfter('soon', 0)).toBeUndefined();
    expect(parseRetryAfter('Thu, 01 Jan 1970 00:00:10 GMT', 4000)).toBe(6000);
    expect(parseRetryAfter('Thu, 01 Jan 1970 00:00:10 GMT', 20_000)).toBe(0);
  });

  it('aborts while waiting', async () => {
    const app = new Hono();
    app.post('/bat/messagelist', (c) =>
      c.json({ error: 'x', message: 'x', status: 429 }, 429, { 'Retry-After': '30' }),
    );
    // the real sleep, with a barrier: the abort comes once the client is waiting out the 429
    const waits: number[] = [];
    let waiting!: () => void;
    const inSleep = new Promise<void>((r) => {
      waiting = r;
    });
    const client = createProviderClient({
      baseUrl: await start(app),
      auth: { apiKey: 'k' },
      sleep: (ms, signal) => {
        waits.push(ms);
        const slept = realSleep(ms, signal);
        waiting();
        return slept;
      },
    });
    const ctl = new AbortController();
    const pending = client.sendMessagelist(many(1), { signal: ctl.signal });
    await inSleep;
    expect(waits).toEqual([30_000]);
    ctl.abort(new Error('shutting down'));
    await expect(pending).rejects.toThrow('shutting down');
  });

  it('releases its limiter slot whatever the outcome', async () => {
    const app = new Hono();
    app.get('/bat/message/:id', (c) =>
      c.req.param('id') === 'ok' ? c.json({ status: 'sent' }) : c.text('no', 400),
    );
    const limiter = createRateLimiter();
    const a = createProviderClient({ baseUrl: await start(app), auth: { apiKey: 'k' }, limiter });
    const b = createProviderClient({
      baseUrl: a.transport.baseUrl,
      auth: { apiKey: 'k' },
      limiter,
    });
    expect(a.limiter).toBe(b.limiter);
    await a.getMessage('ok');
    await expect(b.getMessage('bad')).rejects.toMatchObject({ kind: 'bad_request' });
    expect(limiter.inFlight('data')).toBe(0);
  });
});
