import { afterEach, describe, expect, test } from 'vitest';
import { shortUrl, substitutePlaceholders } from '../../src/sandbox/cascade.ts';
import { json, type Served, serveSandbox } from './helpers.ts';

const TO = '+380501234567';
let s: Served;
afterEach(async () => {
  await s?.close();
});

async function post(path: string, body: unknown, headers: Record<string, string>) {
  return fetch(`${s.baseUrl}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
}
const KEY = { 'X-Authorization-Key': 'sandbox-key' };
const GENERAL = '/api/CascadeMessage/send_message/async';
const TG_VIBER = '/api/CascadeMessage/send_message/tg-viber/async';
type Cb = {
  status: string;
  channel: string | null;
  messageId: string;
  trackinId: string;
  cascade: boolean;
};
const callbacks = () => s.receiver.received.map((r) => r.body as Cb);

describe('placeholders', () => {
  test('name, url and short_url are replaced by the variable of that id', () => {
    const vars = [
      { id: 1, value: 'Ann' },
      { id: 2, value: 'https://example.com/pay?x=1' },
    ];
    expect(substitutePlaceholders('Hi %name=1%, pay at %url=2% or %short_url=2%', vars)).toEqual({
      ok: true,
      text: `Hi Ann, pay at https://example.com/pay?x=1 or ${shortUrl('https://example.com/pay?x=1')}`,
    });
    expect(shortUrl('a')).toBe(shortUrl('a'));
    expect(shortUrl('a')).not.toBe(shortUrl('b'));
  });

  test('a placeholder naming no variable is reported', () => {
    expect(substitutePlaceholders('Hi %name=3%', [])).toEqual({ ok: false, missing: ['%name=3%'] });
  });
});

describe('cascade endpoints (seed 2.8)', () => {
  test.each([
    ['X-Authorization-Key', KEY],
    ['X-Viber-Auth-Token', { 'X-Viber-Auth-Token': 'viber-bot-1' }],
    ['X-Tg-Bot-Key', { 'X-Tg-Bot-Key': '123:abc' }],
  ])('accepts %s and answers a GUID messageId and a trackinId', async (_, headers) => {
    s = await serveSandbox();
    const res = await post(
      GENERAL,
      { messages: [{ recipient: TO, text: 'Hi %name=1%', variables: [{ id: 1, value: 'Ann' }] }] },
      headers,
    );
    expect(res.status).toBe(200);
    const body = await json(res);
    expect(body.messageId).toMatch(
      /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/,
    );
    expect(body.trackinId).toEqual(expect.any(String));
    expect(body.messages).toEqual([
      { recipient: TO, messageId: body.messageId, trackinId: body.trackinId },
    ]);
    expect(s.sandbox.cascade.get(body.messageId)?.text).toBe('Hi Ann');
  });

  test('401 without any of the three headers or with a wrong API key', async () => {
    s = await serveSandbox();
    for (const headers of [{}, { 'X-Authorization-Key': 'wrong' }] as Record<string, string>[]) {
      const res = await post(GENERAL, { messages: [{ recipient: TO, text: 'x' }] }, headers);
      expect(res.status).toBe(401);
      expect(await json(res)).toMatchObject({ error: 'UNAUTHORIZED', status: 401 });
    }
  });

  test('400 for a bad body or a placeholder with no variable', async () => {
    s = await serveSandbox();
    const bad = await post(GENERAL, { messages: [{ recipient: '123', text: '' }] }, KEY);
    expect(bad.status).toBe(400);
    const details = (await json(bad)).details.map((d: { path: string }) => d.path);
    expect(details).toEqual(expect.arrayContaining(['messages[0].recipient', 'messages[0].text']));
    const missing = await post(
      GENERAL,
      { messages: [{ recipient: TO, text: 'Hi %name=9%' }] },
      KEY,
    );
    expect(missing.status).toBe(400);
    expect((await json(missing)).details[0]).toMatchObject({
      path: 'messages[0].text',
      code: 'UNKNOWN_VARIABLE',
    });
  });

  test('channels are tried cheapest first; unscripted, Viber business is the first that reaches', async () => {
    s = await serveSandbox();
    const body = await json(post(GENERAL, { messages: [{ recipient: TO, text: 'x' }] }, KEY));
    await s.clock.advance(30_000);
    expect(callbacks().map((c) => [c.channel, c.status])).toEqual([
      ['telegram_bot', 'failed'],
      ['viber_bot', 'failed'],
      ['viber_business', 'sent'],
      ['viber_business', 'delivered'],
    ]);
    expect(
      callbacks().every(
        (c) => c.messageId === body.messageId && c.trackinId === body.trackinId && c.cascade,
      ),
    ).toBe(true);
  });

  test('a recipient who is a Telegram bot user is reached by the Telegram bot', async () => {
    s = await serveSandbox();
    await post('/api/tg_bot/123:abc', { id: 5, userName: 'ann', phone: TO }, {});
    await post(GENERAL, { messages: [{ recipient: TO, text: 'x' }] }, KEY);
    await s.clock.advance(30_000);
    expect(callbacks().map((c) => [c.channel, c.status])).toEqual([
      ['telegram_bot', 'sent'],
      ['telegram_bot', 'delivered'],
    ]);
  });

  test('reachable channels are scriptable; with none reachable the cascade fails', async () => {
    s = await serveSandbox();
    const set = await post('/_control/cascade/reachable', { recipient: TO, channels: ['sms'] }, {});
    expect(await json(set)).toEqual({ recipient: TO, channels: ['sms'] });
    await post(GENERAL, { messages: [{ recipient: TO, text: 'x' }] }, KEY);
    await s.clock.advance(30_000);
    expect(callbacks().map((c) => [c.channel, c.status])).toEqual([
      ['telegram_bot', 'failed'],
      ['viber_bot', 'failed'],
      ['viber_business', 'failed'],
      ['rcs', 'failed'],
      ['sms', 'sent'],
      ['sms', 'delivered'],
    ]);
    s.receiver.received.length = 0;
    // the Telegram-prioritized endpoint tries only the bots
    await post(TG_VIBER, { messages: [{ recipient: TO, text: 'x' }] }, { 'X-Tg-Bot-Key': 'k' });
    await s.clock.advance(30_000);
    expect(callbacks().map((c) => [c.channel, c.status])).toEqual([
      ['telegram_bot', 'failed'],
      ['viber_bot', 'failed'],
      [null, 'failed'],
    ]);
    const list = await json(fetch(`${s.baseUrl}/_control/cascade`));
    expect(
      list.map((r: { status: string; channel: string | null }) => [r.status, r.channel]),
    ).toEqual([
      ['delivered', 'sms'],
      ['failed', null],
    ]);
  });
});

