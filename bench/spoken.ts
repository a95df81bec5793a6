/**
 * (i) Spoken prompts (issue 25, point 8): what `say:` costs against recorded prompts.
 *
 * - CPU per call started: calls of `bench/flows/reminder-recorded.yaml` and of
 *   `reminder-spoken.yaml` (the same menus, the main intro `Hello {{name}}, ... on {{date}}`)
 *   started through `POST /v1/calls/batch` in batches of 250 and dispatched: the window runs
 *   from the first batch until the outbox is empty and every call was accepted by the sandbox
 *   (so the dispatcher's rendering before each round is in it). Three cases, in one run:
 *   recorded; spoken with every name new (each call's name rendered); spoken with names from
 *   a pool of 200 first names and 30 dates (each rendered once, then reused). Each case has
 *   value sets of its own, so none reuses another's renders. Server CPU (and Postgres's) per
 *   call, and spoken/recorded; the goal is at most 3x.
 * - Render time: a prompt of about ten seconds synthesized by eSpeak NG in this process
 *   (src/speech/espeak.ts) and encoded as WAV 8k (src/speech/audio.ts), CPU ms of each,
 *   median of 5 after one warm-up.
 * - Cache hits: `GET /prompts/{id}.wav` of prompts rendered already (the pool case's calls):
 *   latency over 500 requests on one connection, then throughput at saturation with 20
 *   connections (requests/s, MB/s, seconds of audio served per second, server CPU per GET).
 * - Memory: 1000 more spoken calls, every name new, in one batch: the server's RSS sampled
 *   every 20 ms from just before the POST until they are dispatched; the rise over the RSS
 *   before is the figure (goal <= +50 MB).
 *
 * The sandbox checks each menu's audio URLs as the provider would fetch them; the bench
 * server has no PUBLIC_URL, so those checks do not reach it and its CPU is its own work.
 * BENCH_SCALE scales the calls per case (1000 at 1, at least 250).
 */
import { performance } from 'node:perf_hooks';
import { encodeAudio } from '../src/speech/audio.ts';
import { createEspeakEngine } from '../src/speech/espeak.ts';
import { type BenchContext, round, sleep } from './context.ts';
import { type LoadResult, runLoad } from './lib/load.ts';
import { type CpuUse, cpuMeter, rssWatch } from './lib/metrics.ts';

const RECORDED = 'reminder-recorded';
const SPOKEN = 'reminder-spoken';
const CALLS = 1000;
const BATCH = 250;
const GOAL_RATIO = 3;
const GOAL_RSS_MB = 50;

/** About ten seconds of speech at eSpeak NG's normal pace. */
const TEN_SECONDS =
  'Hello Maria Kovalenko, this is a reminder from the City Dental Clinic about your appointment ' +
  'on Tuesday the first of December at ten in the morning with doctor Shevchenko. ' +
  'Press 1 to confirm, or 2 to change it.';

const FIRST = [
  'Olena',
  'Maria',
  'Anna',
  'Iryna',
  'Natalia',
  'Oksana',
  'Tetiana',
  'Yulia',
  'Svitlana',
  'Kateryna',
  'Andrii',
  'Oleksandr',
  'Serhii',
  'Dmytro',
  'Volodymyr',
  'Mykola',
  'Ivan',
  'Yurii',
  'Taras',
  'Petro',
  'James',
  'Mary',
  'John',
  'Linda',
  'Robert',
  'Susan',
  'Michael',
  'Karen',
  'David',
  'Laura',
];
const LAST = [
  'Kovalenko',
  'Shevchenko',
  'Bondarenko',
  'Tkachenko',
  'Kravchenko',
  'Oliinyk',
  'Melnyk',
  'Boiko',
  'Moroz',
  'Lysenko',
  'Smith',
  'Johnson',
  'Brown',
  'Taylor',
  'Wilson',
  'Evans',
  'Walker',
  'Wright',
  'Hughes',
  'Green',
  'Hall',
  'Wood',
  'Clarke',
  'Turner',
  'Baker',
  'Hill',
  'Cooper',
  'Ward',
  'Morris',
  'King',
  'Price',
  'Bell',
  'Murphy',
  'Bailey',
  'Cox',
  'Gray',
];
const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August'];

/**
 * `count` names nobody else in the run has: `First Last`, then `First Other-Last` (another
 * surname in front for each 1080 names, from the seed on), so each seed gets its own.
 */
