/**
 * Read-your-writes over a read replica (DATABASE_READ_URL, src/db/replica.ts; docs/scaling.md,
 * "Read replicas"). Mounted on /v1 and /ui only when a replica is configured.
 *
 * - A changing request (anything but GET, HEAD, OPTIONS) that succeeded answers with the
 *   primary's WAL position after it, `Switchboard-Written-Lsn: 0/16B3748`; the console's
 *   gets it as a cookie too, and this process remembers it per API token (or for the open
 *   API / API_TOKEN as one caller).
 * - A GET or HEAD is a read scope: its read-db queries go to the replica unless that position
 *   (the request's `Switchboard-Written-Lsn` header, the cookie, or the caller's remembered
 *   one, whichever is newest) is past what the replica has replayed: then to the primary.
 *   It answers `Switchboard-Read-From: replica` or `primary` when it read through the read db.
 *
 * A client behind several instances sends back the header it got; on one instance, or from
 * the console, nothing is needed.
 */
import type { MiddlewareHandler } from 'hono';
import { getCookie, setCookie } from 'hono/cookie';
import {
  LSN_PATTERN,
  parseLsn,
  type ReadReplica,
  type ReadScope,
  routeReads,
} from '../db/replica.ts';
import type { Principal } from './api-tokens.ts';
import type { AppEnv } from './env.ts';
import { header } from './headers.ts';

/** The response header of a write and the request header of a read that follows it. */
export const WRITTEN_LSN_HEADER = 'Switchboard-Written-Lsn';
/** Which server answered a read: `replica` or `primary`. */
export const READ_FROM_HEADER = 'Switchboard-Read-From';
/** The console's copy of the header (an LSN; nothing secret). */
export const WRITTEN_LSN_COOKIE = 'switchboard_written_lsn';

/** Callers remembered per process; the oldest are forgotten past this many. */
const MAX_CALLERS = 10_000;

function callerKey(p: Principal | undefined): string | undefined {
  if (!p) return undefined;
  return p.kind === 'token' ? `token:${p.id}` : p.kind;
}

function isRead(method: string): boolean {
  return method === 'GET' || method === 'HEAD';
}

export function readRouting(replica: ReadReplica): MiddlewareHandler<AppEnv> {
  const lastWrites = new Map<string, bigint>();
  const remember = (key: string, lsn: bigint) => {
    lastWrites.delete(key);
    lastWrites.set(key, lsn);
    if (lastWrites.size > MAX_CALLERS) {
      const oldest = lastWrites.keys().next().value;
      if (oldest !== undefined) lastWrites.delete(oldest);
    }
  };

  return async (c, next) => {
    const method = c.req.method;
    const key = callerKey(c.get('principal'));
    if (isRead(method)) {
      let minLsn: bigint | undefined;
      for (const lsn of [
        parseLsn(header(c, WRITTEN_LSN_HEADER)),
        parseLsn(getCookie(c, WRITTEN_LSN_COOKIE)),
        key === undefined ? undefined : lastWrites.get(key),
      ]) {
        if (lsn !== undefined && (minLsn === undefined || lsn > minLsn)) minLsn = lsn;
      }
      const scope: ReadScope = { minLsn };
      await routeReads(scope, next);
      if (scope.target) {
        // a streamed answer (the console's live page) has sent its headers already
        try {
          c.res.headers.set(READ_FROM_HEADER, scope.target);
        } catch {}
      }
      return;
    }
    await next();
    if (method === 'OPTIONS' || c.res.status >= 400) return;
    let lsn: string;
    try {
      lsn = await replica.primaryLsn();
    } catch {
      // the write is done and answered; without a position its reader may see the replica
      return;
    }
    const position = parseLsn(lsn);
    if (position === undefined) return;
    try {
      c.res.headers.set(WRITTEN_LSN_HEADER, lsn);
    } catch {
      return; // a response whose headers are fixed (streamed): it carries no position
    }
    if (key !== undefined) remember(key, position);
    if (c.req.path.startsWith('/ui')) {
      setCookie(c, WRITTEN_LSN_COOKIE, lsn, {
        path: '/ui',
        httpOnly: true,
        sameSite: 'Lax',
        maxAge: 300,
      });
    }
  };
}

const LSN_SCHEMA = { type: 'string', pattern: LSN_PATTERN.source } as const;
const ONLY_WITH_REPLICA = 'Only when the server has a read replica (DATABASE_READ_URL).';

/**
 * The headers above, in the OpenAPI document (in place): every read under /v1 takes
 * Switchboard-Written-Lsn and answers Switchboard-Read-From; every write answers
 * Switchboard-Written-Lsn on success.
 */
export function documentReadRouting<T extends { paths?: object }>(doc: T): T {
  type Op = { parameters?: unknown[]; responses?: Record<string, { headers?: object }> };
  const paths = (doc.paths ?? {}) as Record<string, Record<string, Op>>;
  for (const [path, item] of Object.entries(paths)) {
    if (!path.startsWith('/v1/')) continue;
    for (const [method, op] of Object.entries(item)) {
      const read = isRead(method.toUpperCase());
      if (read) {
        op.parameters = [
          ...(op.parameters ?? []),
          {
            in: 'header',
            name: WRITTEN_LSN_HEADER,
            required: false,
            description: `The \`${WRITTEN_LSN_HEADER}\` of this caller's last write: the read goes to the primary while the replica has not replayed that far (read-your-writes behind several instances). ${ONLY_WITH_REPLICA}`,
            schema: LSN_SCHEMA,
          },
        ];
      }
      for (const [status, response] of Object.entries(op.responses ?? {})) {
        if (!status.startsWith('2')) continue;
        const name = read ? READ_FROM_HEADER : WRITTEN_LSN_HEADER;
        const description = read
          ? `Which server answered the read: \`replica\` or \`primary\`. ${ONLY_WITH_REPLICA}`
          : `The primary's WAL position after this write; send it back on a read that must see it. ${ONLY_WITH_REPLICA}`;
        const schema = read ? { type: 'string', enum: ['replica', 'primary'] } : LSN_SCHEMA;
        response.headers = { ...response.headers, [name]: { description, schema } };
      }
    }
  }
  return doc;
}
