/**
 * Day partitions of the append-only tables: the timelines (migration 0017), the events for the
 * user's endpoints (0018) and the raw callbacks (0019). `message_events` and `call_events` are
 * partitioned by RANGE of their parent's id, `outgoing_events` by its own, each a UUIDv7 (its
 * first 48 bits are the millisecond it was made), and `inbox` by `received_at`; one partition
 * per UTC day, and a default partition for what falls outside every day made. So:
 *
 * - a read by message or call id (every timeline) touches one partition, whatever the number
 *   of days kept (a message's read by id names it: db/partition-map.ts);
 * - retention drops whole days (`dropPartitionsBefore`): a file unlinked, no row-by-row
 *   delete, no bloat, no vacuum behind it;
 * - the server makes each day's partition ahead (`ensurePartitions`, at start and then hourly
 *   on the leader): PARTITIONS_AHEAD_DAYS days (default 7). A day it did not make in time
 *   (a server stopped for longer) fills the default partition meanwhile, and its rows move
 *   into their partition when it is made.
 *
 * No foreign key refers to a partitioned table: a day would then have to be detached before
 * its drop, and Postgres would check every row of it meanwhile, under the table's lock. So a
 * day of `outgoing_events` goes with its deliveries, and a day of `inbox` with the rows that
 * point at its bodies, deleted here in the drop's transaction.
 *
 * A day partition is defined once, in SQL (`switchboard_day_partition`, migration 0017, made
 * over in 0018 and 0019); this module only says which days. With PARTITIONS=external the
 * server makes and drops none, and another tool (pg_partman) owns them: docs/scaling.md.
 *
 * @example
 * await ensurePartitions(db, clock.now(), 7); // today and the 7 days after it exist
 * const { dropped } = await dropPartitionsBefore(db, cutoff); // days wholly before cutoff
 */
import { sql } from 'drizzle-orm';
import { TransactionRollbackError } from 'drizzle-orm/errors';
import { uuidv7Floor, uuidv7Time } from '../ids.ts';
import { type Db, type Queryable, rowsOf, type Tx } from './client.ts';
import { isLockNotAvailable } from './errors.ts';
import { deleteInboxRefs } from './inbox-refs.ts';

/**
 * The partitioned tables and their keys: the parent's UUIDv7, the row's own, or (`byTime`) a
 * timestamptz. `release`: the rows of other tables that go with a day of this one, in the
 * drop's transaction, before the drop and (`after`) checked after it (false: the day waits,
 * whole, for a later round).
 */
export const PARTITIONED: readonly {
  table: 'message_events' | 'call_events' | 'outgoing_events' | 'inbox';
  key: string;
  byTime?: true;
  release?: {
    before(tx: Tx, p: DayPartition): Promise<boolean>;
    after?(tx: Tx, p: DayPartition): Promise<boolean>;
  };
}[] = [
  { table: 'message_events', key: 'message_id' },
  { table: 'call_events', key: 'call_id' },
  {
    table: 'outgoing_events',
    key: 'id',
    release: { before: releaseDeliveries, after: noDeliveryLeft },
  },
  { table: 'inbox', key: 'received_at', byTime: true, release: { before: releaseBodies } },
];

export type PartitionedTable = (typeof PARTITIONED)[number]['table'];

const TIME_KEYED = PARTITIONED.filter((t) => t.byTime).map((t) => t.table);

const DAY_MS = 86_400_000;

/** A day partition: its name, table and the span of ids it holds, as times (ms, UTC). */
export interface DayPartition {
  table: PartitionedTable;
  name: string;
  fromMs: number;
  toMs: number;
}

/** A range partition's bounds, as pg_get_expr writes them: `FOR VALUES FROM ('lo') TO ('hi')`. */
const BOUNDS = String.raw`FROM \('([^']+)'\) TO \('([^']+)'\)`;

const names = (tables: readonly string[]) =>
  sql.join(
    tables.map((t) => sql`${t}`),
    sql`, `,
  );

/**
 * Every range partition of the partitioned tables, from the catalog (the default partition
 * is not one), oldest first. A time key's bounds are read back by Postgres itself (their text
 * follows the session's DateStyle and time zone).
 */
export async function listPartitions(db: Queryable): Promise<DayPartition[]> {
  const rows = rowsOf<{
    parent: string;
    name: string;
    lo: string;
    hi: string;
    lo_ms: number | string | null;
    hi_ms: number | string | null;
  }>(
    await db.execute(sql`
      select parent, name, b[1] as lo, b[2] as hi,
        case when parent in (${names(TIME_KEYED)})
          then extract(epoch from b[1]::timestamptz) * 1000 end as lo_ms,
        case when parent in (${names(TIME_KEYED)})
          then extract(epoch from b[2]::timestamptz) * 1000 end as hi_ms
      from (
        select p.relname::text as parent, c.relname::text as name,
          regexp_match(pg_get_expr(c.relpartbound, c.oid), ${BOUNDS}) as b
        from pg_inherits i
        join pg_class c on c.oid = i.inhrelid
        join pg_class p on p.oid = i.inhparent
        join pg_namespace n on n.oid = p.relnamespace
        where n.nspname = current_schema()
          and p.relname in (${names(PARTITIONED.map((t) => t.table))})) parts
      -- the default partition has no range
      where b is not null`),
  );
  return rows
    .map((r) => ({
      table: r.parent as PartitionedTable,
      name: r.name,
      fromMs: r.lo_ms === null ? uuidv7Time(r.lo) : Number(r.lo_ms),
      toMs: r.hi_ms === null ? uuidv7Time(r.hi) : Number(r.hi_ms),
    }))
    .sort((a, b) => a.fromMs - b.fromMs || a.name.localeCompare(b.name));
}

