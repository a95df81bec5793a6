/**
 * (g) Events to a user's endpoint (src/events/), side by side with the delivery callbacks that
 * cause them. The same load, delivery callbacks at RATE/s each moving one stored message from
 * `accepted` to `sent`, runs three times:
 *
 * 1. **no endpoint**: the cost of one callback ingested (what (a) measures, at this rate);
 * 2. **an endpoint** (bench/event-receiver.ts, which verifies every signature with the
 *    `standardwebhooks` package) subscribed to `message.status`: each callback now also records
 *    an event, which the worker signs and sends. Measured until every event is delivered: the
 *    CPU of Switchboard and Postgres per event delivered, above phase 1's per callback, is
 *    what an event costs (the goal: at most twice a callback), and the time from the change
 *    (the event's `timestamp`) to its receipt, p50 and p99, at a steady rate;
 * 3. **the receiver killed** (SIGKILL) halfway through the load and started again a second
 *    later on the same port: every event recorded must arrive (none lost), and any event
 *    received twice must carry the same `webhook-id` and body (the receiver logs each request
 *    before answering, so a request it acknowledged is on record).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { type BenchContext, CALLBACK_HEADERS, round, sleep } from './context.ts';
import { type Child, LISTENING, spawnChild } from './lib/children.ts';
import { seedMessages } from './lib/database.ts';
import { benchCustomerId, benchProviderId } from './lib/ids.ts';
import { type LoadResult, percentile, runLoad } from './lib/load.ts';
import { type CpuUse, cpuMeter } from './lib/metrics.ts';

const RATE = 500;
const PREFIX = 'g-';

export interface EventsPhase {
  load: LoadResult;
  /** events recorded in the phase (outgoing_events rows) */
  events: number;
  /** seconds from the load's start until the last event was delivered */
  seconds: number;
  /** events delivered per second over that time */
  eventsPerSecond: number;
  /** CPU over the load and until the last delivery; per request = per event delivered */
  cpu: CpuUse;
}

export interface EventsBench {
  rate: number;
  /** phase 1: CPU per callback with no endpoint */
  baseline: { load: LoadResult; cpu: CpuUse };
  /** phase 2 */
  steady: EventsPhase & {
    /** ms from the change (the event's timestamp) to its first receipt */
    latency: { p50: number; p99: number; max: number };
    /** Switchboard + Postgres CPU per event delivered, less phase 1's per callback */
    eventCpuUs: number;
    /** Switchboard + Postgres CPU per callback in phase 1 */
    callbackCpuUs: number;
    /** eventCpuUs / callbackCpuUs (goal <= 2) */
    ratio: number;
  };
  /** phase 3 */
  restart: EventsPhase & {
    /** distinct webhook-ids received */
    received: number;
    /** recorded but never received */
    lost: number;
    /** requests received for an id already received */
    duplicates: number;
    /** duplicates whose body differed from the first (must be 0) */
    duplicatesDiffering: number;
    /** requests whose signature did not verify (must be 0) */
    invalid: number;
  };
}

interface Receipt {
  id: string;
  receivedMs: number;
  eventMs: number;
  sha: string;
}

function readReceipts(file: string): { receipts: Receipt[]; invalid: number } {
  let text = '';
  try {
    text = readFileSync(file, 'utf8');
  } catch {}
  const receipts: Receipt[] = [];
  let invalid = 0;
  for (const line of text.split('\n')) {
    if (!line) continue;
    if (line.startsWith('invalid ')) {
      invalid++;
      continue;
    }
    const [id, received, event, sha] = line.split(' ');
    receipts.push({ id: id!, receivedMs: Number(received), eventMs: Number(event), sha: sha! });
  }
  return { receipts, invalid };
}

