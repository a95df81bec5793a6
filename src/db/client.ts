/**
 * Opens the one database Switchboard keeps all its state in: an embedded PGlite under
 * `dataDir` when no URL is given, otherwise a real Postgres through postgres.js. Both are
 * driven through the same drizzle schema, so the rest of the code cannot tell them apart.
 *
 * @example
 * const database = await openDatabase({ dataDir: './.data' });
 * await migrateDatabase(database);
 */
import { mkdirSync } from 'node:fs';
import type { PGlite } from '@electric-sql/pglite';
import { type SQL, sql } from 'drizzle-orm';
import { type PgDatabase, PgDialect, type PgQueryResultHKT } from 'drizzle-orm/pg-core';
import {
  drizzle as drizzlePostgres,
  PostgresJsSession,
  PostgresJsTransaction,
} from 'drizzle-orm/postgres-js';
import postgres from 'postgres';
import { type Config, DEFAULT_DATA_DIR } from '../config.ts';
import { ALWAYS_UP, createAvailability, type DatabaseAvailability } from './availability.ts';
import { type DataDirLock, lockDataDir } from './data-dir-lock.ts';
import { createEmbedded } from './embedded.ts';
import { withTimeout } from './errors.ts';
import * as schema from './schema/index.ts';

export type Schema = typeof schema;
/** The drizzle handle every domain function takes; the same type for both engines. */
export type Db = PgDatabase<PgQueryResultHKT, Schema>;
/** A transaction handle (what `db.transaction` passes to its callback). */
export type Tx = Parameters<Parameters<Db['transaction']>[0]>[0];
/** Either the database or an open transaction: functions that only query take this. */
export type Queryable = Db | Tx;

export interface Database {
  readonly kind: 'pglite' | 'postgres';
  readonly db: Db;
  /** Resolves when the database answers a trivial query within `timeoutMs`. */
  ping(timeoutMs?: number): Promise<void>;
  /** whether it is known down: requests that need it are then refused at once (db/availability.ts) */
  readonly availability: DatabaseAvailability;
  /**
   * Runs `fn` while holding a session-level advisory lock (waiting for it), on a dedicated
   * connection, so that two processes never run `fn` at the same time (migrations).
   */
  withExclusiveLock<T>(key: number, fn: (db: Db) => Promise<T>): Promise<T>;
  /**
   * A lock that at most one process holds at a time (the dispatcher leader). It lives as long
   * as a dedicated connection: a leader that dies loses it, and another takes it over.
   * `onAcquired` runs when a lock this process was waiting for becomes its own, so the
   * caller can start leading then rather than at its next try.
   */
  createLeaderLock(key: number, onAcquired?: () => void): LeaderLock;
  /**
   * Calls `onNotify` on each NOTIFY on `channel` (delivered after the notifying transaction
   * commits, from any process); answers the function that stops listening. On Postgres it
   * holds a connection of its own, reconnected by postgres.js after a loss.
   */
  listen(channel: string, onNotify: () => void): Promise<() => Promise<void>>;
  close(): Promise<void>;
  /** the underlying PGlite instance, when embedded (tests dump and load its data dir) */
  readonly pglite?: PGlite;
  /** the lock on DATA_DIR, when embedded in one (db/data-dir-lock.ts); close releases it */
  readonly dataDirLock?: DataDirLock;
}

export interface LeaderLock {
  /**
   * true when this process holds the lock now (taking it if it is free). While another holds
   * it, this process waits for it in the background and calls `onAcquired` the moment it is
   * its own (see createLeaderLock).
   */
  tryAcquire(): Promise<boolean>;
  release(): Promise<void>;
}

