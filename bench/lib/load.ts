/**
 * HTTP load from the bench process, against loopback only.
 *
 * - Saturation (no `rate`): autocannon, closed loop, each connection sending its next request
 *   as soon as the previous one is answered.
 * - A rate (`rate` requests/s offered): an open loop of our own (bench/lib/open-loop.mjs, in
 *   a child process). Request i is due at start + i/rate whatever the answers do, sent on a
 *   pool of keep-alive connections, and its latency counts from when it was due, so a server
 *   that falls behind shows it (no coordinated omission). autocannon's own rate option is not
 *   used: it lets each connection send its quota for the second back to back as soon as the
 *   second starts, which measures bursts at full speed, not a steady rate.
 *
 * Latencies are every response's own timer (sub-millisecond), so p50 and p99 are exact over
 * the whole run.
 */
import { fork } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';

const OPEN_LOOP = fileURLToPath(new URL('./open-loop.mjs', import.meta.url));

export interface LoadOptions {
  url: string;
  /** seconds of load (bounded: every run stops by itself) */
  seconds: number;
  connections: number;
  /** requests per second offered in all, evenly spaced (open loop); unset: as fast as the server answers (saturation, closed loop) */
  rate?: number;
  /** stop after this many requests instead of after `seconds` */
  maxRequests?: number;
  method?: 'GET' | 'POST';
  headers?: Record<string, string>;
  /** builds request `i` (a path, a body, extra headers); called once per request sent */
  request: (i: number) => { path: string; body?: string; headers?: Record<string, string> };
}

export interface LoadResult {
  /** requests answered per second over the run */
  rps: number;
  requests: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  /** answers by status code, and connection errors and timeouts */
  statuses: Record<string, number>;
  errors: number;
  seconds: number;
  offered?: number;
  /** CPU the open-loop generator spent per request (it shares the cores with the server) */
  clientCpuUsPerRequest?: number;
  /**
   * Open loop only: the p99 of the requests due in each second of the run, in order (NaN for
   * a second none of whose requests was answered). One slow second among fast ones is a
   * stall; every second slow is a server that cannot keep the rate.
   */
  p99BySecond?: number[];
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i]!;
}

const round = (n: number, digits = 2) => Math.round(n * 10 ** digits) / 10 ** digits;

/**
 * Runs one load and waits for it to finish.
 *
 * @example
 * const r = await runLoad({ url, seconds: 10, connections: 50, rate: 2000, request: (i) => ({ path: '/hooks/delivery', body: '{}' }) });
 */
export async function runLoad(opts: LoadOptions): Promise<LoadResult> {
  return opts.rate === undefined ? closedLoop(opts) : openLoop({ ...opts, rate: opts.rate });
}

function summary(
  latencies: number[],
  statuses: Record<string, number>,
  errors: number,
  seconds: number,
  offered?: number,
): LoadResult {
  latencies.sort((a, b) => a - b);
  return {
    rps: round(latencies.length / seconds, 0),
    requests: latencies.length,
    p50: round(percentile(latencies, 50)),
    p90: round(percentile(latencies, 90)),
    p99: round(percentile(latencies, 99)),
    max: round(latencies.at(-1) ?? Number.NaN),
    statuses,
    errors,
    seconds: round(seconds, 1),
    ...(offered !== undefined && { offered }),
  };
}

/** A request built in full: the bytes the open loop writes for it. */
function rawRequest(
  method: string,
  url: URL,
  next: { path: string; body?: string; headers?: Record<string, string> },
  headers: Record<string, string> | undefined,
): string {
  const all: Record<string, string> = {
    host: url.host,
    'content-type': 'application/json',
    ...headers,
    ...next.headers,
  };
  if (next.body !== undefined) all['content-length'] = String(Buffer.byteLength(next.body));
  let head = `${method} ${next.path} HTTP/1.1\r\n`;
  for (const [k, v] of Object.entries(all)) head += `${k}: ${v}\r\n`;
  return `${head}\r\n${next.body ?? ''}`;
}

interface OpenLoopDone {
  type: 'done';
  latencies: Float64Array;
  statuses: Uint16Array;
  errors: number;
  seconds: number;
  cpuSeconds: number;
  startMonotonicMs: number;
}

let traces = 0;

/**
 * BENCH_TRACE=<dir>: every open-loop load's requests as a CSV there (when each was due, on
 * CLOCK_MONOTONIC in ms, its latency and status), to line the slow ones up with the server's
 * --trace-gc or a perf recording.
 */
