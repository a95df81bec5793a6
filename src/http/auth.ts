/**
 * Shared-secret checks, in constant time. Both sides are hashed first, so the comparison
 * takes the same time whatever the lengths, and a wrong guess leaks nothing about the token.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Context } from 'hono';
import { header } from './headers.ts';

function digest(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}

/** True when `candidate` equals one of `tokens` (checked against all of them, every time). */
export function tokenMatches(candidate: string | undefined, tokens: readonly string[]): boolean {
  if (candidate === undefined || candidate === '') return false;
  const given = digest(candidate);
  let ok = false;
  for (const t of tokens) ok = timingSafeEqual(given, digest(t)) || ok;
  return ok;
}

/** The token a callback presents: `Authorization: Bearer`, `X-Callback-Token` or `?token=`. */
export function presentedCallbackToken(c: Context): string | undefined {
  const auth = header(c, 'authorization');
  const bearer = auth?.match(/^Bearer\s+(.+)$/i)?.[1]?.trim();
  return bearer ?? header(c, 'x-callback-token') ?? c.req.query('token') ?? undefined;
}
