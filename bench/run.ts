/**
 * `npm run bench`: Switchboard against the goals of issue 8, on real Postgres.
 *
 * - Postgres from DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test); the bench
 *   creates a database of its own there (`sb_bench_<random>`) and drops it at the end.
 * - Three child processes on loopback: Switchboard (`dist/main.js`, as `npm start` runs it:
 *   built first by scripts/build.mjs, PORT=0), the provider
 *   sandbox (`bench/sandbox-server.ts`) as its PROVIDER_BASE_URL, and a bare Hono JSON
 *   endpoint (`bench/bare-server.ts`). Load comes from this process (autocannon).
 * - One Switchboard process serves every part, so its peak RSS (VmHWM) covers the whole run.
 *   Its flows are bench/flows/ (FLOWS_DIR), copies kept for the bench, so a change to the
 *   example flows in flows/ does not change what a part measures.
 * - The peers a team would otherwise use, measured beside Switchboard in alternating rounds
 *   (bench/peers.ts; issue 27): in (a) a hand-written receiver (bench/peers/hand-receiver.ts),
 *   in (b) a pg-boss worker (bench/peers/pgboss-worker.ts), each a child process of its own
 *   only while its part runs; after (d) and (c) the bare endpoint at their rate, for their CPU
 *   per request. BENCH_ROUNDS (default 3) sets the rounds; goals are judged on the medians.
 * - Part (memory) first (bench/memory.ts): a server of its own on the embedded database, RSS
 *   after 60 s idle and through the README's walk-through; `BENCH_ONLY=memory` runs it alone,
 *   without Postgres.
 * - Prints a table and writes `bench/results/<timestamp>.json`.
 *
 * BENCH_SECONDS (default 10) sets each measured load's length; BENCH_SCALE (default 1) scales
 * the data sets down for a quick trial (the goals are judged at 1 only); BENCH_ONLY=a,b,c,d,g,h,i,j,memory
 * runs some parts only ((h): stored calls replayed through a changed flow, bench/replay.ts;
 * (i): spoken prompts against recorded ones, bench/spoken.ts; (j): campaigns, a CSV upload
 * against calls/batch and the scheduler's pace, bench/campaigns.ts); BENCH_PROF=<dir> writes a CPU profile of the server there;
 * BENCH_POOLER=unprepared|pgbouncer runs the server with DATABASE_PREPARE=false, directly or
 * through a PgBouncer in transaction mode (issue 27 point 6);
 * BENCH_LOG_LEVEL sets the server's LOG_LEVEL (default info, as deployed); BENCH_KEEP_LOGS=1
 * keeps the children's logs (e.g. for BENCH_NODE_ARGS=--trace-gc); BENCH_TRACE=<dir> writes each
 * open-loop load's requests there as CSV, to line slow ones up with those logs.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { startFlags } from '../scripts/start-flags.ts';
import { openDatabase } from '../src/db/client.ts';
import { migrateDatabase } from '../src/db/migrate.ts';
import { type PgBouncer, startPgBouncer } from '../test/support/pgbouncer.ts';
import { benchCampaigns, type CampaignsBench } from './campaigns.ts';
import { benchCompile, type CompileBench } from './compile.ts';
import { type BenchContext, CALLBACK_TOKEN, POLL_NEVER_SECONDS, round } from './context.ts';
import type { DispatchBench } from './dispatch.ts';
import { benchEvents, type EventsBench } from './events.ts';
import { benchIngest, type IngestBench } from './ingest.ts';
import { type Child, LISTENING, ROOT, sampleMemory, spawnChild } from './lib/children.ts';
import { createBenchDatabase, DEFAULT_ADMIN_URL } from './lib/database.ts';
import type { LoadResult } from './lib/load.ts';
import { type CpuUse, type MachineShare, machineShare, machineTicks } from './lib/metrics.ts';
import { machine, printGrid } from './lib/report.ts';
import { benchMemory, type MemoryBench } from './memory.ts';
import {
  type BareAtRate,
  benchBareAt,
  benchDispatchVsPgBoss,
  type DispatchVsPgBoss,
} from './peers.ts';
import { benchRead, type ReadBench } from './read.ts';
import { benchReplay, type ReplayBench } from './replay.ts';
import { benchSpeech, type SpeechBench } from './speech.ts';
import { benchSpoken, type SpokenBench } from './spoken.ts';

interface GoalRow {
  goal: string;
  figure: string;
  target: string;
  met: boolean | null;
}

/** A part that did not run (BENCH_ONLY) or failed: its rows say so instead of a figure. */
type Outcome<T> = T | { error: string } | undefined;

function done<T>(o: Outcome<T>): o is T {
  return o !== undefined && !(typeof o === 'object' && o !== null && 'error' in o);
}

function missing(goal: string, target: string, o: Outcome<unknown>): GoalRow {
  const why =
    o === undefined ? 'not run (BENCH_ONLY)' : `failed: ${(o as { error: string }).error}`;
  return { goal, figure: why.slice(0, 120), target, met: null };
}

