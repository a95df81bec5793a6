/**
 * HTTP load from the bench process, against loopback only.
 *
 * - Saturation (no `rate`): autocannon, closed loop, each connection sending its next request
 *   as soon as the previous one is answered.
 * - A rate (`rate` requests/s offered): an open loop of our own. Request i is due at
 *   start + i/rate whatever the answers do, sent on a pool of keep-alive connections, and its
 *   latency counts from when it was due, so a server that falls behind shows it (no
 *   coordinated omission). autocannon's own rate option is not used: it lets each connection
 *   send its quota for the second back to back as soon as the second starts, which measures
 *   bursts at full speed, not a steady rate.
 *
 * Latencies are every response's own timer (sub-millisecond), so p50 and p99 are exact over
 * the whole run.
 */
import { Agent, request as httpRequest } from 'node:http';
import autocannon from 'autocannon';

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

/** `rate` requests per second, evenly spaced, whatever the answers do. */
async function openLoop(opts: LoadOptions & { rate: number }): Promise<LoadResult> {
  const url = new URL(opts.url);
  const agent = new Agent({ keepAlive: true, maxSockets: opts.connections });
  const total = opts.maxRequests ?? Math.round(opts.rate * opts.seconds);
  const interval = 1000 / opts.rate;
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  let errors = 0;
  let sent = 0;
  let settled = 0;
  const start = performance.now() + 5;
  let lastAnswer = start;
  await new Promise<void>((resolve) => {
    const settle = () => {
      settled++;
      if (settled === total) resolve();
    };
    const send = (i: number, due: number) => {
      const next = opts.request(i);
      const body = next.body === undefined ? undefined : Buffer.from(next.body);
      const req = httpRequest(
        {
          agent,
          host: url.hostname,
          port: url.port,
          path: next.path,
          method: opts.method ?? 'POST',
          headers: {
            'content-type': 'application/json',
            ...(body && { 'content-length': body.length }),
            ...opts.headers,
            ...next.headers,
          },
          timeout: 10_000,
        },
        (res) => {
          res.on('data', () => {});
          res.on('end', () => {
            lastAnswer = performance.now();
            latencies.push(lastAnswer - due);
            statuses[res.statusCode ?? 0] = (statuses[res.statusCode ?? 0] ?? 0) + 1;
            settle();
          });
        },
      );
      req.on('timeout', () => req.destroy(new Error('timeout')));
      req.on('error', () => {
        errors++;
        settle();
      });
      req.end(body);
    };
    const tick = () => {
      const now = performance.now();
      while (sent < total && start + sent * interval <= now) {
        send(sent, start + sent * interval);
        sent++;
      }
      if (sent < total) setTimeout(tick, Math.max(0, start + sent * interval - performance.now()));
    };
    setTimeout(tick, 5);
  });
  agent.destroy();
  return summary(latencies, statuses, errors, (lastAnswer - start) / 1000, opts.rate);
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
