/**
 * Idempotency as payment APIs do it: an `Idempotency-Key` on a creating POST answers its first
 * response again (same ids, nothing created twice), refuses the key with other content (409
 * IDEMPOTENCY_KEY_REUSED) or while its first request runs (409 IDEMPOTENCY_KEY_IN_USE), and
 * expires after 24 h; a repeated customerMessageId with the same content is answered as the
 * first time. In-process on each engine, and once over real HTTP to the sandbox, which must
 * see one message.
 */
import { eq, sql } from 'drizzle-orm';
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import type { Clock } from '../../src/clock.ts';
import type { Db } from '../../src/db/client.ts';
import { rowsOf } from '../../src/db/client.ts';
import { apiTokens, idempotencyKeys, messages } from '../../src/db/schema/index.ts';
import type { AppEnv } from '../../src/http/env.ts';
import {
  callerOf,
  claimKey,
  IDEMPOTENCY_TTL_MS,
  idempotency,
  removeExpiredKeys,
  requestFingerprint,
} from '../../src/http/idempotency.ts';
import type { RunningServer } from '../../src/server.ts';
import { buildTestApp, json, phone, readJson, uniq } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';
import { eventually, startTestServer } from '../support/server.ts';

const sms = (to: string, over: Record<string, unknown> = {}) => ({
  from: 'Acme',
  to,
  type: 'sms',
  text: 'Your order has shipped',
  ...over,
});

const withKey = (key: string, body: unknown, headers: Record<string, string> = {}) =>
  json(body, { headers: { 'Idempotency-Key': key, ...headers } });

/** A clock the test moves: keys expire by it. */
function movableClock(): Clock & { advance(ms: number): void } {
  let offset = 0;
  return {
    now: () => new Date(Date.now() + offset),
    advance(ms) {
      offset += ms;
    },
  };
}

