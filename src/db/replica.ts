/**
 * Reads from a streaming replica (DATABASE_READ_URL), never writes. `openReadReplica` answers
 * a drizzle `Db` whose queries go to the replica only inside `routeReads(...)` (the HTTP
 * layer opens one for GET requests on the read routes, src/http/read-routing.ts), and only
 * when the replica is usable for that read:
 *
 * - it answers, is in recovery (a hot standby, not a promoted or stray server), and its
 *   staleness is within `maxLagMs`: the primary's WAL position is sampled at each check, and
 *   the replica is as stale as the newest sample its replayed position has reached is old;
 * - it has replayed the read's `minLsn`, when the read carries one (read-your-writes: the
 *   position of the client's last write, src/http/read-routing.ts); else that read goes to
 *   the primary.
 *
 * Everything else goes to the primary: queries outside `routeReads`, and any query the replica
 * fails (it is retried on the primary, and a lost connection marks the replica down for
 * RETRY_DOWN_MS), so a read never fails because of the replica.
 *
 * @example
 * const replica = await openReadReplica({ url: config.databaseReadUrl, primary: database, maxLagMs: 2000 });
 * const call = await routeReads({ minLsn: undefined }, () => getCall(replica.db, id));
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js';
import postgres from 'postgres';
import type { Logger } from '../logger.ts';
import type { Database, Db } from './client.ts';
import { withTimeout } from './errors.ts';
import * as schema from './schema/index.ts';

/** How long a replica check stands before the next read asks again. */
const CHECK_EVERY_MS = 500;
/** A check that takes longer than this counts as the replica being down. */
const CHECK_TIMEOUT_MS = 1000;
/** After a failed check or a lost connection, reads go to the primary this long untried. */
const RETRY_DOWN_MS = 5000;

/** Where a read went. */
export type ReadTarget = 'replica' | 'primary';

/** What the last check found. */
export interface ReplicaState {
  /** it answered, in recovery */
  up: boolean;
  /** why not usable, when it is not (logged on change) */
  reason?: string;
  /** its replayed WAL position */
  replayLsn?: bigint;
  /** how stale it is at most, in ms, from the primary's sampled positions */
  lagMs: number;
  checkedAt: number;
}

/** A read routed through `routeReads`: what it needs, and where it went. */
export interface ReadScope {
  /** the WAL position the replica must have replayed (the client's last write), if any */
  minLsn?: bigint | undefined;
  /** where this scope's queries went (the last decision), for the response header */
  target?: ReadTarget;
  decidedAt?: number;
}

const scopes = new AsyncLocalStorage<ReadScope>();

/**
 * Runs `fn` with its read-db queries routed to the replica when it is usable for `scope`
 * (see the module comment); outside such a call they all go to the primary.
 */
export function routeReads<T>(scope: ReadScope, fn: () => T): T {
  return scopes.run(scope, fn);
}

export interface ReadReplica {
  /** queries go to the replica inside `routeReads` when it is usable, else to the primary */
  readonly db: Db;
  /** the primary's current WAL insert position ("0/16B3748"), for read-your-writes */
  primaryLsn(): Promise<string>;
  /** the state as last checked (checking now when `refresh`) */
  state(refresh?: boolean): Promise<ReplicaState>;
  close(): Promise<void>;
}

export interface ReadReplicaOptions {
  url: string;
  primary: Database;
  /** reads go to the primary while the replica is staler than this */
  maxLagMs: number;
  logger?: Logger;
  maxConnections?: number;
}

/** An LSN as Postgres writes it ("16/B374D848"); without flags, so JSON Schema can use it. */
export const LSN_PATTERN = /^([0-9A-Fa-f]{1,8})\/([0-9A-Fa-f]{1,8})$/;

/** "16/B374D848" -> a number that orders as the WAL does; undefined when not an LSN. */
export function parseLsn(text: string | null | undefined): bigint | undefined {
  const m = LSN_PATTERN.exec(text?.trim() ?? '');
  if (!m) return undefined;
  return (BigInt(`0x${m[1]}`) << 32n) + BigInt(`0x${m[2]}`);
}

/** The postgres.js client under a drizzle `Db` opened by db/client.ts. */
function clientOf(db: Db): postgres.Sql {
  const client = (db as unknown as { $client?: postgres.Sql }).$client;
  if (!client || typeof client.unsafe !== 'function') {
    throw new Error('DATABASE_READ_URL needs DATABASE_URL: the primary must be a real Postgres');
  }
  return client;
}