/**
 * Where the day partitions retention drops at `cutoff` end (`dropPartitionsBefore`): the start
 * of the cutoff's UTC day. Whatever goes with its day goes by this time too.
 */
export function droppedDaysEnd(cutoff: Date): Date {
  return new Date(Math.floor(cutoff.getTime() / DAY_MS) * DAY_MS);
}

/** `YYYY-MM-DD` of the UTC day `ms` falls in. */
function dayOf(ms: number): string {
  return new Date(Math.floor(ms / DAY_MS) * DAY_MS).toISOString().slice(0, 10);
}

/** Rows of a default partition counted at most, so a scrape stays short however many wait. */
export const DEFAULT_ROWS_COUNTED = 10_000;

/** What `/metrics` says of one partitioned table (`partitionHealth`). */
export interface PartitionHealth {
  table: PartitionedTable;
  /**
   * UTC days from today on whose partition is made, in a row: 0 when today's is missing (its
   * rows go to the default partition); PARTITIONS_AHEAD_DAYS + 1 when every day made ahead is
   */
  daysAhead: number;
  /** rows in the table's default partition, counted up to DEFAULT_ROWS_COUNTED */
  defaultRows: number;
}

/**
 * Whether the day partitions keep ahead of the rows, per table: the days made from today on,
 * and the rows that fell into the default partition instead (a day that could not be made;
 * rows older than every day made). Read from the catalog and one bounded count per table.
 */
export async function partitionHealth(db: Queryable, now: Date): Promise<PartitionHealth[]> {
  const days = new Set((await listPartitions(db)).map((p) => `${p.table} ${dayOf(p.fromMs)}`));
  const counts = rowsOf<{ t: string; n: number | string }>(
    await db.execute(
      sql.join(
        PARTITIONED.map(
          ({ table }) => sql`select ${table}::text as t, count(*) as n from (
            select 1 from ${sql.identifier(`${table}_default`)} limit ${DEFAULT_ROWS_COUNTED}) d`,
        ),
        sql` union all `,
      ),
    ),
  );
  const today = Math.floor(now.getTime() / DAY_MS) * DAY_MS;
  return PARTITIONED.map(({ table }) => {
    let daysAhead = 0;
    while (days.has(`${table} ${dayOf(today + daysAhead * DAY_MS)}`)) daysAhead++;
    const defaultRows = Number(counts.find((c) => c.t === table)?.n ?? 0);
    return { table, daysAhead, defaultRows };
  });
}

/**
 * Makes the day partitions that are missing, on every partitioned table: today's and the
 * `aheadDays` days after it (UTC), and the days whose events are waiting in the default
 * partition (a server stopped longer than that; rows from before the migration's days), which
 * move into it; the names of those made. Each in its own short transaction, which waits at
 * most `lockTimeoutMs` for the table (a partition made takes a brief exclusive lock on its
 * parent): one that could not wait is made on the next round. With `keepFrom` (the retention
 * limit), no day that ended before it is made: retention would drop it again, and its rows go
 * one by one.
 */
export async function ensurePartitions(
  db: Db,
  now: Date,
  aheadDays: number,
  opts: { keepFrom?: Date | undefined; lockTimeoutMs?: number } = {},
): Promise<string[]> {
  const lockTimeoutMs = opts.lockTimeoutMs ?? 2000;
  const keepFrom = opts.keepFrom ? dayOf(opts.keepFrom.getTime() - DAY_MS) : '';
  const have = new Set((await listPartitions(db)).map((p) => `${p.table} ${dayOf(p.fromMs)}`));
  const today = Math.floor(now.getTime() / DAY_MS) * DAY_MS;
  const ahead = Array.from({ length: aheadDays + 1 }, (_, i) => dayOf(today + i * DAY_MS));
  const made: string[] = [];
  for (const { table, key, byTime } of PARTITIONED) {
    const dayOfRow = sql`${sql.raw(byTime ? 'switchboard_time_day' : 'switchboard_uuidv7_day')}(${sql.identifier(key)})`;
    // the default partition is empty but for such rows: reading it is a short scan
    const waiting = rowsOf<{ d: string }>(
      await db.execute(sql`
        select distinct ${dayOfRow}::text as d
        from ${sql.identifier(`${table}_default`)}
        where ${dayOfRow} is not null`),
    ).map((r) => r.d);
    for (const day of [...new Set([...waiting, ...ahead])].sort()) {
      // a day ends by keepFrom when it is keepFrom's day before, or earlier ('' when none)
      if (have.has(`${table} ${day}`) || day <= keepFrom) continue;
      try {
        const name = await db.transaction(async (tx) => {
          await tx.execute(sql`select set_config('lock_timeout', ${`${lockTimeoutMs}ms`}, true)`);
          const [row] = rowsOf<{ name: string | null }>(
            await tx.execute(
              sql`select switchboard_day_partition(${table}, ${key}, ${day}::date) as name`,
            ),
          );
          return row?.name ?? null;
        });
        if (name) made.push(name);
      } catch (err) {
        // the table was busy past the lock timeout: the next round makes it
        if (!isLockNotAvailable(err)) throw err;
      }
    }
  }
  return made;
}