function distinctNames(count: number, seed: number): string[] {
  const out: string[] = [];
  for (let i = 0; out.length < count; i++) {
    const n = i + seed * 100_000;
    const first = FIRST[n % FIRST.length]!;
    const last = LAST[Math.floor(n / FIRST.length) % LAST.length]!;
    const extra = Math.floor(n / (FIRST.length * LAST.length));
    out.push(extra === 0 ? `${first} ${last}` : `${first} ${LAST[extra % LAST.length]}-${last}`);
  }
  return out;
}

/** `size` first names: FIRST, then double names (`Anna Maria`), each pair once. */
function firstNamePool(size: number): string[] {
  const out = [...FIRST];
  for (let i = 0; out.length < size; i++) {
    const a = i % FIRST.length;
    out.push(`${FIRST[a]} ${FIRST[(a + 1 + Math.floor(i / FIRST.length)) % FIRST.length]}`);
  }
  return out.slice(0, size);
}

/** `count` dates of one month, e.g. "May the 4th at 10:30" (a month per case: no reuse). */
function dates(count: number, month: number): string[] {
  return Array.from(
    { length: count },
    (_, d) =>
      `${MONTHS[month % MONTHS.length]} ${(d % 28) + 1} at ${9 + (d % 8)}:${d % 2 ? '30' : '00'}`,
  );
}

export interface StartCase {
  calls: number;
  /** distinct names and dates among the calls */
  names: number;
  dates: number;
  seconds: number;
  cpu: CpuUse;
}

export interface SpokenBench {
  callsPerCase: number;
  batch: number;
  recorded: StartCase;
  spokenDistinct: StartCase;
  spokenPool: StartCase;
  /** server CPU per call, spoken / recorded (the goal: <= 3) */
  ratio: { distinct: number; pool: number };
  /** server + Postgres CPU per call, spoken / recorded */
  ratioWithPostgres: { distinct: number; pool: number };
  goalRatio: number;
  render: {
    text: string;
    audioMs: number;
    runs: number;
    /** CPU ms, medians */
    engineMs: number;
    encodeMs: number;
    wavBytes: number;
  };
  cacheHit: {
    prompts: number;
    meanBytes: number;
    meanAudioMs: number;
    oneConnection: LoadResult;
    saturation: LoadResult;
    mbPerSecond: number;
    audioSecondsPerSecond: number;
    cpu: CpuUse;
  };
  memory: {
    calls: number;
    rssBeforeMB: number;
    rssPeakMB: number;
    riseMB: number;
    goalMB: number;
    seconds: number;
    cpu: CpuUse;
  };
}

function phone(i: number): string {
  return `+38066${String((i * 7919 + 41) % 10_000_000).padStart(7, '0')}`;
}

let phones = 0;

/** Starts the calls in batches of `batch`; answers their message ids. */
async function startCalls(
  ctx: BenchContext,
  flow: string,
  vars: { name: string; date: string }[],
  batch: number,
): Promise<string[]> {
  const ids: string[] = [];
  for (let from = 0; from < vars.length; from += batch) {
    const calls = vars.slice(from, from + batch).map((v) => ({ to: phone(phones++), vars: v }));
    const res = await fetch(`${ctx.server.url}/v1/calls/batch`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ flow, from: 'Clinic', calls }),
    });
    const body = (await res.json()) as { calls?: { messageId?: string }[] };
    if (res.status >= 300)
      throw new Error(`POST /v1/calls/batch: ${res.status} ${JSON.stringify(body).slice(0, 500)}`);
    for (const c of body.calls ?? []) if (c.messageId) ids.push(c.messageId);
  }
  if (ids.length !== vars.length) {
    throw new Error(
      `${vars.length - ids.length} of ${vars.length} calls of ${flow} were not queued`,
    );
  }
  return ids;
}

/** Until the outbox is empty and each of the calls was accepted by the sandbox. */
async function waitDispatched(ctx: BenchContext, ids: string[], timeoutMs = 180_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const [row] = await ctx.db.sql<{ outbox: number; accepted: number }[]>`
      select (select count(*)::int from outbox) as outbox,
             (select count(*)::int from messages
               where id = any(${ids}::uuid[]) and provider_message_id is not null) as accepted`;
    if (row!.outbox === 0 && row!.accepted === ids.length) return;
    if (Date.now() > deadline) {
      throw new Error(`${row!.outbox} outbox rows left, ${row!.accepted}/${ids.length} accepted`);
    }
    await sleep(20);
  }
}

