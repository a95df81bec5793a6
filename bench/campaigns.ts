/**
 * (j) Campaigns (issue 26, point 6): what accepting a campaign costs, what it holds in memory
 * while a big list streams in, and whether the scheduler keeps its pace.
 *
 * - CPU per row: a campaign of N recipients (1 000 000 at BENCH_SCALE=1, at least 20 000)
 *   uploaded as a CSV streamed to `POST /v1/campaigns` (`text/csv`, settings in the query,
 *   `startAt` far in the future so nothing is called), against M calls of the same rows started
 *   through `POST /v1/calls/batch`, 10 000 per request (M = N up to 50 000: a million calls
 *   through the API would take half an hour; the figure compared is per row). While the
 *   calls go in, a trigger of the bench database holds their outbox rows a century ahead, so
 *   the server's dispatcher sends none of them in the window measured: the comparison is
 *   accepting against accepting, nothing is called on either side. Server CPU and Postgres CPU
 *   per row, each side (goal: the campaign costs no more per row than the calls).
 * - Memory: the server's RSS sampled every 20 ms while the N-row CSV streams in, against its
 *   RSS just before (goal: within +50 MB). The CSV goes twice, as two campaigns: first with
 *   a Content-Length header (as curl --data-binary sends a file), then chunked, of unannounced
 *   length, as `switchboard campaign create` sends it (the CPU compared is this one's). The
 *   two take different paths through the server's body limit (src/http/body.ts).
 * - Pacing: in this process, on the bench database, a campaign of 20 000 recipients at
 *   perMinute 600 created with `createCampaign` and run by the real scheduler (`runCampaigns`)
 *   on a clock stepped by one second over ten simulated minutes; calls released per simulated
 *   minute, mean and worst against perMinute (goal: within 5 %). The clock is years ahead of
 *   the real one, so the server's own scheduler and dispatcher leave this campaign and its
 *   calls alone (its pace allows nothing before `paced_at`, its outbox rows are not due);
 *   it is cancelled at the end, and the bench database is dropped with everything in it.
 *
 * The CSV is generated while it is sent (a stream of 1000-row chunks), never held whole.
 */

import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Readable } from 'node:stream';
import { sql } from 'drizzle-orm';
import { createFlowRegistry } from '../src/calls/registry.ts';
import { createCampaign } from '../src/campaigns/create.ts';
import {
  changeCampaignState,
  runCampaigns,
  type SchedulerDeps,
} from '../src/campaigns/scheduler.ts';
import { NO_HOLIDAYS } from '../src/campaigns/windows.ts';
import type { Clock } from '../src/clock.ts';
import { openDatabase, rowsOf } from '../src/db/client.ts';
import { createLogger } from '../src/logger.ts';
import { type BenchContext, round, sleep } from './context.ts';
import { ROOT } from './lib/children.ts';
import { type CpuUse, cpuMeter, rssWatch } from './lib/metrics.ts';

const FLOW = 'appointment-reminder';
const ROWS = 1_000_000;
const MIN_ROWS = 20_000;
/** calls/batch rows at most: 5 requests of 10 000 (their CPU per row is steady from 50 000 on) */
const MAX_BATCH_ROWS = 50_000;
const BATCH = 10_000;
const CSV_CHUNK = 1000;
const GOAL_RSS_MB = 50;
const PACE_PER_MINUTE = 600;
const PACE_RECIPIENTS = 20_000;
const PACE_MINUTES = 10;
const PACE_GOAL_PERCENT = 5;
/** the campaigns' startAt: nothing of part 1's campaigns is ever called */
const FAR_FUTURE = '2099-01-01T00:00:00Z';
/** part 3's simulated start: years ahead of any real clock the server runs on */
const SIMULATED_START = '2040-03-06T08:00:00Z';

