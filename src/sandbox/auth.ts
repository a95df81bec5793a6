/**
 * The provider's authentication methods for messaging, the cascade and bot users
 * (docs/provider.md, "Addresses and credentials" and "The cascade API"), checked against the
 * sandbox's own credentials. Functions take header values, not a request, so they test without
 * HTTP.
 *
 * @example
 * checkMessagingAuth({ authorization: 'Basic ' + btoa('@:sandbox-key') }, DEFAULT_CREDENTIALS)
 * // { ok: true, principal: 'api-key' }
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';

export const SandboxCredentials = z.object({
  /** Messaging login and password (HTTP Basic); the chat operator API uses the same pair. */
  login: z.string().min(1).default('sandbox'),
  password: z.string().min(1).default('sandbox'),
  /** API key: header X-Authorization-Key, or HTTP Basic with `@` as the login. */
  apiKey: z.string().min(1).default('sandbox-key'),
  /**
   * Viber bot tokens (cascade header X-Viber-Auth-Token, bot-user paths) and Telegram bot
   * keys (X-Tg-Bot-Key) the sandbox knows. Unset: any non-empty token is a bot of its own,
   * since the sandbox keeps no bot registry.
   */
  viberBotTokens: z.array(z.string().min(1)).optional(),
  tgBotKeys: z.array(z.string().min(1)).optional(),
});
export type SandboxCredentials = z.infer<typeof SandboxCredentials>;
export type SandboxCredentialsInput = z.input<typeof SandboxCredentials>;

export const DEFAULT_CREDENTIALS: SandboxCredentials = SandboxCredentials.parse({});

/** Compares secrets in constant time (hashing first, so lengths may differ). */
export function secretEquals(a: string, b: string): boolean {
  const ha = createHash('sha256').update(a).digest();
  const hb = createHash('sha256').update(b).digest();
  return timingSafeEqual(ha, hb);
}

export type AuthResult =
  | { ok: true; principal: 'login' | 'api-key' | 'viber-bot' | 'tg-bot'; token?: string }
  | { ok: false; message: string };

/** Decodes `Basic base64(user:pass)`; undefined when the header is not Basic. */
export function parseBasic(header: string | undefined): { user: string; pass: string } | undefined {
  const match = /^Basic\s+(\S+)\s*$/i.exec(header ?? '');
  if (!match?.[1]) return undefined;
  const decoded = Buffer.from(match[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon === -1) return undefined;
  return { user: decoded.slice(0, colon), pass: decoded.slice(colon + 1) };
}

export interface AuthHeaders {
  authorization?: string | undefined;
  'x-authorization-key'?: string | undefined;
  'x-viber-auth-token'?: string | undefined;
  'x-tg-bot-key'?: string | undefined;
}

/**
 * Messaging API: HTTP Basic login:password, header X-Authorization-Key, or Basic `@:key`.
 * A request that offers a method and fails it is refused even if another header would pass.
 */
export function checkMessagingAuth(headers: AuthHeaders, creds: SandboxCredentials): AuthResult {
  const key = headers['x-authorization-key'];
  const basic = parseBasic(headers.authorization);
  if (key === undefined && basic === undefined) {
    return {
      ok: false,
      message:
        'authentication required: HTTP Basic (login:password or @:api-key) or header X-Authorization-Key',
    };
  }
  if (key !== undefined && !secretEquals(key, creds.apiKey)) {
    return { ok: false, message: 'X-Authorization-Key is not a valid API key' };
  }
  if (basic !== undefined) {
    const good =
      basic.user === '@'
        ? secretEquals(basic.pass, creds.apiKey)
        : secretEquals(basic.user, creds.login) && secretEquals(basic.pass, creds.password);
    if (!good) return { ok: false, message: 'HTTP Basic credentials are not valid' };
    return { ok: true, principal: basic.user === '@' ? 'api-key' : 'login' };
  }
  return { ok: true, principal: 'api-key' };
}

/** True when `token` names a known bot (or any non-empty token when no list is configured). */
export function knownBot(token: string, allowed: readonly string[] | undefined): boolean {
  if (token.trim() === '') return false;
  return allowed === undefined || allowed.some((t) => secretEquals(t, token));
}

/** Cascade API: one of X-Authorization-Key, X-Viber-Auth-Token, X-Tg-Bot-Key. */
export function checkCascadeAuth(headers: AuthHeaders, creds: SandboxCredentials): AuthResult {
  const key = headers['x-authorization-key'];
  const viber = headers['x-viber-auth-token'];
  const tg = headers['x-tg-bot-key'];
  if (key === undefined && viber === undefined && tg === undefined) {
    return {
      ok: false,
      message:
        'authentication required: one of the headers X-Authorization-Key, X-Viber-Auth-Token, X-Tg-Bot-Key',
    };
  }
  if (key !== undefined) {
    if (!secretEquals(key, creds.apiKey)) {
      return { ok: false, message: 'X-Authorization-Key is not a valid API key' };
    }
    return { ok: true, principal: 'api-key' };
  }
  if (viber !== undefined) {
    if (!knownBot(viber, creds.viberBotTokens)) {
      return { ok: false, message: 'X-Viber-Auth-Token is not a known Viber bot token' };
    }
    return { ok: true, principal: 'viber-bot', token: viber };
  }
  if (!knownBot(tg ?? '', creds.tgBotKeys)) {
    return { ok: false, message: 'X-Tg-Bot-Key is not a known Telegram bot key' };
  }
  return { ok: true, principal: 'tg-bot', token: tg! };
}