export interface OpenOptions {
  url?: string | undefined;
  dataDir?: string;
  /** an existing PGlite (tests load a migrated template into one) */
  pglite?: PGlite;
  /** postgres.js pool size */
  maxConnections?: number;
  /**
   * DATABASE_DIRECT_URL: the same Postgres as `url` without the pooler in front of it, for
   * what needs a session of its own (see sessionRoute); unset: `url`
   */
  directUrl?: string | undefined;
  /** DATABASE_PREPARE: false sends `url`'s statements unprepared (a pooler in transaction mode) */
  prepare?: boolean;
  /** replaces LOST_CLIENT_SETTINGS (tests: a timeout of a fraction of a second) */
  lostClientSettings?: Readonly<Record<string, number>>;
}

/** openDatabase's options as the configuration gives them (the server, `switchboard migrate`). */
export function configuredDatabase(
  config: Pick<Config, 'databaseUrl' | 'databaseDirectUrl' | 'databasePrepare' | 'dataDir'>,
): OpenOptions {
  return {
    url: config.databaseUrl,
    dataDir: config.dataDir,
    directUrl: config.databaseDirectUrl,
    prepare: config.databasePrepare,
  };
}

export async function openDatabase(opts: OpenOptions): Promise<Database> {
  if (opts.url)
    return openPostgres(
      opts.url,
      opts.maxConnections ?? 10,
      sessionRoute(opts.url, opts),
      opts.lostClientSettings ?? LOST_CLIENT_SETTINGS,
    );
  if (opts.pglite) return openPglite(opts.pglite);
  const dir = opts.dataDir ?? DEFAULT_DATA_DIR;
  mkdirSync(dir, { recursive: true });
  // one process at a time: a second engine on the same files would not see the first's writes
  const lock = lockDataDir(dir);
  try {
    // set for memory (db/embedded.ts), its module loaded only when embedded
    return await openPglite(await createEmbedded(`${dir.replace(/\/+$/, '')}/pgdata`), lock);
  } catch (err) {
    lock.release();
    throw err;
  }
}

/**
 * postgres.js's connect_timeout, in seconds, for the pool and the session connections: how long
 * one connection attempt may take before its queries fail with CONNECT_TIMEOUT.
 */
export const CONNECT_TIMEOUT_S = 5;

async function openPglite(client: PGlite, lock?: DataDirLock): Promise<Database> {
  await client.waitReady;
  const { drizzle: drizzlePglite } = await import('drizzle-orm/pglite');
  const db = drizzlePglite({ client, schema }) as unknown as Db;
  return {
    kind: 'pglite',
    db,
    availability: ALWAYS_UP,
    pglite: client,
    ...(lock && { dataDirLock: lock }),
    async ping(timeoutMs = 2000) {
      await withTimeout(client.query('select 1'), timeoutMs, 'database');
    },
    // PGlite is one connection in one process: there is nobody else to exclude.
    withExclusiveLock: (_key, fn) => fn(db),
    createLeaderLock: () => ({ tryAcquire: async () => !client.closed, release: async () => {} }),
    async listen(channel, onNotify) {
      const stop = await client.listen(channel, () => onNotify());
      return async () => {
        if (!client.closed) await stop();
      };
    },
    async close() {
      try {
        if (!client.closed) await client.close();
      } finally {
        lock?.release();
      }
    },
  };
}

/**
 * Where what needs a session goes. A pooler in transaction mode (PgBouncer) hands each
 * transaction whatever server connection is free, so nothing may outlive a transaction on
 * `url`'s connections: not a prepared statement (hence `prepare`), not a session-level
 * advisory lock (migrations' withExclusiveLock, the dispatcher leader's createLeaderLock),
 * not a LISTEN. Those go to `url` (the direct URL when there is one), on connections of
 * their own. Transaction-scoped locks (`pg_advisory_xact_lock`), `SET LOCAL`, NOTIFY and
 * row locks stay in their transaction and are safe on the pool.
 */
interface SessionRoute {
  /** DATABASE_DIRECT_URL, else DATABASE_URL */
  url: string;
  /** whether statements on the pool (DATABASE_URL) are prepared */
  poolPrepare: boolean;
  /** whether statements on the session connections are: off only when they share the pool's URL */
  prepare: boolean;
}

