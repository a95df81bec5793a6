/**
 * `Idempotency-Key` on every POST under /v1 (each one creates something: messages, calls,
 * tokens), as payment APIs do it. The first answer to a key is kept for IDEMPOTENCY_TTL_MS
 * (24 h) with a fingerprint of its request (method, path and query, body bytes); the same
 * key again:
 *
 * - with the same request: the kept answer, status and body, again (same ids, nothing created
 *   a second time), with `Idempotent-Replayed: true`;
 * - with another request: 409 IDEMPOTENCY_KEY_REUSED;
 * - while the first is still running: 409 IDEMPOTENCY_KEY_IN_USE with `Retry-After: 1` (it
 *   does not wait), so two concurrent requests never both create.
 *
 * Keys belong to the caller: the row is keyed by the hex SHA-256 of the request's bearer
 * token (`open` without one), so two tokens never see each other's keys. The kept body is
 * encrypted with a key derived from the bearer token itself (not stored): a copy of the
 * table shows no answer, and no token POST /v1/tokens made. Only answers that created
 * something (2xx) are kept; any other (a 400 for a malformed request, a 503) releases the key
 * and the retry runs afresh. A key is 1-255 printable ASCII characters, else 400 naming the
 * header.
 *
 * The answer is written in the transaction that creates what it names where the handler can
 * (`c.get('idempotency').save(tx, ...)`: POST /v1/messages, POST /v1/calls), so no crash can
 * leave a creation without its answer, and a failed creation leaves none. Elsewhere it is
 * written right after the handler: POST /v1/tokens (one insert in api-tokens.ts) and POST
 * /v1/calls/batch (one transaction per chunk of 50 calls, calls/start.ts). There, if that
 * write fails or the process dies between the creation's commit and it, the key stays "in
 * use" until it expires: a retry gets 409, never a second creation. One window is left: a
 * batch that fails after some of its chunks committed (a database outage mid-batch, answered
 * 503) releases its key like any failure, so a retry under it starts those calls again, as a
 * retry without a key would.
 *
 * A POST /v1/tokens answer holds the new token itself: replayed to the same caller, with the
 * same key, within 24 h, it is shown again (the row keeps it encrypted, see above).
 *
 * Without the header a request costs nothing here: one header lookup, no database work.
 * Expired keys are deleted by the retention worker (`removeExpiredKeys`); until then an
 * expired key is treated as absent.
 *
 * @example
 * app.use('/v1/*', idempotency({ db, clock }));
 * // in a handler that creates inside a transaction:
 * await db.transaction(async (tx) => { ...; await c.get('idempotency')?.save(tx, 202, body); });
 */
import { createCipheriv, createDecipheriv, createHash, createHmac, randomBytes } from 'node:crypto';
import { sql } from 'drizzle-orm';
import type { MiddlewareHandler } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import type { Clock } from '../clock.ts';
import { type Db, executePrepared, rowsOf, type Tx } from '../db/client.ts';
import { errorFields } from '../db/errors.ts';
import { presentedBearer } from './api-auth.ts';
import type { AppEnv } from './env.ts';
import { errorResponse } from './errors.ts';
import { header } from './headers.ts';
import { isApiPath } from './scopes.ts';

/** How long a key and its answer are kept. */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;
export const IDEMPOTENCY_HEADER = 'Idempotency-Key';
/** Set on an answer given again for a key. */
export const REPLAYED_HEADER = 'Idempotent-Replayed';

const VALID_KEY = /^[\x20-\x7e]{1,255}$/;
const KEY_RULE = '1 to 255 printable ASCII characters';

/** Which requests take an Idempotency-Key: every POST under /v1 (they all create something). */
export function takesIdempotencyKey(method: string, path: string): boolean {
  return method.toUpperCase() === 'POST' && isApiPath(path);
}

