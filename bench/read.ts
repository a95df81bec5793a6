/**
 * (d) `GET /v1/messages/{ref}` with a million messages and five million events in the
 * database: refs drawn at random over the whole set, a third each by Switchboard id,
 * customerMessageId and the provider's messageId, at a steady 500 requests/s offered (the
 * figure judged), and at 100/s (the lookup with the server mostly idle).
 */
import { type BenchContext, round } from './context.ts';
import { seedMessages } from './lib/database.ts';
import { benchCustomerId, benchIdPattern, benchProviderId } from './lib/ids.ts';
import { type LoadResult, runLoad } from './lib/load.ts';
import { type CpuUse, cpuMeter } from './lib/metrics.ts';

export interface ReadBench {
  messages: number;
  events: number;
  seedSeconds: number;
  /** at 500 requests/s offered: the figure judged against the goal */
  load: LoadResult;
  /** CPU of the server and of Postgres during the 500/s load */
  cpu: CpuUse;
  /** at 100 requests/s offered: the lookup itself, with the server mostly idle */
  light: LoadResult;
}

const PREFIX = 'd-';

/**
 * Request after request, `GET /v1/messages/{ref}` of a random one of the messages `prefix` +
 * 1..count: a third each by one of `ids` (Switchboard ids), customerMessageId and messageId.
 */
export function messageReads(
  prefix: string,
  count: number,
  ids: readonly string[],
  pick = () => 1 + Math.floor(Math.random() * count),
) {
  let seq = 0;
  return () => {
    const kind = seq++ % 3;
    const ref =
      kind === 0 && ids.length > 0
        ? ids[Math.floor(Math.random() * ids.length)]!
        : kind === 1
          ? benchCustomerId(prefix, pick())
          : benchProviderId(prefix, pick());
    return { path: `/v1/messages/${encodeURIComponent(ref)}` };
  };
}

export async function benchRead(ctx: BenchContext): Promise<ReadBench> {
  const count = Math.round(1_000_000 * ctx.scale);
  ctx.log(`(d) seeding ${count} messages with 5 events each (set-based SQL)`);
  const start = performance.now();
  await seedMessages(ctx.db.sql, {
    prefix: PREFIX,
    count,
    outbox: false,
    status: 'read',
    events: 5,
  });
  const seedSeconds = (performance.now() - start) / 1000;
  // a table that has lived a while has been vacuumed: hint bits set, no autovacuum of five
  // million fresh rows competing with the reads for the 2 cores
  ctx.log('(d) vacuum analyze, checkpoint');
  await ctx.db.sql.unsafe('vacuum (analyze) messages, message_events');
  // and the seeding's gigabytes written out now, not by a checkpoint during the measurement
  await ctx.db.sql.unsafe('checkpoint');
  const [totals] = await ctx.db.sql`
    select (select count(*) from messages)::int as messages,
           (select count(*) from message_events)::int as events`;
  ctx.log(
    `(d) seeded in ${round(seedSeconds, 1)} s: ${totals!.messages} messages, ${totals!.events} events`,
  );

  // a sample of real Switchboard ids (random over the table), for a third of the refs
  const idRows = await ctx.db.sql<{ id: string }[]>`
    select id from messages tablesample system (1) where customer_message_id like ${benchIdPattern(PREFIX)} limit 20000`;
  const ids = idRows.map((r) => r.id);
  const request = messageReads(PREFIX, count, ids);
  await runLoad({ url: ctx.server.url, seconds: 3, connections: 10, method: 'GET', request });
  ctx.log('(d) 100 requests/s offered');
  const light = await runLoad({
    url: ctx.server.url,
    seconds: ctx.seconds,
    connections: 10,
    rate: 100,
    method: 'GET',
    request,
  });
  ctx.log('(d) 500 requests/s offered');
  const meter = await cpuMeter(ctx.server.pid, ctx.db);
  const load = await runLoad({
    url: ctx.server.url,
    seconds: ctx.seconds,
    connections: 20,
    rate: 500,
    method: 'GET',
    request,
  });
  const cpu = await meter.stop(load.requests);
  return {
    messages: totals!.messages as number,
    events: totals!.events as number,
    seedSeconds: round(seedSeconds, 1),
    load,
    cpu,
    light,
  };
}
