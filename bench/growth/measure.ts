/**
 * What the growth bench (bench/growth.ts) measures at each size, with the main bench's loads
 * and meters: callbacks on `/hooks/delivery` at a fixed rate (part (a)'s bodies, for fresh
 * accepted messages), a drain of queued messages (part (b), `benchDispatch`), and
 * `GET /v1/messages/{ref}` for random refs of every age and of the last day (part (d)'s
 * mix); the tables' sizes;
 * and, after the last size, retention removing the oldest day.
 *
 * @example
 * const read = await measureRead(ctx, { prefix: 'g-', count: 1_000_000, rate: 500 });
 */
import type postgres from 'postgres';
import { openDatabase } from '../../src/db/client.ts';
import { dropPartitionsBefore } from '../../src/db/partitions.ts';
import { retentionCutoff, runRetention } from '../../src/privacy/retention.ts';
import { type BenchContext, CALLBACK_HEADERS, round } from '../context.ts';
import { deliveryCallbacks } from '../ingest.ts';
import { seedMessages } from '../lib/database.ts';
import { benchCustomerId, benchIdPattern, providerIdOf } from '../lib/ids.ts';
import { type LoadResult, runLoad } from '../lib/load.ts';
import {
  type CpuUse,
  cpuMeter,
  diskReadKb,
  type MachineShare,
  machineShare,
  machineTicks,
  waitSampler,
} from '../lib/metrics.ts';
import { median } from '../peers.ts';
import { messageReads } from '../read.ts';
import { recentMessages } from './options.ts';

/** What the growth bench's measurements need beyond the main bench's context. */
export interface GrowthContext extends BenchContext {
  /** a connection to another database than the bench's, for sampling pg_stat_activity */
  monitor: postgres.Sql;
  /** measured windows per load (`--windows`); the step's figures are their medians */
  windows: number;
}

/**
 * One load at an offered rate, the CPU the server and Postgres spent on it, and the kilobytes
 * the machine read from disk per request meanwhile (`diskKbPerRequest`: what missed the page
 * cache, the cost that grows once the data outgrows memory); the machine's CPUs over the
 * window (`machine`: steal is the hypervisor's, outside anyone's control) and what the
 * database's backends waited for (`waits`), to tell a stall from a slower path.
 */
export interface Measured {
  load: LoadResult;
  cpu: CpuUse;
  diskKbPerRequest: number;
  machine: MachineShare;
  waits: { samples: number; activeByWait: Record<string, number> };
}

/** Several windows of the same load, and their medians (each figure's own median). */
export interface Windowed extends Measured {
  windows: Measured[];
}

async function measured(
  ctx: GrowthContext,
  opts: Parameters<typeof runLoad>[0],
): Promise<Measured> {
  const meter = await cpuMeter(ctx.server.pid, ctx.db);
  const readBefore = diskReadKb();
  const ticks = machineTicks();
  const waits = waitSampler(ctx.monitor, ctx.db.name);
  const load = await runLoad(opts);
  const sampled = waits.stop();
  const machine = machineShare(ticks, machineTicks());
  const read = diskReadKb() - readBefore;
  const diskKbPerRequest = load.requests > 0 ? round(read / load.requests, 2) : 0;
  const cpu = await meter.stop(load.requests);
  ctx.log(
    `  window: p99 ${load.p99} ms (by second: ${(load.p99BySecond ?? []).join(' ')}), ${cpu.switchboardUsPerRequest} + ${cpu.postgresUsPerRequest} us, steal ${machine.stealPercent} %, waits ${JSON.stringify(sampled.activeByWait)}`,
  );
  return { load, cpu, diskKbPerRequest, machine, waits: sampled };
}

/**
 * The windows' medians, figure by figure: one window's stall (the hypervisor taking the
 * CPUs for a second, which the window's `machine.stealPercent` shows) moves one of three,
 * not the step's figure; a slower path moves every window, so the median too.
 */
export function medianOfWindows(windows: Measured[]): Windowed {
  const m = (of: (w: Measured) => number) => round(median(windows.map(of)));
  const first = windows[0]!;
  const statuses: Record<string, number> = {};
  for (const w of windows) {
    for (const [code, n] of Object.entries(w.load.statuses))
      statuses[code] = (statuses[code] ?? 0) + n;
  }
  const waits = new Set(windows.flatMap((w) => Object.keys(w.waits.activeByWait)));
  return {
    load: {
      rps: m((w) => w.load.rps),
      requests: windows.reduce((n, w) => n + w.load.requests, 0),
      p50: m((w) => w.load.p50),
      p90: m((w) => w.load.p90),
      p99: m((w) => w.load.p99),
      max: m((w) => w.load.max),
      statuses,
      errors: windows.reduce((n, w) => n + w.load.errors, 0),
      seconds: m((w) => w.load.seconds),
      ...(first.load.offered !== undefined && { offered: first.load.offered }),
    },
    cpu: {
      switchboardSeconds: m((w) => w.cpu.switchboardSeconds),
      postgresSeconds: m((w) => w.cpu.postgresSeconds),
      switchboardUsPerRequest: m((w) => w.cpu.switchboardUsPerRequest),
      postgresUsPerRequest: m((w) => w.cpu.postgresUsPerRequest),
    },
    diskKbPerRequest: m((w) => w.diskKbPerRequest),
    machine: {
      busyPercent: m((w) => w.machine.busyPercent),
      stealPercent: m((w) => w.machine.stealPercent),
    },
    waits: {
      samples: windows.reduce((n, w) => n + w.waits.samples, 0),
      activeByWait: Object.fromEntries(
        [...waits].map((k) => [k, m((w) => w.waits.activeByWait[k] ?? 0)]),
      ),
    },
    windows,
  };
}

