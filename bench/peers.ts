/**
 * The peers a team would use instead of Switchboard, measured in the same run (issue 27,
 * point 1): the hand-written receiver beside (a) (bench/peers/hand-receiver.ts, loaded by
 * bench/ingest.ts), the pg-boss worker beside (b) (bench/peers/pgboss-worker.ts, one drain per
 * call of `benchPgBoss`), and the bare endpoint's CPU per request at the rate (c) and (d) are
 * loaded at, for their CPU per request to be read against. Goals are judged on medians of
 * alternating runs (Switchboard, peer, Switchboard, peer...): `BENCH_ROUNDS` of each, default 3.
 */
import { type BenchContext, CALLBACK_HEADERS, round, sleep } from './context.ts';
import { benchDispatch, type DispatchBench } from './dispatch.ts';
import type { Child } from './lib/children.ts';
import { type LoadResult, runLoad } from './lib/load.ts';
import { type CpuUse, cpuMeter, cpuSeconds, postgresSampler } from './lib/metrics.ts';

/** Runs of each side in the alternating comparisons (BENCH_ROUNDS, at least 1; default 3). */
export function peerRounds(): number {
  const n = Math.round(Number(process.env.BENCH_ROUNDS ?? 3));
  return Number.isFinite(n) ? Math.max(1, n) : 3;
}

export function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  if (s.length === 0) return Number.NaN;
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/** The run whose `key` is the median (the lower middle one of an even count). */
export function medianRun<T>(runs: T[], key: (r: T) => number): T {
  const s = [...runs].sort((a, b) => key(a) - key(b));
  return s[Math.floor((s.length - 1) / 2)]!;
}

export interface PgBossBench {
  messages: number;
  seedSeconds: number;
  seconds: number;
  messagesPerSecond: number;
  requests: number;
  requestsPerSecond: number;
  status429: number;
  accepted: number;
  rejected: number;
  /** CPU seconds in the drain window, as (b) counts them (`worker` is the pg-boss process) */
  cpu: {
    worker: number;
    sandbox: number;
    postgres: number;
    postgresBackends: number;
    postgresAutovacuum: number;
    postgresShared: number;
    postgresOther: number;
    wall: number;
  };
  cpuUsPerMessage: { worker: number; sandbox: number; postgres: number };
}

interface WorkerStats {
  posted: number;
  requests: number;
  accepted: number;
  rejected: number;
  status429: number;
  failures: number;
}

async function call(worker: Child, method: 'GET' | 'POST', path: string): Promise<unknown> {
  const res = await fetch(`${worker.url}${path}`, { method });
  const body = (await res.json()) as unknown;
  if (!res.ok) throw new Error(`pg-boss worker ${path}: ${res.status} ${JSON.stringify(body)}`);
  return body;
}

/**
 * One drain by the pg-boss worker, as (b) times Switchboard's: `messages` jobs committed first
 * (not timed), then timed from the worker's start until no job of the queue is waiting or
 * active.
 */
export async function benchPgBoss(
  ctx: BenchContext,
  worker: Child,
  prefix: string,
): Promise<PgBossBench> {
  const messages = Math.round(200_000 * ctx.scale);
  ctx.log(`(b) pg-boss: queueing ${messages} jobs`);
  const seedStart = performance.now();
  await call(worker, 'POST', `/seed?prefix=${encodeURIComponent(prefix)}&count=${messages}`);
  const seedSeconds = (performance.now() - seedStart) / 1000;
  const before = (await call(worker, 'GET', '/stats')) as WorkerStats;
  const cpuBefore = { worker: cpuSeconds(worker.pid), sandbox: cpuSeconds(ctx.sandbox.pid) };
  const pg = postgresSampler(ctx.db.sql, ctx.db.name);
  await pg.sample();
  const start = performance.now();
  await call(worker, 'POST', '/start');
  const deadline = start + 300_000;
  for (;;) {
    await sleep(100);
    await pg.sample();
    // exists(), not count(*), as (b) polls its outbox
    const [row] = await ctx.db.sql`
      select exists(select 1 from pgboss.job
                    where name = 'messages' and state < 'completed') as waiting`;
    if (!row!.waiting) break;
    if (performance.now() > deadline) throw new Error('(b) pg-boss: jobs left after 5 minutes');
  }
  const end = performance.now();
  await pg.sample();
  await call(worker, 'POST', '/stop');
  const after = (await call(worker, 'GET', '/stats')) as WorkerStats;
  const t = pg.totals();
  const cpu = {
    worker: round(cpuSeconds(worker.pid) - cpuBefore.worker, 1),
    sandbox: round(cpuSeconds(ctx.sandbox.pid) - cpuBefore.sandbox, 1),
    postgres: round(t.backends + t.autovacuum + t.shared, 1),
    postgresBackends: round(t.backends, 1),
    postgresAutovacuum: round(t.autovacuum, 1),
    postgresShared: round(t.shared, 1),
    postgresOther: round(t.other, 1),
    wall: round((end - start) / 1000, 1),
  };
  const seconds = (end - start) / 1000;
  const requests = after.requests - before.requests;
  const perMessage = (s: number) => round((s * 1e6) / messages, 0);
  ctx.log(`(b) pg-boss drained in ${round(seconds, 1)} s (insert took ${round(seedSeconds, 1)} s)`);
  return {
    messages,
    seedSeconds: round(seedSeconds, 1),
    seconds: round(seconds, 2),
    messagesPerSecond: round(messages / seconds, 0),
    requests,
    requestsPerSecond: round(requests / seconds, 1),
    status429: after.status429 - before.status429,
    accepted: after.accepted - before.accepted,
    rejected: after.rejected - before.rejected,
    cpu,
    cpuUsPerMessage: {
      worker: perMessage(cpu.worker),
      sandbox: perMessage(cpu.sandbox),
      postgres: perMessage(cpu.postgres),
    },
  };
}

