import { Hono } from 'hono';
import { afterEach, describe, expect, it } from 'vitest';
import { AppError } from '../../src/errors.ts';
import {
  CASCADE_PATHS,
  createCascadeClient,
  createVariableIds,
  parseCascadeResponse,
  placeholders,
  validateCascade,
} from '../../src/provider/cascade.ts';
import { type LocalServer, listen } from './helpers.ts';

const servers: LocalServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

/** Records every request and answers like the seed's cascade and bot endpoints. */
async function provider() {
  const seen: Array<{ path: string; headers: Record<string, string>; body: unknown }> = [];
  const app = new Hono();
  app.post('*', async (c) => {
    const body = await c.req.json();
    seen.push({
      path: decodeURIComponent(new URL(c.req.url).pathname),
      headers: c.req.header(),
      body,
    });
    if (c.req.path.startsWith('/api/CascadeMessage')) {
      return c.json({ messageId: '6f1c2b1e-8d4a-4a43-9b5e-0a0d2f1c9e11', trackinId: 't-1' });
    }
    return c.json({ ok: true });
  });
  const s = await listen(app);
  servers.push(s);
  return { url: s.url, seen };
}

const msg = {
  recipient: '+380501234567',
  text: 'Hi %name=1%, your link: %short_url=2%',
  variables: [
    { id: 1, value: 'Ann' },
    { id: 2, value: 'https://example.com/x' },
  ],
};

describe('cascade', () => {
  it.each([
    [{ apiKey: 'k1' }, 'x-authorization-key', 'k1'],
    [{ viberBotToken: 'v1' }, 'x-viber-auth-token', 'v1'],
    [{ tgBotKey: 't1' }, 'x-tg-bot-key', 't1'],
  ] as const)('sends with auth %j as header %s', async (auth, header, value) => {
    const p = await provider();
    const client = createCascadeClient({ baseUrl: p.url, auth });
    const res = await client.send([msg]);
    expect(res).toEqual([{ messageId: '6f1c2b1e-8d4a-4a43-9b5e-0a0d2f1c9e11', trackingId: 't-1' }]);
    expect(p.seen[0]?.headers[header]).toBe(value);
    expect(p.seen[0]?.path).toBe(CASCADE_PATHS.general);
    expect(p.seen[0]?.body).toEqual({ messages: [msg] });
  });

  it('uses the Telegram-prioritised endpoint on request, with variables defaulted', async () => {
    const p = await provider();
    const client = createCascadeClient({ baseUrl: p.url, auth: { apiKey: 'k' } });
    await client.send([{ recipient: '+380501234567', text: 'plain, 50% off' }], {
      endpoint: 'tg-viber',
    });
    expect(p.seen[0]?.path).toBe('/api/CascadeMessage/send_message/tg-viber/async');
    expect(p.seen[0]?.body).toEqual({
      messages: [{ recipient: '+380501234567', text: 'plain, 50% off', variables: [] }],
    });
  });

  it('checks placeholders against the variables before sending', async () => {
    const p = await provider();
    const client = createCascadeClient({ baseUrl: p.url, auth: { apiKey: 'k' } });
    const bad = [
      msg,
      {
        ...msg,
        text: 'Hi %name=3% %url=x% %phone=1%',
        variables: [
          { id: 1, value: 'a' },
          { id: 1, value: 'b' },
        ],
      },
    ];
    const err = await client.send(bad).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AppError);
    expect((err as AppError).details.map((d) => [d.path, d.code])).toEqual([
      ['messages[1].variables[1].id', 'DUPLICATE_VARIABLE'],
      ['messages[1].text', 'UNKNOWN_VARIABLE'],
      ['messages[1].text', 'INVALID_PLACEHOLDER'],
      ['messages[1].text', 'UNKNOWN_PLACEHOLDER'],
    ]);
    expect(p.seen).toHaveLength(0);
  });

  it('refuses a bad recipient with the seed code and an empty list', () => {
    expect(() => validateCascade([{ ...msg, recipient: '0501234567' }])).toThrow(
      expect.objectContaining({ code: 'INVALID_RECIPIENT' }),
    );
    expect(() => validateCascade([])).toThrow(
      expect.objectContaining({ code: 'VALIDATION_ERROR' }),
    );
  });

  it('finds placeholders and parses every response spelling', () => {
    expect(placeholders('a %name=1% b %short_url=22% 100% c')).toEqual([
      { kind: 'name', id: '1', raw: '%name=1%' },
      { kind: 'short_url', id: '22', raw: '%short_url=22%' },
    ]);
    expect(parseCascadeResponse([{ messageId: 'a', trackinId: 1 }])).toEqual([
      { messageId: 'a', trackingId: '1' },
    ]);
    expect(parseCascadeResponse({ messages: [{ messageId: 'b' }] })).toEqual([{ messageId: 'b' }]);
    expect(parseCascadeResponse({ ok: true })).toBeUndefined();
  });

  it('a 200 without messageId is an invalid_response', async () => {
    const app = new Hono();
    app.post('*', (c) => c.json({ ok: true }));
    const s = await listen(app);
    servers.push(s);
    const client = createCascadeClient({ baseUrl: s.url, auth: { apiKey: 'k' } });
    await expect(client.send([msg])).rejects.toMatchObject({ kind: 'invalid_response' });
  });
});

