/**
 * The console's token check. With UI_TOKEN set (else API_TOKEN, else nothing: the console is
 * open, as /v1 is, and the server warns at start), every console page needs the token, sent
 * as `Authorization: Bearer <token>` or as the session cookie that the login form sets: a
 * browser cannot add a header to a plain link, an EventSource or a form post.
 *
 * The cookie holds an HMAC of the token, not the token itself (an API token would open /v1
 * too), so it is void once its token is removed from the list. It is HttpOnly, SameSite=Strict
 * and scoped to /ui; console forms also pass Hono's CSRF check (same origin only).
 *
 * @example
 * app.use('*', consoleAuth(['s3cret']));
 */
import { createHmac } from 'node:crypto';
import type { Context, MiddlewareHandler } from 'hono';
import { getCookie } from 'hono/cookie';
import { tokenMatches } from '../http/auth.ts';
import type { AppEnv } from '../http/env.ts';

export const SESSION_COOKIE = 'switchboard_console';

/** The cookie value that stands for `token`. */
export function sessionValue(token: string): string {
  return createHmac('sha256', token).update('switchboard console session v1').digest('base64url');
}

/** Whether the request carries one of `tokens`, as a bearer token or as a session cookie. */
export function isSignedIn(c: Context, tokens: readonly string[]): boolean {
  if (tokens.length === 0) return true;
  const bearer = c.req.header('authorization')?.match(/^Bearer[ \t]+(\S+)[ \t]*$/i)?.[1];
  if (tokenMatches(bearer, tokens)) return true;
  const cookie = getCookie(c, SESSION_COOKIE);
  return tokenMatches(cookie, tokens.map(sessionValue));
}

/** A path inside the console to come back to after signing in; anything else goes home. */
export function safeNext(next: string | undefined): string {
  return next && /^\/ui(\/[^\s\\]*)?(\?[^\s\\]*)?$/.test(next) && !next.startsWith('//')
    ? next
    : '/ui';
}

/**
 * Lets signed-in requests (and `open` paths) through; sends a browser to the login form and
 * anything else a 401.
 */
export function consoleAuth(
  tokens: readonly string[],
  open: (path: string) => boolean,
): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    if (tokens.length === 0 || open(c.req.path) || isSignedIn(c, tokens)) return next();
    const accept = c.req.header('accept') ?? '';
    if (c.req.method === 'GET' && accept.includes('text/html')) {
      const url = new URL(c.req.url);
      return c.redirect(
        `/ui/login?next=${encodeURIComponent(safeNext(url.pathname + url.search))}`,
        303,
      );
    }
    c.header('WWW-Authenticate', 'Bearer realm="switchboard console"');
    return c.text('sign in at /ui/login, or send Authorization: Bearer <UI_TOKEN>', 401);
  };
}