describeEachEngine('Idempotency-Key', (ctx) => {
  let app: App;
  const clock = movableClock();
  const db = () => ctx.database().db;
  const storedTo = async (to: string) =>
    (await db().select({ id: messages.id }).from(messages).where(eq(messages.to, to))).length;

  beforeAll(() => {
    app = buildTestApp(ctx.database(), { clock }).app;
  });

  it('answers the first response again for the same key and request: same ids, one message stored', async () => {
    const to = phone();
    // no customerMessageId: only the key can tell the retry from a new message
    const body = { messages: [sms(to), sms(to, { text: 'second' }), sms('nobody')] };
    const key = uniq('key');
    const first = await app.request('/v1/messages', withKey(key, body));
    expect(first.status).toBe(202);
    expect(first.headers.get('Idempotent-Replayed')).toBeNull();
    const firstBody = await readJson(first);
    expect(firstBody.messages.map((m: { status: string }) => m.status)).toEqual([
      'queued',
      'queued',
      'rejected',
    ]);

    const again = await app.request('/v1/messages', withKey(key, body));
    expect(again.status).toBe(202);
    expect(again.headers.get('Idempotent-Replayed')).toBe('true');
    expect(again.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await readJson(again)).toEqual(firstBody);
    expect(await storedTo(to)).toBe(2);
  });

  it('answers 409 IDEMPOTENCY_KEY_REUSED for the same key with another body or route', async () => {
    const to = phone();
    const key = uniq('key');
    expect((await app.request('/v1/messages', withKey(key, { messages: [sms(to)] }))).status).toBe(
      202,
    );
    const other = await app.request(
      '/v1/messages',
      withKey(key, { messages: [sms(to, { text: 'other' })] }),
    );
    expect(other.status).toBe(409);
    expect((await readJson(other)).error.code).toBe('IDEMPOTENCY_KEY_REUSED');
    const elsewhere = await app.request(
      '/v1/calls',
      withKey(key, { flow: 'appointment-reminder', from: 'Clinic', to }),
    );
    expect(elsewhere.status).toBe(409);
    expect((await readJson(elsewhere)).error.code).toBe('IDEMPOTENCY_KEY_REUSED');
    expect(await storedTo(to)).toBe(1);
  });

  it('answers 409 IDEMPOTENCY_KEY_IN_USE, with Retry-After, while the first request runs', async () => {
    const key = uniq('key');
    const body = { messages: [sms(phone())] };
    const bytes = new TextEncoder().encode(JSON.stringify(body));
    // the first request holds the key and has not answered yet
    const claim = await claimKey(db(), {
      caller: callerOf(undefined),
      key,
      fingerprint: requestFingerprint('POST', '/v1/messages', bytes.buffer as ArrayBuffer),
      now: clock.now(),
    });
    expect(claim.kind).toBe('claimed');
    const res = await app.request('/v1/messages', withKey(key, body));
    expect(res.status).toBe(409);
    expect(res.headers.get('Retry-After')).toBe('1');
    expect((await readJson(res)).error.code).toBe('IDEMPOTENCY_KEY_IN_USE');
  });

  it('two concurrent requests with one key store the messages once', async () => {
    const to = phone();
    const key = uniq('key');
    const body = { messages: [sms(to), sms(to, { text: 'two' })] };
    const answers = await Promise.all(
      [1, 2].map(async () => {
        const res = await app.request('/v1/messages', withKey(key, body));
        return { status: res.status, body: await readJson(res) };
      }),
    );
    const created = answers.filter((a) => a.status === 202);
    expect(created.length).toBeGreaterThanOrEqual(1);
    // the other one came after the first answered and got its answer, or was told to retry
    for (const a of answers) {
      if (a.status === 202) expect(a.body).toEqual(created[0]!.body);
      else
        expect(a).toMatchObject({
          status: 409,
          body: { error: { code: 'IDEMPOTENCY_KEY_IN_USE' } },
        });
    }
    expect(await storedTo(to)).toBe(2);
    // a retry after both: the first answer
    const retry = await app.request('/v1/messages', withKey(key, body));
    expect(await readJson(retry)).toEqual(created[0]!.body);
    expect(await storedTo(to)).toBe(2);
  });

  it('keeps no answer that created nothing: a malformed request leaves the key free', async () => {
    const to = phone();
    const key = uniq('key');
    const bad = await app.request('/v1/messages', withKey(key, { messages: [] }));
    expect(bad.status).toBe(400);
    const good = await app.request('/v1/messages', withKey(key, { messages: [sms(to)] }));
    expect(good.status).toBe(202);
    expect(await storedTo(to)).toBe(1);
  });

  it('keeps a 202 whose messages were all rejected, and answers it again', async () => {
    const key = uniq('key');
    const body = { messages: [sms('nobody')] };
    const first = await app.request('/v1/messages', withKey(key, body));
    expect(first.status).toBe(202);
    const again = await app.request('/v1/messages', withKey(key, body));
    expect(again.headers.get('Idempotent-Replayed')).toBe('true');
    expect(await readJson(again)).toEqual(await readJson(first));
  });

  it('refuses a key that is not 1-255 printable ASCII characters, naming the header', async () => {
    for (const key of ['k'.repeat(256), 'caf\u00e9', '']) {
      const res = await app.request('/v1/messages', withKey(key, { messages: [sms(phone())] }));
      expect(res.status, JSON.stringify(key)).toBe(400);
      const { error } = await readJson(res);
      expect(error.code).toBe('VALIDATION_ERROR');
      expect(error.details[0].path).toBe('header.Idempotency-Key');
    }
    expect(
      (await app.request('/v1/messages', withKey('k'.repeat(255), { messages: [sms(phone())] })))
        .status,
    ).toBe(202);
  });

  it('keeps a key for 24 hours: then it is free again, and the cleanup removes it', async () => {
    const to = phone();
    const key = uniq('key');
    const body = { messages: [sms(to)] };
    const first = await readJson(await app.request('/v1/messages', withKey(key, body)));
    clock.advance(IDEMPOTENCY_TTL_MS - 60_000);
    const within = await readJson(await app.request('/v1/messages', withKey(key, body)));
    expect(within).toEqual(first);
    clock.advance(120_000);
    const after = await readJson(await app.request('/v1/messages', withKey(key, body)));
    expect(after.messages[0].id).not.toBe(first.messages[0].id);
    expect(await storedTo(to)).toBe(2);

    clock.advance(IDEMPOTENCY_TTL_MS + 1000);
    const { removed } = await removeExpiredKeys(db(), clock.now(), 10_000);
    expect(removed).toBeGreaterThanOrEqual(1);
    const left = await db()
      .select({ key: idempotencyKeys.key })
      .from(idempotencyKeys)
      .where(sql`${idempotencyKeys.expiresAt} < ${clock.now().toISOString()}::timestamptz`);
    expect(left).toEqual([]);
  });

  it('answers POST /v1/calls and POST /v1/calls/batch again with the same ids', async () => {
    const to = phone();
    const one = {
      flow: 'appointment-reminder',
      from: 'Clinic',
      to,
      vars: { name: 'A', date: 'x' },
    };
    const key = uniq('key');
    const first = await readJson(await app.request('/v1/calls', withKey(key, one)));
    expect(first).toMatchObject({ state: 'queued', id: expect.any(String) });
    const again = await app.request('/v1/calls', withKey(key, one));
    expect(again.headers.get('Idempotent-Replayed')).toBe('true');
    expect(await readJson(again)).toEqual(first);

    const to2 = phone();
    const batch = {
      flow: 'appointment-reminder',
      from: 'Clinic',
      calls: [{ to: to2, vars: { name: 'B', date: 'y' } }, { to: 'nope' }],
    };
    const key2 = uniq('key');
    const b1 = await readJson(await app.request('/v1/calls/batch', withKey(key2, batch)));
    expect(b1.queued).toBe(1);
    const b2 = await readJson(await app.request('/v1/calls/batch', withKey(key2, batch)));
    expect(b2).toEqual(b1);
    expect(await storedTo(to)).toBe(1);
    expect(await storedTo(to2)).toBe(1);
  });
});