function goals(r: {
  ingest: Outcome<IngestBench>;
  dispatch: Outcome<DispatchBench>;
  speech: Outcome<SpeechBench>;
  read: Outcome<ReadBench>;
  events: Outcome<EventsBench>;
  replay: Outcome<ReplayBench>;
  spoken: Outcome<SpokenBench>;
  campaigns: Outcome<CampaignsBench>;
  peers: Peers;
  compile: CompileBench;
  peakRssMB: number;
  peakRssInPartMB: Record<string, number>;
}): GoalRow[] {
  const { ingest, dispatch, speech, read, compile } = r;
  const rows: GoalRow[] = [];
  if (done(ingest)) rows.push(...ingestRows(ingest));
  else {
    rows.push(
      missing('(a) /hooks/delivery', '>= 0.8 of bare, >= 2 of hand-written; p99 <= 25 ms', ingest),
    );
  }
  rows.push(...peerRows(r));
  rows.push(
    done(dispatch)
      ? dispatchRow(dispatch)
      : missing('(b) dispatch outbox -> sandbox acceptance', '>= 20000 msg/s, 0 x 429', dispatch),
  );
  rows.push(
    done(speech)
      ? speechRow(speech)
      : missing('(c) speech webhook -> follow-up in outbox, 500/s', 'p99 <= 50 ms', speech),
  );
  rows.push(
    done(read) ? readRow(read) : missing('(d) GET /v1/messages/{ref}', 'p99 <= 10 ms', read),
  );
  rows.push(
    ...(done(r.events)
      ? eventsRows(r.events)
      : [missing('(g) events: CPU per event delivered / per callback', '<= 2', r.events)]),
  );
  rows.push(
    done(r.replay)
      ? replayRow(r.replay)
      : missing('(h) stored calls replayed through a changed flow', 'reported', r.replay),
  );
  rows.push(
    ...(done(r.spoken)
      ? spokenRows(r.spoken)
      : [missing('(i) spoken prompts: server CPU per call started, / recorded', '<= 3', r.spoken)]),
  );
  rows.push(
    ...(done(r.campaigns)
      ? campaignsRows(r.campaigns)
      : [missing('(j) campaigns: CPU per row, CSV campaign / calls batch', '<= 1', r.campaigns)]),
  );
  return [...rows, ...restRows(compile, r.peakRssMB, r.peakRssInPartMB)];
}

function eventsRows(e: EventsBench): GoalRow[] {
  const s = e.steady;
  const r = e.restart;
  return [
    {
      goal: `(g) events: CPU per event delivered / per callback, ${e.rate}/s`,
      figure: `${s.eventCpuUs} / ${s.callbackCpuUs} us = ${s.ratio} (${s.eventsPerSecond} events/s; change to receipt p50 ${s.latency.p50} ms, p99 ${s.latency.p99} ms)`,
      target: '<= 2',
      met: s.ratio <= 2,
    },
    {
      goal: '(g) events: receiver killed and restarted mid-run',
      figure: `${r.load.requests} callbacks, ${r.events} events recorded, ${r.received} received, ${r.lost} lost, ${r.duplicates} duplicates (${r.duplicatesDiffering} differing), ${r.invalid} bad signatures`,
      target: '0 lost, duplicates same id and body',
      met:
        r.lost === 0 &&
        r.duplicatesDiffering === 0 &&
        r.invalid === 0 &&
        r.events === r.load.requests,
    },
  ];
}

/** (h): no goal of its own; replayed calls/s beside the rate the same calls were ingested at. */
function replayRow(r: ReplayBench): GoalRow {
  return {
    goal: `(h) ${r.calls} stored calls replayed through a changed flow`,
    figure: `${r.replay.callsPerSecond} calls/s replayed vs ${r.ingest.callsPerSecond} calls/s ingested (${r.ingest.webhooksPerSecond} webhooks/s) = ${r.ratio}`,
    target: 'reported',
    met: null,
  };
}

/** (i): the issue's goals for spoken prompts, CPU per call against recorded and memory. */
function spokenRows(s: SpokenBench): GoalRow[] {
  const cpu = (name: string, c: SpokenBench['recorded'], ratio: number): GoalRow => ({
    goal: `(i) spoken, ${name}: server CPU per call started / recorded`,
    figure: `${c.cpu.switchboardUsPerRequest} / ${s.recorded.cpu.switchboardUsPerRequest} us = ${ratio}`,
    target: `<= ${s.goalRatio}`,
    met: ratio <= s.goalRatio,
  });
  const h = s.cacheHit;
  return [
    cpu(`every name new (${s.spokenDistinct.names} names)`, s.spokenDistinct, s.ratio.distinct),
    cpu(
      `pool (${s.spokenPool.names} names, ${s.spokenPool.dates} dates)`,
      s.spokenPool,
      s.ratio.pool,
    ),
    {
      goal: `(i) render a ${round(s.render.audioMs / 1000, 1)} s prompt / GET a rendered one`,
      figure: `${s.render.engineMs} + ${s.render.encodeMs} ms CPU (engine + WAV 8k) / p50 ${h.oneConnection.p50} ms, p99 ${h.oneConnection.p99} ms; ${h.saturation.rps} GET/s = ${h.mbPerSecond} MB/s`,
      target: 'reported',
      met: null,
    },
    {
      goal: `(i) server RSS rise, ${s.memory.calls} spoken calls in one batch`,
      figure: `+${s.memory.riseMB} MB (${s.memory.rssBeforeMB} -> ${s.memory.rssPeakMB} MB)`,
      target: `<= +${s.memory.goalMB} MB`,
      met: s.memory.riseMB <= s.memory.goalMB,
    },
  ];
}

