/** Reads a few series from a server's Prometheus text at /metrics, and CPU time from /proc. */
import { readdirSync, readFileSync } from 'node:fs';

/** Sum of every sample of `name` whose labels contain all of `labels`. */
export function metricValue(
  text: string,
  name: string,
  labels: Record<string, string> = {},
): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const m = line.match(/^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+(\S+)/);
    if (!m || m[1] !== name) continue;
    const labelText = m[2] ?? '';
    if (Object.entries(labels).every(([k, v]) => labelText.includes(`${k}="${v}"`))) {
      sum += Number(m[3]);
    }
  }
  return sum;
}

export async function scrape(baseUrl: string): Promise<string> {
  const res = await fetch(`${baseUrl}/metrics`);
  return res.text();
}

/** CPU seconds (user + system) a process has used so far, from /proc/<pid>/stat. */
export function cpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // fields after the command name (which may hold spaces) start at state, field 3
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return Number.NaN;
  }
}

/**
 * CPU seconds used so far by every live Postgres process (the server and its backends): the
 * machine's own Postgres, so the bench reads it while nothing else runs.
 */
export function postgresCpuSeconds(): number {
  let sum = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (!stat.includes('(postgres)')) continue;
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      sum += (Number(fields[11]) + Number(fields[12])) / 100;
    } catch {
      // the process ended meanwhile
    }
  }
  return sum;
}

/** CPU seconds of the server and of Postgres over a window, and per request in it. */
export interface CpuUse {
  switchboardSeconds: number;
  postgresSeconds: number;
  /** microseconds of CPU per answered request */
  switchboardUsPerRequest: number;
  postgresUsPerRequest: number;
}

/**
 * Starts counting the CPU the server (`pid`) and Postgres use; `stop(requests)` gives the
 * totals and the cost per request. Postgres is every postgres process on the machine, so
 * the figure is honest only while nothing else uses it.
 *
 * @example
 * const meter = cpuMeter(ctx.server.pid);
 * const load = await runLoad(...);
 * const cpu = meter.stop(load.requests);
 */
export function cpuMeter(pid: number): { stop(requests: number): CpuUse } {
  const server = cpuSeconds(pid);
  const pg = postgresCpuSeconds();
  return {
    stop(requests) {
      const s = cpuSeconds(pid) - server;
      const p = postgresCpuSeconds() - pg;
      const per = (seconds: number) => (requests > 0 ? Math.round((seconds * 1e6) / requests) : 0);
      return {
        switchboardSeconds: Math.round(s * 100) / 100,
        postgresSeconds: Math.round(p * 100) / 100,
        switchboardUsPerRequest: per(s),
        postgresUsPerRequest: per(p),
      };
    },
  };
}