/**
 * `rate` unique callbacks a second for as many new accepted messages (`prefix` + 1..n, made
 * now: callbacks come for messages just sent), after a 3 s warm-up, as in part (a); each
 * window its own messages (`prefix` + `w<k>-`), made right before it.
 */
export async function measureIngest(
  ctx: GrowthContext,
  opts: { prefix: string; rate: number },
): Promise<Windowed & { messages: number }> {
  const messages = Math.max(1000, Math.round(opts.rate * ctx.seconds));
  const ingest = await inWindows(ctx, async (w) => {
    const prefix = `${opts.prefix}w${w}-`;
    await seedMessages(ctx.db.sql, { prefix, count: messages, outbox: false, status: 'accepted' });
    const request = deliveryCallbacks(prefix, messages);
    const load = { url: ctx.server.url, connections: 50, headers: CALLBACK_HEADERS, request };
    await runLoad({ ...load, seconds: 3, connections: 20 });
    ctx.log(
      `ingestion: ${opts.rate} callbacks/s offered for ${ctx.seconds} s (${w + 1} of ${ctx.windows})`,
    );
    return measured(ctx, { ...load, seconds: ctx.seconds, rate: opts.rate });
  });
  return { messages: messages * ctx.windows, ...ingest };
}

/**
 * `rate` reads a second of random messages among `prefix` + 1..count, a third each by id,
 * customerMessageId and messageId, after a 3 s warm-up, as part (d) does: of every age (the
 * seeded history is spread over 30 days; the ids are a sample of about 20 000 pages' worth),
 * or, with `recentDays`, only of those made in the history's last days (30 000 of them).
 *
 * The last days' sample is first read once by SQL (every row and index entry a read of it
 * by any ref touches), untimed: in a live deployment the last day is what the server wrote
 * in the last hours, in memory; here it was seeded before the step's `vacuum` read every
 * table and pushed it out, and a cold read would measure the bench's own order, not the
 * data's size. Reads of every age get no such warming: old messages are cold in a
 * deployment too.
 */
export async function measureRead(
  ctx: GrowthContext,
  opts: { prefix: string; count: number; rate: number; recentDays?: number },
): Promise<Windowed> {
  let ids: string[];
  let pick: (() => number) | undefined;
  if (opts.recentDays === undefined) {
    const percent = Math.min(100, (30_000 / opts.count) * 100);
    ids = (
      await ctx.db.sql<{ id: string }[]>`
        select id from messages tablesample system (${percent})
        where customer_message_id like ${benchIdPattern(opts.prefix)} limit 30000`
    ).map((r) => r.id);
  } else {
    const recent = recentMessages(opts.count, opts.recentDays, 30_000);
    pick = () => recent[Math.floor(Math.random() * recent.length)]!;
    const refs = recent.map((i) => benchCustomerId(opts.prefix, i));
    ids = (
      await ctx.db.sql<{ id: string }[]>`
        select message_id as id from message_customer_ids
        where customer_message_id = any(${refs}::text[])`
    ).map((r) => r.id);
    const warm = performance.now();
    await warmMessages(ctx, ids, refs);
    ctx.log(
      `reads: the last day's ${ids.length} messages read once by SQL in ${round((performance.now() - warm) / 1000, 1)} s (untimed)`,
    );
  }
  const request = messageReads(opts.prefix, opts.count, ids, pick);
  await runLoad({ url: ctx.server.url, seconds: 3, connections: 10, method: 'GET', request });
  return inWindows(ctx, (w) => {
    ctx.log(
      `reads: ${opts.rate} GET /v1/messages/{ref} a second for ${ctx.seconds} s, ${opts.recentDays === undefined ? 'every age' : `made in the last ${opts.recentDays} day(s)`} (${w + 1} of ${ctx.windows})`,
    );
    return measured(ctx, {
      url: ctx.server.url,
      seconds: ctx.seconds,
      connections: 20,
      rate: opts.rate,
      method: 'GET',
      request,
    });
  });
}

/** `run` for each of the context's windows in turn, and their medians. */
async function inWindows(
  ctx: GrowthContext,
  run: (w: number) => Promise<Measured>,
): Promise<Windowed> {
  const windows: Measured[] = [];
  for (let w = 0; w < ctx.windows; w++) windows.push(await run(w));
  return medianOfWindows(windows);
}

