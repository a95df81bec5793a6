/**
 * API_TOKEN: with one or more tokens configured (comma-separated, so a new one can be added
 * before the old one is removed), every request needs `Authorization: Bearer <token>`, except
 * the routes that must stay reachable without it or answer to a guard of their own: the
 * operational routes (no personal data), the API reference, the provider's callbacks (their
 * own CALLBACK_TOKEN and signed tokens), the sandbox (it plays the provider, with the
 * provider's own auth) and the console under `/ui` (ui/auth.ts: UI_TOKEN, else these same
 * API tokens, as a bearer token or the session cookie its sign-in page sets, which a browser
 * needs). Everything else, `/v1/*` and any path no route answers, is closed: a route added
 * later is protected unless someone opens it here on purpose.
 *
 * @example
 * app.use('*', apiAuth(config.apiTokens));
 */
import type { OpenAPIHono } from '@hono/zod-openapi';
import type { MiddlewareHandler } from 'hono';
import { tokenMatches } from './auth.ts';
import type { AppEnv } from './env.ts';
import { errorResponse } from './errors.ts';
import { header } from './headers.ts';

const OPEN_EXACT = new Set(['/healthz', '/readyz', '/metrics', '/openapi.json', '/docs']);
// /ui is guarded by the console itself (ui/auth.ts), with these tokens unless UI_TOKEN is set
const OPEN_PREFIXES = ['/docs/', '/hooks/', '/sandbox/', '/ui/'];

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

/**
 * The middleware: does nothing when `tokens` is empty (the server warns at start), answers
 * 401 in the error envelope when a protected path comes without a valid token. Every token
 * is compared in constant time on every request.
 */
export function apiAuth(tokens: readonly string[]): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    if (tokens.length === 0 || isOpenPath(c.req.path)) return next();
    const given = presentedBearer(header(c, 'authorization'));
    if (tokenMatches(given, tokens)) return next();
    c.header('WWW-Authenticate', 'Bearer realm="switchboard"');
    return errorResponse(
      c,
      'UNAUTHORIZED',
      given === undefined
        ? 'this route needs an API token: send Authorization: Bearer <API_TOKEN>'
        : 'the API token is not valid',
    );
  };
}

/**
 * Marks every documented `/v1` operation as needing the bearer token, in the OpenAPI
 * document. Call it after the routes are mounted and before the document is served.
 */
export function documentApiAuth(app: OpenAPIHono<AppEnv>): void {
  app.openAPIRegistry.registerComponent('securitySchemes', 'apiBearer', {
    type: 'http',
    scheme: 'bearer',
    description:
      'API_TOKEN (one of its comma-separated tokens), required on /v1/* and /ui when it is set',
  });
  for (const def of app.openAPIRegistry.definitions) {
    if (def.type !== 'route' || isOpenPath(def.route.path) || def.route.security) continue;
    def.route = { ...def.route, security: [{ apiBearer: [] }] };
  }
}
