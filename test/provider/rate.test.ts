/**
 * The client against real HTTP servers that count what arrives: the rate and burst of seed 8
 * are kept under load, and a 429 storm (with 5xx on top) is ridden out with nothing lost.
 *
 * On a busy two-core machine a local server may not take much more than 100 requests/s, so
 * a real-time count cannot tell a good limiter from none. The big burst therefore runs on a
 * jump clock shared by client and server: a wait moves the clock forward at once, the
 * server stamps each arrival with it, and the HTTP itself is real. The same server then
 * catches a client without the limiter. A second test counts in real time.
 */
import { Hono } from 'hono';
import { afterEach, describe, expect, it } from 'vitest';
import { createProviderClient } from '../../src/provider/client.ts';
import { createRateLimiter } from '../../src/provider/limiter.ts';
import type { Message, NormalisedMessagelistResponse } from '../../src/provider/message.ts';
import { createRateMeter, type LocalServer, listen } from './helpers.ts';

const servers: LocalServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

const sms = (i: number): Message => ({
  from: 'Acme',
  to: '+380501234567',
  type: 'sms',
  text: `message ${i}`,
  customerMessageId: `c-${i}`,
});

/**
 * A provider that judges every request by its limit (answering 429 like the real one when
 * broken) and records each customerMessageId it accepted.
 */
async function countingProvider(
  opts: {
    storm?: (n: number, sinceFirstMs: number) => Response | undefined;
    now?: () => number;
  } = {},
) {
  const clockNow = opts.now ?? (() => performance.now());
  const meter = createRateMeter({ ratePerSecond: 100, burst: 150, toleranceMs: 2 });
  const dataMeter = createRateMeter({ ratePerSecond: 50, burst: 75, toleranceMs: 2 });
  const accepted = new Map<string, number>();
  const statuses = new Map<number, number>();
  let first: number | undefined;
  let n = 0;
  const app = new Hono();
  const answer = (status: number) => statuses.set(status, (statuses.get(status) ?? 0) + 1);
  app.post('/bat/messagelist', async (c) => {
    const now = clockNow();
    first ??= now;
    n++;
    const stormed = opts.storm?.(n, now - first);
    if (stormed) {
      answer(stormed.status);
      return stormed;
    }
    if (!meter.hit(now)) {
      answer(429);
      return c.json(
        { error: 'Too Many Requests', message: 'rate limit exceeded', status: 429 },
        429,
      );
    }
    const body = (await c.req.json()) as { messages: Message[] };
    for (const m of body.messages) {
      const id = m.customerMessageId ?? '';
      accepted.set(id, (accepted.get(id) ?? 0) + 1);
    }
    answer(200);
    return c.json({
      messagelistId: n,
      messages: body.messages.map((m) => ({
        messageId: `m-${m.customerMessageId}`,
        status: 'accepted',
        parts: 1,
        customerMessageId: m.customerMessageId,
        to: m.to,
      })),
    });
  });
  app.get('/bat/message/:id', (c) => {
    if (!dataMeter.hit(clockNow()))
      return c.json({ error: 'Too Many Requests', message: 'x', status: 429 }, 429);
    return c.json({ messageId: c.req.param('id'), status: 'delivered' });
  });
  const server = await listen(app);
  servers.push(server);
  return { url: server.url, meter, dataMeter, accepted, statuses };
}

/** A clock that jumps forward when anyone waits on it. */
function jumpClock() {
  let now = 1_000_000;
  return {
    now: () => now,
    clock: { now: () => now },
    sleep: (ms: number) =>
      new Promise<void>((resolve) => {
        now = Math.max(now, now + ms);
        setImmediate(resolve);
      }),
  };
}

const allAccepted = (responses: NormalisedMessagelistResponse[][]) =>
  responses.flat().every((r) => r.messages.every((m) => m.accepted));