describeEachEngine('Idempotency-Key per caller', (ctx) => {
  const A = 'env-token-a-for-idempotency-tests';
  const B = 'env-token-b-for-idempotency-tests';
  let app: App;
  const db = () => ctx.database().db;
  const auth = (token: string) => ({ authorization: `Bearer ${token}` });

  beforeAll(() => {
    app = buildTestApp(ctx.database(), { env: { API_TOKEN: `${A},${B}` } }).app;
  });

  it("keeps each caller's keys apart: the same key from another token is its own request", async () => {
    const to = phone();
    const key = uniq('key');
    const body = { messages: [sms(to)] };
    const a = await readJson(await app.request('/v1/messages', withKey(key, body, auth(A))));
    const b = await readJson(await app.request('/v1/messages', withKey(key, body, auth(B))));
    expect(b.messages[0].id).not.toBe(a.messages[0].id);
    const a2 = await readJson(await app.request('/v1/messages', withKey(key, body, auth(A))));
    expect(a2).toEqual(a);
  });

  it('answers POST /v1/tokens again with the same token, and stores no answer in clear', async () => {
    const key = uniq('key');
    const body = { name: uniq('ci'), scopes: ['send'] };
    const first = await app.request('/v1/tokens', withKey(key, body, auth(A)));
    expect(first.status).toBe(201);
    const made = await readJson(first);
    const again = await app.request('/v1/tokens', withKey(key, body, auth(A)));
    expect(again.status).toBe(201);
    expect(await readJson(again)).toEqual(made);
    const rows = await db().select().from(apiTokens).where(eq(apiTokens.name, body.name));
    expect(rows).toHaveLength(1);

    const stored = rowsOf<{ caller: string; body: string }>(
      await db().execute(sql`select caller, body from idempotency_keys where key = ${key}`),
    );
    expect(stored).toHaveLength(1);
    expect(stored[0]!.caller).not.toContain(A);
    expect(stored[0]!.body).not.toContain(made.token);
    expect(Buffer.from(stored[0]!.body, 'base64').toString('latin1')).not.toContain(made.token);
    expect(Buffer.from(stored[0]!.body, 'base64').toString('latin1')).not.toContain(made.id);
  });
});