const FIRST = ['Olena', 'Maria', 'Andrii', 'Oleksandr', 'Iryna', 'Taras', 'Natalia', 'Serhii'];
const LAST = ['Kovalenko', 'Shevchenko', 'Bondarenko', 'Tkachenko', 'Melnyk', 'Boiko', 'Moroz'];
const DAYS = ['Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];

/** Row `i`: a distinct Ukrainian mobile number (7919 is prime: i -> i * 7919 mod 10^7 is one-to-one). */
function row(i: number, prefix = '50'): { to: string; name: string; date: string } {
  return {
    to: `+380${prefix}${String((i * 7919 + 13) % 10_000_000).padStart(7, '0')}`,
    name: `${FIRST[i % FIRST.length]} ${LAST[Math.floor(i / FIRST.length) % LAST.length]}`,
    date: `${DAYS[i % DAYS.length]} ${(i % 28) + 1} March at ${9 + (i % 9)}:${i % 2 ? '30' : '00'}`,
  };
}

/** The CSV of rows [from, from + count), 1000 rows a chunk, made as it is read. */
function* csvChunks(from: number, count: number): Generator<Buffer> {
  yield Buffer.from('to,name,date\n');
  for (let start = from; start < from + count; start += CSV_CHUNK) {
    let text = '';
    for (let i = start; i < Math.min(from + count, start + CSV_CHUNK); i++) {
      const r = row(i);
      text += `${r.to},${r.name},${r.date}\n`;
    }
    yield Buffer.from(text);
  }
}

/** The CSV's size in bytes, from a first pass over the generator (nothing held). */
function csvLength(from: number, count: number): number {
  let bytes = 0;
  for (const chunk of csvChunks(from, count)) bytes += chunk.length;
  return bytes;
}

/**
 * How the body goes: `chunked` as `switchboard campaign create` sends a file (a stream of
 * unannounced length), `length` with a Content-Length header (as curl --data-binary does).
 */
type Framing = 'chunked' | 'length';

/** Uploads rows [from, from + count) as a CSV campaign; throws unless every row was taken. */
async function uploadCsv(
  ctx: BenchContext,
  from: number,
  count: number,
  framing: Framing,
): Promise<string> {
  const query = new URLSearchParams({ flow: FLOW, from: 'Clinic', startAt: FAR_FUTURE });
  const res = await fetch(`${ctx.server.url}/v1/campaigns?${query}`, {
    method: 'POST',
    headers: {
      'content-type': 'text/csv',
      accept: 'application/json',
      ...(framing === 'length' && { 'content-length': String(csvLength(from, count)) }),
    },
    body: Readable.toWeb(Readable.from(csvChunks(from, count))) as ReadableStream<Uint8Array>,
    duplex: 'half', // a stream body goes as it is read
  } as RequestInit);
  const body = (await res.json()) as {
    id?: string;
    accepted?: number;
    rejectedCount?: number;
    rejected?: unknown[];
  };
  if (res.status !== 201 || body.accepted !== count || body.rejectedCount !== 0) {
    const first = JSON.stringify(body.rejected?.[0] ?? body).slice(0, 800);
    throw new Error(
      `CSV campaign: ${res.status}, ${body.accepted} of ${count} accepted, ${body.rejectedCount} rejected, the first: ${first}`,
    );
  }
  return body.id!;
}

/**
 * Holds every outbox row inserted from now on a century ahead, so the server's dispatcher
 * leaves the calls stored (a trigger of the bench database's, dropped by `release`). Not a
 * calling window: a window makes each call look its number's time zones up, which is not
 * what a campaign's acceptance does (it does that at release).
 */
async function holdOutbox(ctx: BenchContext): Promise<{ release(): Promise<void> }> {
  await ctx.db.sql.unsafe(`
    create function bench_hold_outbox() returns trigger language plpgsql as $$
      begin new.available_at := new.available_at + interval '100 years'; return new; end $$;
    create trigger bench_hold_outbox before insert on outbox
      for each row execute function bench_hold_outbox()`);
  return {
    async release() {
      await ctx.db.sql.unsafe(`
        drop trigger bench_hold_outbox on outbox; drop function bench_hold_outbox()`);
    },
  };
}

/** Starts rows [from, from + count) through /v1/calls/batch, BATCH a request. */
async function startBatches(ctx: BenchContext, from: number, count: number): Promise<number> {
  let queued = 0;
  for (let start = from; start < from + count; start += BATCH) {
    const calls = [];
    for (let i = start; i < Math.min(from + count, start + BATCH); i++) {
      const r = row(i, '67');
      calls.push({ to: r.to, vars: { name: r.name, date: r.date } });
    }
    const res = await fetch(`${ctx.server.url}/v1/calls/batch`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ flow: FLOW, from: 'Clinic', calls }),
    });
    const body = (await res.json()) as { calls?: { status: string }[] };
    if (res.status >= 300) {
      throw new Error(`POST /v1/calls/batch: ${res.status} ${JSON.stringify(body).slice(0, 500)}`);
    }
    queued += (body.calls ?? []).filter((c) => c.status === 'queued').length;
  }
  if (queued !== count) throw new Error(`${count - queued} of ${count} calls were not queued`);
  return queued;
}

