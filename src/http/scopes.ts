/**
 * API scopes: what a token may do. Every `/v1` route declares the one scope it needs in its
 * own OpenAPI definition (`security: needs('send')`), so the document shows it and nothing
 * else has to be kept in step; `routeScopes` reads the declarations back from the app's
 * registry once, after the routes are mounted, and refuses to build an app with a `/v1` route
 * that declares none (or more than one). The auth middleware matches each request against
 * the result.
 *
 * `read`: every GET. `send`: messages and calls. `admin`: flows, erasure, settings, tokens,
 * the audit log. Any scope can also read (sending needs its results read back; an
 * administrator sees what it administers), written once in `IMPLIED`; `send` and `admin` are
 * independent of each other.
 *
 * @example
 * createRoute({ method: 'post', path: '/v1/messages', security: needs('send'), ... });
 * const table = routeScopes(app); // [{ method: 'POST', path: '/v1/messages', scope: 'send' }, ...]
 */
import type { OpenAPIHono } from '@hono/zod-openapi';
import { RegExpRouter } from 'hono/router/reg-exp-router';
import type { AppEnv } from './env.ts';

export const SCOPES = ['read', 'send', 'admin'] as const;
export type Scope = (typeof SCOPES)[number];

/** The security scheme the scopes belong to, in the OpenAPI document. */
export const API_SCHEME = 'apiBearer';

/** What each scope brings along with it. */
const IMPLIED: Record<Scope, readonly Scope[]> = { read: [], send: ['read'], admin: ['read'] };

/** A route's `security` requirement: the bearer token, with `scope`. */
export function needs(scope: Scope): Record<string, string[]>[] {
  return [{ [API_SCHEME]: [scope] }];
}

/** Whether a token holding `granted` may use a route that needs `needed`. */
export function allows(granted: readonly Scope[], needed: Scope): boolean {
  return granted.some((g) => g === needed || IMPLIED[g].includes(needed));
}

/** `granted` with what it implies, sorted in `SCOPES` order (for messages). */
export function effectiveScopes(granted: readonly Scope[]): Scope[] {
  return SCOPES.filter((s) => allows(granted, s));
}

export function isScope(value: string): value is Scope {
  return (SCOPES as readonly string[]).includes(value);
}

export interface RouteScope {
  /** upper case, as in a request */
  method: string;
  /** as documented: /v1/subjects/{phone} */
  path: string;
  scope: Scope;
}

/** Reads one route's declared scope; throws naming the route when it is not exactly one. */
function declaredScope(method: string, path: string, security: unknown): Scope {
  const where = `${method} ${path}`;
  const list = Array.isArray(security) ? (security as Record<string, unknown>[]) : [];
  const scopes = list.flatMap((req) => {
    const s = req?.[API_SCHEME];
    return Array.isArray(s) ? s : [];
  });
  if (list.length !== 1 || scopes.length !== 1) {
    throw new Error(
      `${where} declares no single API scope: give its createRoute "security: needs('read' | 'send' | 'admin')" (src/http/scopes.ts)`,
    );
  }
  const [scope] = scopes;
  if (typeof scope !== 'string' || !isScope(scope)) {
    throw new Error(`${where} declares an unknown scope "${String(scope)}"`);
  }
  return scope;
}

const METHODS_WITH_HANDLERS = new Set(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * The scope of every `/v1` route of `app`, in registration order. Throws when a `/v1` route
 * declares no scope, or when a `/v1` handler was mounted outside the OpenAPI registry (where
 * it could declare none).
 */
export function routeScopes(app: OpenAPIHono<AppEnv>): RouteScope[] {
  const table: RouteScope[] = [];
  for (const def of app.openAPIRegistry.definitions) {
    if (def.type !== 'route' || !isApiPath(def.route.path)) continue;
    const method = def.route.method.toUpperCase();
    table.push({
      method,
      path: def.route.path,
      scope: declaredScope(method, def.route.path, def.route.security),
    });
  }
  const declared = new Set(table.map((r) => `${r.method} ${honoPath(r.path)}`));
  for (const r of app.routes) {
    if (!isApiPath(r.path) || !METHODS_WITH_HANDLERS.has(r.method)) continue;
    if (!declared.has(`${r.method} ${r.path}`)) {
      throw new Error(
        `${r.method} ${r.path} is mounted without an OpenAPI definition, so it declares no API scope: define it with createRoute and security: needs(...)`,
      );
    }
  }
  return table;
}

/** The API's own paths: the ones routes must declare a scope for. */
export function isApiPath(path: string): boolean {
  return path === '/v1' || path.startsWith('/v1/');
}

/** `/v1/subjects/{phone}` as Hono writes it: `/v1/subjects/:phone`. */
function honoPath(path: string): string {
  return path.replace(/\{([^}]+)\}/g, ':$1');
}

/** The route a request is for, found by method and path the way the app's router finds it. */
export type ScopeMatcher = (method: string, path: string) => RouteScope | undefined;

export function scopeMatcher(table: readonly RouteScope[]): ScopeMatcher {
  const router = new RegExpRouter<RouteScope>();
  for (const r of table) router.add(r.method, honoPath(r.path), r);
  return (method, path) => {
    // Hono answers HEAD with the GET handler
    const [matches] = router.match(method === 'HEAD' ? 'GET' : method, path);
    return matches[0]?.[0];
  };
}

/** The route/scope table as Markdown (docs/security.md), one row per route. */
export function scopeTableMarkdown(table: readonly RouteScope[]): string {
  const rows = table.map((r) => `| ${r.method} | \`${r.path}\` | \`${r.scope}\` |`);
  return ['| Method | Route | Scope |', '| --- | --- | --- |', ...rows].join('\n');
}