// ---------------------------------------------------------------------------------------
// Forms, typed variables and uploads (docs/api/cascade/*.md)

/** Records every request; answers the cascade as send.md shows (one entry per message). */
async function recorder() {
  const seen: Array<{ path: string; body: unknown }> = [];
  const app = new Hono();
  app.post('*', async (c) => {
    const body = await c.req.json();
    seen.push({ path: c.req.path, body });
    if (c.req.path === '/api/items') return c.json({});
    const list = (Array.isArray(body) ? body : body.messages) as Array<{ id?: string }>;
    return c.json(list.map((m, i) => ({ messageId: `m-${i}`, trackinId: m.id ?? `t-${i}` })));
  });
  const s = await listen(app);
  servers.push(s);
  return { url: s.url, seen };
}

const endpoint = (extra: Record<string, unknown> = {}) => ({
  id: 'o-1',
  fromName: 'Acme',
  toPhone: '+380501234567',
  messageType: 'transaction' as const,
  text: 'Order shipped',
  ...extra,
});

function refusal(fn: () => unknown): AppError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(AppError);
    return e as AppError;
  }
  throw new Error('not refused');
}

describe('cascade forms', () => {
  it("sends send.md's bare array as given, on either endpoint, and reads trackinId back", async () => {
    const p = await recorder();
    const client = createCascadeClient({ baseUrl: p.url, auth: { apiKey: 'k' } });
    const res = await client.send([endpoint(), endpoint({ id: 'o-2' })], { endpoint: 'tg-viber' });
    expect(p.seen).toEqual([
      { path: CASCADE_PATHS['tg-viber'], body: [endpoint(), endpoint({ id: 'o-2' })] },
    ]);
    expect(res).toEqual([
      { messageId: 'm-0', trackingId: 'o-1' },
      { messageId: 'm-1', trackingId: 'o-2' },
    ]);
  });

  it('maps condensed messages with a fromName: transaction, a fresh id, scheduledTime as scheduledSent', async () => {
    const p = await recorder();
    const client = createCascadeClient({ baseUrl: p.url, auth: { apiKey: 'k' }, fromName: 'Acme' });
    const res = await client.send(
      {
        messages: [
          {
            recipient: '+380501234567',
            text: 'hi',
            ttl: 60,
            scheduledTime: '2030-01-01T10:00:00Z',
          },
        ],
      },
      { fromName: 'Other' },
    );
    const [sent] = p.seen[0]!.body as Array<Record<string, unknown>>;
    expect(sent).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      fromName: 'Other',
      toPhone: '+380501234567',
      messageType: 'transaction',
      text: 'hi',
      ttl: 60,
      scheduledSent: '2030-01-01T10:00:00Z',
    });
    expect(res).toEqual([{ messageId: 'm-0', trackingId: sent!.id }]);
  });

  it('refuses condensed messages mixed with endpoint ones when no fromName is known', async () => {
    const p = await recorder();
    const client = createCascadeClient({ baseUrl: p.url, auth: { apiKey: 'k' } });
    const err = await client
      .send([endpoint(), { recipient: '+380501234567', text: 'hi' }])
      .catch((e: unknown) => e);
    expect(err).toMatchObject({
      code: 'VALIDATION_ERROR',
      details: [{ path: 'messages[1]', code: 'REQUIRED' }],
    });
    expect(p.seen).toHaveLength(0);
  });

  it("uploads the messages' variables in one request, then sends only placeholders", async () => {
    const p = await recorder();
    const client = createCascadeClient({ baseUrl: p.url, auth: { apiKey: 'k' }, fromName: 'Acme' });
    await client.send([
      endpoint({
        text: 'Hi %name=1%, track %url=7% or %short_url=7%',
        variables: [
          { id: 1, type: 'name', value: 'Ann' },
          { id: 7, value: 'https://example.com/t/1' },
          { id: 9, type: 'name', value: 'never named' },
        ],
      }),
      // the same ids with another name: uploaded under another id, so neither overwrites
      { recipient: '+380671234567', text: 'Hi %name=1%', variables: [{ id: 1, value: 'Bob' }] },
      // the same value again: its id is reused
      { recipient: '+380931234567', text: 'Hi %name=5%', variables: [{ id: 5, value: 'Ann' }] },
    ]);
    expect(p.seen.map((r) => r.path)).toEqual(['/api/items', CASCADE_PATHS.general]);
    expect(p.seen[0]!.body).toEqual({
      variables: [
        { id: 1, type: 'name', value: 'Ann' },
        { id: 1, type: 'url', value: 'https://example.com/t/1' },
        { id: 1, type: 'short_url', value: 'https://example.com/t/1' },
        { id: 2, type: 'name', value: 'Bob' },
      ],
    });
    const wire = p.seen[1]!.body as Array<Record<string, unknown>>;
    expect(wire.map((m) => m.text)).toEqual([
      'Hi %name=1%, track %url=1% or %short_url=1%',
      'Hi %name=2%',
      'Hi %name=1%',
    ]);
    expect(wire.every((m) => !('variables' in m))).toBe(true);
  });

  it('two sends at once with different values under one id never share an uploaded id', async () => {
    const p = await recorder();
    const client = createCascadeClient({ baseUrl: p.url, auth: { apiKey: 'k' }, fromName: 'Acme' });
    const one = (name: string) =>
      client.send([
        {
          recipient: '+380501234567',
          text: 'Reset: %short_url=1% for %name=1%',
          variables: [
            { id: 1, type: 'short_url', value: `https://example.com/reset/${name}` },
            { id: 1, type: 'name', value: name },
          ],
        },
      ]);
    await Promise.all([one('ann'), one('bob')]);
    const uploads = p.seen.filter((r) => r.path === '/api/items');
    const ids = uploads.flatMap((u) =>
      (u.body as { variables: Array<{ type: string; id: number }> }).variables.map(
        (v) => `${v.type}=${v.id}`,
      ),
    );
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("keeps variables inline, typed, with variables: 'inline' (message-types.md)", async () => {
    const p = await recorder();
    const client = createCascadeClient({
      baseUrl: p.url,
      auth: { apiKey: 'k' },
      fromName: 'Acme',
      variables: 'inline',
    });
    await client.send([
      {
        recipient: '+380501234567',
        text: 'Hi %name=1%',
        variables: [
          { id: 1, value: 'Ann' },
          { id: 2, value: 'x' },
        ],
      },
    ]);
    expect(p.seen.map((r) => r.path)).toEqual([CASCADE_PATHS.general]);
    expect((p.seen[0]!.body as Array<Record<string, unknown>>)[0]!.variables).toEqual([
      { id: 1, type: 'name', value: 'Ann' },
    ]);
  });

  it('uploadVariables: placeholders may then name them; its ids are never taken for message variables', async () => {
    const p = await recorder();
    const client = createCascadeClient({ baseUrl: p.url, auth: { apiKey: 'k' } });
    expect(() => validateCascade([endpoint({ text: 'Hi %name=1%' })])).toThrow(AppError);
    await client.uploadVariables([{ id: 1, type: 'name', value: 'Ann' }]);
    await client.send([endpoint({ text: 'Hi %name=1%' })]);
    await client.send([
      endpoint({ text: 'Hi %name=1%', variables: [{ id: 1, type: 'name', value: 'Bob' }] }),
    ]);
    expect(p.seen.map((r) => [r.path, r.body])).toEqual([
      ['/api/items', { variables: [{ id: 1, type: 'name', value: 'Ann' }] }],
      [CASCADE_PATHS.general, [endpoint({ text: 'Hi %name=1%' })]],
      ['/api/items', { variables: [{ id: 2, type: 'name', value: 'Bob' }] }],
      [CASCADE_PATHS.general, [endpoint({ text: 'Hi %name=2%' })]],
    ]);
    // name 2 holds Bob because this client chose it: a placeholder may not name it on its own
    await expect(client.send([endpoint({ text: 'Hi %name=2%' })])).rejects.toMatchObject({
      details: [{ path: 'messages[0].text', code: 'UNKNOWN_VARIABLE' }],
    });
    const err = await client
      .uploadVariables([{ id: 1, value: 'x' } as never])
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ details: [{ path: 'variables[0].type', code: 'REQUIRED' }] });
  });

  it('a typed placeholder resolves only to a variable of its type (or an untyped one)', () => {
    const e = refusal(() =>
      validateCascade([
        endpoint({ text: '%url=1% %name=1%', variables: [{ id: 1, type: 'name', value: 'a' }] }),
      ]),
    );
    expect(e.details).toEqual([
      {
        path: 'messages[0].text',
        code: 'UNKNOWN_VARIABLE',
        message: '%url=1% names variable 1 of type url, which is not in variables',
      },
    ]);
    expect(() =>
      validateCascade([endpoint({ text: '%url=1% %name=1%', variables: [{ id: 1, value: 'a' }] })]),
    ).not.toThrow();
  });

  it.each<[string, Record<string, unknown>, string, string, RegExp]>([
    ['missing fromName', { fromName: undefined }, 'fromName', 'REQUIRED', /fromName is required/],
    [
      'missing messageType',
      { messageType: undefined },
      'messageType',
      'REQUIRED',
      /messageType is required/,
    ],
    ['blank fromName', { fromName: ' ' }, 'fromName', 'INVALID_SENDER', /fromName/],
    [
      'bad messageType',
      { messageType: 'sms' },
      'messageType',
      'INVALID_VALUE',
      /messageType must be one of/,
    ],
    [
      'no text',
      { text: undefined },
      'text',
      'REQUIRED',
      /text is required for messageType transaction/,
    ],
    ['id too long', { id: 'x'.repeat(256) }, 'id', 'TOO_BIG', /id is at most 255/],
    ['ttl zero', { ttl: 0 }, 'ttl', 'TOO_SMALL', /ttl must be at least 1/],
    ['ttl not whole', { ttl: 1.5 }, 'ttl', 'INVALID_TYPE', /ttl must be a whole number/],
    [
      'date without zone',
      { scheduledSent: '2025-01-25T10:00:00' },
      'scheduledSent',
      'INVALID_DATETIME',
      /scheduledSent must be an ISO 8601/,
    ],
    [
      'both spellings',
      { scheduledSent: '2025-01-25T10:00:00Z', scheduledTime: '2025-01-25T10:00:00Z' },
      'scheduledTime',
      'CONFLICTING_FIELDS',
      /scheduledSent or scheduledTime/,
    ],
    [
      'options on a transaction',
      { surveyOptions: ['a', 'b'] },
      'surveyOptions',
      'SURVEY_OPTIONS_NOT_ALLOWED',
      /only for messageType viber_survey/,
    ],
    [
      'survey without options',
      { messageType: 'viber_survey' },
      'surveyOptions',
      'REQUIRED',
      /surveyOptions is required/,
    ],
    [
      'survey with one option',
      { messageType: 'viber_survey', surveyOptions: ['a'] },
      'surveyOptions',
      'SURVEY_OPTIONS_COUNT',
      /2 to 5 options/,
    ],
    [
      'survey with six options',
      { messageType: 'viber_survey', surveyOptions: ['a', 'b', 'c', 'd', 'e', 'f'] },
      'surveyOptions',
      'SURVEY_OPTIONS_COUNT',
      /got 6/,
    ],
    [
      'survey text of 86',
      { messageType: 'viber_survey', surveyOptions: ['a', 'b'], text: 'x'.repeat(86) },
      'text',
      'TEXT_TOO_LONG',
      /at most 85/,
    ],
    [
      'empty option',
      { messageType: 'viber_survey', surveyOptions: ['a', ' '] },
      'surveyOptions[1]',
      'EMPTY_OPTION',
      /must not be empty/,
    ],
    ['unknown field', { channel: 'sms' }, 'channel', 'UNKNOWN_FIELD', /channel is not a field/],
    [
      'short_url not a URL',
      { text: '%short_url=1%', variables: [{ id: 1, type: 'short_url', value: 'x' }] },
      'variables[0].value',
      'INVALID_URL',
      /http/,
    ],
    [
      'untyped short_url not a URL',
      { text: '%short_url=1%', variables: [{ id: 1, value: 'x' }] },
      'text',
      'INVALID_URL',
      /shortens variable 1/,
    ],
    [
      'duplicate variable',
      {
        text: '%name=1%',
        variables: [
          { id: 1, type: 'name', value: 'a' },
          { id: 1, value: 'b' },
        ],
      },
      'variables[1].id',
      'DUPLICATE_VARIABLE',
      /variable id 1 appears twice/,
    ],
    [
      'fallback without text',
      { messageType: 'flashcall', text: undefined, fallback: { messageType: 'promo' } },
      'fallback.text',
      'REQUIRED',
      /text is required for messageType promo/,
    ],
    [
      'fallback placeholder',
      { fallback: { messageType: 'transaction', text: 'code %name=3%' } },
      'fallback.text',
      'UNKNOWN_VARIABLE',
      /%name=3%/,
    ],
  ])('refuses %s with a detail naming the field and the rule', (_, extra, path, code, message) => {
    const e = refusal(() => validateCascade([endpoint(extra)]));
    expect(e.code).toBe('VALIDATION_ERROR');
    expect(e.details).toContainEqual({
      path: `messages[0].${path}`,
      code,
      message: expect.stringMatching(message),
    });
  });

  it('refuses a bad toPhone as INVALID_RECIPIENT, and repeated tracking ids', () => {
    const phone = refusal(() => validateCascade([endpoint({ toPhone: '380501234567' })]));
    expect(phone.code).toBe('INVALID_RECIPIENT');
    expect(phone.details[0]).toMatchObject({
      path: 'messages[0].toPhone',
      code: 'INVALID_RECIPIENT',
    });
    const twice = refusal(() => validateCascade([endpoint(), endpoint()]));
    expect(twice.details).toEqual([
      expect.objectContaining({ path: 'messages[1].id', code: 'DUPLICATE_ID' }),
    ]);
  });

  it('accepts a flash call without text, with a fallback (message-types.md)', () => {
    const { messages } = validateCascade([
      endpoint({
        messageType: 'flashcall',
        text: undefined,
        fallback: { messageType: 'transaction', text: 'code 1' },
      }),
    ]);
    expect(messages[0]).toMatchObject({ messageType: 'flashcall', fallback: { text: 'code 1' } });
  });

  it('says which form a body is in', () => {
    expect(validateCascade([endpoint()]).form).toBe('array');
    expect(validateCascade({ messages: [msg] }).form).toBe('messages');
    expect(refusal(() => validateCascade({ messages: [msg], extra: 1 })).details).toEqual([
      expect.objectContaining({ path: 'extra', code: 'UNKNOWN_FIELD' }),
    ]);
  });
});

describe('variable ids', () => {
  it('come round only after every other id of the range, skipping ids the caller uploaded', () => {
    const ids = createVariableIds({ first: 1, last: 3 });
    ids.pin([{ id: 2, type: 'name', value: 'mine' }]);
    expect(['a', 'b', 'a', 'c', 'd'].map((v) => ids.idFor('name', v))).toEqual([1, 3, 1, 1, 3]);
    expect(ids.idFor('url', 'a')).toBe(1);
    // only the caller's own uploads may be named by a placeholder without its variable
    expect(ids.has('name', 2)).toBe(true);
    expect(ids.has('name', 1)).toBe(false);
  });
});
