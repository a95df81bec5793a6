/**
 * API_TOKEN: /v1/* needs a bearer token (any of the comma-separated ones) when it is set, and
 * so does /ui (through the console's own guard, which also takes its sign-in cookie); the
 * operational routes, the API reference, the hooks (their own auth) and the sandbox stay open
 * to it. The constant-time check itself (`tokenMatcher`) is held to a plain comparison.
 */
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import { tokenMatcher } from '../../src/http/auth.ts';
import { buildTestApp, json, phone, readJson, uniq } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';

const OLD = 'old-token-3f9a1c7e';
const NEW = 'new-token-b24d8e06';
const CALLBACK = 'callback-token-51aa';

const bearer = (token: string) => ({ headers: { authorization: `Bearer ${token}` } });

describeEachEngine('API_TOKEN', (ctx) => {
  let app: App;
  let open: App;
  beforeAll(() => {
    app = buildTestApp(ctx.database(), {
      env: { API_TOKEN: ` ${NEW} , ${OLD} `, CALLBACK_TOKEN: CALLBACK },
    }).app;
    open = buildTestApp(ctx.database()).app;
  });

  it('refuses /v1 without a token: 401 in the error envelope, with a bearer challenge', async () => {
    const res = await app.request('/v1/messages');
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toMatch(/^Bearer/);
    const body = await readJson(res);
    expect(body).toEqual({
      error: { code: 'UNAUTHORIZED', message: expect.stringContaining('Bearer'), details: [] },
    });
  });

  it('refuses a wrong token, a token that is only a prefix or an extension of a right one, and other schemes', async () => {
    for (const authorization of [
      'Bearer nope',
      `Bearer ${NEW.slice(0, -1)}`,
      `Bearer ${NEW}x`,
      `Bearer ${NEW},${OLD}`,
      `Basic ${Buffer.from(`x:${NEW}`).toString('base64')}`,
      NEW,
      'Bearer ',
    ]) {
      const res = await app.request('/v1/messages', { headers: { authorization } });
      expect(res.status, authorization).toBe(401);
      expect((await readJson(res)).error.code).toBe('UNAUTHORIZED');
    }
  });

  it('takes either token while they rotate, whatever the case of the scheme', async () => {
    for (const init of [
      bearer(NEW),
      bearer(OLD),
      { headers: { authorization: `bearer ${OLD}` } },
    ]) {
      const res = await app.request('/v1/messages', init);
      expect(res.status).toBe(200);
    }
  });

  it('guards every /v1 route and method', async () => {
    const cmid = uniq('auth');
    const guarded: [string, RequestInit][] = [
      [
        '/v1/messages',
        json({
          messages: [
            { from: 'Acme', to: phone(), type: 'sms', text: 'x', customerMessageId: cmid },
          ],
        }),
      ],
      [`/v1/messages/${cmid}`, {}],
      ['/v1/inbound', {}],
      ['/v1/calls', json({ flow: 'appointment-reminder', to: phone(), from: 'Clinic' })],
      ['/v1/flows', {}],
      [`/v1/subjects/${encodeURIComponent(phone())}`, { method: 'DELETE' }],
      ['/v1/no-such-route', {}],
    ];
    for (const [path, init] of guarded) {
      const res = await app.request(path, init);
      expect(res.status, path).toBe(401);
    }
    // and nothing was done by the refused POST
    const read = await app.request(`/v1/messages/${cmid}`, bearer(NEW));
    expect(read.status).toBe(404);
  });

  it('leaves /ui to the console, which takes the same tokens and its sign-in page lets browsers in', async () => {
    for (const path of ['/ui', '/ui/', '/ui/calls']) {
      expect((await app.request(path)).status, path).toBe(401);
      const browser = await app.request(path, { headers: { accept: 'text/html' } });
      expect(browser.status, path).toBe(303);
      expect(browser.headers.get('location')).toMatch(/^\/ui\/login/);
      expect((await app.request(path, bearer(OLD))).status, path).not.toBe(401);
    }
    expect((await app.request('/ui/login')).status).toBe(200);
  });

  it('leaves the operational routes, the reference, the hooks and the sandbox to their own rules', async () => {
    for (const path of ['/healthz', '/readyz', '/metrics', '/openapi.json', '/docs']) {
      const res = await app.request(path);
      expect(res.status, path).toBe(200);
    }
    // the hooks answer to CALLBACK_TOKEN, not to API_TOKEN
    const body = JSON.stringify({ customerMessageId: uniq('late'), status: 'delivered' });
    const withCallback = await app.request(`/hooks/delivery?token=${CALLBACK}`, {
      method: 'POST',
      body,
    });
    expect(withCallback.status).toBe(200);
    const withApiToken = await app.request('/hooks/delivery', {
      method: 'POST',
      body,
      headers: { authorization: `Bearer ${NEW}` },
    });
    expect(withApiToken.status).toBe(401);
    expect((await readJson(withApiToken)).error.message).toMatch(/callback token/);
  });

  it('takes every CALLBACK_TOKEN of a rotation on the hooks, and no other', async () => {
    const rotating = buildTestApp(ctx.database(), {
      env: { CALLBACK_TOKEN: `${CALLBACK}-new,${CALLBACK}` },
    }).app;
    const body = JSON.stringify({ customerMessageId: uniq('rot'), status: 'delivered' });
    for (const [token, status] of [
      [`${CALLBACK}-new`, 200],
      [CALLBACK, 200],
      [`${CALLBACK}-new,${CALLBACK}`, 401],
      ['other', 401],
    ] as const) {
      const res = await rotating.request(`/hooks/delivery?token=${encodeURIComponent(token)}`, {
        method: 'POST',
        body,
      });
      expect(res.status, token).toBe(status);
    }
  });

  it('refuses before reading the body: no token and a huge body is a 401, not a 413', async () => {
    const res = await app.request('/v1/messages', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-length': String(200 * 1024 * 1024) },
      body: '{}',
    });
    expect(res.status).toBe(401);
  });

  it('is open, with no token configured', async () => {
    const res = await open.request('/v1/messages');
    expect(res.status).toBe(200);
  });

  it('documents the bearer token on /v1 operations only', async () => {
    const doc = await readJson(await app.request('/openapi.json'));
    expect(doc.components.securitySchemes.apiBearer).toMatchObject({
      type: 'http',
      scheme: 'bearer',
    });
    // with the scope each operation needs (test/security/tokens.test.ts checks them all)
    expect(doc.paths['/v1/messages'].post.security).toEqual([{ apiBearer: ['send'] }]);
    expect(doc.paths['/v1/subjects/{phone}'].delete.security).toEqual([{ apiBearer: ['admin'] }]);
    // open routes say so explicitly (redocly's security-defined rule)
    expect(doc.paths['/healthz'].get.security).toEqual([]);
    expect(JSON.stringify(doc.paths['/hooks/delivery'].post.security)).not.toContain('apiBearer');
  });
});

describe('tokenMatcher', () => {
  it('answers as a plain comparison with each token does, for any tokens and candidate', () => {
    // the digests of the tokens are made once, when the check is: held to `includes`
    fc.assert(
      fc.property(
        fc.array(fc.string({ unit: 'binary', minLength: 1 }), { maxLength: 3 }),
        fc.option(fc.string({ unit: 'binary' }), { nil: undefined }),
        fc.nat(),
        (tokens, other, pick) => {
          const check = tokenMatcher(tokens);
          const candidates = [
            other,
            ...tokens,
            tokens.length ? `${tokens[pick % tokens.length]}x` : '',
          ];
          for (const c of candidates) {
            expect(check(c)).toBe(c !== undefined && c !== '' && tokens.includes(c));
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it('checks against the tokens as they were when it was made', () => {
    const tokens = ['first'];
    const check = tokenMatcher(tokens);
    tokens[0] = 'second';
    expect(check('first')).toBe(true);
    expect(check('second')).toBe(false);
  });
});
