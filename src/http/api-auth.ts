/**
 * The API's auth: who may call what. A request to a protected path needs a bearer token:
 * API_TOKEN (one of its comma-separated values, so a new one can be added before the old one
 * is removed), which has every scope and is checked first, in constant time, with no
 * database work; or a token made through `POST /v1/tokens` (src/http/api-tokens.ts), with the
 * scopes it was given. A `/v1` route's scope is the one its OpenAPI definition declares
 * (src/http/scopes.ts): a valid token without it gets 403 INSUFFICIENT_SCOPE, no valid token
 * 401. The API is open (every scope, audited as `open`) only while API_TOKEN is unset and no
 * token has ever been made; the server warns at start.
 *
 * Left to other rules: the operational routes (no personal data), the API reference, the
 * provider's callbacks (their own CALLBACK_TOKEN and signed tokens), the sandbox (it plays the
 * provider, with the provider's own auth), the rendered prompts the provider fetches
 * (`/prompts/`, src/http/routes/prompts.ts) and the console under `/ui` (ui/auth.ts: UI_TOKEN,
 * else API_TOKEN). Everything else, `/v1/*` and any path no route answers, is closed: a route
 * added later is protected unless someone opens it here on purpose, and a `/v1` route that
 * declares no scope stops the app from being built.
 *
 * @example
 * const auth = apiAuth({ apiTokens: config.apiTokens, store });
 * app.use('*', auth.middleware);
 * // ...mount the routes...
 * auth.seal(app);
 */
import type { OpenAPIHono } from '@hono/zod-openapi';
import type { MiddlewareHandler } from 'hono';
import {
  ENV_PRINCIPAL,
  OPEN_PRINCIPAL,
  type Principal,
  TOKEN_PREFIX,
  type TokenStore,
} from './api-tokens.ts';
import { tokenMatcher } from './auth.ts';
import type { AppEnv } from './env.ts';
import { errorResponse } from './errors.ts';
import { header } from './headers.ts';
import {
  API_SCHEME,
  allows,
  effectiveScopes,
  type RouteScope,
  routeScopes,
  type ScopeMatcher,
  scopeMatcher,
} from './scopes.ts';

const OPEN_EXACT = new Set(['/healthz', '/readyz', '/metrics', '/openapi.json', '/docs']);
// /ui is guarded by the console itself (ui/auth.ts), with these tokens unless UI_TOKEN is set
// /prompts/ serves rendered audio to the provider; its ids are unguessable HMACs (speech/ids.ts)
const OPEN_PREFIXES = ['/docs/', '/hooks/', '/prompts/', '/sandbox/', '/ui/'];

/**
 * Whether `path` is left to other rules than the API token (none, or a guard of its own).
 *
 * @example
 * isOpenPath('/healthz') // true
 * isOpenPath('/v1/messages') // false
 * isOpenPath('/ui/calls') // true: the console checks its own token
 */
export function isOpenPath(path: string): boolean {
  return (
    OPEN_EXACT.has(path) ||
    path === '/sandbox' ||
    path === '/ui' ||
    OPEN_PREFIXES.some((p) => path.startsWith(p))
  );
}

/** The bearer token of a request, if it sent one. */
export function presentedBearer(header: string | undefined): string | undefined {
  return header?.match(/^Bearer[ \t]+(\S+)[ \t]*$/i)?.[1];
}

export interface ApiAuth {
  middleware: MiddlewareHandler<AppEnv>;
  /**
   * Reads every `/v1` route's scope from `app` (throwing when one declares none) and
   * documents the bearer scheme. Call it after the routes are mounted; until then the
   * middleware refuses to run.
   */
  seal(app: OpenAPIHono<AppEnv>): RouteScope[];
}

export function apiAuth(opts: { apiTokens: readonly string[]; store: TokenStore }): ApiAuth {
  const { apiTokens, store } = opts;
  const envToken = tokenMatcher(apiTokens);
  let match: ScopeMatcher | undefined;

  async function principalOf(given: string | undefined): Promise<Principal | undefined> {
    if (envToken(given)) return ENV_PRINCIPAL;
    if (given?.startsWith(TOKEN_PREFIX)) {
      const stored = await store.authenticate(given);
      if (stored) return stored;
    }
    // open only while nothing could close it: no API_TOKEN, and no token ever made
    if (apiTokens.length === 0 && !(await store.anyMade())) return OPEN_PRINCIPAL;
    return undefined;
  }

  const middleware: MiddlewareHandler<AppEnv> = async (c, next) => {
    if (!match) throw new Error('apiAuth: seal(app) was not called after mounting the routes');
    const path = c.req.path;
    if (isOpenPath(path)) return next();
    const route = match(c.req.method, path);
    if (route) c.set('apiRoute', route);
    const given = presentedBearer(header(c, 'authorization'));
    const principal = await principalOf(given);
    if (!principal) {
      c.header('WWW-Authenticate', 'Bearer realm="switchboard"');
      return errorResponse(
        c,
        'UNAUTHORIZED',
        given === undefined
          ? 'this route needs an API token: send Authorization: Bearer <token>'
          : 'the API token is not valid',
      );
    }
    c.set('principal', principal);
    if (route && !allows(principal.scopes, route.scope)) {
      const has = effectiveScopes(principal.scopes).join(', ');
      c.header(
        'WWW-Authenticate',
        `Bearer realm="switchboard", error="insufficient_scope", scope="${route.scope}"`,
      );
      return errorResponse(
        c,
        'INSUFFICIENT_SCOPE',
        `${route.method} ${route.path} needs the "${route.scope}" scope; the token "${principal.name}" has ${has}`,
        [
          {
            path: 'authorization',
            code: 'INSUFFICIENT_SCOPE',
            message: `needs scope ${route.scope}; the token has ${has}`,
          },
        ],
      );
    }
    return next();
  };

  return {
    middleware,
    seal(app) {
      const table = routeScopes(app);
      match = scopeMatcher(table);
      app.openAPIRegistry.registerComponent('securitySchemes', API_SCHEME, {
        type: 'http',
        scheme: 'bearer',
        description:
          'API_TOKEN (every scope), or a token made with POST /v1/tokens (the scopes it was given: read, send, admin). Each /v1 operation lists the scope it needs.',
      });
      return table;
    },
  };
}
