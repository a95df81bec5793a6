/**
 * API tokens with scopes (issue 21, point 7): every /v1 route declares its scope and the
 * OpenAPI document shows it; each scope opens its routes and is refused the others (the
 * routes taken from the app's own table, so a route added later is covered); tokens are kept
 * hashed; revocation takes effect at once here and within the cache's time elsewhere;
 * API_TOKEN has every scope and UI_TOKEN none; the API is open only while API_TOKEN is unset
 * and no token was ever made.
 */
import { createHash } from 'node:crypto';
import { createRoute, OpenAPIHono, z } from '@hono/zod-openapi';
import { sql } from 'drizzle-orm';
import { beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import { rowsOf } from '../../src/db/client.ts';
import { CACHE_TTL_MS, TOUCH_EVERY_MS } from '../../src/http/api-tokens.ts';
import {
  type RouteScope,
  routeScopes,
  SCOPES,
  type Scope,
  scopeTableMarkdown,
} from '../../src/http/scopes.ts';
import { buildTestApp, json, readJson, uniq } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';

const ENV = 'env-token-7c1d9e';
const UI = 'ui-token-04be2a';

const bearer = (token: string, init: RequestInit = {}): RequestInit => ({
  ...init,
  headers: { ...(init.headers as Record<string, string>), authorization: `Bearer ${token}` },
});

/** The routes that need more than `read`; every other /v1 route must be a GET needing `read`. */
const NOT_READ: Record<string, Scope> = {
  'POST /v1/messages': 'send',
  'POST /v1/calls': 'send',
  'POST /v1/calls/batch': 'send',
  'POST /v1/campaigns': 'send',
  'POST /v1/campaigns/{id}/pause': 'send',
  'POST /v1/campaigns/{id}/resume': 'send',
  'POST /v1/campaigns/{id}/cancel': 'send',
  'DELETE /v1/subjects/{phone}': 'admin',
  // anyone who sends may stop sending to a number; letting messages reach it again is admin's
  'POST /v1/opt-outs': 'send',
  'DELETE /v1/opt-outs/{phone}': 'admin',
  'PUT /v1/flows/{id}': 'admin',
  // a POST only because the draft travels in the body: it reads calls and changes nothing
  'POST /v1/flows/{id}/replay': 'read',
  'GET /v1/tokens': 'admin',
  'POST /v1/tokens': 'admin',
  'DELETE /v1/tokens/{id}': 'admin',
  'GET /v1/audit': 'admin',
  // an endpoint's URL can itself be a credential (a token in its path): admin reads them too
  'POST /v1/endpoints': 'admin',
  'GET /v1/endpoints': 'admin',
  'GET /v1/endpoints/{id}': 'admin',
  'PATCH /v1/endpoints/{id}': 'admin',
  'DELETE /v1/endpoints/{id}': 'admin',
  'POST /v1/endpoints/{id}/secret/rotate': 'admin',
  'POST /v1/endpoints/{id}/replay': 'admin',
  'POST /v1/events/{id}/replay': 'admin',
};

/** A request to `route` that changes nothing whoever sends it: params that name nothing, no body. */
function harmless(route: RouteScope): [string, RequestInit] {
  const path = route.path.replace(/\{[^}]+\}/g, 'nothing-here');
  return [path, { method: route.method }];
}

/** A manual clock: tests move it instead of waiting. */
function manualClock() {
  let t = Date.now();
  return { now: () => new Date(t), advance: (ms: number) => (t += ms) };
}

describe('route scopes', () => {
  it('refuses to build an app with a /v1 route that declares no scope, or one outside the registry', () => {
    const undeclared = new OpenAPIHono();
    undeclared.openapi(
      createRoute({
        method: 'get',
        path: '/v1/things',
        responses: {
          200: { description: 'ok', content: { 'application/json': { schema: z.object({}) } } },
        },
      }),
      (c) => c.json({}, 200),
    );
    expect(() => routeScopes(undeclared as never)).toThrow(
      /GET \/v1\/things declares no single API scope/,
    );

    const plain = new OpenAPIHono();
    plain.get('/v1/hidden', (c) => c.text('x'));
    expect(() => routeScopes(plain as never)).toThrow(
      /GET \/v1\/hidden is mounted without an OpenAPI definition/,
    );

    const unknown = new OpenAPIHono();
    unknown.openapi(
      createRoute({
        method: 'post',
        path: '/v1/things',
        security: [{ apiBearer: ['root'] }],
        responses: { 200: { description: 'ok' } },
      }),
      (c) => c.body(null, 200),
    );
    expect(() => routeScopes(unknown as never)).toThrow(/unknown scope "root"/);
  });
});