export interface BareAtRate {
  rate: number;
  load: LoadResult;
  cpu: CpuUse;
}

/**
 * The bare endpoint's CPU per request at `rate` offered (open loop, as (c) and (d) load
 * Switchboard): `GET /v1/messages/{ref}` for reads, `POST /hooks/delivery` with a callback's
 * body for webhooks. Its Postgres figure is the bench database's idle background.
 */
export async function benchBareAt(
  ctx: BenchContext,
  kind: 'read' | 'webhook',
  rate: number,
  connections: number,
): Promise<BareAtRate> {
  let n = 0;
  const request = () => {
    const i = n++;
    return kind === 'read'
      ? { path: `/v1/messages/bare-${i}` }
      : {
          path: '/hooks/delivery',
          body: JSON.stringify({
            eventId: `bare-${i}`,
            customerMessageId: `bare-${i}`,
            status: 'delivered',
            timestamp: new Date().toISOString(),
          }),
        };
  };
  const method = kind === 'read' ? 'GET' : 'POST';
  await runLoad({ url: ctx.bare.url, seconds: 2, connections, method, request });
  ctx.log(`bare endpoint, ${kind}s at ${rate}/s offered`);
  const meter = await cpuMeter(ctx.bare.pid, ctx.db);
  const load = await runLoad({
    url: ctx.bare.url,
    seconds: ctx.seconds,
    connections,
    rate,
    method,
    headers: CALLBACK_HEADERS,
    request,
  });
  return { rate, load, cpu: await meter.stop(load.requests) };
}

export interface DispatchVsPgBoss {
  rounds: number;
  /** Switchboard's run of median messages/s (what (b)'s own row reports) */
  switchboard: DispatchBench;
  runs: { switchboard: DispatchBench[]; pgboss: PgBossBench[] };
  /** medians over the runs */
  medians: {
    switchboardMessagesPerSecond: number;
    pgbossMessagesPerSecond: number;
    /** Switchboard / pg-boss */
    ratio: number;
    /** CPU microseconds per message: Switchboard's server / the pg-boss worker, and Postgres beside each */
    switchboardUsPerMessage: number;
    switchboardPostgresUsPerMessage: number;
    pgbossUsPerMessage: number;
    pgbossPostgresUsPerMessage: number;
  };
}

/** (b) in alternating rounds: Switchboard drains, the pg-boss worker drains, and again. */
export async function benchDispatchVsPgBoss(
  ctx: BenchContext,
  worker: Child,
): Promise<DispatchVsPgBoss> {
  const rounds = peerRounds();
  const sb: DispatchBench[] = [];
  const pb: PgBossBench[] = [];
  for (let r = 1; r <= rounds; r++) {
    ctx.log(`(b) round ${r} of ${rounds}: Switchboard`);
    sb.push(await benchDispatch(ctx, `b-${r}-`));
    ctx.log(`(b) round ${r} of ${rounds}: pg-boss`);
    pb.push(await benchPgBoss(ctx, worker, `pb-${r}-`));
  }
  const sbMps = median(sb.map((d) => d.messagesPerSecond));
  const pbMps = median(pb.map((d) => d.messagesPerSecond));
  return {
    rounds,
    switchboard: medianRun(sb, (d) => d.messagesPerSecond),
    runs: { switchboard: sb, pgboss: pb },
    medians: {
      switchboardMessagesPerSecond: sbMps,
      pgbossMessagesPerSecond: pbMps,
      ratio: round(sbMps / pbMps, 3),
      switchboardUsPerMessage: median(sb.map((d) => d.cpuUsPerMessage.switchboard)),
      switchboardPostgresUsPerMessage: median(sb.map((d) => d.cpuUsPerMessage.postgres)),
      pgbossUsPerMessage: median(pb.map((d) => d.cpuUsPerMessage.worker)),
      pgbossPostgresUsPerMessage: median(pb.map((d) => d.cpuUsPerMessage.postgres)),
    },
  };
}
