/**
 * Shared-secret checks, in constant time. Both sides are hashed first, so the comparison
 * takes the same time whatever the lengths, and a wrong guess leaks nothing about the token.
 */
import { hash, timingSafeEqual } from 'node:crypto';
import type { Context } from 'hono';
import { header } from './headers.ts';

// one-shot hash(): about half the CPU of createHash().update().digest() for a short string
function digest(value: string): Buffer {
  return hash('sha256', value, 'buffer');
}

/**
 * A check of presented tokens against `tokens`, in constant time: true when the candidate
 * equals one of them (compared with all of them, every time). The tokens' digests are made
 * once, here, from the list as it is now, so a request hashes only what it presents.
 */
export function tokenMatcher(
  tokens: readonly string[],
): (candidate: string | undefined) => boolean {
  const known = tokens.map(digest);
  return (candidate) => {
    if (candidate === undefined || candidate === '') return false;
    const given = digest(candidate);
    let ok = false;
    for (const d of known) ok = timingSafeEqual(given, d) || ok;
    return ok;
  };
}

/** True when `candidate` equals one of `tokens` (a check made once: `tokenMatcher`). */
export function tokenMatches(candidate: string | undefined, tokens: readonly string[]): boolean {
  return tokenMatcher(tokens)(candidate);
}

/** The token a callback presents: `Authorization: Bearer`, `X-Callback-Token` or `?token=`. */
export function presentedCallbackToken(c: Context): string | undefined {
  const auth = header(c, 'authorization');
  const bearer = auth?.match(/^Bearer\s+(.+)$/i)?.[1]?.trim();
  return bearer ?? header(c, 'x-callback-token') ?? c.req.query('token') ?? undefined;
}
