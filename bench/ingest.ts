/**
 * (a) `/hooks/delivery` durable ingestion, next to a bare Hono JSON endpoint and the
 * hand-written receiver a team would otherwise write (bench/peers/hand-receiver.ts: one
 * INSERT per callback), all three loaded in the same run with the same bodies: at saturation
 * (closed loop, as fast as each answers) and at 2000 requests/s offered (open loop), in
 * alternating rounds (Switchboard, hand-written, bare, Switchboard, ...; BENCH_ROUNDS of each,
 * default 3), every figure the median over its rounds. Each callback is a `sent` or
 * `delivered` event for one of `messages` stored messages, every body unique (a retry of the
 * same bytes would be a cheaper duplicate), so each request commits its inbox row, its
 * timeline event and the status move before the 200.
 */
import { type BenchContext, CALLBACK_HEADERS, round } from './context.ts';
import type { Child } from './lib/children.ts';
import { seedMessages } from './lib/database.ts';
import { benchCustomerId, benchProviderId } from './lib/ids.ts';
import { type LoadResult, runLoad } from './lib/load.ts';
import { type CpuUse, cpuMeter } from './lib/metrics.ts';
import { median, medianRun, peerRounds } from './peers.ts';

/** One endpoint's runs of one load: each run's figures, and their medians. */
export interface Series {
  runs: { load: LoadResult; cpu: CpuUse }[];
  /** medians over the runs */
  rps: number;
  p50: number;
  p99: number;
  switchboardUsPerRequest: number;
  postgresUsPerRequest: number;
}

export interface IngestBench {
  /** the run of median req/s (p99 of median p99 at 2000/s), for each endpoint */
  saturation: { switchboard: LoadResult; bare: LoadResult; ratio: number; cpu: CpuUse };
  offered: { switchboard: LoadResult; bare: LoadResult; cpu: CpuUse };
  /** callbacks stored in the inbox during the measured runs, against the 2xx answers */
  stored: number;
  acknowledged: number;
  rounds: number;
  /** every run of each endpoint; the server's CPU is that endpoint's own process */
  series: {
    saturation: { switchboard: Series; hand: Series; bare: Series };
    offered: { switchboard: Series; hand: Series; bare: Series };
  };
  /** the hand-written receiver's rows stored during the measured runs, against its 2xx */
  hand: { stored: number; acknowledged: number };
  /** medians of saturation req/s: Switchboard / hand-written, Switchboard / bare */
  ratios: { vsHand: number; vsBare: number };
}

function series(runs: { load: LoadResult; cpu: CpuUse }[]): Series {
  return {
    runs,
    rps: median(runs.map((r) => r.load.rps)),
    p50: round(median(runs.map((r) => r.load.p50))),
    p99: round(median(runs.map((r) => r.load.p99))),
    switchboardUsPerRequest: median(runs.map((r) => r.cpu.switchboardUsPerRequest)),
    postgresUsPerRequest: median(runs.map((r) => r.cpu.postgresUsPerRequest)),
  };
}

const PREFIX = 'a-';

/**
 * Request after request, a unique `sent` (then `delivered`, on the next pass) callback for
 * one of the `messages` stored messages `prefix` + 1..messages, in turn.
 */
export function deliveryCallbacks(prefix: string, messages: number) {
  let seq = 0;
  return () => {
    const n = seq++;
    const i = 1 + (n % messages);
    const status = Math.floor(n / messages) % 2 === 0 ? 'sent' : 'delivered';
    return {
      path: '/hooks/delivery',
      body: JSON.stringify({
        eventId: `${prefix}${i}:${status}:${n}`,
        customerMessageId: benchCustomerId(prefix, i),
        messageId: benchProviderId(prefix, i),
        status,
        timestamp: new Date().toISOString(),
        channel: 'sms',
      }),
    };
  };
}