/** The header as an OpenAPI parameter, added to every operation that takes it (docs.ts). */
export const IDEMPOTENCY_PARAMETER = {
  in: 'header',
  name: IDEMPOTENCY_HEADER,
  required: false,
  description: `${KEY_RULE}. The first answer to a request with this key is kept for 24 hours and given again (with \`${REPLAYED_HEADER}: true\`) to a repeat of the same request; the same key with another request is a 409 IDEMPOTENCY_KEY_REUSED, and while the first is running a 409 IDEMPOTENCY_KEY_IN_USE.`,
  schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x20-\\x7e]+$' },
} as const;

/** What a handler gets to keep its answer inside the transaction of its creation. */
export interface IdempotencySlot {
  /** keeps `body` (sent as JSON) with `status` as the key's answer, inside `tx` */
  save(tx: Tx, status: number, body: unknown): Promise<void>;
}

/** Whose key it is: the hex SHA-256 of the bearer token, or `open`. */
export function callerOf(bearer: string | undefined): string {
  return bearer === undefined ? 'open' : createHash('sha256').update(bearer).digest('hex');
}

/** The request a key was first used for: method, path and query, body bytes. */
export function requestFingerprint(method: string, target: string, body: ArrayBuffer): string {
  return createHash('sha256')
    .update(`${method} ${target}\n`)
    .update(new Uint8Array(body))
    .digest('hex');
}

/** The AES-256-GCM key of one caller's one key: only the bearer token can make it again. */
function sealingKey(bearer: string | undefined, key: string): Buffer {
  return createHmac('sha256', bearer ?? '')
    .update(`switchboard idempotency\0${key}`)
    .digest();
}

function seal(secret: Buffer, text: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', secret, iv);
  const data = Buffer.concat([cipher.update(text, 'utf8'), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), data]).toString('base64');
}

function unseal(secret: Buffer, sealed: string): string {
  const raw = Buffer.from(sealed, 'base64');
  const decipher = createDecipheriv('aes-256-gcm', secret, raw.subarray(0, 12));
  decipher.setAuthTag(raw.subarray(12, 28));
  return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
}

type Claim =
  | { kind: 'claimed' }
  | { kind: 'reused' }
  | { kind: 'in-use' }
  | { kind: 'replay'; status: number; body: string };

interface KeyRow {
  caller: string;
  key: string;
}

/**
 * Takes the key for this request (a new row, or an expired one taken over), or says what
 * holds it. Two statements at most; again when the holder released it in between.
 */
export async function claimKey(
  db: Db,
  row: KeyRow & { fingerprint: string; now: Date },
): Promise<Claim> {
  const { caller, key, fingerprint, now } = row;
  const expires = new Date(now.getTime() + IDEMPOTENCY_TTL_MS);
  for (let attempt = 0; attempt < 3; attempt++) {
    const taken = await executePrepared(
      db,
      sql`insert into idempotency_keys as k (caller, key, fingerprint, created_at, expires_at)
          values (${caller}, ${key}, ${fingerprint}, ${now.toISOString()}::timestamptz,
                  ${expires.toISOString()}::timestamptz)
          on conflict (caller, key) do update
            set fingerprint = excluded.fingerprint, status = null, body = null,
                created_at = excluded.created_at, expires_at = excluded.expires_at
            where k.expires_at <= excluded.created_at
          returning 1 as taken`,
    );
    if (taken.length > 0) return { kind: 'claimed' };
    const [held] = await executePrepared<{
      fingerprint: string;
      status: number | null;
      body: string | null;
    }>(
      db,
      sql`select fingerprint, status, body from idempotency_keys
          where caller = ${caller} and key = ${key}`,
    );
    if (!held) continue;
    if (held.fingerprint !== fingerprint) return { kind: 'reused' };
    if (held.status === null || held.body === null) return { kind: 'in-use' };
    return { kind: 'replay', status: held.status, body: held.body };
  }
  return { kind: 'in-use' };
}

