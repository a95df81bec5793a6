/**
 * (a) `/hooks/delivery` durable ingestion, next to a bare Hono JSON endpoint measured in the
 * same run with the same bodies: at saturation (closed loop, as fast as each answers) and at
 * 2000 requests/s offered (open loop). Each callback is a `sent` or `delivered` event for one
 * of `messages` stored messages, every body unique (a retry of the same bytes would be a
 * cheaper duplicate), so each request commits its inbox row, its timeline event and the
 * status move before the 200.
 */
import { type BenchContext, CALLBACK_HEADERS, round } from './context.ts';
import { seedMessages } from './lib/database.ts';
import { type LoadResult, runLoad } from './lib/load.ts';
import { type CpuUse, cpuMeter } from './lib/metrics.ts';

export interface IngestBench {
  saturation: { switchboard: LoadResult; bare: LoadResult; ratio: number; cpu: CpuUse };
  offered: { switchboard: LoadResult; bare: LoadResult; cpu: CpuUse };
  /** callbacks stored in the inbox during the measured runs, against the 2xx answers */
  stored: number;
  acknowledged: number;
}

const PREFIX = 'a-';

export async function benchIngest(ctx: BenchContext): Promise<IngestBench> {
  const messages = Math.round(100_000 * ctx.scale);
  ctx.log(`(a) seeding ${messages} accepted messages for the callbacks to find`);
  await seedMessages(ctx.db.sql, {
    prefix: PREFIX,
    count: messages,
    outbox: false,
    status: 'accepted',
  });

  let seq = 0;
  const request = () => {
    const n = seq++;
    const i = 1 + (n % messages);
    const status = Math.floor(n / messages) % 2 === 0 ? 'sent' : 'delivered';
    return {
      path: '/hooks/delivery',
      body: JSON.stringify({
        eventId: `${PREFIX}${i}:${status}:${n}`,
        customerMessageId: `${PREFIX}${i}`,
        messageId: `pm-${PREFIX}${i}`,
        status,
        timestamp: new Date().toISOString(),
        channel: 'sms',
      }),
    };
  };
  const inboxCount = async () =>
    Number((await ctx.db.sql`select count(*)::int as n from inbox where kind = 'delivery'`)[0]!.n);

  const load = (url: string, rate?: number) =>
    runLoad({
      url,
      seconds: ctx.seconds,
      connections: 50,
      ...(rate !== undefined && { rate }),
      headers: CALLBACK_HEADERS,
      request,
    });
  const ok = (r: LoadResult) =>
    Object.entries(r.statuses)
      .filter(([s]) => s.startsWith('2'))
      .reduce((a, [, n]) => a + n, 0);

  ctx.log('(a) warming up both endpoints');
  const warm = { seconds: 3, connections: 20, headers: CALLBACK_HEADERS, request };
  await runLoad({ url: ctx.bare.url, ...warm });
  await runLoad({ url: ctx.server.url, ...warm });

  const before = await inboxCount();
  ctx.log('(a) saturation: bare endpoint');
  const bareSat = await load(ctx.bare.url);
  ctx.log('(a) saturation: /hooks/delivery');
  let meter = await cpuMeter(ctx.server.pid, ctx.db);
  const sbSat = await load(ctx.server.url);
  const satCpu = await meter.stop(sbSat.requests);
  ctx.log('(a) 2000 requests/s offered: bare endpoint');
  const bareRate = await load(ctx.bare.url, 2000);
  ctx.log('(a) 2000 requests/s offered: /hooks/delivery');
  meter = await cpuMeter(ctx.server.pid, ctx.db);
  const sbRate = await load(ctx.server.url, 2000);
  const rateCpu = await meter.stop(sbRate.requests);
  const stored = (await inboxCount()) - before;

  return {
    saturation: {
      switchboard: sbSat,
      bare: bareSat,
      ratio: round(sbSat.rps / bareSat.rps, 3),
      cpu: satCpu,
    },
    offered: { switchboard: sbRate, bare: bareRate, cpu: rateCpu },
    stored,
    acknowledged: ok(sbSat) + ok(sbRate),
  };
}