function sessionRoute(poolUrl: string, opts: OpenOptions): SessionRoute {
  const poolPrepare = opts.prepare ?? true;
  const url = opts.directUrl ?? poolUrl;
  return { url, poolPrepare, prepare: opts.directUrl === undefined ? poolPrepare : true };
}

/**
 * A postgres.js client of one connection for session work (sessionRoute); `connection`: the
 * server settings it starts its session with.
 */
function sessionClient(
  route: SessionRoute,
  opts: { connection?: Partial<postgres.ConnectionParameters> } = {},
): postgres.Sql {
  return postgres(route.url, {
    max: 1,
    onnotice: () => {},
    connect_timeout: CONNECT_TIMEOUT_S,
    prepare: route.prepare,
    ...(opts.connection && { connection: opts.connection }),
  });
}

/**
 * The leader's session is ended by Postgres (`idle_session_timeout`, Postgres 14+), and its
 * lock freed, once it has been idle this long. A leader that hangs (SIGSTOP, a stuck event
 * loop, a paused VM) keeps its TCP connection, so without this it would keep the lock, and
 * nobody would dispatch, until it died. A live leader's heartbeat (every
 * LEADER_HEARTBEAT_MS, a quarter of it, so an event loop late by up to 600 ms still makes it)
 * keeps its session busy. The other instances wait for the lock in Postgres
 * (`pg_advisory_lock`), so one of them holds it the moment it is freed: handover from a hung
 * leader takes this long, from a dead one (its connection closed) a round trip. A leader whose
 * event loop stalls longer loses the lock: that costs a handover, not a double send (rounds
 * claim rows with SKIP LOCKED), and it takes the lock again when it is free.
 */
export const LEADER_IDLE_TIMEOUT_MS = 800;
const LEADER_HEARTBEAT_MS = LEADER_IDLE_TIMEOUT_MS / 4;

/**
 * Whether the server refused to start a session with `idle_session_timeout`: PgBouncer
 * refuses startup parameters it does not know (08P01 "unsupported startup parameter"),
 * Postgres before 14 does not have the setting.
 */
function refusedIdleTimeout(err: unknown): boolean {
  return err instanceof Error && err.message.includes('idle_session_timeout');
}

/**
 * What the pool's sessions start with on a direct Postgres, for an instance lost without
 * closing its connections (its machine gone, the network cut: nothing reaches Postgres, whose
 * TCP keepalive gives up after two hours by default):
 * - `idle_in_transaction_session_timeout`: a transaction left open this long is ended and its
 *   row locks freed. A lost instance mid-batch would otherwise keep the locks of the messages
 *   it was updating, and every other instance's callbacks for them would wait on those locks.
 *   Switchboard's transactions are statements back to back; the one that waits on something
 *   else, the dispatcher's round on the provider, sets its own bound for itself (SET LOCAL).
 * - `tcp_keepalives_*`: an idle session whose client vanished is found in about 90 s and its
 *   connection slot freed.
 * A pooler does not pass startup settings on (PgBouncer refuses them), so behind one the
 * pooler's own settings do this (docs/scaling.md, "Behind PgBouncer").
 */
export const LOST_CLIENT_SETTINGS = {
  idle_in_transaction_session_timeout: 60_000,
  tcp_keepalives_idle: 60,
  tcp_keepalives_interval: 10,
  tcp_keepalives_count: 3,
} as const;

/**
 * Whether the server refused a session's startup `settings`: a pooler's "unsupported startup
 * parameter: ...", or any refusal that names one of them.
 */
function refusedStartupSetting(err: unknown, settings: Readonly<Record<string, unknown>>): boolean {
  if (!(err instanceof Error)) return false;
  const { message } = err;
  return (
    message.includes('startup parameter') ||
    Object.keys(settings).some((name) => message.includes(name))
  );
}