/**
 * A lost connection or a server that is shutting down or refusing connections, as opposed
 * to a statement the replica refused (those are retried on the primary without marking it down).
 */
function isConnectionError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') return false;
  if (err instanceof postgres.PostgresError) {
    // connection exception, operator intervention (shutdown), insufficient resources
    return code.startsWith('08') || code.startsWith('57P') || code.startsWith('53');
  }
  // postgres.js's own (CONNECTION_CLOSED, CONNECT_TIMEOUT, ...) and the system's (ECONNREFUSED)
  return /^(CONNECT|ECONN|EHOST|ENET|EPIPE$|ETIMEDOUT$|ENOTFOUND$|EAI_)/.test(code);
}

/**
 * The database's error in `err` (itself, or its cause: drizzle wraps what fails inside a
 * transaction), or undefined for anything else (an AppError a read throws, a 404, is an
 * answer, not a failure of the replica).
 */
function databaseError(err: unknown): unknown {
  for (let e = err, depth = 0; e instanceof Error && depth < 4; e = e.cause, depth++) {
    if (e instanceof postgres.PostgresError || isConnectionError(e)) return e;
  }
  return undefined;
}

export async function openReadReplica(opts: ReadReplicaOptions): Promise<ReadReplica> {
  const primary = clientOf(opts.primary.db);
  const replica = postgres(opts.url, {
    max: opts.maxConnections ?? 10,
    onnotice: () => {},
    connect_timeout: 2,
    backoff: (attempt: number) => Math.min(0.05 * 2 ** attempt, 1),
    connection: { application_name: 'switchboard-reads' },
  });
  // drizzle sets its parsers on the client it is given: the same as the primary's
  drizzlePostgres({ client: replica, schema });

  // the primary's WAL position sampled at each check, newest last, kept for maxLag and a bit
  const samples: { lsn: bigint; at: number }[] = [];
  let current: ReplicaState = { up: false, reason: 'not checked yet', lagMs: 0, checkedAt: 0 };
  let downUntil = 0;
  let inFlight: Promise<ReplicaState> | undefined;
  let wasUsable: boolean | undefined;

  const usable = (s: ReplicaState) => s.up && s.lagMs <= opts.maxLagMs;
  const report = (s: ReplicaState) => {
    const now = usable(s);
    if (now === wasUsable) return;
    wasUsable = now;
    if (now) opts.logger?.info({ lagMs: s.lagMs }, 'read replica in use');
    else opts.logger?.warn({ reason: s.reason, lagMs: s.lagMs }, 'reads go to the primary');
  };
  const markDown = (reason: string) => {
    downUntil = Date.now() + RETRY_DOWN_MS;
    current = { up: false, reason, lagMs: current.lagMs, checkedAt: Date.now() };
    report(current);
  };

  async function check(): Promise<ReplicaState> {
    const at = Date.now();
    try {
      const [[p], [r]] = await withTimeout(
        Promise.all([
          primary<{ lsn: string }[]>`select pg_current_wal_insert_lsn()::text as lsn`,
          replica<{ recovery: boolean; replay: string | null }[]>`
            select pg_is_in_recovery() as recovery, pg_last_wal_replay_lsn()::text as replay`,
        ]),
        CHECK_TIMEOUT_MS,
        'the replica',
      );
      const primaryLsn = parseLsn(p?.lsn);
      if (primaryLsn !== undefined) samples.push({ lsn: primaryLsn, at });
      while (samples.length > 1 && samples[0]!.at < at - opts.maxLagMs - 10 * CHECK_EVERY_MS) {
        samples.shift();
      }
      const replayLsn = parseLsn(r?.replay);
      if (!r?.recovery || replayLsn === undefined) {
        // promoted, or not a replica at all: its data may have parted from the primary's
        downUntil = at + RETRY_DOWN_MS;
        return {
          up: false,
          reason: 'not in recovery (not a streaming replica)',
          lagMs: 0,
          checkedAt: at,
        };
      }
      // the newest sample it has replayed: it holds everything the primary held then
      let lagMs = Number.POSITIVE_INFINITY;
      for (let i = samples.length - 1; i >= 0; i--) {
        if (samples[i]!.lsn <= replayLsn) {
          lagMs = Math.max(0, at - samples[i]!.at);
          break;
        }
      }
      // behind every sample kept: staler than the oldest of them
      if (lagMs === Number.POSITIVE_INFINITY && samples.length > 0) lagMs = at - samples[0]!.at;
      const reason = lagMs > opts.maxLagMs ? `lagging ${lagMs} ms behind the primary` : undefined;
      return { up: true, ...(reason && { reason }), replayLsn, lagMs, checkedAt: at };
    } catch (err) {
      downUntil = at + RETRY_DOWN_MS;
      return {
        up: false,
        reason: `unreachable: ${err instanceof Error ? err.message : String(err)}`,
        lagMs: current.lagMs,
        checkedAt: at,
      };
    }
  }

  /** The state, checked again when it is older than CHECK_EVERY_MS (or `force`); one at a time. */
  function state(force = false): Promise<ReplicaState> {
    const now = Date.now();
    if (!current.up && now < downUntil) return Promise.resolve(current);
    if (!force && now - current.checkedAt < CHECK_EVERY_MS) return Promise.resolve(current);
    inFlight ??= check().then((s) => {
      current = s;
      inFlight = undefined;
      report(s);
      return s;
    });
    return inFlight;
  }

  async function decide(scope: ReadScope): Promise<ReadTarget> {
    let s = await state();
    if (!usable(s)) return 'primary';
    const need = scope.minLsn;
    if (need !== undefined && (s.replayLsn ?? 0n) < need) {
      // the client's own write may have been replayed since the last check: ask once more
      s = await state(true);
      if (!usable(s) || (s.replayLsn ?? 0n) < need) return 'primary';
    }
    return 'replica';
  }

  /** Where the current scope's next query goes: decided once per CHECK_EVERY_MS of a scope. */
  async function target(): Promise<ReadTarget> {
    const scope = scopes.getStore();
    if (!scope) return 'primary';
    const now = Date.now();
    if (scope.target && scope.decidedAt !== undefined && now - scope.decidedAt < CHECK_EVERY_MS) {
      return scope.target;
    }
    // decided again after a while: a long read (the console's live call page) follows the
    // replica's state, and moves to it once it has replayed the scope's minLsn
    scope.target = await decide(scope);
    scope.decidedAt = now;
    return scope.target;
  }

  /** Runs `run` on the replica when the scope allows, on the primary otherwise or on failure. */
  async function routed<T>(run: (sql: postgres.Sql) => Promise<T>): Promise<T> {
    if ((await target()) === 'primary') return run(primary);
    try {
      return await run(replica);
    } catch (err) {
      const failed = databaseError(err);
      if (failed === undefined) throw err;
      if (isConnectionError(failed)) {
        markDown(`lost: ${failed instanceof Error ? failed.message : String(failed)}`);
      }
      const scope = scopes.getStore();
      if (scope) {
        scope.target = 'primary';
        scope.decidedAt = Date.now();
      }
      return run(primary);
    }
  }

  // what drizzle's postgres.js session calls on its client: unsafe (awaited, or .values()),
  // begin (transactions), and the parser tables it fills in at construction
  const client = {
    options: { parsers: {}, serializers: {} },
    unsafe(query: string, params?: unknown[], options?: postgres.UnsafeQueryOptions) {
      const run = (values: boolean) =>
        routed(async (sql) => {
          const q = sql.unsafe(query, params as never[], options);
          return values ? await q.values() : await q;
        });
      return {
        values: () => run(true),
        // biome-ignore lint/suspicious/noThenProperty: drizzle awaits what unsafe() answers
        then: <A, B>(ok?: (v: unknown) => A, fail?: (e: unknown) => B) => run(false).then(ok, fail),
      };
    },
    begin(...args: unknown[]) {
      // a read-only transaction (getCall's snapshot): run whole on one server, again on the
      // primary when the replica fails it
      return routed((sql) => (sql.begin as (...a: unknown[]) => Promise<unknown>)(...args));
    },
  };
  const db = drizzlePostgres({
    client: client as unknown as postgres.Sql,
    schema,
  }) as unknown as Db;

  return {
    db,
    async primaryLsn() {
      const [row] = await primary<
        { lsn: string }[]
      >`select pg_current_wal_insert_lsn()::text as lsn`;
      return row!.lsn;
    },
    state: (refresh = false) => state(refresh),
    async close() {
      await replica.end({ timeout: 5 });
    },
  };
}
