/**
 * Who may use the provider sandbox, so that it is safe to leave on. It plays the provider with
 * well-known credentials, and its control API lists phone numbers and texts and can stop all
 * outbound messaging, so every route, provider and control, answers only:
 * - requests made in-process (the console asking the mounted sandbox);
 * - clients on this host: the socket peer is loopback, or a TRUSTED_PROXIES peer forwards a
 *   loopback client (src/http/client-address.ts), and the Host header names loopback
 *   (`localhost`, `127.0.0.1`, `[::1]`), so a web page that rebinds its own name to 127.0.0.1
 *   does not count;
 * - clients presenting SANDBOX_TOKEN in `X-Sandbox-Token` (a header of its own: the provider
 *   routes use `Authorization` for the provider's own credentials).
 * A wrong `X-Sandbox-Token` is refused even from loopback: it is a misconfigured client.
 *
 * The control API also refuses what only a browser would send: a request from another site
 * (`Sec-Fetch-Site` other than same-origin or none, or an `Origin` that is not the sandbox's
 * own host) and a body that is not JSON (415). Together they stop a web page's no-CORS "simple
 * request" (text/plain, a form) from driving it.
 *
 * @example
 * app.use('*', sandboxAccess({ token: config.sandboxToken, trustedProxies: config.trustedProxies }));
 * control.use('*', controlRequests());
 */
import { isIP } from 'node:net';
import type { MiddlewareHandler } from 'hono';
import { tokenMatcher } from '../http/auth.ts';
import { isLoopback, requestOrigin, trustedProxies } from '../http/client-address.ts';
import { header, nodeRequest } from '../http/headers.ts';
import { isJsonType, providerError } from './http.ts';

export interface SandboxAccessOptions {
  /** SANDBOX_TOKEN: lets clients that are not on this host in, with `X-Sandbox-Token`. */
  token?: string | undefined;
  /** TRUSTED_PROXIES: peers whose X-Forwarded-For is believed. */
  trustedProxies?: readonly string[];
}

/** The header that carries SANDBOX_TOKEN. */
export const SANDBOX_TOKEN_HEADER = 'X-Sandbox-Token';

const HOW_TO_GET_IN = `the sandbox answers only this host (loopback, with Host localhost, 127.0.0.1 or [::1]), or a client sending header ${SANDBOX_TOKEN_HEADER} with the server's SANDBOX_TOKEN`;

/** The hostname of a Host header (`[::1]:3000` -> `::1`); undefined when it is not one. */
function hostnameOf(host: string | undefined): string | undefined {
  if (host === undefined || host === '') return undefined;
  try {
    const name = new URL(`http://${host}`).hostname.toLowerCase();
    return name.startsWith('[') ? name.slice(1, -1) : name;
  } catch {
    return undefined;
  }
}

/** `localhost`, `*.localhost` (RFC 6761: always loopback) or a loopback address. */
function namesLoopback(host: string | undefined): boolean {
  const name = hostnameOf(host);
  if (name === undefined) return false;
  if (name === 'localhost' || name.endsWith('.localhost')) return true;
  return isIP(name) !== 0 && isLoopback(name);
}

/** Refuses every request that is neither from this host nor carries SANDBOX_TOKEN (403). */
export function sandboxAccess(opts: SandboxAccessOptions = {}): MiddlewareHandler {
  const proxies = trustedProxies(opts.trustedProxies ?? []);
  const token = tokenMatcher(opts.token === undefined || opts.token === '' ? [] : [opts.token]);
  return async (c, next) => {
    const presented = header(c, SANDBOX_TOKEN_HEADER);
    if (presented !== undefined) {
      if (token(presented)) return next();
      return providerError(
        c,
        403,
        'FORBIDDEN',
        `${SANDBOX_TOKEN_HEADER} is not the sandbox's token`,
      );
    }
    const origin = requestOrigin(c, proxies);
    if (origin.inProcess || (origin.local && namesLoopback(header(c, 'host')))) return next();
    return providerError(c, 403, 'FORBIDDEN', HOW_TO_GET_IN);
  };
}

const READS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** Whether the request carries a body: announced on a socket, or present in-process. */
function hasBody(c: Parameters<MiddlewareHandler>[0]): boolean {
  const length = header(c, 'content-length');
  if (length !== undefined) return length.trim() !== '0';
  if (header(c, 'transfer-encoding') !== undefined) return true;
  // on a socket a body is always announced; in-process, the Request says
  return nodeRequest(c) === undefined && c.req.raw.body !== null;
}

/**
 * The control API's own rules, before any route runs: no request from another site, and a
 * body only as JSON.
 */
export function controlRequests(): MiddlewareHandler {
  return async (c, next) => {
    const site = header(c, 'sec-fetch-site');
    if (site !== undefined && site !== 'same-origin' && site !== 'none') {
      return providerError(
        c,
        403,
        'CROSS_SITE',
        `the control API refuses requests from web pages of other sites (Sec-Fetch-Site: ${site})`,
      );
    }
    const from = header(c, 'origin');
    if (from !== undefined && hostOfOrigin(from) !== header(c, 'host')?.toLowerCase()) {
      return providerError(
        c,
        403,
        'CROSS_SITE',
        'the control API refuses requests from web pages of other origins (Origin is not this host)',
      );
    }
    if (!READS.has(c.req.method) && hasBody(c)) {
      const type = header(c, 'content-type') ?? '';
      if (!isJsonType(type)) {
        return providerError(
          c,
          415,
          'UNSUPPORTED_MEDIA_TYPE',
          `the control API takes JSON bodies only: Content-Type must be application/json (got ${type === '' ? 'none' : `"${type}"`})`,
        );
      }
    }
    return next();
  };
}

/** `http://localhost:3000` -> `localhost:3000`; undefined for `null` or anything not a URL. */
function hostOfOrigin(origin: string): string | undefined {
  try {
    const url = new URL(origin);
    return url.host === '' ? undefined : url.host.toLowerCase();
  } catch {
    return undefined;
  }
}
