/**
 * The console's sessions, as an attacker tries them (issue 21, point 6): the cookie was an
 * HMAC of the token that signing out could not revoke, never `Secure` behind a TLS proxy,
 * and sign-in had no attempt limit. Now: server-side sessions that sign-out, expiry and a
 * token's removal end; `Secure` over TLS or from a trusted proxy only; 10 failed sign-ins per
 * address in 15 minutes, then 429.
 */
import { createHash } from 'node:crypto';
import { eq } from 'drizzle-orm';
import { beforeAll, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import type { Clock } from '../../src/clock.ts';
import { consoleSessions } from '../../src/db/schema/index.ts';
import { SESSION_COOKIE } from '../../src/ui/auth.ts';
import { SESSION_LIFETIME_MS } from '../../src/ui/sessions.ts';
import { bucketOf, SIGN_IN_LIMIT, signInLimiter } from '../../src/ui/sign-in-limit.ts';
import { buildTestApp } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';
import { startTestServer } from '../support/server.ts';

const SAME = { origin: 'http://localhost' };
const HTML = { accept: 'text/html' };

/** A clock the test moves. */
function testClock(start = Date.now()) {
  let now = start;
  const clock: Clock = { now: () => new Date(now) };
  return { clock, advance: (ms: number) => (now += ms) };
}

/**
 * What @hono/node-server passes as the env of a request from `remoteAddress` (src/http/headers.ts
 * reads headers and the socket from it).
 */
function fromPeer(remoteAddress: string, headers: Record<string, string> = {}, encrypted = false) {
  return { incoming: { socket: { remoteAddress, encrypted }, headers } };
}

const cookieOf = (res: Response) => res.headers.get('set-cookie')?.split(';')[0];
const secretOf = (cookie: string) => cookie.slice(SESSION_COOKIE.length + 1);
const idOf = (cookie: string) => createHash('sha256').update(secretOf(cookie)).digest('hex');

describeEachEngine('console sessions', (ctx) => {
  const signIn = (app: App, token: string, headers: Record<string, string> = SAME, env?: unknown) =>
    app.request(
      '/ui/login',
      {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
        body: new URLSearchParams({ token, next: '/ui/calls' }).toString(),
      },
      env,
    );
  const page = (app: App, cookie: string) =>
    app.request('/ui/calls', { headers: { cookie, ...HTML } });
  const row = async (cookie: string) =>
    (
      await ctx
        .database()
        .db.select()
        .from(consoleSessions)
        .where(eq(consoleSessions.id, idOf(cookie)))
    )[0];

  let app: App;
  let time: ReturnType<typeof testClock>;
  beforeAll(() => {
    time = testClock();
    app = buildTestApp(ctx.database(), { env: { UI_TOKEN: 'ui-a, ui-b' }, clock: time.clock }).app;
  });

  it('signs in to a server-side session that signing out revokes', async () => {
    const res = await signIn(app, 'ui-a');
    expect(res.status).toBe(303);
    const cookie = cookieOf(res)!;
    expect(cookie).not.toContain('ui-a');
    // the table keeps the secret's hash, never the secret
    const stored = await row(cookie);
    expect(stored).toMatchObject({ revokedAt: null });
    expect(stored!.expiresAt.getTime() - stored!.createdAt.getTime()).toBe(SESSION_LIFETIME_MS);
    expect(JSON.stringify(stored)).not.toContain(secretOf(cookie));

    const other = cookieOf(await signIn(app, 'ui-a'))!;
    expect((await page(app, cookie)).status).toBe(200);

    const out = await app.request('/ui/logout', { method: 'POST', headers: { ...SAME, cookie } });
    expect(out.status).toBe(303);
    expect(out.headers.get('location')).toBe('/ui/login');
    expect(out.headers.get('set-cookie')).toMatch(/Max-Age=0/);
    expect((await row(cookie))!.revokedAt).not.toBeNull();

    // the same cookie, kept by whoever copied it, now gets the sign-in page
    const after = await page(app, cookie);
    expect(after.status).toBe(303);
    expect(after.headers.get('location')).toMatch(/^\/ui\/login/);
    expect((await app.request('/ui/calls', { headers: { cookie } })).status).toBe(401);
    // only that session ended
    expect((await page(app, other)).status).toBe(200);
  });

  it('refuses a sign-out posted from another site', async () => {
    const cookie = cookieOf(await signIn(app, 'ui-b'))!;
    const forged = await app.request('/ui/logout', {
      method: 'POST',
      headers: { origin: 'http://evil.example', cookie },
    });
    expect(forged.status).toBe(403);
    expect((await page(app, cookie)).status).toBe(200);
  });

  it("takes a form posted from PUBLIC_URL's origin behind a TLS-terminating proxy", async () => {
    // the proxy speaks http to Switchboard, so the request URL's origin is not the browser's
    const behind = buildTestApp(ctx.database(), {
      env: { UI_TOKEN: 'ui-b', PUBLIC_URL: 'https://switchboard.example.com' },
      clock: time.clock,
    }).app;
    const cookie = cookieOf(await signIn(behind, 'ui-b'))!;
    const lookalike = await behind.request('/ui/logout', {
      method: 'POST',
      headers: { origin: 'https://switchboard.example.com.evil.example', cookie },
    });
    expect(lookalike.status).toBe(403);
    expect((await page(behind, cookie)).status).toBe(200);
    const out = await behind.request('/ui/logout', {
      method: 'POST',
      headers: { origin: 'https://switchboard.example.com', cookie },
    });
    expect(out.status).toBe(303);
    expect((await page(behind, cookie)).status).toBe(303);
  });

  it('a token removed from UI_TOKEN voids its sessions, on any instance', async () => {
    const a = cookieOf(await signIn(app, 'ui-a'))!;
    const b = cookieOf(await signIn(app, 'ui-b'))!;
    // another instance, same database, configured with ui-b only
    const rotated = buildTestApp(ctx.database(), {
      env: { UI_TOKEN: 'ui-b' },
      clock: time.clock,
    }).app;
    expect((await page(rotated, a)).status).toBe(303);
    expect((await page(rotated, b)).status).toBe(200);
    // a session is shared by instances: signing out on one ends it on the other at once
    await rotated.request('/ui/logout', { method: 'POST', headers: { ...SAME, cookie: b } });
    expect((await page(app, b)).status).toBe(303);
  });

  it('ends a session when its lifetime is over, and sweeps it at a later sign-in', async () => {
    const t = testClock(Date.now());
    const timed = buildTestApp(ctx.database(), {
      env: { UI_TOKEN: 'ui-a' },
      clock: t.clock,
    }).app;
    const cookie = cookieOf(await signIn(timed, 'ui-a'))!;
    t.advance(SESSION_LIFETIME_MS - 1000);
    expect((await page(timed, cookie)).status).toBe(200);
    t.advance(1000);
    expect((await page(timed, cookie)).status).toBe(303);
    expect(await row(cookie)).toBeDefined();
    t.advance(1);
    await signIn(timed, 'ui-a');
    expect(await row(cookie)).toBeUndefined();
  });

  it('keeps bearer-token access to the console, with no session made', async () => {
    const before = await ctx.database().db.select({ id: consoleSessions.id }).from(consoleSessions);
    const res = await app.request('/ui/calls', { headers: { authorization: 'Bearer ui-b' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('set-cookie')).toBeNull();
    const after = await ctx.database().db.select({ id: consoleSessions.id }).from(consoleSessions);
    expect(after.length).toBe(before.length);
  });

  it('marks the cookie Secure over TLS, or from a trusted proxy that says https, only', async () => {
    const proxied = buildTestApp(ctx.database(), {
      env: { UI_TOKEN: 'ui-a', TRUSTED_PROXIES: '10.0.0.0/8' },
      clock: time.clock,
    }).app;
    const cookieFlags = async (env: unknown, headers: Record<string, string> = {}) => {
      const all = { ...SAME, ...headers };
      const res = await signIn(proxied, 'ui-a', all, env);
      expect(res.status).toBe(303);
      return res.headers.get('set-cookie')!;
    };
    const forwarded = { 'x-forwarded-proto': 'https', 'x-forwarded-for': '198.51.100.7' };
    // TLS on the socket itself
    expect(await cookieFlags(fromPeer('203.0.113.5', SAME, true))).toMatch(/; Secure/);
    // a trusted proxy that terminated TLS
    expect(await cookieFlags(fromPeer('10.1.2.3', { ...SAME, ...forwarded }), forwarded)).toMatch(
      /; Secure/,
    );
    // the same header from anyone else is not believed; nor plain HTTP from the proxy
    expect(
      await cookieFlags(fromPeer('203.0.113.9', { ...SAME, ...forwarded }), forwarded),
    ).not.toMatch(/Secure/);
    expect(await cookieFlags(fromPeer('10.1.2.3', SAME))).not.toMatch(/Secure/);
    for (const flags of [await cookieFlags(fromPeer('203.0.113.5', SAME, true))]) {
      expect(flags).toMatch(/HttpOnly/);
      expect(flags).toMatch(/SameSite=Strict/);
      expect(flags).toMatch(/Path=\/ui/);
    }
  });

  it('over real HTTP, behind a trusted proxy on loopback, Secure follows X-Forwarded-Proto', async () => {
    const server = await startTestServer(ctx.database(), {
      env: { UI_TOKEN: 'ui-real', TRUSTED_PROXIES: '127.0.0.1' },
    });
    try {
      const post = (headers: Record<string, string>) =>
        fetch(`${server.url}/ui/login`, {
          method: 'POST',
          redirect: 'manual',
          headers: { 'sec-fetch-site': 'same-origin', ...headers },
          body: new URLSearchParams({ token: 'ui-real', next: '/ui' }),
        });
      const tls = await post({ 'x-forwarded-proto': 'https' });
      expect(tls.status).toBe(303);
      expect(tls.headers.get('set-cookie')).toMatch(/; Secure/);
      const plain = await post({});
      expect(plain.status).toBe(303);
      expect(plain.headers.get('set-cookie')).not.toMatch(/Secure/);
    } finally {
      await server.stop();
    }
  });

  it('locks an address out after 10 failed sign-ins for 15 minutes, correct token included', async () => {
    const t = testClock();
    const limited = buildTestApp(ctx.database(), {
      env: { UI_TOKEN: 'ui-a' },
      clock: t.clock,
    }).app;
    const attacker = fromPeer('203.0.113.66', SAME);
    for (let i = 0; i < SIGN_IN_LIMIT.failures; i++) {
      const res = await signIn(limited, `guess-${i}`, SAME, attacker);
      expect(res.status, `attempt ${i + 1}`).toBe(401);
    }
    const locked = await signIn(limited, 'guess-11', SAME, attacker);
    expect(locked.status).toBe(429);
    expect(locked.headers.get('retry-after')).toBe(String(SIGN_IN_LIMIT.windowMs / 1000));
    expect(locked.headers.get('content-type')).toMatch(/text\/html/);
    expect(await locked.text()).toContain('Too many failed sign-ins from your address');
    // while locked, even the right token is not checked: the form answers no more guesses
    const right = await signIn(limited, 'ui-a', SAME, attacker);
    expect(right.status).toBe(429);
    expect(right.headers.get('set-cookie')).toBeNull();
    // another address is not held up
    expect((await signIn(limited, 'ui-a', SAME, fromPeer('203.0.113.67', SAME))).status).toBe(303);

    t.advance(5 * 60_000);
    expect(Number((await signIn(limited, 'ui-a', SAME, attacker)).headers.get('retry-after'))).toBe(
      10 * 60,
    );
    t.advance(10 * 60_000);
    expect((await signIn(limited, 'ui-a', SAME, attacker)).status).toBe(303);
  });

  it('does not count successful sign-ins', async () => {
    const limited = buildTestApp(ctx.database(), { env: { UI_TOKEN: 'ui-a' } }).app;
    const peer = fromPeer('203.0.113.80', SAME);
    for (let i = 0; i < SIGN_IN_LIMIT.failures + 2; i++) {
      expect((await signIn(limited, 'ui-a', SAME, peer)).status).toBe(303);
    }
    expect((await signIn(limited, 'wrong', SAME, peer)).status).toBe(401);
  });
});

it('keeps the sign-in limit bounded however many addresses try', () => {
  const t = testClock(0);
  const limit = signInLimiter(t.clock);
  for (let i = 0; i < SIGN_IN_LIMIT.addresses * 2; i++)
    limit.fail(`10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`);
  expect(limit.size).toBe(SIGN_IN_LIMIT.addresses);

  // least recently failing dropped first: a small limit shows the order
  const small = signInLimiter(t.clock, { failures: 2, windowMs: 60_000, addresses: 2 });
  small.fail('192.0.2.1');
  small.fail('192.0.2.1');
  expect(small.retryAfter('192.0.2.1')).toBe(60);
  small.fail('192.0.2.2');
  small.fail('192.0.2.3');
  expect(small.size).toBe(2);
  expect(small.retryAfter('192.0.2.1')).toBe(0);
  // and a window's end frees the memory too
  t.advance(60_000);
  expect(small.retryAfter('192.0.2.2')).toBe(0);
  expect(small.retryAfter('192.0.2.3')).toBe(0);
  expect(small.size).toBe(0);
});

it('counts an IPv6 client by its /64, and in-process requests in one bucket', () => {
  expect(bucketOf('2001:db8:1:2::1')).toBe(bucketOf('2001:db8:1:2:ffff:ffff:ffff:fffe'));
  expect(bucketOf('2001:db8:1:2::1')).not.toBe(bucketOf('2001:db8:1:3::1'));
  expect(bucketOf('2001:0db8:0001:0002::')).toBe(bucketOf('2001:db8:1:2::9'));
  expect(bucketOf('::1')).toBe(bucketOf('0:0:0:0:0:0:0:1'));
  expect(bucketOf('1::2:3:4:5:1.2.3.4')).toBe(bucketOf('1:0:2:3::'));
  expect(bucketOf('fe80::1%eth0')).toBe(bucketOf('fe80::2'));
  expect(bucketOf('192.0.2.1')).toBe('192.0.2.1');
  expect(bucketOf(undefined)).toBe(bucketOf(undefined));
  expect(bucketOf(undefined)).not.toBe(bucketOf('127.0.0.1'));
});