/** `hand`: the hand-written receiver (bench/peers/hand-receiver.ts), started for this part. */
export async function benchIngest(ctx: BenchContext, hand: Child): Promise<IngestBench> {
  const messages = Math.round(100_000 * ctx.scale);
  ctx.log(`(a) seeding ${messages} accepted messages for the callbacks to find`);
  await seedMessages(ctx.db.sql, {
    prefix: PREFIX,
    count: messages,
    outbox: false,
    status: 'accepted',
  });

  const request = deliveryCallbacks(PREFIX, messages);
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

  const handCount = async () =>
    Number((await ctx.db.sql`select count(*)::int as n from peer_delivery_callbacks`)[0]!.n);

  const endpoints: [name: 'switchboard' | 'hand' | 'bare', child: Child][] = [
    ['switchboard', ctx.server],
    ['hand', hand],
    ['bare', ctx.bare],
  ];
  ctx.log('(a) warming up the three endpoints');
  const warm = { seconds: 3, connections: 20, headers: CALLBACK_HEADERS, request };
  for (const [, child] of endpoints) await runLoad({ url: child.url, ...warm });

  const rounds = peerRounds();
  const measure = async (child: Child, rate?: number) => {
    const meter = await cpuMeter(child.pid, ctx.db);
    const result = await load(child.url, rate);
    return { load: result, cpu: await meter.stop(result.requests) };
  };
  type Runs = Record<'switchboard' | 'hand' | 'bare', { load: LoadResult; cpu: CpuUse }[]>;
  const sat: Runs = { switchboard: [], hand: [], bare: [] };
  const rate: Runs = { switchboard: [], hand: [], bare: [] };
  const before = await inboxCount();
  const handBefore = await handCount();
  for (let r = 1; r <= rounds; r++) {
    for (const [name, child] of endpoints) {
      ctx.log(`(a) saturation, round ${r} of ${rounds}: ${name}`);
      sat[name].push(await measure(child));
    }
  }
  for (let r = 1; r <= rounds; r++) {
    for (const [name, child] of endpoints) {
      ctx.log(`(a) 2000 requests/s offered, round ${r} of ${rounds}: ${name}`);
      rate[name].push(await measure(child, 2000));
    }
  }
  const stored = (await inboxCount()) - before;
  const handStored = (await handCount()) - handBefore;
  const all = (runs: Runs, name: keyof Runs) => runs[name].map((r) => r.load);
  const sbSat = medianRun(sat.switchboard, (r) => r.load.rps);
  const sbRate = medianRun(rate.switchboard, (r) => r.load.p99);
  const s = {
    saturation: {
      switchboard: series(sat.switchboard),
      hand: series(sat.hand),
      bare: series(sat.bare),
    },
    offered: {
      switchboard: series(rate.switchboard),
      hand: series(rate.hand),
      bare: series(rate.bare),
    },
  };
  const bareSat = medianRun(sat.bare, (r) => r.load.rps).load;
  return {
    saturation: {
      switchboard: sbSat.load,
      bare: bareSat,
      ratio: round(s.saturation.switchboard.rps / s.saturation.bare.rps, 3),
      cpu: sbSat.cpu,
    },
    offered: {
      switchboard: sbRate.load,
      bare: medianRun(rate.bare, (r) => r.load.p99).load,
      cpu: sbRate.cpu,
    },
    stored,
    acknowledged: [...all(sat, 'switchboard'), ...all(rate, 'switchboard')].reduce(
      (a, r) => a + ok(r),
      0,
    ),
    rounds,
    series: s,
    hand: {
      stored: handStored,
      acknowledged: [...all(sat, 'hand'), ...all(rate, 'hand')].reduce((a, r) => a + ok(r), 0),
    },
    ratios: {
      vsHand: round(s.saturation.switchboard.rps / s.saturation.hand.rps, 3),
      vsBare: round(s.saturation.switchboard.rps / s.saturation.bare.rps, 3),
    },
  };
}