/** (j): the issue's goals for campaigns: CPU per row against calls/batch, memory, pace. */
function campaignsRows(c: CampaignsBench): GoalRow[] {
  const per = (s: CampaignsBench['csv']) =>
    `${s.cpu.switchboardUsPerRequest} + ${s.cpu.postgresUsPerRequest}`;
  const p = c.pacing;
  return [
    {
      goal: `(j) campaigns: server + Postgres CPU per row, ${c.csv.rows}-row CSV / ${c.batch.rows} calls in batches`,
      figure: `${per(c.csv)} / ${per(c.batch)} us = ${c.ratio.withPostgres} (server alone ${c.ratio.server})`,
      target: '<= 1',
      met: c.ratio.withPostgres <= 1,
    },
    ...(['chunked', 'length'] as const).map((framing) => {
      const m = c.memory[framing];
      return {
        goal: `(j) server RSS rise while a ${m.rows}-row CSV streams in, ${framing === 'chunked' ? 'chunked (as the CLI sends it)' : 'with Content-Length'}`,
        figure: `+${m.riseMB} MB (${m.rssBeforeMB} -> ${m.rssPeakMB} MB)`,
        target: `<= +${m.goalMB} MB`,
        met: m.riseMB <= m.goalMB,
      };
    }),
    {
      goal: `(j) scheduler pace, ${p.perMinute}/min over ${p.minutes} simulated minutes`,
      figure: `mean ${p.mean}/min (${p.meanOffPercent}% off), worst minute ${p.worst} (${p.worstOffPercent}% off)`,
      target: `within ${p.goalPercent}%`,
      met: p.meanOffPercent <= p.goalPercent && p.worstOffPercent <= p.goalPercent,
    },
  ];
}

/** (j) in full: the two ways in, side by side, and the calls released per minute. */
function printCampaigns(c: CampaignsBench): void {
  const row = (name: string, s: CampaignsBench['csv'], ratio: string) => [
    name,
    String(s.rows),
    String(s.requests),
    String(s.seconds),
    String(s.rowsPerSecond),
    String(s.cpu.switchboardUsPerRequest),
    String(s.cpu.postgresUsPerRequest),
    ratio,
  ];
  printGrid(
    [
      '(j) accepted',
      'rows',
      'requests',
      'seconds',
      'rows/s',
      'server us/row',
      'Postgres us/row',
      '(server + Postgres) / batch',
    ],
    [
      row('CSV campaign, chunked', c.csv, String(c.ratio.withPostgres)),
      row(
        'CSV campaign, Content-Length',
        c.csvWithLength,
        String(
          round(
            (c.csvWithLength.cpu.switchboardUsPerRequest +
              c.csvWithLength.cpu.postgresUsPerRequest) /
              (c.batch.cpu.switchboardUsPerRequest + c.batch.cpu.postgresUsPerRequest),
            3,
          ),
        ),
      ),
      row('POST /v1/calls/batch', c.batch, '1'),
    ],
  );
  console.log(
    `(j) calls released per simulated minute at ${c.pacing.perMinute}/min: ${c.pacing.perMinuteReleased.join(', ')} (${c.pacing.seconds} s of wall time)`,
  );
}

/** (i) in full: the three cases side by side. */
function printSpoken(s: SpokenBench): void {
  const row = (name: string, c: SpokenBench['recorded'], ratio: string) => [
    name,
    String(c.calls),
    `${c.names} / ${c.dates}`,
    String(c.seconds),
    String(c.cpu.switchboardUsPerRequest),
    String(c.cpu.postgresUsPerRequest),
    ratio,
  ];
  printGrid(
    [
      '(i) calls started',
      'calls',
      'names / dates',
      'seconds',
      'server us/call',
      'Postgres us/call',
      'server / recorded',
    ],
    [
      row('recorded', s.recorded, '1'),
      row('spoken, every name new', s.spokenDistinct, String(s.ratio.distinct)),
      row('spoken, pool', s.spokenPool, String(s.ratio.pool)),
    ],
  );
}