async function openPostgres(
  url: string,
  max: number,
  route: SessionRoute,
  settings: Readonly<Record<string, number>>,
): Promise<Database> {
  const pool = (withSettings: boolean) =>
    postgres(url, {
      max,
      prepare: route.poolPrepare,
      onnotice: () => {},
      // fail fast when the server is gone, so /readyz and the hooks can answer 503 quickly
      connect_timeout: CONNECT_TIMEOUT_S,
      // reconnect soon after the server is back: postgres.js's default waits 3^n/100 s after
      // the n-th failed attempt (up to 20 s), and a busy server fails many attempts during
      // an outage of a few seconds; capped at one second, recovery takes about that long
      backoff: (attempt: number) => Math.min(0.05 * 2 ** attempt, 1),
      connection: { application_name: 'switchboard', ...(withSettings && settings) },
    });
  // DATABASE_URL names a pooler when DATABASE_DIRECT_URL or DATABASE_PREPARE=false says so;
  // else it is taken for Postgres itself, and a pooler that refuses the settings (one in
  // session mode, configured as if it were Postgres) gets the pool without them
  const direct = route.url === url && route.poolPrepare;
  let client = pool(direct);
  if (direct) {
    await client`select 1`.catch(async (err: unknown) => {
      // any other failure (the server down) is the pool's to meet, as without the probe
      if (!refusedStartupSetting(err, settings)) return;
      await client.end({ timeout: 1 });
      client = pool(false);
    });
  }
  const db = drizzlePostgres({ client, schema }) as unknown as Db;
  let listener: postgres.Sql | undefined;
  const ping = async (timeoutMs = 2000) => {
    await withTimeout(client`select 1`, timeoutMs, 'database');
  };
  // its probe is the pool's own `select 1`: up again means requests' queries get through
  const availability = createAvailability(ping);
  return {
    kind: 'postgres',
    db,
    availability,
    ping,
    async withExclusiveLock(key, fn) {
      // a client of its own with one connection: the session-level lock and everything
      // `fn` runs share that connection (drizzle cannot drive a reserved postgres.js one)
      const single = sessionClient(route);
      try {
        await single`select pg_advisory_lock(${key})`;
        return await fn(drizzlePostgres({ client: single, schema }) as unknown as Db);
      } finally {
        // ending the session releases the lock, whatever state fn left it in
        await single.end({ timeout: 5 });
      }
    },
    createLeaderLock(key, onAcquired) {
      let session: postgres.Sql | undefined;
      let heartbeat: NodeJS.Timeout | undefined;
      let beating = false;
      // the background `pg_advisory_lock` of session `waiting` (one at a time); `won` once it
      // returned: the lock is this session's
      let waiting: postgres.Sql | undefined;
      let won = false;
      // false once the server refused the setting (refusedIdleTimeout): the session then
      // starts without it, and a hung leader keeps the lock until it dies, as a pooler in
      // front of the session route implies (docs/scaling.md)
      let idleTimeout = true;
      const stopHeartbeat = () => {
        clearInterval(heartbeat);
        heartbeat = undefined;
      };
      const startHeartbeat = () => {
        if (heartbeat) return;
        heartbeat = setInterval(() => void beat(), LEADER_HEARTBEAT_MS);
        heartbeat.unref(); // never what keeps the process alive
      };
      /** Ends session `s` (a wait on it fails with it); the next tryAcquire opens a new one. */
      const drop = async (s = session) => {
        if (s === session) {
          session = undefined;
          stopHeartbeat();
        }
        if (s === waiting) {
          waiting = undefined;
          won = false;
        }
        await s?.end({ timeout: 1 }).catch(() => {});
      };
      const open = () =>
        sessionClient(
          route,
          idleTimeout ? { connection: { idle_session_timeout: LEADER_IDLE_TIMEOUT_MS } } : {},
        );
      // postgres.js reconnects silently after a lost connection (a session Postgres ended for
      // idling included), and the new session does not hold the lock: so ask pg_locks about
      // this very session, and with `take`, take the lock when it is not ours
      const holds = async (s: postgres.Sql, take: boolean) => {
        const [row] = await s<{ held: boolean }[]>`
          select case when exists(
            select 1 from pg_locks where locktype = 'advisory' and granted
              and pid = pg_backend_pid() and objid = ${key}
          ) then true when ${take} then pg_try_advisory_lock(${key}) else false end as held`;
        return row?.held === true;
      };
      // another process holds the lock: wait for it in Postgres, on this session (a query
      // waiting for a lock is not idle, so the idle timeout leaves it alone). The session can
      // run nothing else meanwhile, so tryAcquire asks `won` instead of Postgres until then.
      const wait = (s: postgres.Sql) => {
        waiting = s;
        won = false;
        s`select pg_advisory_lock(${key})`.then(
          () => {
            if (waiting !== s) return; // released or dropped meanwhile: the session is ending
            won = true;
            startHeartbeat();
            onAcquired?.();
          },
          () => void drop(s),
        );
      };
      // while this process holds the lock: keeps its session from idling out, and finds a
      // lost one (a resumed process whose session Postgres ended) at once
      const beat = async () => {
        const s = session;
        if (!s || beating) return;
        beating = true;
        try {
          // unanswered that long (the network gone), Postgres ends the session anyway
          const held = await withTimeout(holds(s, false), LEADER_IDLE_TIMEOUT_MS, 'leader session');
          if (!held) await drop(s);
        } catch {
          await drop(s);
        } finally {
          beating = false;
        }
      };
      const tryAcquire = async (): Promise<boolean> => {
        session ??= open();
        const s = session;
        if (s === waiting) {
          if (!won) return false;
          // the wait returned: from now on this session is a holder's, heartbeat and all
          waiting = undefined;
          won = false;
        }
        try {
          const held = await holds(s, true);
          if (s === session) {
            if (held) startHeartbeat();
            else {
              stopHeartbeat();
              wait(s);
            }
          }
          return held;
        } catch (err) {
          await drop(s);
          if (idleTimeout && refusedIdleTimeout(err)) {
            idleTimeout = false;
            return tryAcquire();
          }
          return false;
        }
      };
      return { tryAcquire, release: () => drop() };
    },
    async listen(channel, onNotify) {
      // postgres.js listens on a connection of its own, made with the client's URL
      listener ??= route.url === url ? client : sessionClient(route);
      const { unlisten } = await listener.listen(channel, () => onNotify());
      return async () => {
        await unlisten().catch(() => {});
      };
    },
    async close() {
      availability.stop();
      await Promise.all([
        client.end({ timeout: 5 }),
        listener !== client && listener?.end({ timeout: 5 }),
      ]);
    },
  };
}

