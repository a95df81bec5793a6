import { afterEach, describe, expect, test } from 'vitest';
import { AppError } from '../../src/errors.ts';
import { type CascadeClientOptions, createCascadeClient } from '../../src/provider/cascade.ts';
import { shortUrl, substitutePlaceholders } from '../../src/sandbox/cascade.ts';
import { postJson } from '../support/http.ts';
import { json, type Served, serveSandbox } from './helpers.ts';

const TO = '+380501234567';
let s: Served;
afterEach(async () => {
  await s?.close();
});

const post = (path: string, body: unknown, headers: Record<string, string>) =>
  postJson(`${s.baseUrl}${path}`, body, headers);
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

// ---------------------------------------------------------------------------------------
// The documented forms (docs/api/cascade/*.md), uploads, types and the docs dialect

const message = (extra: Record<string, unknown> = {}) => ({
  id: 'm-1',
  fromName: 'Acme',
  toPhone: TO,
  messageType: 'transaction' as const,
  text: 'Order shipped',
  ...extra,
});
const attempts = (id: string) =>
  s.sandbox.cascade.get(id)!.attempts.map((a) => [a.channel, a.status, a.fallback === true]);

describe('cascade forms and variables', () => {
  test("send.md's bare array: trackinId is the message's id; compact still answers its own shape", async () => {
    s = await serveSandbox();
    const body = await json(post(GENERAL, [message(), message({ id: 'm-2' })], KEY));
    expect(body.messages.map((m: { trackinId: string }) => m.trackinId)).toEqual(['m-1', 'm-2']);
    expect(body.trackinId).toBe('m-1');
    expect(s.sandbox.cascade.get('m-2')).toMatchObject({
      fromName: 'Acme',
      messageType: 'transaction',
    });
  });

  test('POST /api/items stores typed variables per account; placeholders resolve inline first, then uploaded', async () => {
    s = await serveSandbox();
    const up = await post(
      '/api/items',
      {
        variables: [
          { id: 1, type: 'name', value: 'Ann' },
          { id: 1, type: 'url', value: 'https://example.com/a' },
        ],
      },
      KEY,
    );
    expect(await json(up)).toEqual({ uploaded: 2 });
    const sent = await json(
      post(
        GENERAL,
        [
          message({ text: 'Hi %name=1%: %url=1%' }),
          message({
            id: 'm-2',
            text: 'Hi %name=1%',
            variables: [{ id: 1, type: 'name', value: 'Bob' }],
          }),
        ],
        KEY,
      ),
    );
    expect(
      sent.messages.map((m: { messageId: string }) => s.sandbox.cascade.get(m.messageId)?.text),
    ).toEqual(['Hi Ann: https://example.com/a', 'Hi Bob']);
    // another account (a Telegram bot key) has uploaded nothing: a 400 naming the placeholder
    const other = await post(GENERAL, [message({ text: 'Hi %name=1%' })], {
      'X-Tg-Bot-Key': '1:a',
    });
    expect(other.status).toBe(400);
    expect((await json(other)).details).toEqual([
      {
        path: '[0].text',
        code: 'UNKNOWN_VARIABLE',
        message:
          '%name=1% names variable 1 of type name, which is not in variables nor uploaded with POST /api/items',
      },
    ]);
    // a placeholder of another type does not resolve to an uploaded name
    const typed = await post(GENERAL, [message({ text: '%short_url=1%' })], KEY);
    expect((await json(typed)).details[0]).toMatchObject({ code: 'UNKNOWN_VARIABLE' });
    // a later upload of the same type and id replaces the value
    await post('/api/items', { variables: [{ id: 1, type: 'name', value: 'Cy' }] }, KEY);
    const again = await json(post(GENERAL, [message({ id: 'm-3', text: 'Hi %name=1%' })], KEY));
    expect(s.sandbox.cascade.get(again.messageId)?.text).toBe('Hi Cy');
  });

  test('an upload needs typed variables; 401 without a cascade header', async () => {
    s = await serveSandbox();
    const bad = await post('/api/items', { variables: [{ id: 1, value: 'x' }] }, KEY);
    expect(bad.status).toBe(400);
    expect((await json(bad)).details).toEqual([
      expect.objectContaining({ path: 'variables[0].type', code: 'REQUIRED' }),
    ]);
    expect((await post('/api/items', { variables: [] }, {})).status).toBe(401);
  });

  test('a viber_survey goes on Viber and SMS only; on the tg-viber endpoint, the Viber bot only', async () => {
    s = await serveSandbox();
    const survey = message({
      messageType: 'viber_survey',
      text: 'Rate us',
      surveyOptions: ['Good', 'Bad'],
    });
    const general = await json(post(GENERAL, [survey], KEY));
    const tg = await json(post(TG_VIBER, [{ ...survey, id: 'm-2' }], KEY));
    await s.clock.advance(30_000);
    expect(attempts(general.messageId)).toEqual([
      ['viber_bot', 'failed', false],
      ['viber_business', 'sent', false],
      ['viber_business', 'delivered', false],
    ]);
    expect(attempts(tg.messageId)).toEqual([['viber_bot', 'failed', false]]);
    expect(s.sandbox.cascade.get(tg.messageId)).toMatchObject({
      status: 'failed',
      surveyOptions: ['Good', 'Bad'],
      error: { code: 'NO_CHANNEL' },
    });
  });

  test('a flash call is a phone call; when it does not reach, its fallback goes on the cascade', async () => {
    s = await serveSandbox();
    const flash = message({ messageType: 'flashcall', text: undefined, ttl: 300 });
    const direct = await json(post(GENERAL, [flash], KEY));
    await s.clock.advance(30_000);
    expect(attempts(direct.messageId)).toEqual([
      ['flashcall', 'sent', false],
      ['flashcall', 'delivered', false],
    ]);
    await post('/_control/cascade/reachable', { recipient: TO, channels: ['sms'] }, {});
    const withFallback = await json(
      post(
        GENERAL,
        [
          {
            ...flash,
            id: 'm-2',
            fallback: { messageType: 'transaction', text: 'Code %name=1%' },
            variables: [{ id: 1, value: '123456' }],
          },
        ],
        KEY,
      ),
    );
    await s.clock.advance(30_000);
    const record = s.sandbox.cascade.get(withFallback.messageId)!;
    expect(record.fallback).toEqual({ messageType: 'transaction', text: 'Code 123456' });
    expect(attempts(withFallback.messageId)).toEqual([
      ['flashcall', 'failed', false],
      ['telegram_bot', 'failed', true],
      ['viber_bot', 'failed', true],
      ['viber_business', 'failed', true],
      ['rcs', 'failed', true],
      ['sms', 'sent', true],
      ['sms', 'delivered', true],
    ]);
    expect(record).toMatchObject({ status: 'delivered', channel: 'sms' });
  });

  test('scheduledSent in the future starts then; no attempt is made after its ttl', async () => {
    s = await serveSandbox();
    const later = await json(
      post(GENERAL, [message({ scheduledSent: '2030-01-01T01:00:00Z' })], KEY),
    );
    await s.clock.advance(59 * 60_000);
    expect(s.sandbox.cascade.get(later.messageId)).toMatchObject({
      status: 'accepted',
      attempts: [],
    });
    await s.clock.advance(2 * 60_000);
    expect(s.sandbox.cascade.get(later.messageId)?.status).toBe('delivered');

    await post('/_control/cascade/reachable', { recipient: TO, channels: ['sms'] }, {});
    // each unreachable channel fails after failedAfterMs (1 s): rcs would start after 3 s
    const short = await json(post(GENERAL, [message({ id: 'm-2', ttl: 2 })], KEY));
    await s.clock.advance(30_000);
    expect(attempts(short.messageId)).toEqual([
      ['telegram_bot', 'failed', false],
      ['viber_bot', 'failed', false],
      ['viber_business', 'failed', false],
    ]);
    expect(s.sandbox.cascade.get(short.messageId)).toMatchObject({
      status: 'failed',
      error: { code: 'EXPIRED' },
    });
    expect(callbacks().at(-1)).toMatchObject({ status: 'failed', channel: null });
  });

  test('the control API lists cascade messages with their type, and scripts the flashcall channel', async () => {
    s = await serveSandbox();
    expect(
      await json(
        fetch(`${s.baseUrl}/_control/cascade/reachable?recipient=${encodeURIComponent(TO)}`),
      ),
    ).toEqual({
      recipient: TO,
      channels: ['viber_business', 'sms', 'flashcall'],
    });
    await post('/_control/cascade/reachable', { recipient: TO, channels: ['flashcall'] }, {});
    await post(GENERAL, [message({ messageType: 'flashcall', text: undefined })], KEY);
    await s.clock.advance(30_000);
    const list = await json(fetch(`${s.baseUrl}/_control/cascade`));
    expect(list).toEqual([
      expect.objectContaining({
        trackinId: 'm-1',
        messageType: 'flashcall',
        text: null,
        status: 'delivered',
        channel: 'flashcall',
      }),
    ]);
  });
});