/** (h) in full: the same calls, ingested and replayed, side by side. */
function printReplay(r: ReplayBench): void {
  printGrid(
    ['(h) stage', 'calls', 'requests', 'seconds', 'calls/s', 'server CPU us/call'],
    [
      [
        'ingest (callbacks + key webhooks)',
        String(r.calls),
        String(r.ingest.webhooks),
        String(r.ingest.seconds),
        String(r.ingest.callsPerSecond),
        '-',
      ],
      [
        `replay (${r.replay.differing} differ, ${r.replay.skipped} skipped)`,
        String(r.replay.replayed),
        '1',
        String(r.replay.seconds),
        String(r.replay.callsPerSecond),
        String(r.replay.cpu.switchboardUsPerRequest),
      ],
    ],
  );
}

function ingestRows(ingest: IngestBench): GoalRow[] {
  const s = ingest.series.saturation;
  const offered = ingest.offered.switchboard;
  return [
    {
      goal: `(a) /hooks/delivery vs bare Hono, saturation, medians of ${ingest.rounds} alternating runs`,
      figure: `${s.switchboard.rps} / ${s.bare.rps} req/s = ${ingest.ratios.vsBare} (p99 ${s.switchboard.p99} / ${s.bare.p99} ms; CPU per request ${s.switchboard.switchboardUsPerRequest} + ${s.switchboard.postgresUsPerRequest} us Postgres / ${s.bare.switchboardUsPerRequest} us)`,
      target: '>= 0.8 (issue 27; issue 8 asked 0.35)',
      met: ingest.ratios.vsBare >= 0.8,
    },
    {
      goal: `(a) /hooks/delivery vs hand-written receiver (one INSERT per callback), saturation, medians of ${ingest.rounds}`,
      figure: `${s.switchboard.rps} / ${s.hand.rps} req/s = ${ingest.ratios.vsHand} (p99 ${s.switchboard.p99} / ${s.hand.p99} ms; CPU per request ${s.switchboard.switchboardUsPerRequest} + ${s.switchboard.postgresUsPerRequest} / ${s.hand.switchboardUsPerRequest} + ${s.hand.postgresUsPerRequest} us, server + Postgres)`,
      target: '>= 2',
      met: ingest.ratios.vsHand >= 2,
    },
    {
      goal: '(a) /hooks/delivery at 2000 req/s offered',
      figure: `${offered.rps} req/s answered, p50 ${offered.p50} ms, p99 ${offered.p99} ms`,
      target: 'p99 <= 25 ms',
      met: offered.p99 <= 25 && offered.rps >= 1900,
    },
  ];
}

/** Issue 27, point 1: the figures read against the peers measured in the same run. */
interface Peers {
  dispatch: Outcome<DispatchVsPgBoss>;
  /** the bare endpoint at the rate (d) and (c) are loaded at */
  bareRead?: BareAtRate;
  bareWebhook?: BareAtRate;
}

function peerRows(r: {
  read: Outcome<ReadBench>;
  speech: Outcome<SpeechBench>;
  peers: Peers;
}): GoalRow[] {
  const rows: GoalRow[] = [];
  const d = r.peers.dispatch;
  if (done(d)) {
    const m = d.medians;
    rows.push({
      goal: `(b) dispatch vs pg-boss worker (5000 jobs a fetch, one messagelist each), medians of ${d.rounds} alternating drains`,
      figure: `${m.switchboardMessagesPerSecond} / ${m.pgbossMessagesPerSecond} msg/s = ${m.ratio} (CPU per message ${m.switchboardUsPerMessage} + ${m.switchboardPostgresUsPerMessage} / ${m.pgbossUsPerMessage} + ${m.pgbossPostgresUsPerMessage} us, process + Postgres)`,
      target: '>= 1.5',
      met: m.ratio >= 1.5,
    });
  } else rows.push(missing('(b) dispatch vs pg-boss worker', '>= 1.5', d));
  const against = (
    goal: string,
    load: LoadResult,
    cpu: CpuUse,
    bare: BareAtRate | undefined,
  ): GoalRow => {
    if (!bare) return { goal, figure: 'bare endpoint not measured', target: 'reported', met: null };
    const ratio = round(cpu.switchboardUsPerRequest / bare.cpu.switchboardUsPerRequest, 2);
    return {
      goal,
      figure: `${cpu.switchboardUsPerRequest} / ${bare.cpu.switchboardUsPerRequest} us = ${ratio} (+ ${cpu.postgresUsPerRequest} us Postgres; p99 ${round(load.p99)} / ${round(bare.load.p99)} ms)`,
      target: 'reported',
      met: null,
    };
  };
  if (done(r.read)) {
    rows.push(
      against(
        `(d) reads: server CPU per request / bare endpoint's, ${r.read.load.offered ?? 500}/s offered`,
        r.read.load,
        r.read.cpu,
        r.peers.bareRead,
      ),
    );
  }
  if (done(r.speech) && r.speech.measured) {
    rows.push(
      against(
        `(c) speech webhooks: server CPU per request / bare endpoint's, ${r.speech.load.offered ?? 500}/s offered`,
        r.speech.load,
        r.speech.cpu,
        r.peers.bareWebhook,
      ),
    );
  }
  return rows;
}

