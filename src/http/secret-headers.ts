/**
 * Which HTTP headers carry secrets: the one list for anything that shows headers (the
 * sandbox's callback listings) or passes caller-chosen ones on. Known names (the provider's
 * auth headers, Switchboard's callback and sandbox tokens, cookies) plus, for headers a
 * caller named freely (a speech menu's webhook headers), any name that says token, secret,
 * key, auth, password, signature, session or cookie.
 *
 * @example
 * redactHeaders({ 'x-callback-token': 's3cret', 'content-type': 'application/json' })
 * // { 'x-callback-token': '[redacted]', 'content-type': 'application/json' }
 */

import { REDACTED } from '../logger.ts';

export const SECRET_HEADERS: ReadonlySet<string> = new Set([
  'authorization',
  'proxy-authorization',
  'cookie',
  'set-cookie',
  'x-callback-token',
  'x-sandbox-token',
  'x-authorization-key',
  'x-api-key',
  'x-viber-auth-token',
  'x-tg-bot-key',
]);

const SECRET_NAME = /token|secret|(^|[-_])(api[-_]?)?key$|auth|passw|signature|session|cookie/i;

/** True when a header of this name (any case) may carry a secret. */
export function isSecretHeader(name: string): boolean {
  return SECRET_HEADERS.has(name.toLowerCase()) || SECRET_NAME.test(name);
}

/** A copy of `headers` with the value of every secret header replaced by `[redacted]`. */
export function redactHeaders(headers: Readonly<Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    out[name] = isSecretHeader(name) ? REDACTED : value;
  }
  return out;
}