function writeTrace(opts: LoadOptions & { rate: number }, done: OpenLoopDone): void {
  const dir = process.env.BENCH_TRACE;
  if (!dir) return;
  mkdirSync(dir, { recursive: true });
  const interval = 1000 / opts.rate;
  const lines = ['due_monotonic_ms,latency_ms,status'];
  for (let i = 0; i < done.statuses.length; i++) {
    const due = done.startMonotonicMs + i * interval;
    lines.push(`${due.toFixed(3)},${done.latencies[i]!.toFixed(3)},${done.statuses[i]}`);
  }
  const name = `${String(++traces).padStart(2, '0')}-${new URL(opts.url).port}-${opts.rate}per-s.csv`;
  writeFileSync(join(dir, name), `${lines.join('\n')}\n`);
}

/**
 * `rate` requests per second, evenly spaced, whatever the answers do: bench/lib/open-loop.mjs
 * in a child process of its own, handed every request built in advance (so this process's
 * garbage collections and its other work cannot delay a send). The child's CPU is reported,
 * since it shares the cores with what it measures.
 */
async function openLoop(opts: LoadOptions & { rate: number }): Promise<LoadResult> {
  const url = new URL(opts.url);
  const total = opts.maxRequests ?? Math.round(opts.rate * opts.seconds);
  const parts: Buffer[] = new Array(total);
  const offsets = new Uint32Array(total + 1);
  for (let i = 0; i < total; i++) {
    parts[i] = Buffer.from(rawRequest(opts.method ?? 'POST', url, opts.request(i), opts.headers));
    offsets[i + 1] = offsets[i]! + parts[i]!.length;
  }
  const child = fork(OPEN_LOOP, [], {
    execArgv: [], // plain node: not the TypeScript loader this process runs under
    serialization: 'advanced',
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const done = await new Promise<OpenLoopDone>((resolve, reject) => {
    child.once('message', (m) => resolve(m as OpenLoopDone));
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`open-loop generator exited with ${code}`)));
    child.send({
      host: url.hostname,
      port: Number(url.port),
      rate: opts.rate,
      connections: opts.connections,
      timeoutMs: 10_000,
      requests: Buffer.concat(parts),
      offsets,
    });
  });
  child.removeAllListeners('exit');
  writeTrace(opts, done);
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  const bySecond: number[][] = Array.from({ length: Math.ceil(total / opts.rate) }, () => []);
  for (let i = 0; i < total; i++) {
    const status = done.statuses[i]!;
    if (status === 0) continue;
    latencies.push(done.latencies[i]!);
    statuses[status] = (statuses[status] ?? 0) + 1;
    bySecond[Math.floor(i / opts.rate)]!.push(done.latencies[i]!);
  }
  const p99BySecond = bySecond.map((second) =>
    round(
      percentile(
        second.sort((a, b) => a - b),
        99,
      ),
    ),
  );
  return {
    ...summary(latencies, statuses, done.errors, done.seconds, opts.rate),
    clientCpuUsPerRequest: Math.round((done.cpuSeconds * 1e6) / total),
    p99BySecond,
  };
}

async function closedLoop(opts: LoadOptions): Promise<LoadResult> {
  let n = 0;
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  let finish: (err: unknown, result: autocannon.Result) => void = () => {};
  const done = new Promise<autocannon.Result>((resolve, reject) => {
    finish = (err, result) => (err ? reject(err) : resolve(result));
  });
  const instance = autocannon(
    {
      url: opts.url,
      connections: opts.connections,
      duration: opts.seconds,
      timeout: 10,
      ...(opts.maxRequests !== undefined && { amount: opts.maxRequests }),
      requests: [
        {
          method: opts.method ?? 'POST',
          headers: { 'content-type': 'application/json', ...opts.headers },
          setupRequest: (req) => {
            const next = opts.request(n++);
            return {
              ...req,
              path: next.path,
              ...(next.body !== undefined && { body: next.body }),
              ...(next.headers !== undefined && { headers: { ...req.headers, ...next.headers } }),
            };
          },
        },
      ],
    },
    (err, result) => finish(err, result),
  );
  instance.on('response', (_client, statusCode, _bytes, responseTime) => {
    latencies.push(responseTime);
    statuses[statusCode] = (statuses[statusCode] ?? 0) + 1;
  });
  const result = await done;
  return summary(latencies, statuses, result.errors, result.duration);
}