function dispatchRow(dispatch: DispatchBench): GoalRow {
  return {
    goal: '(b) dispatch outbox -> sandbox acceptance',
    figure: `${dispatch.messagesPerSecond} msg/s, ${dispatch.requestsPerSecond} req/s (${round(dispatch.shareOfLimit * 100, 1)}% of 100/s), ${dispatch.status429} x 429`,
    target: '>= 20000 msg/s, 0 x 429',
    met: dispatch.messagesPerSecond >= 20_000 && dispatch.status429 === 0,
  };
}

function speechRow(speech: SpeechBench): GoalRow {
  return speech.measured
    ? {
        goal: '(c) speech webhook -> follow-up in outbox, 500/s',
        figure: `p50 ${speech.load.p50} ms, p99 ${speech.load.p99} ms (${speech.load.rps} req/s)`,
        target: 'p99 <= 50 ms',
        met: speech.load.p99 <= 50 && speech.load.rps >= 475,
      }
    : {
        goal: '(c) speech webhook -> follow-up in outbox, 500/s',
        figure: `not measured (${speech.reason})`,
        target: 'p99 <= 50 ms',
        met: null,
      };
}

function readRow(read: ReadBench): GoalRow {
  return {
    goal: `(d) GET /v1/messages/{ref}, ${round(read.messages / 1e6, 2)}M msgs / ${round(read.events / 1e6, 2)}M events`,
    figure: `p50 ${read.load.p50} ms, p99 ${read.load.p99} ms at ${read.load.rps} req/s (at ${read.light.rps}/s: p99 ${read.light.p99} ms)`,
    target: 'p99 <= 10 ms',
    met: read.load.p99 <= 10,
  };
}

function restRows(
  compile: CompileBench,
  peakRssMB: number,
  inPart: Record<string, number>,
): GoalRow[] {
  const parts = Object.entries(inPart)
    .map(([part, mb]) => `${part} ${Math.round(mb)}`)
    .join(', ');
  return [
    {
      goal: `(e) compile a ${compile.menus}-menu flow`,
      figure: `${compile.ms} ms (median of ${compile.runs})`,
      target: `< ${compile.goalMs} ms`,
      met: compile.ms < compile.goalMs,
    },
    {
      goal: '(f) server peak RSS through the run',
      figure: `${peakRssMB} MB (peak in part: ${parts})`,
      target: '<= 250 MB',
      met: peakRssMB <= 250,
    },
  ];
}

function memoryRows(memory: Outcome<MemoryBench>): GoalRow[] {
  if (!done(memory)) {
    return [
      missing('(memory) embedded database: RSS after 60 s idle', '< 200 MB', memory),
      missing('(memory) embedded database: peak RSS through the walk-through', '< 300 MB', memory),
    ];
  }
  return [
    {
      goal: '(memory) embedded database: RSS after 60 s idle',
      figure: `${memory.idleMB} MB after ${memory.idleSeconds} s (${memory.readyMB} MB when listening, ${memory.startSeconds} s after start)`,
      target: `< ${memory.goals.idleMB} MB`,
      met: memory.idleSeconds >= 60 ? memory.idleMB < memory.goals.idleMB : null,
    },
    {
      goal: '(memory) embedded database: peak RSS through the walk-through',
      figure: `${memory.walkPeakMB} MB (${memory.afterWalkMB} MB after it)`,
      target: `< ${memory.goals.walkPeakMB} MB`,
      met: memory.walkPeakMB < memory.goals.walkPeakMB,
    },
  ];
}

/** (memory)'s load, no goal: what the embedded database costs per request. */
function printMemoryLoad(memory: MemoryBench): void {
  const l = memory.load;
  const statuses = Object.entries(l.statuses)
    .map(([s, n]) => `${s} x ${n}`)
    .join(', ');
  console.log(
    `(memory) POST /v1/messages on the embedded database, 10 connections: ${l.rps} req/s, p50 ${l.p50} ms, p99 ${l.p99} ms, server CPU ${l.cpuMsPerRequest} ms/request, RSS ${l.rssMB} MB at the end (peak ${l.peakMB} MB); ${statuses}${l.errors ? `, ${l.errors} errors` : ''}`,
  );
}

function printTable(rows: GoalRow[]): void {
  printGrid(
    ['goal', 'figure', 'target', 'met'],
    rows.map((r) => [r.goal, r.figure, r.target, r.met === null ? '-' : r.met ? 'met' : 'NOT MET']),
  );
}

