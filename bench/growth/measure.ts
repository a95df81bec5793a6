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
import { openDatabase } from '../../src/db/client.ts';
import { dropPartitionsBefore } from '../../src/db/partitions.ts';
import { retentionCutoff, runRetention } from '../../src/privacy/retention.ts';
import { type BenchContext, CALLBACK_HEADERS, round } from '../context.ts';
import { deliveryCallbacks } from '../ingest.ts';
import { seedMessages } from '../lib/database.ts';
import { type LoadResult, runLoad } from '../lib/load.ts';
import { type CpuUse, cpuMeter, diskReadKb } from '../lib/metrics.ts';
import { messageReads } from '../read.ts';
import { recentMessages } from './options.ts';

/**
 * One load at an offered rate, the CPU the server and Postgres spent on it, and the kilobytes
 * the machine read from disk per request meanwhile (`diskKbPerRequest`: what missed the page
 * cache, the cost that grows once the data outgrows memory).
 */
export interface Measured {
  load: LoadResult;
  cpu: CpuUse;
  diskKbPerRequest: number;
}

async function measured(ctx: BenchContext, opts: Parameters<typeof runLoad>[0]): Promise<Measured> {
  const meter = await cpuMeter(ctx.server.pid, ctx.db);
  const readBefore = diskReadKb();
  const load = await runLoad(opts);
  const read = diskReadKb() - readBefore;
  const diskKbPerRequest = load.requests > 0 ? round(read / load.requests, 2) : 0;
  return { load, cpu: await meter.stop(load.requests), diskKbPerRequest };
}

/**
 * `rate` unique callbacks a second for as many new accepted messages (`prefix` + 1..n, made
 * now: callbacks come for messages just sent), after a 3 s warm-up, as in part (a).
 */
export async function measureIngest(
  ctx: BenchContext,
  opts: { prefix: string; rate: number },
): Promise<Measured & { messages: number }> {
  const messages = Math.max(1000, Math.round(opts.rate * ctx.seconds));
  await seedMessages(ctx.db.sql, {
    prefix: opts.prefix,
    count: messages,
    outbox: false,
    status: 'accepted',
  });
  const request = deliveryCallbacks(opts.prefix, messages);
  const load = { url: ctx.server.url, connections: 50, headers: CALLBACK_HEADERS, request };
  await runLoad({ ...load, seconds: 3, connections: 20 });
  ctx.log(`ingestion: ${opts.rate} callbacks/s offered for ${ctx.seconds} s`);
  return { messages, ...(await measured(ctx, { ...load, seconds: ctx.seconds, rate: opts.rate })) };
}

/**
 * `rate` reads a second of random messages among `prefix` + 1..count, a third each by id,
 * customerMessageId and messageId, after a 3 s warm-up, as part (d) does: of every age (the
 * seeded history is spread over 30 days; the ids are a sample of about 20 000 pages' worth),
 * or, with `recentDays`, only of those made in the history's last days (30 000 of them).
 */
export async function measureRead(
  ctx: BenchContext,
  opts: { prefix: string; count: number; rate: number; recentDays?: number },
): Promise<Measured> {
  let ids: string[];
  let pick: (() => number) | undefined;
  if (opts.recentDays === undefined) {
    const percent = Math.min(100, (30_000 / opts.count) * 100);
    ids = (
      await ctx.db.sql<{ id: string }[]>`
        select id from messages tablesample system (${percent})
        where customer_message_id like ${`${opts.prefix}%`} limit 30000`
    ).map((r) => r.id);
  } else {
    const recent = recentMessages(opts.count, opts.recentDays, 30_000);
    pick = () => recent[Math.floor(Math.random() * recent.length)]!;
    ids = (
      await ctx.db.sql<{ id: string }[]>`
        select id from messages
        where customer_message_id = any(${recent.map((i) => `${opts.prefix}${i}`)}::text[])`
    ).map((r) => r.id);
  }
  const request = messageReads(opts.prefix, opts.count, ids, pick);
  await runLoad({ url: ctx.server.url, seconds: 3, connections: 10, method: 'GET', request });
  ctx.log(
    `reads: ${opts.rate} GET /v1/messages/{ref} a second for ${ctx.seconds} s, ${opts.recentDays === undefined ? 'every age' : `made in the last ${opts.recentDays} day(s)`}`,
  );
  return measured(ctx, {
    url: ctx.server.url,
    seconds: ctx.seconds,
    connections: 20,
    rate: opts.rate,
    method: 'GET',
    request,
  });
}

/**
 * Bytes of each table with its indexes (`totalBytes`) and of its indexes alone, and its rows
 * as the statistics last counted them (`rows`: exact after the vacuum analyze of a step).
 */
export type TableSizes = Record<string, { totalBytes: number; indexBytes: number; rows: number }>;

export const TABLES = [
  'messages',
  'message_recipients',
  'message_events',
  'inbox',
  'inbox_keys',
  'call_events',
] as const;

/**
 * The tables' sizes, a partitioned table's summed over its partitions (the parent of one
 * holds no rows), so the figures mean the same whichever schema the database has (a table it
 * does not have, inbox_keys before migration 0019 or message_recipients before 0024, counts
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