describeEachEngine('API tokens with scopes', (ctx) => {
  let app: App;
  let routes: RouteScope[];
  const made: Record<Scope, { id: string; name: string; token: string }> = {} as never;

  const makeToken = async (on: App, scopes: Scope[], as = ENV, name = uniq(scopes.join('-'))) => {
    const res = await on.request('/v1/tokens', bearer(as, json({ name, scopes })));
    expect(res.status, await res.clone().text()).toBe(201);
    return { name, ...(await readJson(res)) };
  };

  beforeAll(async () => {
    ({ app, routes } = buildTestApp(ctx.database(), {
      env: { API_TOKEN: ENV, UI_TOKEN: UI },
    }));
    for (const scope of SCOPES) made[scope] = await makeToken(app, [scope]);
  });

  it('reads every /v1 route scope from its OpenAPI definition: GETs read, sending send, the rest admin', async () => {
    const doc = await readJson(await app.request('/openapi.json'));
    const documented = Object.entries(doc.paths as Record<string, Record<string, unknown>>)
      .filter(([path]) => path.startsWith('/v1/'))
      .flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`));
    expect(routes.map((r) => `${r.method} ${r.path}`).sort()).toEqual(documented.sort());
    for (const r of routes) {
      const key = `${r.method} ${r.path}`;
      const expected = NOT_READ[key] ?? (r.method === 'GET' ? 'read' : undefined);
      expect(expected, `${key}: a new changing route; add its scope to NOT_READ`).toBeDefined();
      expect(r.scope, key).toBe(expected);
      expect(doc.paths[r.path][r.method.toLowerCase()].security, key).toEqual([
        { apiBearer: [r.scope] },
      ]);
    }
    for (const key of Object.keys(NOT_READ)) {
      expect(
        routes.map((r) => `${r.method} ${r.path}`),
        key,
      ).toContain(key);
    }
    expect(scopeTableMarkdown(routes)).toContain('| DELETE | `/v1/subjects/{phone}` | `admin` |');
  });

  it('lets each scope through to its routes and refuses it the others with 403 INSUFFICIENT_SCOPE', async () => {
    // send and admin can also read (src/http/scopes.ts); nothing else is implied
    const grants: Record<Scope, Scope[]> = {
      read: ['read'],
      send: ['read', 'send'],
      admin: ['read', 'admin'],
    };
    for (const scope of SCOPES) {
      for (const route of routes) {
        const [path, init] = harmless(route);
        const res = await app.request(path, bearer(made[scope].token, init));
        const where = `${scope} token, ${route.method} ${route.path}`;
        if (grants[scope].includes(route.scope)) {
          expect([401, 403], where).not.toContain(res.status);
          continue;
        }
        expect(res.status, where).toBe(403);
        expect(res.headers.get('www-authenticate')).toContain(`scope="${route.scope}"`);
        const body = await readJson(res);
        expect(body.error.code, where).toBe('INSUFFICIENT_SCOPE');
        expect(body.error.message, where).toContain(`needs the "${route.scope}" scope`);
        expect(body.error.message, where).toContain(`has ${grants[scope].join(', ')}`);
        expect(body.error.details[0]).toMatchObject({
          path: 'authorization',
          code: 'INSUFFICIENT_SCOPE',
        });
      }
    }
  });

  it('refuses a token without the scope before reading the body', async () => {
    const res = await app.request('/v1/messages', {
      method: 'POST',
      headers: {
        authorization: `Bearer ${made.read.token}`,
        'content-type': 'application/json',
        'content-length': String(200 * 1024 * 1024),
      },
      body: '{}',
    });
    expect(res.status).toBe(403);
  });

  it('gives API_TOKEN every scope on every route', async () => {
    for (const route of routes) {
      const [path, init] = harmless(route);
      const res = await app.request(path, bearer(ENV, init));
      expect([401, 403], `${route.method} ${route.path}`).not.toContain(res.status);
    }
  });

  it('refuses UI_TOKEN on /v1: it opens the console only', async () => {
    for (const route of routes) {
      const [path, init] = harmless(route);
      const res = await app.request(path, bearer(UI, init));
      expect(res.status, `${route.method} ${route.path}`).toBe(401);
    }
  });

  it('refuses unknown and malformed stored tokens alike, with 401', async () => {
    for (const token of [
      `sb_${'A'.repeat(43)}`,
      `${made.read.token}x`,
      made.read.token.slice(0, -1),
      'sb_',
    ]) {
      const res = await app.request('/v1/messages', bearer(token));
      expect(res.status, token).toBe(401);
      expect((await readJson(res)).error).toMatchObject({
        code: 'UNAUTHORIZED',
        message: 'the API token is not valid',
      });
    }
  });

  it('keeps only the hash: no column holds the token, and listing shows neither', async () => {
    const rows = rowsOf<Record<string, unknown>>(
      await ctx.database().db.execute(sql`select * from api_tokens`),
    );
    const dump = JSON.stringify(rows);
    for (const scope of SCOPES) {
      const { id, token } = made[scope];
      expect(dump).not.toContain(token);
      expect(dump).not.toContain(token.slice(3)); // nor its random part
      const row = rows.find((r) => r.id === id);
      expect(row?.hash).toBe(createHash('sha256').update(token).digest('hex'));
    }
    const listed = await app.request('/v1/tokens', bearer(made.admin.token));
    expect(listed.status).toBe(200);
    const text = await listed.text();
    for (const scope of SCOPES) {
      expect(text).not.toContain(made[scope].token);
      expect(text).not.toContain(createHash('sha256').update(made[scope].token).digest('hex'));
    }
    const items = JSON.parse(text).items;
    expect(items.find((t: { id: string }) => t.id === made.send.id)).toMatchObject({
      scopes: ['send'],
      createdBy: 'API_TOKEN',
      revokedAt: null,
    });
    expect(Object.keys(items[0]).sort()).toEqual(
      ['createdAt', 'createdBy', 'id', 'lastUsedAt', 'name', 'revokedAt', 'scopes'].sort(),
    );
  });

  it('checks names and scopes: one live token per name, reserved names, known scopes only', async () => {
    const name = uniq('dup');
    await makeToken(app, ['read'], ENV, name);
    const dup = await app.request('/v1/tokens', bearer(ENV, json({ name, scopes: ['read'] })));
    expect(dup.status).toBe(409);
    expect((await readJson(dup)).error.details[0].path).toBe('name');
    for (const [body, path] of [
      [{ name: 'API_TOKEN', scopes: ['read'] }, 'name'],
      [{ name: 'Open', scopes: ['read'] }, 'name'],
      [{ name: 'x', scopes: ['root'] }, 'scopes[0]'],
      [{ name: 'x', scopes: [] }, 'scopes'],
      [{ name: 'x', scopes: ['read', 'read'] }, 'scopes'],
      [{ name: 'bad\u0000name', scopes: ['read'] }, 'name'],
      [{ name: '', scopes: ['read'] }, 'name'],
    ] as const) {
      const res = await app.request('/v1/tokens', bearer(ENV, json(body)));
      expect(res.status, JSON.stringify(body)).toBe(400);
      const err = (await readJson(res)).error;
      expect(err.code).toBe('VALIDATION_ERROR');
      expect(err.details.map((d: { path: string }) => d.path)).toContain(path);
    }
  });

  it('lets a token give only scopes it has itself', async () => {
    const res = await app.request(
      '/v1/tokens',
      bearer(made.admin.token, json({ name: uniq('escalate'), scopes: ['send'] })),
    );
    expect(res.status).toBe(403);
    const err = (await readJson(res)).error;
    expect(err.code).toBe('INSUFFICIENT_SCOPE');
    expect(err.details).toEqual([
      { path: 'scopes', code: 'INSUFFICIENT_SCOPE', message: 'not held: send' },
    ]);
    const child = await makeToken(app, ['read', 'admin'], made.admin.token);
    expect(child.scopes).toEqual(['read', 'admin']);
    const list = await readJson(await app.request('/v1/tokens', bearer(ENV)));
    expect(list.items.find((t: { id: string }) => t.id === child.id).createdBy).toBe(
      made.admin.name,
    );
  });

  it('revokes at once on this instance, and within the cache time on another', async () => {
    const clock = manualClock();
    const other = buildTestApp(ctx.database(), { env: { API_TOKEN: ENV }, clock }).app;
    const victim = await makeToken(app, ['read']);
    expect((await app.request('/v1/messages', bearer(victim.token))).status).toBe(200);
    expect((await other.request('/v1/messages', bearer(victim.token))).status).toBe(200);

    const revoked = await app.request(`/v1/tokens/${victim.id}`, bearer(ENV, { method: 'DELETE' }));
    expect(revoked.status).toBe(200);
    const { revokedAt } = await readJson(revoked);
    expect(revokedAt).toEqual(expect.any(String));
    expect((await app.request('/v1/messages', bearer(victim.token))).status).toBe(401);

    // the other instance believes its cached lookup until it is CACHE_TTL_MS old
    expect((await other.request('/v1/messages', bearer(victim.token))).status).toBe(200);
    clock.advance(CACHE_TTL_MS);
    expect((await other.request('/v1/messages', bearer(victim.token))).status).toBe(401);

    // revoking again changes nothing and says since when; an unknown id is a 404
    const again = await app.request(`/v1/tokens/${victim.id}`, bearer(ENV, { method: 'DELETE' }));
    expect(again.status).toBe(200);
    expect((await readJson(again)).revokedAt).toBe(revokedAt);
    const missing = await app.request('/v1/tokens/tok_none', bearer(ENV, { method: 'DELETE' }));
    expect(missing.status).toBe(404);
    // and the name is free again
    await makeToken(app, ['read'], ENV, victim.name);
  });

  it('writes last_used_at on first use and then at most once a minute', async () => {
    const clock = manualClock();
    const own = buildTestApp(ctx.database(), { env: { API_TOKEN: ENV }, clock }).app;
    const t = await makeToken(own, ['read']);
    const lastUsed = async () => {
      const list = await readJson(await own.request('/v1/tokens', bearer(ENV)));
      return list.items.find((i: { id: string }) => i.id === t.id).lastUsedAt as string | null;
    };
    expect(await lastUsed()).toBeNull();
    await own.request('/v1/messages', bearer(t.token));
    const first = await lastUsed();
    expect(first).toBe(clock.now().toISOString());
    clock.advance(TOUCH_EVERY_MS - 1);
    await own.request('/v1/messages', bearer(t.token));
    expect(await lastUsed()).toBe(first);
    clock.advance(1);
    await own.request('/v1/messages', bearer(t.token));
    expect(await lastUsed()).toBe(clock.now().toISOString());
  });
});

describeEachEngine('an API with no API_TOKEN', (ctx) => {
  it('is open until the first token is made, and stays closed after it is revoked', async () => {
    const clock = manualClock();
    const { app } = buildTestApp(ctx.database(), { env: { UI_TOKEN: UI } });
    const other = buildTestApp(ctx.database(), { clock }).app;
    expect((await app.request('/v1/messages')).status).toBe(200);
    expect((await other.request('/v1/messages')).status).toBe(200);

    const res = await app.request('/v1/tokens', json({ name: 'first', scopes: ['admin'] }));
    expect(res.status).toBe(201);
    const first = await readJson(res);
    expect(first.token).toMatch(/^sb_[A-Za-z0-9_-]{43}$/);

    expect((await app.request('/v1/messages')).status).toBe(401);
    expect((await app.request('/v1/messages', bearer(UI))).status).toBe(401);
    expect((await app.request('/v1/messages', bearer(first.token))).status).toBe(200);
    // another instance learns of it within the cache time
    clock.advance(CACHE_TTL_MS);
    expect((await other.request('/v1/messages')).status).toBe(401);

    const list = await readJson(await app.request('/v1/tokens', bearer(first.token)));
    expect(list.items[0]).toMatchObject({ name: 'first', createdBy: 'open' });

    await app.request(`/v1/tokens/${first.id}`, bearer(first.token, { method: 'DELETE' }));
    expect((await app.request('/v1/messages', bearer(first.token))).status).toBe(401);
    expect((await app.request('/v1/messages')).status).toBe(401);
    const fresh = buildTestApp(ctx.database()).app;
    expect((await fresh.request('/v1/messages')).status).toBe(401);
  });
});