/** (a) in full: the three endpoints, both loads, every run's req/s and the medians. */
function printIngest(ingest: IngestBench): void {
  const s = ingest.series;
  const cells: string[][] = [];
  for (const load of ['saturation', 'offered'] as const) {
    const name = load === 'saturation' ? 'saturation' : '2000/s offered';
    const sb = s[load].switchboard;
    for (const [endpoint, e] of [
      ['/hooks/delivery', sb],
      ['hand-written (1 INSERT)', s[load].hand],
      ['bare Hono', s[load].bare],
    ] as const) {
      cells.push([
        name,
        endpoint,
        e.runs.map((r) => r.load.rps).join(', '),
        String(e.rps),
        String(e.p50),
        String(e.p99),
        `${e.switchboardUsPerRequest} + ${e.postgresUsPerRequest}`,
        String(round(sb.rps / e.rps, 3)),
      ]);
    }
  }
  printGrid(
    [
      `(a) load (${ingest.rounds} rounds)`,
      'endpoint',
      'req/s by run',
      'median req/s',
      'p50 ms',
      'p99 ms',
      'CPU us/req (+ Postgres)',
      '/hooks/delivery / this',
    ],
    cells,
  );
}

/** (b) beside the pg-boss worker, drain by drain. */
function printDispatchPeers(d: DispatchVsPgBoss): void {
  const m = d.medians;
  printGrid(
    ['(b) drains', 'msg/s by run', 'median msg/s', 'CPU us/msg (+ Postgres)', 'req/s by run'],
    [
      [
        'Switchboard outbox',
        d.runs.switchboard.map((r) => r.messagesPerSecond).join(', '),
        String(m.switchboardMessagesPerSecond),
        `${m.switchboardUsPerMessage} + ${m.switchboardPostgresUsPerMessage}`,
        d.runs.switchboard.map((r) => r.requestsPerSecond).join(', '),
      ],
      [
        'pg-boss worker',
        d.runs.pgboss.map((r) => r.messagesPerSecond).join(', '),
        String(m.pgbossMessagesPerSecond),
        `${m.pgbossUsPerMessage} + ${m.pgbossPostgresUsPerMessage}`,
        d.runs.pgboss.map((r) => r.requestsPerSecond).join(', '),
      ],
    ],
  );
}

/**
 * Part (memory), before anything else runs (its idle minute wants a quiet machine), on a
 * server of its own; `undefined` when BENCH_ONLY leaves it out.
 */
async function runMemoryPart(
  only: string[] | undefined,
  opts: Parameters<typeof benchMemory>[0],
): Promise<Outcome<MemoryBench>> {
  if (only && !only.includes('memory')) return undefined;
  execFileSync(process.execPath, ['scripts/build.mjs'], { cwd: ROOT, stdio: 'inherit' });
  try {
    return await benchMemory(opts);
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    opts.log(`(memory) failed: ${message}`);
    return { error: message };
  }
}

function writeResults(out: { at: Date } & Record<string, unknown>): string {
  mkdirSync(join(ROOT, 'bench/results'), { recursive: true });
  const file = join(
    ROOT,
    'bench/results',
    `${out.at
      .toISOString()
      .replace(/:/g, '-')
      .replace(/\.\d+Z$/, 'Z')}.json`,
  );
  writeFileSync(file, `${JSON.stringify({ ...out, at: out.at.toISOString() }, null, 2)}\n`);
  return file.slice(ROOT.length);
}