describeEachEngine('customerMessageId sent again', (ctx) => {
  let app: App;
  const db = () => ctx.database().db;

  beforeAll(() => {
    app = buildTestApp(ctx.database()).app;
  });

  it('with the same content: answered as the first time, stored once; with other content: rejected', async () => {
    const to = phone();
    const cmid = uniq('order');
    const first = await readJson(
      await app.request('/v1/messages', json({ messages: [sms(to, { customerMessageId: cmid })] })),
    );
    expect(first.messages[0]).toMatchObject({
      status: 'queued',
      customerMessageId: cmid,
      parts: 1,
    });

    // a retry without a key, the same message written in another key order, and a new one
    const retry = await app.request(
      '/v1/messages',
      json({
        messages: [
          {
            customerMessageId: cmid,
            text: 'Your order has shipped',
            type: 'sms',
            to,
            from: 'Acme',
          },
          sms(phone()),
        ],
      }),
    );
    expect(retry.status).toBe(202);
    const answer = await readJson(retry);
    expect(answer.messages[0]).toEqual(first.messages[0]);
    expect(answer.messages[1].status).toBe('queued');

    const changed = await readJson(
      await app.request(
        '/v1/messages',
        json({ messages: [sms(to, { customerMessageId: cmid, text: 'changed' })] }),
      ),
    );
    expect(changed.messages[0]).toMatchObject({
      status: 'rejected',
      customerMessageId: cmid,
      error: {
        code: 'DUPLICATE_CUSTOMER_MESSAGE_ID',
        details: [{ path: 'messages[0].customerMessageId' }],
      },
    });
    expect(changed.messages[0].id).toBeUndefined();
    const rows = await db().select().from(messages).where(eq(messages.customerMessageId, cmid));
    expect(rows).toHaveLength(1);
  });

  it('after retention removed its texts: rejected, saying why, as the content cannot be compared', async () => {
    const to = phone();
    const cmid = uniq('old');
    const body = { messages: [sms(to, { customerMessageId: cmid })] };
    expect((await readJson(await app.request('/v1/messages', json(body)))).messages[0].status).toBe(
      'queued',
    );
    await db().execute(
      sql`update messages set payload = payload - 'text', content_removed_at = now()
          where customer_message_id = ${cmid}`,
    );
    const again = await readJson(await app.request('/v1/messages', json(body)));
    expect(again.messages[0]).toMatchObject({
      status: 'rejected',
      error: {
        code: 'DUPLICATE_CUSTOMER_MESSAGE_ID',
        message: expect.stringContaining('retention'),
      },
    });
  });

  it('twice in one request: the same content answered alike, other content rejected', async () => {
    const to = phone();
    const cmid = uniq('twice');
    const res = await readJson(
      await app.request(
        '/v1/messages',
        json({
          messages: [
            sms(to, { customerMessageId: cmid }),
            sms(to, { customerMessageId: cmid }),
            sms(to, { customerMessageId: cmid, text: 'other' }),
          ],
        }),
      ),
    );
    expect(res.messages[0]).toMatchObject({ status: 'queued', customerMessageId: cmid });
    expect(res.messages[1]).toEqual(res.messages[0]);
    expect(res.messages[2]).toMatchObject({
      status: 'rejected',
      error: { code: 'DUPLICATE_CUSTOMER_MESSAGE_ID' },
    });
    const rows = await db().select().from(messages).where(eq(messages.customerMessageId, cmid));
    expect(rows).toHaveLength(1);
  });
});

describe('Idempotency-Key without the header', () => {
  it('does no database work: the request goes straight to its handler', async () => {
    // any use of this database fails the request
    const db = new Proxy({} as Db, {
      get() {
        throw new Error('the database was used');
      },
    });
    const app = new Hono<AppEnv>();
    app.onError((err, c) => c.json({ error: err.message }, 500));
    app.use('*', idempotency({ db, clock: { now: () => new Date() } }));
    app.post('/v1/things', (c) => c.json({ made: true }, 201));
    const plain = await app.request('/v1/things', { method: 'POST', body: '{}' });
    expect(plain.status).toBe(201);
    const keyed = await app.request('/v1/things', {
      method: 'POST',
      body: '{}',
      headers: { 'Idempotency-Key': 'k1' },
    });
    // the same app with the header does reach for the database (what the test relies on)
    expect(keyed.status).toBe(500);
    expect(await keyed.json()).toEqual({ error: 'the database was used' });
  });
});

describeEachEngine('Idempotency-Key over HTTP', (ctx) => {
  let server: RunningServer;

  beforeAll(async () => {
    server = await startTestServer(ctx.database());
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('the sandbox sees one message for a request sent three times, two of them at once', async () => {
    const to = phone();
    const key = uniq('key');
    const send = () =>
      fetch(`${server.url}/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'Idempotency-Key': key },
        body: JSON.stringify({ messages: [sms(to)] }),
      });
    const [a, b] = await Promise.all([send(), send()]);
    const c = await send();
    const statuses = [a.status, b.status, c.status];
    expect(statuses.filter((s) => s === 202).length).toBeGreaterThanOrEqual(2);
    expect(statuses.every((s) => s === 202 || s === 409)).toBe(true);
    const id = (await readJson(c)).messages[0].id as string;
    await eventually(
      async () => {
        const view = await readJson(await fetch(`${server.url}/v1/messages/${id}`));
        return view.status !== 'queued' && view;
      },
      10_000,
      'the message sent',
    );
    const seen = await readJson(
      await fetch(`${server.url}/sandbox/_control/messages?to=${encodeURIComponent(to)}`),
    );
    expect(seen).toHaveLength(1);
  });
});
