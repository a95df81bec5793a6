/**
 * Bad input, as an attacker sends it (issue 21's findings): characters Postgres refuses, any
 * nesting depth, key names that are Object.prototype's own: every answer is a 4xx in the one
 * envelope, or a 2xx for a callback that was stored; never a 500.
 */
import { and, eq } from 'drizzle-orm';
import { beforeAll, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import { inbox } from '../../src/db/schema/index.ts';
import { MAX_URL_LENGTH } from '../../src/http/input.ts';
import { buildTestApp, json, phone, readJson } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';

const nested = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`;

describeEachEngine('bad input', (ctx) => {
  let app: App;
  beforeAll(() => {
    app = buildTestApp(ctx.database()).app;
  });

  it('answers 404, not 500, for asset names that are Object.prototype keys', async () => {
    for (const path of [
      '/ui/assets/constructor',
      '/ui/assets/__proto__',
      '/ui/assets/hasOwnProperty',
      '/docs/assets/__proto__',
      '/docs/assets/constructor',
      '/docs/assets/toString',
    ]) {
      const res = await app.request(path);
      expect(res.status, path).toBe(404);
    }
  });

  it('refuses a NUL in a message text (that message alone), call vars, a path or a query', async () => {
    // a well-formed list: 202, the message with the NUL rejected in its own result, the other sent
    const messages = await app.request(
      '/v1/messages',
      json({
        messages: [
          { type: 'sms', from: 'Shop', to: phone(), text: 'a\u0000b' },
          { type: 'sms', from: 'Shop', to: phone(), text: 'fine' },
        ],
      }),
    );
    expect(messages.status).toBe(202);
    const results = (await readJson(messages)).messages;
    expect(results[0]).toMatchObject({ status: 'rejected', error: { code: 'INVALID_ENCODING' } });
    expect(results[1]).toMatchObject({ status: 'queued' });
    const call = await app.request(
      '/v1/calls',
      json({
        flow: 'appointment-reminder',
        from: 'Clinic',
        to: phone(),
        vars: { name: 'A\u0000n', date: 'Monday' },
      }),
    );
    expect(call.status).toBe(400);
    expect((await readJson(call)).error.code).toBe('INVALID_ENCODING');
    // found before any route runs, the call id's included (it was a 404 by the UUID rule)
    for (const path of ['/v1/messages/a%00b', '/v1/messages?to=%2B380%00', '/v1/calls/a%00b']) {
      const res = await app.request(path);
      expect(res.status, path).toBe(400);
      expect((await readJson(res)).error.code, path).toBe('INVALID_ENCODING');
    }
  });

  it('rejects the one call of a batch that holds a NUL, and starts the others', async () => {
    const res = await app.request(
      '/v1/calls/batch',
      json({
        flow: 'appointment-reminder',
        from: 'Clinic',
        calls: [
          { to: phone(), vars: { name: 'A\u0000n', date: 'Monday' } },
          { to: phone(), vars: { name: 'Ann', date: 'Monday' } },
        ],
      }),
    );
    expect(res.status).toBe(202);
    const answer = await readJson(res);
    expect(answer.calls[0]).toMatchObject({
      status: 'rejected',
      error: { code: 'INVALID_ENCODING', details: [{ path: 'calls[0].vars.name' }] },
    });
    expect(answer.calls[1].status).not.toBe('rejected');
    expect(answer.queued).toBe(1);
  });

  it('names the field that holds the character, in the body, the query and the path', async () => {
    const cases: [string, RequestInit | undefined, string][] = [
      [
        '/v1/messages',
        json({ messages: [{ type: 'sms', from: 'Shop', to: phone(), text: 'a\u0000b' }] }),
        'messages[0].text',
      ],
      [
        '/v1/messages',
        json({ messages: [{ type: 'sms', from: 'Shop', to: phone(), text: 'a\uD800b' }] }),
        'messages[0].text',
      ],
      [
        '/v1/messages',
        json({ messages: [{ type: 'sms', from: 'Shop', to: phone(), text: 'hi', 'x\u0000': 1 }] }),
        'messages[0].x\u0000',
      ],
      [
        '/v1/calls',
        json({
          flow: 'appointment-reminder',
          from: 'Clinic',
          to: phone(),
          vars: { name: 'A\u0000n' },
        }),
        'vars.name',
      ],
      ['/v1/messages?to=%2B380%00', undefined, 'query.to'],
      ['/v1/messages/a%00b', undefined, 'path.ref'],
      ['/v1/calls/a%00b', undefined, 'path.id'],
      ['/ui/messages/a%00b', undefined, 'path.ref'],
    ];
    for (const [path, init, field] of cases) {
      const res = await app.request(path, init);
      // POST /v1/messages answers its list item by item (202): the message's own result
      const itemByItem = path === '/v1/messages' && init !== undefined;
      expect(res.status, field).toBe(itemByItem ? 202 : 400);
      const answer = await readJson(res);
      const error = itemByItem ? answer.messages[0].error : answer.error;
      expect(error.code, field).toBe('INVALID_ENCODING');
      expect(error.details[0].path, field).toBe(field);
      expect(error.message, field).toContain(field);
    }
  });

  it('refuses a JSON body nested deeper than the limit, naming where, and stores a deep callback', async () => {
    const deep = nested(100_000);
    const body = `{"messages":[{"type":"viber_trans","from":"Shop","to":"${phone()}","messageData":${deep}}]}`;
    const res = await app.request('/v1/messages', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    // that message alone is rejected, in its own result
    expect(res.status).toBe(202);
    const { error } = (await readJson(res)).messages[0];
    expect(error.code).toBe('VALIDATION_ERROR');
    expect(error.details[0]).toMatchObject({ code: 'TOO_DEEP' });
    expect(error.details[0].path).toMatch(/^messages\[0\]\.messageData(\[0\])+$/);
    // objects, not arrays: the delivery parser looked for fields all the way down (a 500)
    const objects = `${'{"a":'.repeat(100_000)}1${'}'.repeat(100_000)}`;
    const hook = await app.request('/hooks/delivery', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: objects,
    });
    expect(hook.status).toBe(200);
    const rows = await ctx
      .database()
      .db.select({ id: inbox.id })
      .from(inbox)
      .where(and(eq(inbox.body, objects), eq(inbox.kind, 'delivery')));
    expect(rows).toHaveLength(1);
  });

  it('takes any key name without polluting Object.prototype, and 10 000 unknown keys without a blow-up', async () => {
    const body = `{"__proto__":{"polluted":1},"constructor":{"prototype":{"polluted":1}},"messages":[{"__proto__":{"polluted":1},"type":"sms","from":"Shop","to":"${phone()}","text":"hi"}]}`;
    const res = await app.request('/v1/messages', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    expect(res.status).toBeLessThan(500);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    // each unknown key's detail names that key alone: the list of all 10 000 was copied into
    // each of the 10 000 details (a 500 in the sandbox, gigabytes here)
    const many = Object.fromEntries(Array.from({ length: 10_000 }, (_, i) => [`k${i}`, i]));
    const wide = await app.request(
      '/v1/messages',
      json({ messages: [{ type: 'sms', from: 'Shop', to: phone(), text: 'hi', ...many }] }),
    );
    // a well-formed list: the message is rejected on its own (202)
    expect(wide.status).toBe(202);
    const text = await wide.text();
    expect(text.length).toBeLessThan(2_000_000);
    const { error } = JSON.parse(text).messages[0];
    expect(error.details.length).toBeGreaterThan(1);
    expect(error.details[0].message).not.toContain('k9999');
  });

  it('refuses JSON in another charset than UTF-8 (415) and bytes that are not UTF-8 (400); a callback keeps them', async () => {
    const sample = JSON.stringify({
      messages: [{ type: 'sms', from: 'Shop', to: phone(), text: 'hi' }],
    });
    const utf16 = await app.request('/v1/messages', {
      method: 'POST',
      headers: { 'content-type': 'application/json; charset=utf-16' },
      body: sample,
    });
    expect(utf16.status).toBe(415);
    expect((await readJson(utf16)).error.code).toBe('UNSUPPORTED_MEDIA_TYPE');
    // {"messages":[{"text":"\xC3(" ... }]}: 0xC3 opens a two-byte sequence, '(' cannot end it
    const bad = Buffer.concat([
      Buffer.from(`{"messages":[{"type":"sms","from":"Shop","to":"${phone()}","text":"`),
      Buffer.from([0xc3, 0x28]),
      Buffer.from('"}]}'),
    ]);
    const res = await app.request('/v1/messages', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: bad,
    });
    expect(res.status).toBe(400);
    const { error } = await readJson(res);
    expect(error).toMatchObject({ code: 'INVALID_ENCODING', details: [{ path: 'body' }] });
    const hook = await app.request('/hooks/delivery', {
      method: 'POST',
      headers: { 'content-type': 'application/json; charset=utf-16' },
      body: bad,
    });
    expect(hook.status).toBe(200);
  });

  it('answers 414 for a path and query over 8 KiB, on the API, the console and the sandbox', async () => {
    for (const path of [
      `/v1/messages?to=${'1'.repeat(MAX_URL_LENGTH)}`,
      `/ui/messages/${'x'.repeat(MAX_URL_LENGTH)}`,
      `/sandbox/_control/messages/${'x'.repeat(MAX_URL_LENGTH)}`,
      `/hooks/delivery?token=${'x'.repeat(MAX_URL_LENGTH)}`,
    ]) {
      const res = await app.request(path);
      expect(res.status, path.slice(0, 30)).toBe(414);
      expect((await readJson(res)).error.code).toBe('URI_TOO_LONG');
    }
  });

  it('stores a deeply nested delivery or Viber callback raw, and does not answer 500', async () => {
    for (const [path, kind] of [
      ['/hooks/delivery', 'delivery'],
      ['/hooks/viber', 'viber'],
    ] as const) {
      const body = nested(100_000);
      const res = await app.request(path, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
      });
      expect(res.status, path).toBeLessThan(500);
      const rows = await ctx
        .database()
        .db.select({ id: inbox.id })
        .from(inbox)
        .where(and(eq(inbox.body, body), eq(inbox.kind, kind)));
      expect(rows, path).toHaveLength(1);
    }
  });
});