/** `select 1` through drizzle: used by readiness checks that only hold a `Db`. */
export async function selectOne(db: Queryable): Promise<void> {
  await db.execute(sql`select 1`);
}

/**
 * The rows of a raw `db.execute(sql...)`: postgres.js returns an array, PGlite an object with
 * `rows`; drizzle's query builder hides this, raw SQL does not.
 */
export function rowsOf<T>(result: unknown): T[] {
  return (Array.isArray(result) ? result : (result as { rows: T[] }).rows) as T[];
}

/**
 * A list of values as one JSON parameter, for `in (...)`: the statement's text is the same
 * whatever the list's length, and there is no limit on how many (unlike `in ($1, $2, ...)`).
 *
 * @example
 * sql`delete from inbox where id in ${idList(ids, 'bigint')}`
 */
export function idList(ids: readonly (string | number)[], type: 'uuid' | 'text' | 'bigint') {
  return sql`(select value::${sql.raw(type)} from jsonb_array_elements_text(${JSON.stringify(ids)}::jsonb))`;
}

/**
 * A list of values as one Postgres array parameter, for `= any(...)`: unlike `idList`'s
 * subquery, Postgres reads its values while planning, so a statement on a partitioned table
 * keyed by them plans only their days (docs/scaling.md, "Partitions"). For values whose text
 * needs no quoting in an array literal: UUIDs, ISO times, integers.
 *
 * @example
 * sql`select * from outgoing_events where id = any(${valueArray(ids, 'uuid')})`
 */