/**
 * Before a day of `outgoing_events` goes: its events' deliveries (no foreign key: migration
 * 0018), and their attempts (that foreign key cascades). Retention never cuts a retry: while
 * one of them is pending the day stays (false), whole, and is tried again on a later round.
 * The deliveries go row by row, but they are narrow; the events, the wide rows, go with the
 * partition.
 */
async function releaseDeliveries(tx: Tx, p: DayPartition): Promise<boolean> {
  const day = deliveriesOf(p);
  const pending = rowsOf(
    await tx.execute(
      sql`select 1 from event_deliveries where ${day} and state = 'pending' limit 1`,
    ),
  );
  if (pending.length > 0) return false;
  await tx.execute(sql`delete from event_deliveries where ${day} and state <> 'pending'`);
  return true;
}

/**
 * After a day of `outgoing_events` is dropped, under the table's lock: that none of its
 * deliveries is left (one index probe). No one can read an event of the day any more, let
 * alone queue a delivery of it, and a replay that read one before has committed (the drop
 * waited for it); false: it queued one after `releaseDeliveries`, and the day waits.
 */
async function noDeliveryLeft(tx: Tx, p: DayPartition): Promise<boolean> {
  const left = rowsOf(
    await tx.execute(sql`select 1 from event_deliveries where ${deliveriesOf(p)} limit 1`),
  );
  return left.length === 0;
}

/**
 * Before a day of `inbox` goes: the rows that point at its bodies (inbox-refs.ts), found by
 * the day's span of ids (two probes of its primary key) and then each checked against the
 * day, so a body of a neighbouring day whose id falls in that span keeps its rows. The keys
 * in `inbox_keys` are not touched: retention deletes them by their own age.
 */
async function releaseBodies(tx: Tx, p: DayPartition): Promise<boolean> {
  const day = sql.identifier(p.name);
  await deleteInboxRefs(
    tx,
    (id) => sql`${id} between (select min(id) from ${day}) and (select max(id) from ${day})
      and exists (select 1 from ${day} b where b.id = ${id})`,
  );
  return true;
}

/** The deliveries of the events of day `p`: a range of event_deliveries_event_endpoint_idx. */
function deliveriesOf(p: DayPartition) {
  const lo = uuidv7Floor(new Date(p.fromMs));
  const hi = uuidv7Floor(new Date(p.toMs));
  return sql`event_id >= ${lo}::uuid and event_id < ${hi}::uuid`;
}

/**
 * Drops the day partitions that end at or before `cutoff`: every event in them belongs to a
 * message or call made before it (or, for `outgoing_events`, was recorded before it; a day
 * goes with its deliveries, once none is pending: `releaseDeliveries`). Each drop is its own
 * short transaction that waits at most `lockTimeoutMs` for the table; one that could not is
 * left for the next round. The names of those dropped, with their row counts as the
 * statistics last saw them (a count would read what is about to go).
 */
export async function dropPartitionsBefore(
  db: Db,
  cutoff: Date,
  lockTimeoutMs = 2000,
): Promise<{ name: string; rows: number }[]> {
  const old = (await listPartitions(db)).filter((p) => p.toMs <= cutoff.getTime());
  const dropped: { name: string; rows: number }[] = [];
  for (const p of old) {
    const of = PARTITIONED.find((t) => t.table === p.table);
    try {
      const rows = await db.transaction(async (tx) => {
        await tx.execute(sql`select set_config('lock_timeout', ${`${lockTimeoutMs}ms`}, true)`);
        const [stats] = rowsOf<{ n: number | string }>(
          await tx.execute(
            sql`select greatest(reltuples, 0)::bigint as n from pg_class where relname = ${p.name}`,
          ),
        );
        const release = of?.release;
        // the day waits, whole: what release deleted comes back
        if (release && !(await release.before(tx, p))) tx.rollback();
        // the drop holds the parent's lock from here to the commit: nothing slow after it
        await tx.execute(sql`drop table if exists ${sql.identifier(p.name)}`);
        if (release?.after && !(await release.after(tx, p))) tx.rollback();
        return Number(stats?.n ?? 0);
      });
      dropped.push({ name: p.name, rows });
    } catch (err) {
      // the table was busy past the lock timeout: the next round drops it; a day that must
      // wait (a delivery pending, or queued again meanwhile) likewise
      if (!(err instanceof TransactionRollbackError) && !isLockNotAvailable(err)) throw err;
    }
  }
  return dropped;
}