async function keepAnswer(q: Db | Tx, row: KeyRow, status: number, sealed: string): Promise<void> {
  await executePrepared(
    q,
    sql`update idempotency_keys set status = ${status}, body = ${sealed}
        where caller = ${row.caller} and key = ${row.key} and status is null`,
  );
}

async function releaseKey(db: Db, row: KeyRow): Promise<void> {
  await executePrepared(
    db,
    sql`delete from idempotency_keys
        where caller = ${row.caller} and key = ${row.key} and status is null`,
  );
}

/** Deletes up to `batchSize` expired keys; `more` when there may be others. */
export async function removeExpiredKeys(
  db: Db,
  now: Date,
  batchSize = 500,
): Promise<{ removed: number; more: boolean }> {
  const removed = rowsOf(
    await db.execute(sql`
      delete from idempotency_keys where (caller, key) in (
        select caller, key from idempotency_keys
        where expires_at < ${now.toISOString()}::timestamptz
        order by expires_at limit ${batchSize} for update skip locked)
      returning 1`),
  ).length;
  return { removed, more: removed === batchSize };
}

/** The path and query of the request, as the fingerprint takes them. */
function targetOf(url: string): string {
  const u = new URL(url);
  return `${u.pathname}${u.search}`;
}

/** The middleware: see the module comment. */
export function idempotency(deps: { db: Db; clock: Clock }): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    if (!takesIdempotencyKey(c.req.method, c.req.path)) return next();
    const key = header(c, 'idempotency-key');
    if (key === undefined) return next();
    if (!VALID_KEY.test(key)) {
      return errorResponse(c, 'VALIDATION_ERROR', `${IDEMPOTENCY_HEADER}: must be ${KEY_RULE}`, [
        {
          path: `header.${IDEMPOTENCY_HEADER}`,
          code: 'INVALID_FORMAT',
          message: `must be ${KEY_RULE}`,
        },
      ]);
    }
    const bearer = presentedBearer(header(c, 'authorization'));
    const row: KeyRow = { caller: callerOf(bearer), key };
    const secret = sealingKey(bearer, key);
    const fingerprint = requestFingerprint(
      c.req.method,
      targetOf(c.req.url),
      await c.req.arrayBuffer(),
    );
    const claim = await claimKey(deps.db, { ...row, fingerprint, now: deps.clock.now() });
    if (claim.kind === 'replay') {
      return c.body(unseal(secret, claim.body), claim.status as ContentfulStatusCode, {
        'content-type': 'application/json',
        [REPLAYED_HEADER]: 'true',
      });
    }
    if (claim.kind === 'reused') {
      return errorResponse(
        c,
        'IDEMPOTENCY_KEY_REUSED',
        `this ${IDEMPOTENCY_HEADER} was used for a different request in the last 24 hours; use a new key for a new request`,
      );
    }
    if (claim.kind === 'in-use') {
      c.header('Retry-After', '1');
      return errorResponse(
        c,
        'IDEMPOTENCY_KEY_IN_USE',
        `a request with this ${IDEMPOTENCY_HEADER} is still running; retry shortly for its answer`,
      );
    }

    let saved = false;
    c.set('idempotency', {
      async save(tx, status, body) {
        await keepAnswer(tx, row, status, seal(secret, JSON.stringify(body)));
        saved = true;
      },
    });
    await next();
    const res = c.res;
    try {
      if (res.status < 200 || res.status >= 300) {
        // nothing was created (a rolled-back transaction took a saved answer with it)
        await releaseKey(deps.db, row);
      } else if (!saved) {
        await keepAnswer(deps.db, row, res.status, seal(secret, await res.clone().text()));
      }
    } catch (err) {
      // the answer stands; the key stays "in use" until it expires (never a second creation)
      c.get('logger')?.warn({ err: errorFields(err) }, 'idempotency key not recorded');
    }
  };
}