export async function benchEvents(ctx: BenchContext): Promise<EventsBench> {
  const perPhase = Math.round(RATE * ctx.seconds);
  const warm = 1000;
  // a message per callback: warm-up, three phases, and the open loop's catching up
  const messages = warm + Math.ceil(perPhase * 3 * 1.1);
  ctx.log(`(g) seeding ${messages} accepted messages for the callbacks to move`);
  await seedMessages(ctx.db.sql, {
    prefix: PREFIX,
    count: messages,
    outbox: false,
    status: 'accepted',
  });

  // each request moves its own message from accepted to sent: one status change, one event
  let next = 1;
  const request = () => {
    const i = next++;
    return {
      path: '/hooks/delivery',
      body: JSON.stringify({
        eventId: `${PREFIX}${i}:sent`,
        customerMessageId: benchCustomerId(PREFIX, i),
        messageId: benchProviderId(PREFIX, i),
        status: 'sent',
        timestamp: new Date().toISOString(),
        channel: 'sms',
      }),
    };
  };
  const load = () =>
    runLoad({
      url: ctx.server.url,
      seconds: ctx.seconds,
      connections: 50,
      rate: RATE,
      headers: CALLBACK_HEADERS,
      request,
    });
  const count = async (query: string) => Number((await ctx.db.sql.unsafe(query))[0]!.n);
  const api = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${ctx.server.url}${path}`, {
      method,
      headers: { 'content-type': 'application/json' },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
    const answer = (await res.json()) as Record<string, unknown>;
    if (res.status >= 300)
      throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(answer)}`);
    return answer;
  };

  ctx.log('(g) warming up');
  // at most `warm` callbacks: uncapped, a fast server took more in its 2 s than were seeded
  // for it, and the last phase ran past the seeded messages (callbacks with no message to
  // move record no event: 4783 events for 5000 callbacks in run 2026-11-28T12-53-45Z)
  await runLoad({
    url: ctx.server.url,
    seconds: 2,
    connections: 10,
    headers: CALLBACK_HEADERS,
    request,
    maxRequests: warm,
  });

  ctx.log(`(g) phase 1: ${RATE} callbacks/s, no endpoint`);
  let meter = await cpuMeter(ctx.server.pid, ctx.db);
  const baselineLoad = await load();
  const baseline = { load: baselineLoad, cpu: await meter.stop(baselineLoad.requests) };
  if ((await count('select count(*)::int as n from outgoing_events')) !== 0)
    throw new Error('events were recorded with no endpoint');

  // the endpoint is made disabled, so that the receiver can start with its secret first
  const made = await api('POST', '/v1/endpoints', {
    url: 'http://127.0.0.1:9/',
    name: 'bench-receiver',
    events: ['message.status'],
    enabled: false,
  });
  const receiptsFile = join(dirname(ctx.server.logFile), 'event-receipts.log');
  writeFileSync(receiptsFile, '');
  const startReceiver = (port: number) =>
    spawnChild({
      name: 'event-receiver',
      entry: 'bench/event-receiver.ts',
      env: { PORT: String(port), SECRET: String(made.secret), LOG: receiptsFile },
      ready: LISTENING,
      logDir: dirname(ctx.server.logFile),
    });
  let receiver: Child = await startReceiver(0);
  const port = receiver.port;
  await api('PATCH', `/v1/endpoints/${made.id}`, { url: receiver.url, enabled: true });

  const drained = async (deadlineMs: number) => {
    const deadline = Date.now() + deadlineMs;
    for (;;) {
      const left = await count(
        "select count(*)::int as n from event_deliveries where state <> 'delivered'",
      );
      if (left === 0) return;
      if (Date.now() > deadline) throw new Error(`${left} deliveries still not delivered`);
      await sleep(50);
    }
  };
  const phase = async (during?: () => Promise<void>): Promise<EventsPhase> => {
    const eventsBefore = await count('select count(*)::int as n from outgoing_events');
    const started = Date.now();
    meter = await cpuMeter(ctx.server.pid, ctx.db);
    const [phaseLoad] = await Promise.all([load(), during?.()]);
    await drained(120_000);
    const seconds = (Date.now() - started) / 1000;
    const events = (await count('select count(*)::int as n from outgoing_events')) - eventsBefore;
    const cpu = await meter.stop(events);
    return {
      load: phaseLoad,
      events,
      seconds: round(seconds, 1),
      eventsPerSecond: round(events / seconds, 0),
      cpu,
    };
  };

  ctx.log(`(g) phase 2: ${RATE} callbacks/s, each an event to the receiver`);
  const steadyFrom = readReceipts(receiptsFile).receipts.length;
  const steady = await phase();
  const firstReceipts = new Map<string, Receipt>();
  for (const r of readReceipts(receiptsFile).receipts.slice(steadyFrom)) {
    if (!firstReceipts.has(r.id)) firstReceipts.set(r.id, r);
  }
  const latencies = [...firstReceipts.values()]
    .map((r) => r.receivedMs - r.eventMs)
    .sort((a, b) => a - b);
  const perCallback = baseline.cpu.switchboardUsPerRequest + baseline.cpu.postgresUsPerRequest;
  const perEvent =
    steady.cpu.switchboardUsPerRequest + steady.cpu.postgresUsPerRequest - perCallback;

  ctx.log('(g) phase 3: the receiver killed halfway and started again');
  const restart = await phase(async () => {
    await sleep((ctx.seconds * 1000) / 2);
    await receiver.stop('SIGKILL');
    await sleep(1000);
    receiver = await startReceiver(port);
  });
  await receiver.stop();
  // the parts after this one measure without endpoints, as before this part existed
  await api('DELETE', `/v1/endpoints/${made.id}`);

  const all = readReceipts(receiptsFile);
  const ids = (await ctx.db.sql`select id::text as id from outgoing_events`).map(
    (r) => `evt_${String(r.id).replaceAll('-', '')}`,
  );
  const seen = new Map<string, string>();
  let duplicates = 0;
  let duplicatesDiffering = 0;
  for (const r of all.receipts) {
    const first = seen.get(r.id);
    if (first === undefined) seen.set(r.id, r.sha);
    else {
      duplicates++;
      if (first !== r.sha) duplicatesDiffering++;
    }
  }
  const lost = ids.filter((id) => !seen.has(id)).length;

  return {
    rate: RATE,
    baseline,
    steady: {
      ...steady,
      latency: {
        p50: percentile(latencies, 50),
        p99: percentile(latencies, 99),
        max: latencies.at(-1) ?? Number.NaN,
      },
      eventCpuUs: perEvent,
      callbackCpuUs: perCallback,
      ratio: round(perEvent / perCallback, 2),
    },
    restart: {
      ...restart,
      received: seen.size,
      lost,
      duplicates,
      duplicatesDiffering,
      invalid: all.invalid,
    },
  };
}