describe('rate limits as counted by the server', () => {
  it('20 000 messages in a burst of 400 requests stay within 100/s, burst 150', async () => {
    const time = jumpClock();
    const provider = await countingProvider({ now: time.now });
    // Two clients sharing one limiter, as the dispatcher and anything else in the process would.
    const limiter = createRateLimiter({ clock: time.clock, sleep: time.sleep });
    const a = createProviderClient({
      baseUrl: provider.url,
      auth: { apiKey: 'k' },
      limiter,
      ...time,
    });
    const b = createProviderClient({
      baseUrl: provider.url,
      auth: { apiKey: 'k' },
      limiter,
      ...time,
    });
    const start = time.now();
    const calls = Array.from({ length: 400 }, (_, i) => {
      const messages = Array.from({ length: 50 }, (_, j) => sms(i * 50 + j));
      return (i % 2 === 0 ? a : b).sendMessagelist(messages);
    });
    const responses = await Promise.all(calls);

    expect(provider.meter.count).toBe(400);
    expect(provider.meter.violations).toBe(0);
    expect(provider.statuses.get(429) ?? 0).toBe(0);
    expect(provider.meter.maxInWindow(1000)).toBeLessThanOrEqual(250);
    // it did not get there by crawling: 150 at once, then 250 at about 100/s
    expect(time.now() - start).toBeLessThan(2500 + 1500);
    expect(provider.accepted.size).toBe(20_000);
    expect([...provider.accepted.values()].every((n) => n === 1)).toBe(true);
    expect(allAccepted(responses)).toBe(true);
  }, 20_000);

  it('the same server catches a client whose limiter lets everything through', async () => {
    const time = jumpClock();
    const provider = await countingProvider({ now: time.now });
    const limiter = createRateLimiter({
      clock: time.clock,
      sleep: time.sleep,
      limits: { messaging: { ratePerSecond: 1_000_000, burst: 1_000_000 } },
    });
    const client = createProviderClient({
      baseUrl: provider.url,
      auth: { apiKey: 'k' },
      limiter,
      ...time,
      retry: { maxRateLimitRetries: 0 },
    });
    const settled = await Promise.allSettled(
      Array.from({ length: 200 }, (_, i) => client.sendMessagelist([sms(i)])),
    );
    expect(provider.meter.violations).toBe(50);
    expect(settled.filter((s) => s.status === 'rejected')).toHaveLength(50);
  }, 20_000);

  it('in real time, 300 requests at once are never over the limit as the server counts', async () => {
    const provider = await countingProvider();
    const client = createProviderClient({ baseUrl: provider.url, auth: { apiKey: 'k' } });
    await Promise.all(Array.from({ length: 300 }, (_, i) => client.sendMessagelist([sms(i)])));
    expect(provider.meter.count).toBe(300);
    expect(provider.meter.violations).toBe(0);
  }, 20_000);

  it('status lookups keep to the data limit, 50/s burst 75', async () => {
    const time = jumpClock();
    const provider = await countingProvider({ now: time.now });
    const client = createProviderClient({ baseUrl: provider.url, auth: { apiKey: 'k' }, ...time });
    const start = time.now();
    const results = await Promise.all(
      Array.from({ length: 300 }, (_, i) => client.getMessage(`m-${i}`)),
    );
    expect(results.every((r) => r.status === 'delivered')).toBe(true);
    expect(provider.dataMeter.count).toBe(300);
    expect(provider.dataMeter.violations).toBe(0);
    expect(time.now() - start).toBeGreaterThanOrEqual((300 - 75) * 20);
  }, 20_000);
});

describe('a 429 storm', () => {
  it('is ridden out with nothing lost and nothing doubled', async () => {
    const tooMany = (retryAfter?: string) =>
      new Response(JSON.stringify({ error: 'Too Many Requests', message: 'storm', status: 429 }), {
        status: 429,
        headers: {
          'content-type': 'application/json',
          ...(retryAfter ? { 'retry-after': retryAfter } : {}),
        },
      });
    const provider = await countingProvider({
      storm: (n, since) => {
        // 600 ms in which everything is refused, some with Retry-After, then scattered 5xx
        if (since < 600) return n % 3 === 0 ? tooMany('1') : tooMany();
        if (n % 11 === 0) return new Response('upstream hiccup', { status: 502 });
        if (n % 13 === 0) return tooMany();
        return undefined;
      },
    });
    const client = createProviderClient({
      baseUrl: provider.url,
      auth: { apiKey: 'k' },
      retry: { baseDelayMs: 100, maxDelayMs: 2000 },
    });
    const responses = await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        client.sendMessagelist(Array.from({ length: 20 }, (_, j) => sms(i * 20 + j))),
      ),
    );
    // bounds: how many attempts the storm refuses depends on when the retries land (real time)
    expect(provider.statuses.get(429) ?? 0).toBeGreaterThan(50);
    expect(provider.statuses.get(502) ?? 0).toBeGreaterThan(0);
    expect(provider.statuses.get(200)).toBe(100);
    expect(provider.accepted.size).toBe(2000);
    expect([...provider.accepted.values()].every((n) => n === 1)).toBe(true);
    expect(allAccepted(responses)).toBe(true);
  }, 30_000);
});