/** One case: its calls started in batches and dispatched, the CPU of that window. */
async function startCase(
  ctx: BenchContext,
  flow: string,
  vars: { name: string; date: string }[],
): Promise<{ result: StartCase; ids: string[] }> {
  const meter = await cpuMeter(ctx.server.pid, ctx.db);
  const t0 = performance.now();
  const ids = await startCalls(ctx, flow, vars, BATCH);
  await waitDispatched(ctx, ids);
  const seconds = (performance.now() - t0) / 1000;
  const cpu = await meter.stop(ids.length);
  const result = {
    calls: ids.length,
    names: new Set(vars.map((v) => v.name)).size,
    dates: new Set(vars.map((v) => v.date)).size,
    seconds: round(seconds, 2),
    cpu,
  };
  return { result, ids };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const cpuMs = (since: NodeJS.CpuUsage) => {
  const u = process.cpuUsage(since);
  return (u.user + u.system) / 1000;
};

/** A ten-second prompt synthesized and encoded in this process: CPU ms of each, medians. */
async function renderTime(runs: number): Promise<SpokenBench['render']> {
  const engine = createEspeakEngine();
  await engine.synthesize('warm up', { lang: 'en' });
  const engineMs: number[] = [];
  const encodeMs: number[] = [];
  let audioMs = 0;
  let wavBytes = 0;
  for (let i = 0; i < runs + 1; i++) {
    const c0 = process.cpuUsage();
    const speech = await engine.synthesize(TEN_SECONDS, { lang: 'en' });
    const e = cpuMs(c0);
    const c1 = process.cpuUsage();
    const wav = encodeAudio(speech.samples, speech.sampleRate, 'wav8k');
    const w = cpuMs(c1);
    if (i === 0) continue; // warm-up: the first run compiles the encoder's paths
    engineMs.push(e);
    encodeMs.push(w);
    audioMs = (speech.samples.length / speech.sampleRate) * 1000;
    wavBytes = wav.body.byteLength;
  }
  return {
    text: TEN_SECONDS,
    audioMs: Math.round(audioMs),
    runs,
    engineMs: round(median(engineMs), 1),
    encodeMs: round(median(encodeMs), 1),
    wavBytes,
  };
}

async function cacheHits(ctx: BenchContext, ids: string[]): Promise<SpokenBench['cacheHit']> {
  const rows = await ctx.db.sql<{ url: string }[]>`
    select payload->'menu'->0->>'introUrl' as url from messages where id = any(${ids}::uuid[])`;
  const paths = rows.map((r) => new URL(r.url).pathname);
  if (!paths.every((p) => p.startsWith('/prompts/'))) {
    throw new Error(`a spoken call's intro is not a /prompts/ URL: ${paths[0]}`);
  }
  // each prompt's size once (a rendered prompt: each GET answers the same bytes)
  let bytes = 0;
  for (const p of paths) {
    const res = await fetch(`${ctx.server.url}${p}`);
    if (res.status !== 200) throw new Error(`GET ${p}: ${res.status}`);
    bytes += (await res.arrayBuffer()).byteLength;
  }
  const meanBytes = bytes / paths.length;
  const meanAudioMs = ((meanBytes - 44) / 2 / 8000) * 1000; // WAV 8k, 16-bit mono
  const get = (i: number) => ({ path: paths[i % paths.length]! });
  const oneConnection = await runLoad({
    url: ctx.server.url,
    seconds: 60,
    connections: 1,
    method: 'GET',
    maxRequests: 500,
    request: get,
  });
  const meter = await cpuMeter(ctx.server.pid, ctx.db);
  const saturation = await runLoad({
    url: ctx.server.url,
    seconds: ctx.seconds,
    connections: 20,
    method: 'GET',
    request: get,
  });
  const cpu = await meter.stop(saturation.requests);
  const ok = (r: LoadResult) => Object.keys(r.statuses).every((s) => s === '200') && !r.errors;
  if (!ok(oneConnection) || !ok(saturation)) {
    throw new Error(
      `GET /prompts answers: ${JSON.stringify(oneConnection.statuses)} ${JSON.stringify(saturation.statuses)}`,
    );
  }
  const r = (l: LoadResult) => ({ ...l, p50: round(l.p50), p90: round(l.p90), p99: round(l.p99) });
  return {
    prompts: paths.length,
    meanBytes: Math.round(meanBytes),
    meanAudioMs: Math.round(meanAudioMs),
    oneConnection: r(oneConnection),
    saturation: r(saturation),
    mbPerSecond: round((saturation.rps * meanBytes) / 1e6, 1),
    audioSecondsPerSecond: Math.round((saturation.rps * meanAudioMs) / 1000),
    cpu,
  };
}

/** 1000 spoken calls, every name new, in one batch: the server's RSS rise until dispatched. */
async function memoryRise(ctx: BenchContext, count: number): Promise<SpokenBench['memory']> {
  const names = distinctNames(count, 3);
  const ds = dates(30, 3);
  const vars = names.map((name, i) => ({ name, date: ds[i % ds.length]! }));
  // the engine running, as in (i)'s other cases: its worker thread ends after 10 s idle
  // (src/speech/espeak.ts), and its start (~75 MB, reported by (f)) is not the calls' memory
  const warm = { name: `${distinctNames(1, 4)[0]} Engine`, date: ds[0]! };
  await waitDispatched(ctx, await startCalls(ctx, SPOKEN, [warm], 1));
  await sleep(1000); // the previous case's garbage has a chance to go
  const watch = rssWatch(ctx.server);
  try {
    const meter = await cpuMeter(ctx.server.pid, ctx.db);
    const t0 = performance.now();
    const ids = await startCalls(ctx, SPOKEN, vars, count);
    await waitDispatched(ctx, ids);
    const seconds = (performance.now() - t0) / 1000;
    const cpu = await meter.stop(ids.length);
    return {
      calls: ids.length,
      ...watch.stop(),
      goalMB: GOAL_RSS_MB,
      seconds: round(seconds, 2),
      cpu,
    };
  } finally {
    watch.stop();
  }
}

export async function benchSpoken(ctx: BenchContext): Promise<SpokenBench> {
  const count = Math.max(BATCH, Math.round(CALLS * ctx.scale));
  // warm-up: both flows' paths compiled, the engine loaded, the fixed pieces rendered
  ctx.log('(i) warm-up: 250 calls of each flow');
  const warmNames = distinctNames(BATCH, 9).map((n) => `${n} Warm`);
  const warmDates = dates(30, 7);
  const warm = warmNames.map((name, i) => ({ name, date: warmDates[i % 30]! }));
  await waitDispatched(ctx, await startCalls(ctx, RECORDED, warm, BATCH));
  await waitDispatched(ctx, await startCalls(ctx, SPOKEN, warm, BATCH));

  const recordedDates = dates(30, 0);
  const recordedVars = distinctNames(count, 0).map((name, i) => ({
    name,
    date: recordedDates[i % 30]!,
  }));
  ctx.log(`(i) ${count} calls of ${RECORDED}`);
  const { result: recorded } = await startCase(ctx, RECORDED, recordedVars);

  const distinctDates = dates(30, 1);
  const distinctVars = distinctNames(count, 1).map((name, i) => ({
    name,
    date: distinctDates[i % 30]!,
  }));
  ctx.log(`(i) ${count} calls of ${SPOKEN}, every name new`);
  const { result: spokenDistinct } = await startCase(ctx, SPOKEN, distinctVars);

  // a pool: 200 first names, 30 dates, drawn in an order that mixes them
  const pool = firstNamePool(200);
  const poolDates = dates(30, 2);
  const poolVars = Array.from({ length: count }, (_, i) => ({
    name: pool[(i * 37) % pool.length]!,
    date: poolDates[(i * 11) % poolDates.length]!,
  }));
  ctx.log(`(i) ${count} calls of ${SPOKEN}, names from a pool of 200 and 30 dates`);
  const { result: spokenPool, ids: poolIds } = await startCase(ctx, SPOKEN, poolVars);

  ctx.log('(i) render time of a ten-second prompt (in the bench process)');
  const render = await renderTime(5);
  ctx.log('(i) GET /prompts of rendered prompts');
  const cacheHit = await cacheHits(ctx, poolIds);
  ctx.log(`(i) memory: ${count} spoken calls, every name new, in one batch`);
  const memory = await memoryRise(ctx, count);

  const per = (c: StartCase) => c.cpu.switchboardUsPerRequest;
  const both = (c: StartCase) => c.cpu.switchboardUsPerRequest + c.cpu.postgresUsPerRequest;
  return {
    callsPerCase: count,
    batch: BATCH,
    recorded,
    spokenDistinct,
    spokenPool,
    ratio: {
      distinct: round(per(spokenDistinct) / per(recorded), 2),
      pool: round(per(spokenPool) / per(recorded), 2),
    },
    ratioWithPostgres: {
      distinct: round(both(spokenDistinct) / both(recorded), 2),
      pool: round(both(spokenPool) / both(recorded), 2),
    },
    goalRatio: GOAL_RATIO,
    render,
    cacheHit,
    memory,
  };
}
