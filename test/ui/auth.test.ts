/**
 * The console's token: UI_TOKEN (else API_TOKEN) as a bearer token or as the session cookie
 * the sign-in form sets; same-origin form posts only. Sessions themselves (sign-out, expiry,
 * Secure, the attempt limit) are in test/security/console.test.ts.
 */
import { randomBytes } from 'node:crypto';
import { beforeAll, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import { SESSION_COOKIE, safeNext } from '../../src/ui/auth.ts';
import { buildTestApp } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';

const HTML = { accept: 'text/html,application/xhtml+xml' };
const SAME = { origin: 'http://localhost' };

describeEachEngine('console token', (ctx) => {
  let app: App;
  const login = (token: string, headers: Record<string, string> = SAME, next = '/ui/calls') =>
    app.request('/ui/login', {
      method: 'POST',
      headers,
      body: new URLSearchParams({ token, next }),
    });

  beforeAll(() => {
    app = buildTestApp(ctx.database(), { env: { UI_TOKEN: 'ui-old, ui-new' } }).app;
  });

  it('sends a browser without the token to the sign-in form, and anything else a 401', async () => {
    const page = await app.request('/ui/flows?x=1', { headers: HTML });
    expect(page.status).toBe(303);
    expect(page.headers.get('location')).toBe('/ui/login?next=%2Fui%2Fflows%3Fx%3D1');
    for (const path of ['/ui', '/ui/calls', '/ui/try', '/ui/calls/x/events']) {
      const res = await app.request(path);
      expect(res.status, path).toBe(401);
      expect(res.headers.get('www-authenticate')).toMatch(/^Bearer/);
    }
    const wrong = await app.request('/ui', { headers: { authorization: 'Bearer nope' } });
    expect(wrong.status).toBe(401);
  });

  it('takes each configured token as a bearer token', async () => {
    for (const token of ['ui-old', 'ui-new']) {
      const res = await app.request('/ui/flows', { headers: { authorization: `Bearer ${token}` } });
      expect(res.status, token).toBe(200);
    }
  });

  it('the sign-in form and the assets are open', async () => {
    expect((await app.request('/ui/login', { headers: HTML })).status).toBe(200);
    expect((await app.request('/ui/assets/console.css')).status).toBe(200);
  });

  it('signs in with the form: an HttpOnly, SameSite=Strict cookie that is not the token', async () => {
    const bad = await login('guess');
    expect(bad.status).toBe(401);
    expect(await bad.text()).toContain('That token is not valid.');
    expect(bad.headers.get('set-cookie')).toBeNull();

    const good = await login('ui-new');
    expect(good.status).toBe(303);
    expect(good.headers.get('location')).toBe('/ui/calls');
    const cookie = good.headers.get('set-cookie')!;
    expect(cookie).toMatch(new RegExp(`^${SESSION_COOKIE}=`));
    expect(cookie).toMatch(/HttpOnly/);
    expect(cookie).toMatch(/SameSite=Strict/);
    expect(cookie).toMatch(/Path=\/ui/);
    expect(cookie).not.toContain('ui-new');
    const pair = cookie.split(';')[0]!;
    const res = await app.request('/ui/calls', { headers: { cookie: pair } });
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('Sign out');

    // a cookie of the right shape that no sign-in made opens nothing
    const made = `${SESSION_COOKIE}=${randomBytes(32).toString('base64url')}`;
    expect((await app.request('/ui/calls', { headers: { cookie: made } })).status).toBe(401);

    const out = await app.request('/ui/logout', {
      method: 'POST',
      headers: { ...SAME, cookie: pair },
    });
    expect(out.status).toBe(303);
    expect(out.headers.get('set-cookie')).toMatch(/Max-Age=0/);
  });

  it('refuses sign-in posts from another site', async () => {
    expect((await login('ui-new', { origin: 'http://evil.example' })).status).toBe(403);
    expect((await login('ui-new', { 'sec-fetch-site': 'cross-site' })).status).toBe(403);
    expect((await login('ui-new', { 'sec-fetch-site': 'same-origin' })).status).toBe(303);
  });

  it('comes back only to console pages after signing in', async () => {
    expect(safeNext('/ui/calls?to=%2B380')).toBe('/ui/calls?to=%2B380');
    for (const evil of ['https://evil.example', '//evil.example', '/v1/calls', '/uix', undefined]) {
      expect(safeNext(evil)).toBe('/ui');
    }
    const res = await login('ui-new', SAME, 'https://evil.example/');
    expect(res.headers.get('location')).toBe('/ui');
  });

  it('with API_TOKEN set too, the console still answers to its own token, and /v1 to the API one', async () => {
    const both = buildTestApp(ctx.database(), {
      env: { UI_TOKEN: 'ui-1', API_TOKEN: 'api-1' },
    }).app;
    const signIn = await both.request('/ui/login', {
      method: 'POST',
      headers: SAME,
      body: new URLSearchParams({ token: 'ui-1', next: '/ui/flows' }),
    });
    expect(signIn.status).toBe(303);
    const cookie = signIn.headers.get('set-cookie')!.split(';')[0]!;
    expect((await both.request('/ui/flows', { headers: { cookie } })).status).toBe(200);
    // the API token is not the console's when UI_TOKEN is set, and the console's opens no API
    const api = { authorization: 'Bearer api-1' };
    expect((await both.request('/ui/flows', { headers: api })).status).toBe(401);
    expect((await both.request('/v1/flows', { headers: { cookie } })).status).toBe(401);
    expect((await both.request('/v1/flows', { headers: api })).status).toBe(200);
  });

  it('without UI_TOKEN, API_TOKEN protects the console; with neither it is open', async () => {
    const api = buildTestApp(ctx.database(), { env: { API_TOKEN: 'api-1' } }).app;
    expect((await api.request('/ui/flows')).status).toBe(401);
    const ok = await api.request('/ui/flows', { headers: { authorization: 'Bearer api-1' } });
    expect(ok.status).toBe(200);
    const signIn = await api.request('/ui/login', {
      method: 'POST',
      headers: SAME,
      body: new URLSearchParams({ token: 'api-1', next: '/ui' }),
    });
    expect(signIn.status).toBe(303);
    const cookie = signIn.headers.get('set-cookie')!.split(';')[0]!;
    expect(cookie).not.toContain('api-1');
    expect((await api.request('/ui/flows', { headers: { cookie } })).status).toBe(200);
    const open = buildTestApp(ctx.database()).app;
    const page = await open.request('/ui/flows');
    expect(page.status).toBe(200);
    expect(await page.text()).not.toContain('Sign out');
  });
});
