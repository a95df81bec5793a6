/**
 * Bad input, as an attacker sends it (issue 21's findings): characters Postgres refuses, any
 * nesting depth, key names that are Object.prototype's own: every answer is a 4xx in the one
 * envelope, or a 2xx for a callback that was stored; never a 500.
 */
import { and, eq } from 'drizzle-orm';
import { beforeAll, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import { inbox } from '../../src/db/schema/index.ts';
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

  it('refuses a NUL in a message text, call vars, a path or a query with 400', async () => {
    const messages = await app.request(
      '/v1/messages',
      json({ messages: [{ type: 'sms', from: 'Shop', to: phone(), text: 'a\u0000b' }] }),
    );
    expect(messages.status).toBe(400);
    expect((await readJson(messages)).error.code).toBe('INVALID_ENCODING');
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
    // a call id is a UUID: anything else is no call, before the database is asked
    for (const [path, status, code] of [
      ['/v1/messages/a%00b', 400, 'INVALID_ENCODING'],
      ['/v1/messages?to=%2B380%00', 400, 'INVALID_ENCODING'],
      ['/v1/calls/a%00b', 404, 'NOT_FOUND'],
    ] as const) {
      const res = await app.request(path);
      expect(res.status, path).toBe(status);
      expect((await readJson(res)).error.code, path).toBe(code);
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