export function valueArray(
  values: readonly (string | number)[],
  type: 'uuid' | 'timestamptz' | 'bigint',
) {
  return sql`${`{${values.join(',')}}`}::${sql.raw(type)}[]`;
}

const dialect = new PgDialect();

/**
 * Runs `query` as a prepared statement: Postgres parses and plans it once per connection
 * (postgres.js keeps one per text and connection; PGlite prepares it too), not on every call.
 * drizzle's `execute` sends raw SQL unprepared (postgres.js's `unsafe`), so the big
 * statements of the hot paths (delivery batches, speech-webhook batches, dispatch rounds),
 * whose rows travel as JSON parameters, were parsed and planned on every batch. Only for
 * statements whose text is the same whatever the data (each text is kept per connection).
 * Rows as the driver gives them. With DATABASE_PREPARE=false the client prepares nothing (its
 * `prepare: false` outranks the query's): the statement goes unnamed, parsed and planned each
 * time, and works through a pooler in transaction mode.
 *
 * @example
 * const rows = await executePrepared<{ id: string }>(tx, sql`select id from messages where id = any(${ids})`);
 */
export async function executePrepared<T>(db: Db | Tx, query: SQL): Promise<T[]> {
  // a name makes drizzle ask the driver to prepare (the name itself is not used)
  const prepared = db._.session.prepareQuery(dialect.sqlToQuery(query), undefined, 'sb', false);
  return rowsOf<T>(await prepared.execute());
}

/** Runs a transaction's final statement with COMMIT right behind it (see pipelinedTransaction). */
export type RunLast = <T>(query: SQL) => Promise<T[]>;

/**
 * A postgres.js query as pipelinedTransaction's deadline sees it (fields its typings hide):
 * `active` while the connection runs it; `cancel()` sends Postgres a cancel request for it and
 * returns a promise settled once Postgres took it (scripts/patch-postgres-js.mjs, fix 3).
 */
interface CancellableQuery {
  active?: boolean;
  cancel(): Promise<void> | null;
}

/** What pipelinedTransaction reads of drizzle's postgres.js session (fields its typings hide). */
interface PostgresJsInternals {
  client: postgres.Sql;
  dialect: PgDialect;
  schema: unknown;
  options: unknown;
}

/**
 * A transaction in two round trips instead of four, for hot paths that run many small ones
 * (delivery batches): BEGIN goes out with the first statement instead of alone, and `last`
 * sends the final statement with COMMIT behind it. Each round trip wakes Postgres and then
 * this process, on a busy server the costliest part of a small transaction (measured: BEGIN
 * and COMMIT took half a batch's time at 2000 callbacks/s). `fn` runs the transaction's
 * statements on `tx` as usual, and may end with `await last(query)`: run prepared (unless
 * DATABASE_PREPARE=false), its rows returned, and committed. No statement may follow it. A last statement that Postgres
 * refuses makes that COMMIT a rollback, and its error is thrown; one that the driver refuses
 * before sending it (65 534 parameters or more) cannot stop the COMMIT behind it, and throws
 * "failed after COMMIT". When `fn` returns without calling `last`, COMMIT follows as usual;
 * when it throws, the transaction is rolled back.
 *
 * On PGlite (no network between the two) this is `db.transaction`, and `last` a statement
 * like any other.
 *
 * `signal` (Postgres only; group commit's deadline) stops the transaction where it is: the
 * statement Postgres runs is cancelled (a wait on a row lock that a lost instance holds ends
 * now, not when Postgres notices the loss), `last` refuses to send, and the connection goes
 * back to the pool only after the cancel was delivered and a ROLLBACK answered behind it. A
 * cancel request names the backend, not the statement, so one that arrived late would stop
 * the connection's next user's statement; waiting for it first means it stops ours, or
 * reaches an idle backend, which ignores it.
 *
 * @example
 * const rows = await pipelinedTransaction(db, async (tx, last) => {
 *   const locked = await tx.execute(sql`select ... for update`); // BEGIN travels with it
 *   return last<{ n: number }>(sql`insert ... returning 1`); // and COMMIT with this
 * });
 */
