/** Reads a few series from a server's Prometheus text at /metrics, and CPU time from /proc. */
import { readFileSync } from 'node:fs';
import type postgres from 'postgres';
import { round } from '../context.ts';

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
 * The CPU of the Postgres server's processes by what they work for, sampled while the outbox
 * drains: a process seen first during the window counts from zero (it started in it), one
 * gone before the end counts up to its last sample. pg_stat_activity names each one's
 * database (none for the shared processes).
 */
export function postgresSampler(sql: postgres.Sql, database: string) {
  const first = new Map<number, number>();
  type Kind = 'backends' | 'autovacuum' | 'shared' | 'other';
  const last = new Map<number, { cpu: number; kind: Kind }>();
  let started = false;
  return {
    async sample() {
      const rows = await sql<{ pid: number; datname: string | null; type: string | null }[]>`
        select pid, datname, backend_type as type from pg_stat_activity`;
      for (const { pid, datname, type } of rows) {
        const cpu = cpuSeconds(pid);
        if (Number.isNaN(cpu)) continue; // ended meanwhile
        if (!first.has(pid)) first.set(pid, started ? 0 : cpu);
        const kind: Kind =
          datname === null
            ? 'shared'
            : datname !== database
              ? 'other'
              : type === 'autovacuum worker'
                ? 'autovacuum'
                : 'backends';
        last.set(pid, { cpu, kind });
      }
      started = true;
    },
    totals() {
      const sum: Record<Kind, number> = { backends: 0, autovacuum: 0, shared: 0, other: 0 };
      for (const [pid, { cpu, kind }] of last) sum[kind] += cpu - (first.get(pid) ?? 0);
      return sum;
    },
  };
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
 * Starts counting the CPU the server (`pid`) and the bench database's Postgres processes
 * (its backends, autovacuum, the shared ones) use; `stop(requests)` gives the totals and the
 * cost per request. Postgres is sampled at the start and the end only: right for the
 * server's pooled connections, which live through the window.
 *
 * @example
 * const meter = await cpuMeter(ctx.server.pid, ctx.db);
 * const load = await runLoad(...);
 * const cpu = await meter.stop(load.requests);
 */
export async function cpuMeter(
  pid: number,
  db: { sql: postgres.Sql; name: string },
): Promise<{ stop(requests: number): Promise<CpuUse> }> {
  const server = cpuSeconds(pid);
  const pg = postgresSampler(db.sql, db.name);
  await pg.sample();
  return {
    async stop(requests) {
      const s = cpuSeconds(pid) - server;
      await pg.sample();
      const t = pg.totals();
      const p = t.backends + t.autovacuum + t.shared;
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

/**
 * Kilobytes the whole machine has read from its disks so far (`pgpgin` of /proc/vmstat, which
 * the kernel counts in kB): what missed the page cache. On a machine that runs nothing but the
 * bench, the difference over a window is the reads its load caused; NaN where there is no
 * /proc/vmstat.
 */
export function diskReadKb(vmstat = readVmstat()): number {
  const m = vmstat.match(/^pgpgin (\d+)$/m);
  return m ? Number(m[1]) : Number.NaN;
}

function readVmstat(): string {
  try {
    return readFileSync('/proc/vmstat', 'utf8');
  } catch {
    return '';
  }
}

/** The whole machine's CPU time so far, in clock ticks, from the first line of /proc/stat. */
export interface MachineTicks {
  busy: number;
  /** time the hypervisor gave this VM's CPUs to someone else while they had work */
  steal: number;
  total: number;
}

export function machineTicks(): MachineTicks {
  // cpu  user nice system idle iowait irq softirq steal guest guest_nice
  const [user, nice, system, idle, iowait, irq, softirq, steal] = readFileSync('/proc/stat', 'utf8')
    .split('\n', 1)[0]!
    .trim()
    .split(/\s+/)
    .slice(1, 9)
    .map(Number) as [number, number, number, number, number, number, number, number];
  const busy = user + nice + system + irq + softirq;
  return { busy, steal, total: busy + idle + iowait + steal };
}

export interface MachineShare {
  busyPercent: number;
  stealPercent: number;
}

/**
 * How the machine's CPUs were used between two readings, in percent of all their time: busy
 * (anyone's work, the bench's own included) and stolen by the hypervisor. A run with steal
 * well above zero measured a starved VM, not the code.
 */
export function machineShare(before: MachineTicks, after: MachineTicks): MachineShare {
  const total = after.total - before.total;
  const pct = (n: number) => (total > 0 ? Math.round((n / total) * 1000) / 10 : 0);
  return {
    busyPercent: pct(after.busy - before.busy),
    stealPercent: pct(after.steal - before.steal),
  };
}

/**
 * A process's RSS sampled every 20 ms from now until `stop`: where it started, its peak and
 * the rise, in MB (one decimal). `stop` takes a last sample; calling it again is harmless.
 */
export function rssWatch(proc: { memory(): { rssKiB: number } | undefined }) {
  const rss = () => (proc.memory()?.rssKiB ?? 0) * 1024;
  const mb = (bytes: number) => round(bytes / 1e6, 1);
  const before = rss();
  let peak = before;
  const timer = setInterval(() => {
    peak = Math.max(peak, rss());
  }, 20);
  return {
    stop() {
      clearInterval(timer);
      peak = Math.max(peak, rss());
      return { rssBeforeMB: mb(before), rssPeakMB: mb(peak), riseMB: mb(peak - before) };
    },
  };
}

/**
 * What the database's client backends were doing while a load ran: `pg_stat_activity`
 * sampled every `everyMs` on `monitor` (a connection to another database, so its own queries
 * count neither among the sampled backends nor in `cpuMeter`'s Postgres CPU), each active
 * backend counted under its wait event (`IO:DataFileRead`, `Lock:transactionid`, ...) or
 * `CPU` when it waits for nothing. `stop` gives the average number of backends in each, the
 * "average active sessions" of Postgres monitoring: 0.9 `IO:WALSync` says commits waited
 * on the disk most of the window.
 */
export function waitSampler(monitor: postgres.Sql, database: string, everyMs = 50) {
  const counts = new Map<string, number>();
  let samples = 0;
  let busy = false;
  const timer = setInterval(() => {
    if (busy) return; // a slow sample is skipped, not queued
    busy = true;
    monitor<{ wait: string; n: number }[]>`
      select coalesce(wait_event_type || ':' || wait_event, 'CPU') as wait, count(*)::int as n
      from pg_stat_activity
      where datname = ${database} and state = 'active' and backend_type = 'client backend'
      group by 1`
      .then((rows) => {
        samples++;
        for (const { wait, n } of rows) counts.set(wait, (counts.get(wait) ?? 0) + n);
      })
      .catch(() => {}) // a lost sample only lowers the count
      .finally(() => {
        busy = false;
      });
  }, everyMs);
  return {
    stop(): { samples: number; activeByWait: Record<string, number> } {
      clearInterval(timer);
      const activeByWait = Object.fromEntries(
        [...counts]
          .sort((a, b) => b[1] - a[1])
          .map(([wait, n]) => [wait, samples > 0 ? round(n / samples, 2) : 0]),
      );
      return { samples, activeByWait };
    },
  };
}