/**
 * Touches what a read of each message by any of its refs touches and the lookup of `ids`
 * by customerMessageId (message_customer_ids' key) did not: the primary key and the rows, the
 * provider ids' key (message_provider_ids), and the events through their index (every day partition's: a message's events are
 * in its day's).
 */
async function warmMessages(ctx: BenchContext, ids: string[], refs: string[]): Promise<void> {
  const sql = ctx.db.sql;
  // whole rows (`m::text`), so the heap pages are read too, not only an index-only scan's
  await sql`select sum(length(m::text)) from messages m where id = any(${ids}::uuid[])`;
  await sql`select sum(length(k::text)) from message_provider_ids k
    where provider_message_id = any(${refs.map(providerIdOf)}::text[])`;
  await sql`select sum(length(e::text)) from message_events e where message_id = any(${ids}::uuid[])`;
}

/**
 * Bytes of each table with its indexes (`totalBytes`) and of its indexes alone, and its rows
 * as the statistics last counted them (`rows`: exact after the vacuum analyze of a step).
 */
export type TableSizes = Record<string, { totalBytes: number; indexBytes: number; rows: number }>;

export const TABLES = [
  'messages',
  'message_customer_ids',
  'message_provider_ids',
  'message_recipients',
  'message_events',
  'inbox',
  'inbox_keys',
  'call_events',
] as const;

/**
 * The tables' sizes, a partitioned table's summed over its partitions (the parent of one
 * holds no rows), so the figures mean the same whichever schema the database has (a table it
 * does not have, inbox_keys before migration 0019, message_recipients before 0024 or the ids' tables before 0030, counts
 * 0).
 */
export async function tableSizes(ctx: BenchContext): Promise<TableSizes> {
  const sizes: TableSizes = {};
  for (const table of TABLES) {
    const [row] = await ctx.db.sql<
      { total: string | null; indexes: string | null; rows: string | null }[]
    >`
      select sum(pg_total_relation_size(c.oid))::bigint as total,
             sum(pg_indexes_size(c.oid))::bigint as indexes,
             sum(greatest(c.reltuples, 0))::bigint as rows
      from pg_class c
      where (c.oid = to_regclass(${table}) and c.relkind = 'r')
         or c.oid in (select relid from pg_partition_tree(to_regclass(${table})) where isleaf)`;
    sizes[table] = {
      totalBytes: Number(row?.total ?? 0),
      indexBytes: Number(row?.indexes ?? 0),
      rows: Number(row?.rows ?? 0),
    };
  }
  return sizes;
}

export interface RetentionRun {
  /** retention's cutoff: the data older than this was the oldest day */
  cutoff: string;
  rounds: number;
  seconds: number;
  removed: Record<string, number>;
  /** rounds stopped at the time limit with more to remove */
  unfinished: boolean;
  before: TableSizes;
  after: TableSizes;
  /**
   * The day partitions' drop alone, timed before the rest of retention runs (which then finds
   * none to drop): the partitions dropped with their rows (as the statistics saw them), and
   * the tables' sizes right after, without a vacuum
   */
  partitionDrop: { seconds: number; dropped: { name: string; rows: number }[]; after: TableSizes };
}

/**
 * The project's retention (src/privacy/retention.ts) as its worker runs it (`runRetention`,
 * batches of 500, again while `more`), with a clock at `anchor` and `days` one less than the
 * history's: what it removes is the oldest day. Sizes are read right after it, without a
 * vacuum: what a delete frees is reused by later rows, a dropped partition is gone.
 */
export async function measureRetention(
  ctx: BenchContext,
  opts: { anchor: Date; days: number; limitSeconds: number },
): Promise<RetentionRun> {
  const before = await tableSizes(ctx);
  const database = await openDatabase({ url: ctx.db.url, maxConnections: 2 });
  const clock = { now: () => opts.anchor };
  const removed: Record<string, number> = {};
  let rounds = 0;
  let more = true;
  let partitionDrop: RetentionRun['partitionDrop'] | undefined;
  let start = performance.now();
  try {
    const dropped = await dropPartitionsBefore(
      database.db,
      retentionCutoff(opts.anchor, opts.days),
    );
    partitionDrop = {
      seconds: round((performance.now() - start) / 1000, 2),
      dropped,
      after: await tableSizes(ctx),
    };
    start = performance.now();
    const deadline = start + opts.limitSeconds * 1000;
    while (more && performance.now() < deadline) {
      const r = await runRetention(database.db, clock, opts.days, 500);
      rounds++;
      more = r.more;
      for (const [k, n] of Object.entries(r.removed)) removed[k] = (removed[k] ?? 0) + n;
      if (rounds % 200 === 0) ctx.log(`retention: ${rounds} rounds, ${JSON.stringify(removed)}`);
    }
  } finally {
    await database.close();
  }
  const seconds = round((performance.now() - start) / 1000, 1);
  return {
    cutoff: retentionCutoff(opts.anchor, opts.days).toISOString(),
    rounds,
    seconds,
    removed,
    unfinished: more,
    before,
    after: await tableSizes(ctx),
    partitionDrop: partitionDrop!,
  };
}