describe('cascade in the docs dialect', () => {
  test('answers an array for both forms (send.md "Success Response", index.md "Response Format")', async () => {
    s = await serveSandbox({ dialect: 'docs' });
    const bare = await json(post(GENERAL, [message(), message({ id: 'm-2' })], KEY));
    expect(bare).toEqual([
      { messageId: expect.any(String), trackinId: 'm-1' },
      { messageId: expect.any(String), trackinId: 'm-2' },
    ]);
    const condensed = await json(post(GENERAL, { messages: [{ recipient: TO, text: 'x' }] }, KEY));
    expect(condensed).toEqual([{ messageId: expect.any(String), trackinId: expect.any(String) }]);
  });

  test("reports the whole message with status.md's webhook, nothing per channel", async () => {
    s = await serveSandbox({ dialect: 'docs' });
    const [ok] = await json(post(GENERAL, [message()], KEY));
    await s.clock.advance(30_000);
    expect(s.receiver.received.map((r) => r.body)).toEqual([
      {
        messageId: ok.messageId,
        deliverystatus: 'processing',
        timestamp: '2030-01-01T00:00:02.500Z',
        cost: 0,
      },
      {
        messageId: ok.messageId,
        deliverystatus: 'delivered',
        timestamp: '2030-01-01T00:00:03.000Z',
        cost: 0.05,
      },
    ]);
    s.receiver.received.length = 0;
    await post('/_control/cascade/reachable', { recipient: TO, channels: [] }, {});
    const [none] = await json(post(TG_VIBER, [message({ id: 'm-2' })], KEY));
    const [later] = await json(
      post(GENERAL, [message({ id: 'm-3', scheduledSent: '2030-01-01T01:00:00Z', ttl: 1 })], KEY),
    );
    await s.clock.advance(2 * 3_600_000);
    expect(s.receiver.received.map((r) => r.body)).toEqual([
      {
        messageId: later.messageId,
        deliverystatus: 'scheduled',
        timestamp: expect.any(String),
        cost: 0,
      },
      {
        messageId: none.messageId,
        deliverystatus: 'undeliverable',
        timestamp: expect.any(String),
        cost: 0,
      },
      {
        messageId: later.messageId,
        deliverystatus: 'permanenterror',
        timestamp: expect.any(String),
        cost: 0,
      },
    ]);
  });

  test('request errors take send.md\'s "Error Response" body, with the field', async () => {
    s = await serveSandbox({ dialect: 'docs' });
    const unauthorized = await post(GENERAL, [message()], {});
    expect(unauthorized.status).toBe(401);
    expect(await json(unauthorized)).toEqual({
      error: { code: 'UNAUTHORIZED', message: expect.any(String) },
    });
    const survey = await post(
      GENERAL,
      [message(), message({ id: 'm-2', messageType: 'viber_survey', surveyOptions: ['one'] })],
      KEY,
    );
    expect(survey.status).toBe(400);
    expect(await json(survey)).toEqual({
      error: {
        code: 'SURVEY_OPTIONS_COUNT',
        message: 'message 1: surveyOptions must hold 2 to 5 options (got 1)',
        field: 'surveyOptions',
      },
    });
    const notJson = await fetch(`${s.baseUrl}${GENERAL}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...KEY },
      body: '[',
    });
    expect(await json(notJson)).toEqual({
      error: { code: 'BAD_REQUEST', message: 'the request body is not valid JSON' },
    });
  });
});

describe('the cascade client against the sandbox', () => {
  const client = (extra: Partial<CascadeClientOptions> = {}) =>
    createCascadeClient({
      baseUrl: s.baseUrl,
      auth: { apiKey: 'sandbox-key' },
      clock: { now: () => s.clock.now() },
      sleep: (ms) => s.clock.advance(Math.ceil(ms)),
      ...extra,
    });

  test.each(['docs', 'compact'] as const)(
    '%s: per-recipient values sent at once each reach their own recipient (uploaded, then placeholders)',
    async (dialect) => {
      s = await serveSandbox({ dialect });
      const cascade = client({ fromName: 'Acme' });
      const people = [
        ['+380501234567', 'Ann'],
        ['+380671234567', 'Bob'],
        ['+380931234567', 'Cy'],
      ] as const;
      const results = await Promise.all(
        people.map(([to, name]) =>
          cascade.send([
            {
              recipient: to,
              text: 'Hi %name=1%, reset: %short_url=1%',
              variables: [
                { id: 1, type: 'name', value: name },
                { id: 1, type: 'short_url', value: `https://example.com/reset/${name}` },
              ],
            },
          ]),
        ),
      );
      expect(results.map(([r]) => s.sandbox.cascade.get(r!.messageId)?.text)).toEqual(
        people.map(
          ([, name]) => `Hi ${name}, reset: ${shortUrl(`https://example.com/reset/${name}`)}`,
        ),
      );
      expect(results.map(([r]) => s.sandbox.cascade.get(r!.messageId)?.trackinId)).toEqual(
        results.map(([r]) => r!.trackingId),
      );
    },
  );

  test('inline variables, variables uploaded by the caller, and a refusal the sandbox makes', async () => {
    s = await serveSandbox({ dialect: 'docs' });
    const cascade = client();
    const [inline] = await cascade.send(
      [{ ...message(), text: 'Hi %name=1%', variables: [{ id: 1, value: 'Ann' }] }],
      { variables: 'inline' },
    );
    expect(s.sandbox.cascade.get(inline!.messageId)?.text).toBe('Hi Ann');
    expect(s.sandbox.cascade.variables('api-key')).toEqual([]);
    await cascade.uploadVariables([{ id: 4, type: 'url', value: 'https://example.com/x' }]);
    const [uploaded] = await cascade.send([{ ...message({ id: 'm-2' }), text: 'See %url=4%' }]);
    expect(s.sandbox.cascade.get(uploaded!.messageId)?.text).toBe('See https://example.com/x');
    // a client refuses a placeholder it knows no variable for, unless told it was uploaded
    // elsewhere; then the sandbox judges: %url=4% was uploaded to this account, %url=5% never
    const other = client();
    await expect(other.send([{ ...message({ id: 'm-3' }), text: 'See %url=4%' }])).rejects.toThrow(
      AppError,
    );
    const elsewhere = { uploaded: () => true };
    const [known] = await other.send(
      [{ ...message({ id: 'm-3' }), text: 'See %url=4%' }],
      elsewhere,
    );
    expect(s.sandbox.cascade.get(known!.messageId)?.text).toBe('See https://example.com/x');
    const err = await other
      .send([{ ...message({ id: 'm-4' }), text: 'See %url=5%' }], elsewhere)
      .catch((e: unknown) => e);
    expect(err).toMatchObject({
      kind: 'bad_request',
      status: 400,
      body: { error: { code: 'UNKNOWN_VARIABLE', field: 'text' } },
    });
  });
});