export interface AcceptSide {
  rows: number;
  requests: number;
  seconds: number;
  rowsPerSecond: number;
  cpu: CpuUse;
}

export interface MemoryRise {
  rows: number;
  rssBeforeMB: number;
  rssPeakMB: number;
  riseMB: number;
  goalMB: number;
}

export interface CampaignsBench {
  csv: AcceptSide;
  batch: AcceptSide;
  /** per row, campaign / calls batch: server only, and server + Postgres (the goal: <= 1) */
  ratio: { server: number; withPostgres: number };
  /** the CSV sent with a Content-Length header: the same rows, a campaign of its own */
  csvWithLength: AcceptSide;
  /** the server's RSS while each upload streams in, by framing */
  memory: { chunked: MemoryRise; length: MemoryRise };
  pacing: {
    perMinute: number;
    recipients: number;
    minutes: number;
    stepSeconds: number;
    perMinuteReleased: number[];
    mean: number;
    worst: number;
    /** the worst minute's distance from perMinute, in percent */
    worstOffPercent: number;
    meanOffPercent: number;
    goalPercent: number;
    /** wall time of the simulated run */
    seconds: number;
  };
}

const perRow = (c: CpuUse) => c.switchboardUsPerRequest + c.postgresUsPerRequest;

/** Part 3: the real scheduler on a stepped clock, in this process, against the bench database. */
async function pacing(ctx: BenchContext): Promise<CampaignsBench['pacing']> {
  let now = new Date(SIMULATED_START);
  const clock: Clock = { now: () => new Date(now) };
  const database = await openDatabase({ url: ctx.db.url, maxConnections: 4 });
  try {
    const flows = createFlowRegistry(join(ROOT, 'bench/flows'));
    const deps: SchedulerDeps = {
      db: database.db,
      clock,
      flows,
      signingSecret: { id: 'bench', key: 'bench-signing-secret-0123456789abcdef' },
      hookUrl: 'http://127.0.0.1:9/hooks/speechcall',
      logger: createLogger('silent'),
      window: { from: '00:00', to: '24:00' },
      holidays: NO_HOLIDAYS,
      capPerDay: undefined,
    };
    const recipients = Array.from({ length: PACE_RECIPIENTS }, (_, i) => {
      const r = row(i, '63');
      return { to: r.to, vars: { name: r.name, date: r.date } };
    });
    const made = await createCampaign(
      { db: database.db, clock, flows },
      {
        flow: FLOW,
        from: 'Clinic',
        recipients,
        startAt: now.toISOString(),
        perMinute: PACE_PER_MINUTE,
      },
    );
    if (made.accepted !== PACE_RECIPIENTS) {
      throw new Error(`pacing campaign: ${made.accepted} of ${PACE_RECIPIENTS} accepted`);
    }
    const t0 = performance.now();
    const start = now.getTime();
    for (let s = 0; s < PACE_MINUTES * 60; s++) {
      now = new Date(start + s * 1000);
      // as the leader's loop does: again at once while a round did something
      let rounds = 0;
      while (rounds++ < 10 && (await runCampaigns(deps))) {
        // the next round at the same instant
      }
    }
    const seconds = (performance.now() - t0) / 1000;
    const byMinute = rowsOf<{ minute: number; n: number }>(
      await database.db.execute(sql`
        select floor(extract(epoch from started_at - ${new Date(start).toISOString()}::timestamptz) / 60)::int as minute,
          count(*)::int as n
        from campaign_attempts where campaign_id = ${made.id} group by 1 order by 1`),
    );
    const perMinuteReleased = Array.from(
      { length: PACE_MINUTES },
      (_, m) => byMinute.find((b) => Number(b.minute) === m)?.n ?? 0,
    );
    await changeCampaignState(deps, made.id, 'cancel');
    const mean = perMinuteReleased.reduce((a, b) => a + b, 0) / PACE_MINUTES;
    const off = (n: number) => (Math.abs(n - PACE_PER_MINUTE) / PACE_PER_MINUTE) * 100;
    const worst = perMinuteReleased.reduce((w, n) => (off(n) > off(w) ? n : w));
    return {
      perMinute: PACE_PER_MINUTE,
      recipients: PACE_RECIPIENTS,
      minutes: PACE_MINUTES,
      stepSeconds: 1,
      perMinuteReleased,
      mean: round(mean, 1),
      worst,
      worstOffPercent: round(off(worst), 2),
      meanOffPercent: round(off(mean), 2),
      goalPercent: PACE_GOAL_PERCENT,
      seconds: round(seconds, 1),
    };
  } finally {
    await database.close();
  }
}

