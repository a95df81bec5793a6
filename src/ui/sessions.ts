/**
 * The console's server-side sessions (table `console_sessions`). Signing in makes a random
 * secret, which goes into the cookie; the row is keyed by its SHA-256, so the table alone
 * opens nothing. A session is good while its row is not revoked (signing out), not expired
 * (SESSION_LIFETIME_MS after sign-in) and names, by `token_hash`, a token that is still
 * configured: removing a token from UI_TOKEN voids every session it opened.
 *
 * Every console request reads its row by primary key, with no cache: a sign-out, here or on
 * another instance, holds from the next request on. Rows past their expiry (revoked ones
 * included) are deleted, a batch at a time, when someone signs in.
 *
 * @example
 * const sessions = consoleSessionStore({ db, clock, tokens: ['s3cret'] });
 * const secret = await sessions.open('s3cret');
 * await sessions.isValid(secret); // true
 * await sessions.revoke(secret);
 */
import { createHash, createHmac, randomBytes } from 'node:crypto';
import { and, eq, inArray, isNull, lt } from 'drizzle-orm';
import type { Clock } from '../clock.ts';
import type { Db } from '../db/client.ts';
import { consoleSessions } from '../db/schema/index.ts';

/** How long a console sign-in lasts: a working day, then the token is asked for again. */
export const SESSION_LIFETIME_MS = 12 * 3600_000;

/** Expired rows deleted per sign-in (a short statement; sign-ins are rate-limited). */
const SWEEP_BATCH = 500;

/** 32 random bytes, base64url: what a cookie made by `open` looks like. */
const SECRET = /^[A-Za-z0-9_-]{43}$/;

/** Which token opened a session: an HMAC keyed by the token, never the token itself. */
export function tokenHash(token: string): string {
  return createHmac('sha256', token).update('switchboard console session v2').digest('hex');
}

function sessionId(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

export interface ConsoleSessions {
  /** A new session for `token` (one of the configured tokens): the cookie's secret. */
  open(token: string): Promise<string>;
  /** Whether `secret` names a session that is live and whose token is still configured. */
  isValid(secret: string | undefined): Promise<boolean>;
  /** Ends the session `secret` names, if any. */
  revoke(secret: string | undefined): Promise<void>;
}

export function consoleSessionStore(deps: {
  db: Db;
  clock: Clock;
  tokens: readonly string[];
}): ConsoleSessions {
  const { db, clock } = deps;
  const configured = new Set(deps.tokens.map(tokenHash));
  return {
    async open(token) {
      const now = clock.now();
      const expired = db
        .select({ id: consoleSessions.id })
        .from(consoleSessions)
        .where(lt(consoleSessions.expiresAt, now))
        .limit(SWEEP_BATCH);
      await db.delete(consoleSessions).where(inArray(consoleSessions.id, expired));
      const secret = randomBytes(32).toString('base64url');
      await db.insert(consoleSessions).values({
        id: sessionId(secret),
        tokenHash: tokenHash(token),
        createdAt: now,
        expiresAt: new Date(now.getTime() + SESSION_LIFETIME_MS),
      });
      return secret;
    },
    async isValid(secret) {
      // anything but a secret of ours costs no database read
      if (secret === undefined || !SECRET.test(secret)) return false;
      const [row] = await db
        .select({
          tokenHash: consoleSessions.tokenHash,
          expiresAt: consoleSessions.expiresAt,
          revokedAt: consoleSessions.revokedAt,
        })
        .from(consoleSessions)
        .where(eq(consoleSessions.id, sessionId(secret)));
      return (
        row !== undefined &&
        row.revokedAt === null &&
        row.expiresAt.getTime() > clock.now().getTime() &&
        configured.has(row.tokenHash)
      );
    },
    async revoke(secret) {
      if (secret === undefined || !SECRET.test(secret)) return;
      await db
        .update(consoleSessions)
        .set({ revokedAt: clock.now() })
        .where(and(eq(consoleSessions.id, sessionId(secret)), isNull(consoleSessions.revokedAt)));
    },
  };
}
