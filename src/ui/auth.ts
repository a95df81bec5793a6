/**
 * The console's token check. With UI_TOKEN set (else API_TOKEN, else nothing: the console is
 * open, as /v1 is, and the server warns at start), every console page needs the token, sent
 * as `Authorization: Bearer <token>` or as the session cookie that the login form sets: a
 * browser cannot add a header to a plain link, an EventSource or a form post.
 *
 * The cookie holds the random secret of a server-side session (src/ui/sessions.ts), not the
 * token (an API token would open /v1 too): signing out revokes it, and it is void once it
 * expires or its token is removed from the list. It is HttpOnly, SameSite=Strict, scoped to
 * /ui, and Secure whenever the request came over TLS (directly, or through one of
 * TRUSTED_PROXIES saying `X-Forwarded-Proto: https`); console forms also pass Hono's CSRF
 * check (same origin only).
 *
 * @example
 * app.use('*', consoleAuth(['s3cret'], sessions, (path) => path === '/ui/login'));
 */
import type { Context, MiddlewareHandler } from 'hono';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import { presentedBearer } from '../http/api-auth.ts';
import { tokenMatcher } from '../http/auth.ts';
import type { AppEnv } from '../http/env.ts';
import { header } from '../http/headers.ts';
import { type ConsoleSessions, SESSION_LIFETIME_MS } from './sessions.ts';

export const SESSION_COOKIE = 'switchboard_console';

const COOKIE = { path: '/ui', httpOnly: true, sameSite: 'Strict' } as const;

/** Sets the session cookie; `secure` is requestOrigin's verdict on the request. */
export function setSessionCookie(c: Context, secret: string, secure: boolean): void {
  setCookie(c, SESSION_COOKIE, secret, {
    ...COOKIE,
    secure,
    maxAge: Math.floor(SESSION_LIFETIME_MS / 1000),
  });
}

export function clearSessionCookie(c: Context, secure: boolean): void {
  deleteCookie(c, SESSION_COOKIE, { ...COOKIE, secure });
}

export function sessionCookie(c: Context): string | undefined {
  return getCookie(c, SESSION_COOKIE);
}

/** Whether the request carries a bearer token `matches` accepts, or a live session cookie. */
async function isSignedIn(
  c: Context,
  matches: (token: string | undefined) => boolean,
  sessions: ConsoleSessions,
): Promise<boolean> {
  if (matches(presentedBearer(header(c, 'authorization')))) return true;
  return sessions.isValid(sessionCookie(c));
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
  sessions: ConsoleSessions,
  open: (path: string) => boolean,
): MiddlewareHandler<AppEnv> {
  const matches = tokenMatcher(tokens);
  return async (c, next) => {
    if (tokens.length === 0 || open(c.req.path) || (await isSignedIn(c, matches, sessions))) {
      return next();
    }
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
