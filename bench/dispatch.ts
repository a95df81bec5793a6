/**
 * (b) Dispatch: `messages` queued messages (outbox rows, committed at once) to acceptance by
 * the sandbox, which allows 100 requests/s (burst 150) of up to 5000 messages each. Timed from
 * the commit of the outbox rows to the moment the outbox is empty. The CPU seconds each
 * process spent in that window say where the time goes.
 */
import { type BenchContext, round, sleep } from './context.ts';
import { seedMessages } from './lib/database.ts';
import { benchIdPattern } from './lib/ids.ts';
import { cpuSeconds, metricValue, postgresSampler, scrape } from './lib/metrics.ts';

export interface DispatchBench {
  messages: number;
  seconds: number;
  messagesPerSecond: number;
  /** messagelist requests made, per second, and that as a share of the 100 allowed */
  requests: number;
  requestsPerSecond: number;
  shareOfLimit: number;
  status429: number;
  accepted: number;
  rejected: number;
  /**
   * CPU seconds spent by each process while the outbox drained. `postgres` is the bench
   * database's backends (`postgresBackends`: the dispatcher's statements) and autovacuum
   * workers plus the server's shared processes (WAL writer, checkpointer, background
   * writer, launchers); `postgresOther` is what other databases' sessions on the same server
   * used meanwhile (other work on the machine, not counted in `postgres`).
   */
  cpu: {
    switchboard: number;
    sandbox: number;
    postgres: number;
    postgresBackends: number;
    postgresAutovacuum: number;
    postgresShared: number;
    postgresOther: number;
    wall: number;
  };
  /** CPU microseconds per message, per process (`postgres` as above) */
  cpuUsPerMessage: { switchboard: number; sandbox: number; postgres: number };
}

/** One drain; `prefix` starts its messages' customerMessageIds (one per round of (b)). */
export async function benchDispatch(ctx: BenchContext, prefix = 'b-'): Promise<DispatchBench> {
  const messages = Math.round(200_000 * ctx.scale);
  const metricsBefore = await scrape(ctx.server.url);
  ctx.log(`(b) queueing ${messages} messages (one commit) and waiting for the outbox to drain`);
  const start = performance.now();
  await seedMessages(ctx.db.sql, { prefix, count: messages, outbox: true, analyze: false });
  // rows are visible to the dispatcher from their commit on: time and CPU count from here
  const committed = performance.now();
  const cpuBefore = {
    switchboard: cpuSeconds(ctx.server.pid),
    sandbox: cpuSeconds(ctx.sandbox.pid),
  };
  const pg = postgresSampler(ctx.db.sql, ctx.db.name);
  const deadline = committed + 300_000;
  // Polled with exists(), not count(*): this connection is one of the bench database's
  // backends, counted in `postgres`, and a count of a 200 000-row outbox every 100 ms (each
  // visiting every row, ~10 ms) was ~7 us per message of that figure; exists() stops at the
  // first row still there
  for (;;) {
    await pg.sample();
    const [row] = await ctx.db.sql`select exists(select 1 from outbox) as waiting`;
    if (!row!.waiting) break;
    if (performance.now() > deadline) {
      const [left] = await ctx.db.sql`select count(*)::int as n from outbox`;
      throw new Error(`(b) outbox still holds ${left!.n} rows after 5 minutes`);
    }
    await sleep(100);
  }
  const end = performance.now();
  await pg.sample();
  const pgCpu = pg.totals();
  const cpu = {
    switchboard: round(cpuSeconds(ctx.server.pid) - cpuBefore.switchboard, 1),
    sandbox: round(cpuSeconds(ctx.sandbox.pid) - cpuBefore.sandbox, 1),
    postgres: round(pgCpu.backends + pgCpu.autovacuum + pgCpu.shared, 1),
    postgresBackends: round(pgCpu.backends, 1),
    postgresAutovacuum: round(pgCpu.autovacuum, 1),
    postgresShared: round(pgCpu.shared, 1),
    postgresOther: round(pgCpu.other, 1),
    wall: round((end - committed) / 1000, 1),
  };
  const perMessage = (s: number) => round((s * 1e6) / messages, 0);
  const metricsAfter = await scrape(ctx.server.url);
  const delta = (name: string, labels: Record<string, string> = {}) =>
    metricValue(metricsAfter, name, labels) - metricValue(metricsBefore, name, labels);
  const [lists] = await ctx.db.sql`
    select count(distinct messagelist_id)::int as n from messages
    where customer_message_id like ${benchIdPattern(prefix)} and messagelist_id is not null`;
  // the seeding's own time counts only from the commit: before it the rows were invisible
  const seconds = (end - committed) / 1000;
  const requests = lists!.n as number;
  ctx.log(
    `(b) drained in ${round(seconds, 1)} s (insert took ${round((committed - start) / 1000, 1)} s)`,
  );
  return {
    messages,
    seconds: round(seconds, 2),
    messagesPerSecond: round(messages / seconds, 0),
    requests,
    requestsPerSecond: round(requests / seconds, 1),
    shareOfLimit: round(requests / seconds / 100, 3),
    status429: delta('switchboard_provider_rate_limited_total'),
    accepted: delta('switchboard_messages_dispatched_total', { result: 'accepted' }),
    rejected: delta('switchboard_messages_dispatched_total', { result: 'rejected' }),
    cpu,
    cpuUsPerMessage: {
      switchboard: perMessage(cpu.switchboard),
      sandbox: perMessage(cpu.sandbox),
      postgres: perMessage(cpu.postgres),
    },
  };
}