async function main(): Promise<void> {
  const adminUrl = process.env.DATABASE_URL ?? DEFAULT_ADMIN_URL;
  const seconds = Number(process.env.BENCH_SECONDS ?? 10);
  const scale = Number(process.env.BENCH_SCALE ?? 1);
  const started = Date.now();
  const runTicks = machineTicks();
  let ticks = runTicks;
  let rssOf: () => string = () => '';
  const log = (m: string) =>
    console.error(`[bench ${round((Date.now() - started) / 1000, 0)}s${rssOf()}] ${m}`);
  const logDir = mkdtempSync(join(tmpdir(), 'switchboard-bench-'));
  const only = process.env.BENCH_ONLY?.split(',').map((p) => p.trim());
  const extraNodeArgs = process.env.BENCH_NODE_ARGS?.split(/\s+/).filter(Boolean) ?? [];
  const embedded = await runMemoryPart(only, {
    log,
    seconds,
    ready: LISTENING,
    logDir,
    nodeArgs: extraNodeArgs,
  });
  if (only?.length === 1 && only[0] === 'memory') {
    // nothing else to run: no Postgres needed
    const rows = memoryRows(embedded);
    console.log('');
    printTable(rows);
    if (done(embedded)) printMemoryLoad(embedded);
    const at = new Date();
    const durationSeconds = round((Date.now() - started) / 1000, 0);
    const file = writeResults({
      at,
      seconds,
      scale,
      machine: machine('not used'),
      serverNodeArgs: [...startFlags(), ...extraNodeArgs],
      goals: rows,
      results: { memory: embedded },
      durationSeconds,
    });
    console.log(`results: ${file} (${durationSeconds} s)`);
    if (!process.env.BENCH_KEEP_LOGS) rmSync(logDir, { recursive: true, force: true });
    else log(`logs kept in ${logDir}`);
    return;
  }
  const db = await createBenchDatabase(adminUrl);
  const children: Child[] = [];
  let bouncer: PgBouncer | undefined;
  let cleaned = false;
  const cleanup = async () => {
    if (cleaned) return;
    cleaned = true;
    await Promise.all(children.map((c) => c.stop()));
    await bouncer?.stop();
    await db.drop().catch((err: unknown) => log(`could not drop ${db.name}: ${String(err)}`));
    if (process.env.BENCH_KEEP_LOGS) log(`logs kept in ${logDir}`);
    else rmSync(logDir, { recursive: true, force: true });
  };
  process.once('SIGINT', () => void cleanup().then(() => process.exit(130)));
  try {
    log(`database ${db.name}; logs in ${logDir}`);
    const migrator = await openDatabase({ url: db.url, maxConnections: 1 });
    await migrateDatabase(migrator);
    await migrator.close();
    const [pg] = await db.sql`select current_setting('server_version') as v`;

    const sandbox = await spawnChild({
      name: 'sandbox',
      entry: 'bench/sandbox-server.ts',
      env: { PORT: '0' },
      ready: LISTENING,
      logDir,
    });
    children.push(sandbox);
    const bare = await spawnChild({
      name: 'bare',
      entry: 'bench/bare-server.ts',
      env: { PORT: '0' },
      ready: LISTENING,
      logDir,
    });
    children.push(bare);
    execFileSync(process.execPath, ['scripts/build.mjs'], { cwd: ROOT, stdio: 'inherit' });
    // npm start's node flags; BENCH_PROF=<dir>: a CPU profile of the server, written when
    // it stops; BENCH_NODE_ARGS: more node flags (e.g. --trace-gc, --max-semi-space-size=16).
    // Recorded with the results: a run with other flags measured something else.
    const serverNodeArgs = [
      ...startFlags(),
      ...(process.env.BENCH_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROF}`] : []),
      ...extraNodeArgs,
    ];
    // BENCH_POOLER: how the server reaches Postgres (issue 27 point 6): unset, directly with
    // prepared statements; `unprepared`, directly with DATABASE_PREPARE=false; `pgbouncer`,
    // through a PgBouncer in transaction mode (Debian's), unprepared, sessions direct
    const pooler = process.env.BENCH_POOLER ?? 'direct';
    if (!['direct', 'unprepared', 'pgbouncer'].includes(pooler))
      throw new Error(`BENCH_POOLER=${pooler}: expected unprepared or pgbouncer`);
    if (pooler === 'pgbouncer') bouncer = await startPgBouncer(db.url);
    const databaseEnv =
      pooler === 'direct'
        ? { DATABASE_URL: db.url }
        : {
            DATABASE_URL: bouncer ? bouncer.via(db.url) : db.url,
            DATABASE_PREPARE: 'false',
            ...(bouncer && { DATABASE_DIRECT_URL: db.url }),
          };
    const server = await spawnChild({
      name: 'switchboard',
      entry: 'dist/main.js',
      env: {
        PORT: '0',
        HOST: '127.0.0.1',
        ...databaseEnv,
        PROVIDER_BASE_URL: sandbox.url,
        CALLBACK_TOKEN,
        // part (g)'s endpoint is a receiver on this machine's loopback
        OUTBOUND_ALLOW_PRIVATE: 'true',
        LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'info',
        // the bench's own copies: (c) and (h) keep recorded prompts, (i) has its two flows
        FLOWS_DIR: join(ROOT, 'bench/flows'),
        // no status polls: (a)'s messages stay accepted under ids the sandbox never issued
        POLL_AFTER_SECONDS: String(POLL_NEVER_SECONDS),
      },
      ready: LISTENING,
      logDir,
      nodeArgs: serverNodeArgs,
    });
    children.push(server);
    const memory = sampleMemory(server);
    rssOf = () => `, server RSS ${round(((server.memory()?.rssKiB ?? 0) * 1024) / 1e6, 0)} MB`;
    const ctx: BenchContext = { db, server, sandbox, bare, log, seconds, scale };

    // the server's memory by part, to show where the peak comes from: the peak so far (VmHWM)
    // after each part, and the highest RSS sampled while that part ran
    const rssMB: Record<string, number> = {};
    const partPeakMB: Record<string, number> = {};
    // the machine's CPU by part: how busy it was, and how much the hypervisor took away
    const cpuByPart: Record<string, MachineShare> = {};
    const mark = (part: string) => {
      rssMB[part] = round((memory.peakKiB() * 1024) / 1e6, 1);
      partPeakMB[part] = round((memory.section() * 1024) / 1e6, 1);
      const now = machineTicks();
      cpuByPart[part] = machineShare(ticks, now);
      ticks = now;
    };
    const loadBefore = loadavg()[0]!;
    mark('started');
    log('(e) compile');
    const compile = benchCompile();
    const part = async <T>(name: string, fn: () => Promise<T>): Promise<Outcome<T>> => {
      if (only && !only.includes(name)) return undefined;
      try {
        return await fn();
      } catch (err) {
        log(`(${name}) failed: ${err instanceof Error ? err.message : String(err)}`);
        return { error: err instanceof Error ? err.message : String(err) };
      } finally {
        mark(name);
      }
    };
    // a peer runs only through its part: its connections and pg-boss's maintenance would count
    // in the bench database's CPU of the other parts
    const peer = async (name: string, entry: string, env: Record<string, string>) => {
      const child = await spawnChild({
        name,
        entry,
        env: { PORT: '0', DATABASE_URL: db.url, ...env },
        ready: LISTENING,
        logDir,
      });
      children.push(child);
      return child;
    };
    const ingest = await part('a', async () => {
      const hand = await peer('hand-receiver', 'bench/peers/hand-receiver.ts', { CALLBACK_TOKEN });
      try {
        return await benchIngest(ctx, hand);
      } finally {
        await hand.stop();
      }
    });
    // (g) beside (a): an event costs against a callback, measured in the same run
    const events = await part('g', () => benchEvents(ctx));
    const dispatchPeers = await part('b', async () => {
      const worker = await peer('pgboss', 'bench/peers/pgboss-worker.ts', {
        SANDBOX_URL: sandbox.url,
      });
      try {
        return await benchDispatchVsPgBoss(ctx, worker);
      } finally {
        await worker.stop();
      }
    });
    const dispatch: Outcome<DispatchBench> = done(dispatchPeers)
      ? dispatchPeers.switchboard
      : dispatchPeers;
    const peers: Peers = { dispatch: dispatchPeers };
    // (d) before (c): the call runtime's work goes on after (c) (timers, follow-ups to send)
    const read = await part('d', async () => {
      const r = await benchRead(ctx);
      // the yardstick for (d)'s CPU per request, at the same rate and connections
      peers.bareRead = await benchBareAt(ctx, 'read', 500, 20);
      return r;
    });
    const speech = await part('c', async () => {
      const r = await benchSpeech(ctx);
      if (r.measured) peers.bareWebhook = await benchBareAt(ctx, 'webhook', 500, 30);
      return r;
    });
    // (h) last: its calls are counted from its own start, after (c)'s of the same flow
    const replay = await part('h', () => benchReplay(ctx));
    // (i) after (h): flows of its own, and it renders speech, which (f)'s peak should show
    const spoken = await part('i', () => benchSpoken(ctx));
    // (j) last: its pacing campaign runs on a clock of its own, years ahead
    const campaigns = await part('j', () => benchCampaigns(ctx));
    const peakRssMB = round((memory.stop() * 1024) / 1e6, 1);

    const results = {
      memory: embedded,
      ingest,
      dispatch,
      speech,
      read,
      events,
      replay,
      spoken,
      campaigns,
      peers,
      compile,
      peakRssMB,
      peakRssAfterMB: rssMB,
      peakRssInPartMB: partPeakMB,
      loadAverage: { before: round(loadBefore, 2), after: round(loadavg()[0]!, 2) },
      machineCpu: { run: machineShare(runTicks, machineTicks()), byPart: cpuByPart },
    };
    const rows = [...memoryRows(embedded), ...goals(results)];
    console.log('');
    if (done(ingest)) {
      printIngest(ingest);
      console.log('');
    }
    if (done(dispatchPeers)) {
      printDispatchPeers(dispatchPeers);
      console.log('');
    }
    if (done(replay)) {
      printReplay(replay);
      console.log('');
    }
    if (done(spoken)) {
      printSpoken(spoken);
      console.log('');
    }
    if (done(campaigns)) {
      printCampaigns(campaigns);
      console.log('');
    }
    printTable(rows);
    if (done(embedded)) printMemoryLoad(embedded);
    const stolen = Object.entries(results.machineCpu.byPart).map(
      ([p, c]) => `${p} ${c.stealPercent}%`,
    );
    console.log(
      `\nCPU stolen by the hypervisor: ${stolen.join(', ')} (a starved VM, not the code, if high)`,
    );
    console.log(`server node flags: ${serverNodeArgs.join(' ') || 'none'}`);
    console.log(`server's database connection (BENCH_POOLER): ${pooler}`);
    const measured = machine(String(pg!.v));
    console.log(
      `code: ${measured.commit}${measured.uncommitted.length > 0 ? ` with uncommitted changes to ${measured.uncommitted.join(', ')}` : ''}`,
    );
    console.log('');
    const durationSeconds = round((Date.now() - started) / 1000, 0);
    const file = writeResults({
      at: new Date(),
      seconds,
      scale,
      machine: measured,
      serverNodeArgs,
      pooler,
      goals: rows,
      results,
      durationSeconds,
    });
    console.log(`results: ${file} (${durationSeconds} s)`);
  } catch (err) {
    for (const c of children) console.error(`--- ${c.name} log (tail) ---\n${c.tail(3000)}`);
    throw err;
  } finally {
    await cleanup();
  }
}

await main();