export async function pipelinedTransaction<T>(
  db: Db,
  fn: (tx: Tx, last: RunLast) => Promise<T>,
  signal?: AbortSignal,
): Promise<T> {
  const base = db._.session;
  if (!(base instanceof PostgresJsSession)) {
    return db.transaction((tx) => fn(tx, (query) => executePrepared(tx, query)));
  }
  const { client, dialect: d, schema: relations, options } = base as unknown as PostgresJsInternals;
  const conn = await client.reserve();
  // every query of the transaction, drizzle's included, for the deadline to find the one
  // running (postgres.js marks it `active`); with no signal, the connection as it is
  const issued: CancellableQuery[] = [];
  const run: postgres.ReservedSql = signal
    ? new Proxy(conn, {
        get(target, prop, receiver) {
          if (prop !== 'unsafe') return Reflect.get(target, prop, receiver);
          return (...args: Parameters<postgres.Sql['unsafe']>) => {
            signal.throwIfAborted();
            const query = target.unsafe(...args);
            issued.push(query as unknown as CancellableQuery);
            return query;
          };
        },
      })
    : conn;
  // postgres.js sends each query a microtask after `execute()` (or `await`) in call order, and
  // a connection's queries in the order they were sent: BEGIN goes first, before anything fn
  // runs, and in the same write as fn's first statement. Not through `run`, which throws once
  // aborted: nothing between the reservation and the `finally` that releases it may throw
  const begun = conn.unsafe('begin').execute();
  issued.push(begun as unknown as CancellableQuery);
  begun.catch(() => {}); // its failure fails fn's first statement too; awaited below
  // the deadline: cancel the statement Postgres runs now (the connection's active query), and
  // send nothing more; `cancelled` settles once Postgres has taken the request
  let cancelled: Promise<void> | undefined;
  const stop = () => {
    const running = issued.filter((q) => q.active === true);
    cancelled = Promise.all(running.map((q) => q.cancel()?.catch(() => {}))).then(() => {});
  };
  if (signal?.aborted) stop();
  else signal?.addEventListener('abort', stop, { once: true });
  let ended = false;
  const last: RunLast = async <R>(query: SQL) => {
    if (ended) throw new Error('pipelinedTransaction: last() ran twice');
    ended = true;
    const q = d.sqlToQuery(query);
    // both handed to the connection now, in this order; not through drizzle, whose promise
    // chain would hand its query over later than COMMIT
    const statement = run.unsafe(q.sql, q.params as never[], { prepare: true }).execute();
    const commit = run.unsafe('commit').execute();
    const [rows, committed] = await Promise.allSettled([statement, commit]);
    if (rows.status === 'rejected') {
      // Postgres refused it, and COMMIT became a rollback: its error is the one that matters.
      // One the driver refused before sending (too many parameters) left COMMIT to commit
      // what came before: say so rather than let the caller believe nothing was kept
      if (committed.status === 'fulfilled' && committed.value.command === 'COMMIT') {
        throw new Error('pipelinedTransaction: the last statement failed after COMMIT', {
          cause: rows.reason,
        });
      }
      throw rows.reason;
    }
    if (committed.status === 'rejected') throw committed.reason;
    return rows.value as unknown as R[];
  };
  try {
    const session = new PostgresJsSession(run as never, d, relations as never, options as never);
    const tx = new PostgresJsTransaction(d, session, relations as never) as unknown as Tx;
    let result: T;
    try {
      result = await fn(tx, last);
      await begun;
    } catch (err) {
      if (!ended) {
        ended = true;
        await conn.unsafe('rollback').catch(() => {}); // a dead connection rolled back already
      }
      throw err;
    }
    if (!ended) await run.unsafe('commit');
    return result;
  } finally {
    signal?.removeEventListener('abort', stop);
    if (cancelled) {
      await cancelled;
      // whatever the cancel hit (COMMIT included), nothing of the transaction stays open
      await conn.unsafe('rollback').catch(() => {});
    }
    conn.release();
  }
}
