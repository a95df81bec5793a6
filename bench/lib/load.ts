/**
 * HTTP load from the bench process with autocannon, against loopback only. Latencies are
 * taken from every response's own timer (sub-millisecond, not autocannon's integer
 * histogram), so p50 and p99 are exact over the whole run.
 */
import autocannon from 'autocannon';

export interface LoadOptions {
  url: string;
  /** seconds of load (bounded: every run stops by itself) */
  seconds: number;
  connections: number;
  /** requests per second offered in all; unset: as fast as the server answers (saturation) */
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
      ...(opts.rate !== undefined && { overallRate: opts.rate }),
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
  latencies.sort((a, b) => a - b);
  return {
    rps: round(latencies.length / result.duration, 0),
    requests: latencies.length,
    p50: round(percentile(latencies, 50)),
    p90: round(percentile(latencies, 90)),
    p99: round(percentile(latencies, 99)),
    max: round(latencies.at(-1) ?? Number.NaN),
    statuses,
    errors: result.errors,
    seconds: round(result.duration, 1),
    ...(opts.rate !== undefined && { offered: opts.rate }),
  };
}