/** One CSV campaign of `rows` rows: its time, CPU, and the server's RSS while it streams in. */
async function csvUpload(
  ctx: BenchContext,
  rows: number,
  framing: Framing,
): Promise<{ seconds: number; cpu: CpuUse; memory: MemoryRise }> {
  await sleep(1000); // the garbage of what ran before has a chance to go before the baseline
  ctx.log(`(j) a CSV campaign of ${rows} rows, streamed to /v1/campaigns (${framing})`);
  const watch = rssWatch(ctx.server);
  try {
    const meter = await cpuMeter(ctx.server.pid, ctx.db);
    const t0 = performance.now();
    await uploadCsv(ctx, 0, rows, framing);
    const seconds = (performance.now() - t0) / 1000;
    const cpu = await meter.stop(rows);
    return { seconds, cpu, memory: { rows, ...watch.stop(), goalMB: GOAL_RSS_MB } };
  } finally {
    watch.stop();
  }
}

export async function benchCampaigns(ctx: BenchContext): Promise<CampaignsBench> {
  const rows = Math.max(MIN_ROWS, Math.round(ROWS * ctx.scale));
  const batchRows = Math.min(rows, MAX_BATCH_ROWS);
  // warm-up: both paths compiled; rows of their own (the campaign's numbers are its own anyway)
  ctx.log('(j) warm-up: a 2000-row CSV campaign, 2000 calls in a batch');
  await uploadCsv(ctx, 5_000_000, 2000, 'chunked');
  const held = await holdOutbox(ctx);
  let batchSeconds: number;
  let batchCpu: CpuUse;
  try {
    await startBatches(ctx, 5_000_000, 2000);
    ctx.log(`(j) ${batchRows} calls through /v1/calls/batch, ${BATCH} a request`);
    const batchMeter = await cpuMeter(ctx.server.pid, ctx.db);
    const b0 = performance.now();
    await startBatches(ctx, 0, batchRows);
    batchSeconds = (performance.now() - b0) / 1000;
    batchCpu = await batchMeter.stop(batchRows);
  } finally {
    await held.release();
  }

  // with a Content-Length first: the chunked upload may leave the heap grown for the other
  const withLength = await csvUpload(ctx, rows, 'length');
  const chunked = await csvUpload(ctx, rows, 'chunked');

  ctx.log(
    `(j) pacing: ${PACE_RECIPIENTS} recipients at ${PACE_PER_MINUTE}/min, ${PACE_MINUTES} simulated minutes`,
  );
  const pace = await pacing(ctx);
  // the held calls and the simulated ones leave the outbox (as if sent): a part after this one
  // finds it empty
  await ctx.db.sql`delete from outbox where available_at > now() + interval '1 year'`;

  const side = (n: number, requests: number, seconds: number, cpu: CpuUse): AcceptSide => ({
    rows: n,
    requests,
    seconds: round(seconds, 2),
    rowsPerSecond: Math.round(n / seconds),
    cpu,
  });
  const csv = side(rows, 1, chunked.seconds, chunked.cpu);
  const batch = side(batchRows, Math.ceil(batchRows / BATCH), batchSeconds, batchCpu);
  return {
    csv,
    batch,
    ratio: {
      server: round(csv.cpu.switchboardUsPerRequest / batch.cpu.switchboardUsPerRequest, 3),
      withPostgres: round(perRow(csv.cpu) / perRow(batch.cpu), 3),
    },
    csvWithLength: side(rows, 1, withLength.seconds, withLength.cpu),
    memory: { chunked: chunked.memory, length: withLength.memory },
    pacing: pace,
  };
}