describe('bot users (seed 2.7)', () => {
  test('are validated and kept per bot token; sending one again replaces it', async () => {
    s = await serveSandbox();
    const first = await post('/api/tg_bot/bot-a', { id: 1, userName: 'ann', firstName: 'Ann' }, {});
    expect(first.status).toBe(200);
    expect(await json(first)).toEqual({ status: 'ok', id: 1, created: true, users: 1 });
    const again = await json(post('/api/tg_bot/bot-a', { id: 1, userName: 'ann2' }, {}));
    expect(again).toMatchObject({ created: false, users: 1 });
    await post('/api/tg_bot/bot-b', { id: 1, userName: 'bob' }, {});
    const viber = await post(
      '/api/viber_bot/vb-1',
      { id: 'u-1', name: 'Vic', avatar: 'https://example.com/a.png' },
      {},
    );
    expect(viber.status).toBe(200);
    const users = await json(fetch(`${s.baseUrl}/_control/bots`));
    expect(
      users.map((u: { kind: string; token: string; id: string }) => [u.kind, u.token, u.id]),
    ).toEqual([
      ['tg', 'bot-a', '1'],
      ['tg', 'bot-b', '1'],
      ['viber', 'vb-1', 'u-1'],
    ]);
    expect(users[0].user.userName).toBe('ann2');
  });

  test("400 for a user that breaks the seed's fields", async () => {
    s = await serveSandbox();
    const cases: [string, unknown, string][] = [
      ['/api/tg_bot/t', { id: 'not-a-number', userName: 'x' }, 'id'],
      ['/api/tg_bot/t', { id: 1 }, 'userName'],
      ['/api/viber_bot/t', { id: 'u', name: 'n', avatar: 'not a url' }, 'avatar'],
      ['/api/viber_bot/t', { id: 7, name: 'n' }, 'id'],
    ];
    for (const [path, body, field] of cases) {
      const res = await post(path, body, {});
      expect(res.status).toBe(400);
      expect((await json(res)).details.map((d: { path: string }) => d.path)).toContain(field);
    }
    expect(s.sandbox.bots.users()).toHaveLength(0);
  });

  test('401 for a bot token the sandbox does not know, when a list is configured', async () => {
    s = await serveSandbox({ credentials: { tgBotKeys: ['good'] } });
    expect((await post('/api/tg_bot/bad', { id: 1, userName: 'x' }, {})).status).toBe(401);
    expect((await post('/api/tg_bot/good', { id: 1, userName: 'x' }, {})).status).toBe(200);
  });
});
