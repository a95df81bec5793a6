/**
 * (memory) The server on the embedded database, as a new user starts it: `npm start`'s flags,
 * a fresh DATA_DIR, no DATABASE_URL, the built-in sandbox. Issue 22's goals: RSS under
 * 200 MB after 60 s idle, and under 300 MB through the README's walk-through.
 *
 * - idle: RSS (`VmRSS`) once the server listens, then after BENCH_MEMORY_IDLE seconds
 *   (default 60) with no request; the goal is judged at 60 only.
 * - walk-through: the README's requests (a script for the sandbox's callee, a call of the
 *   appointment-reminder flow, polled until its outcome and its follow-up SMS is delivered,
 *   the SMS's timeline, the flow's stats), then the pages the start banner points to (`/docs`
 *   with its assets, `/openapi.json`, the console with the call's diagram). Its figure is the
 *   process's peak RSS (`VmHWM`) from its start to the end of the walk-through.
 * - load (no goal, for CPU per request before and after a change): `POST /v1/messages` with
 *   one SMS each, at saturation from 10 connections for BENCH_SECONDS, dispatched to the
 *   sandbox and called back meanwhile; the server's CPU per request and its RSS at the end.
 *
 * Needs no Postgres: `BENCH_ONLY=memory npm run bench` runs this part alone.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startFlags } from '../scripts/start-flags.ts';
import { round, sleep } from './context.ts';
import { type Child, sampleMemory, spawnChild } from './lib/children.ts';
import { type LoadResult, runLoad } from './lib/load.ts';
import { cpuSeconds } from './lib/metrics.ts';

export interface MemoryBench {
  idleSeconds: number;
  /** RSS when the server first listened */
  readyMB: number;
  /** RSS after `idleSeconds` with no request */
  idleMB: number;
  /** peak RSS (VmHWM) from the start to the end of the walk-through */
  walkPeakMB: number;
  /** RSS right after the walk-through */
  afterWalkMB: number;
  /** seconds from spawning the server to its `listening` line (fresh DATA_DIR: initdb) */
  startSeconds: number;
  load: LoadResult & { cpuMsPerRequest: number; rssMB: number; peakMB: number };
  goals: { idleMB: number; walkPeakMB: number };
}

export interface MemoryOptions {
  log(message: string): void;
  seconds: number;
  ready: RegExp;
  logDir: string;
  nodeArgs: string[];
  /** the server's entry, relative to the repository (default `dist/main.js`, as `npm start`) */
  entry?: string;
}

const TO = '+380501234567';
const mb = (kib: number) => round((kib * 1024) / 1e6, 1);

export async function benchMemory(opts: MemoryOptions): Promise<MemoryBench> {
  const idleSeconds = Number(process.env.BENCH_MEMORY_IDLE ?? 60);
  const dataDir = mkdtempSync(join(tmpdir(), 'switchboard-bench-data-'));
  const started = Date.now();
  const server = await spawnChild({
    name: 'switchboard-embedded',
    entry: opts.entry ?? 'dist/main.js',
    env: { PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, LOG_LEVEL: 'info' },
    ready: opts.ready,
    logDir: opts.logDir,
    timeoutMs: 120_000,
    nodeArgs: [...startFlags(), ...opts.nodeArgs],
  });
  try {
    const startSeconds = round((Date.now() - started) / 1000, 1);
    const readyMB = mb(server.memory()?.rssKiB ?? 0);
    opts.log(
      `(memory) listening after ${startSeconds} s, RSS ${readyMB} MB; idle ${idleSeconds} s`,
    );
    await sleep(idleSeconds * 1000);
    const idleMB = mb(server.memory()?.rssKiB ?? 0);
    opts.log(`(memory) RSS after ${idleSeconds} s idle: ${idleMB} MB; the walk-through`);
    await walkThrough(server.url);
    const after = server.memory();
    const walkPeakMB = mb(after?.hwmKiB ?? 0);
    opts.log(`(memory) walk-through peak ${walkPeakMB} MB; POST /v1/messages at saturation`);
    const load = await messageLoad(server, opts.seconds);
    return {
      idleSeconds,
      readyMB,
      idleMB,
      walkPeakMB,
      afterWalkMB: mb(after?.rssKiB ?? 0),
      startSeconds,
      load,
      goals: { idleMB: 200, walkPeakMB: 300 },
    };
  } finally {
    await server.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function call(base: string, path: string, init?: { method?: string; json?: unknown }) {
  const res = await fetch(`${base}${path}`, {
    method: init?.method ?? (init?.json === undefined ? 'GET' : 'POST'),
    ...(init?.json !== undefined && {
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(init.json),
    }),
  });
  const text = await res.text();
  if (!res.ok)
    throw new Error(`${init?.method ?? 'GET'} ${path}: ${res.status} ${text.slice(0, 300)}`);
  return text;
}

interface CallView {
  outcome: string | null;
  messages: { id: string; role: string; status: string }[];
}

/** README.md's walk-through, request by request, then what the start banner points to. */
async function walkThrough(base: string): Promise<void> {
  await call(base, '/sandbox/_control/scripts', { json: { to: TO, keys: ['1'] } });
  const { id } = JSON.parse(
    await call(base, '/v1/calls', {
      json: {
        flow: 'appointment-reminder',
        to: TO,
        from: 'Clinic',
        vars: { name: 'Ann', date: 'Monday 10:00' },
      },
    }),
  ) as { id: string };
  // until the outcome is recorded and the follow-up SMS delivered (the README's step 3 and 4)
  const deadline = Date.now() + 60_000;
  let followUp: CallView['messages'][number] | undefined;
  for (;;) {
    const view = JSON.parse(await call(base, `/v1/calls/${id}`)) as CallView;
    followUp = view.messages.find((m) => m.role === 'follow-up');
    if (view.outcome && followUp?.status === 'delivered') break;
    if (Date.now() > deadline)
      throw new Error(`call ${id} not done in 60 s: ${JSON.stringify(view)}`);
    await sleep(200);
  }
  await call(base, `/v1/messages/${followUp.id}`);
  await call(base, '/v1/flows/appointment-reminder/stats');
  for (const path of [
    '/docs',
    '/docs/assets/swagger-ui.css',
    '/docs/assets/swagger-ui-bundle.js',
    '/openapi.json',
    '/ui',
    '/ui/flows/appointment-reminder',
    `/ui/calls/${id}`,
    '/ui/assets/mermaid.min.js',
    '/ui/messages',
  ]) {
    await call(base, path);
  }
}

async function messageLoad(server: Child, seconds: number): Promise<MemoryBench['load']> {
  const memory = sampleMemory(server);
  const cpuBefore = cpuSeconds(server.pid);
  const result = await runLoad({
    url: server.url,
    seconds,
    connections: 10,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    request: (i) => ({
      path: '/v1/messages',
      body: JSON.stringify({
        messages: [
          { from: 'Acme', to: TO, type: 'sms', text: `Hello ${i}`, customerMessageId: `m-${i}` },
        ],
      }),
    }),
  });
  const cpu = cpuSeconds(server.pid) - cpuBefore;
  const peakKiB = memory.section();
  memory.stop();
  return {
    ...result,
    cpuMsPerRequest: round((cpu * 1000) / Math.max(1, result.requests), 3),
    rssMB: mb(server.memory()?.rssKiB ?? 0),
    peakMB: mb(peakKiB),
  };
}
