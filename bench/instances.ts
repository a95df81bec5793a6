/**
 * `npm run bench:instances`: several Switchboard instances behind a round-robin proxy on one
 * Postgres (issue 27, point 5), on real Postgres (DATABASE_URL, default the test server; a
 * database of its own, `sb_bench_<random>`, dropped at the end).
 *
 * - Children on loopback, as `npm run bench` starts them (bench/lib/children.ts): the
 *   sandbox (bench/sandbox-server.ts with SANDBOX_CALLBACK_URL: it calls back to the
 *   proxy), the round-robin proxy (bench/lib/round-robin.ts in
 *   bench/instances/proxy-server.ts, its CPU its own, on one port for the whole run) and
 *   three Switchboard processes (`dist/main.js`, built by scripts/build.mjs, run with npm
 *   start's node flags), each on its own PORT, all with PUBLIC_URL the proxy, so the
 *   sandbox's callbacks and the calls' webhooks spread over them too.
 * - All three run from the start; a measurement with n instances restarts the proxy (same
 *   port) in front of the first n, the others idle (their loops poll the database). n = 1,
 *   2, 3 alternate, BENCH_ROUNDS times (default 3), and the table shows medians: on a machine
 *   shared with other work, the load drifts over minutes, and alternating spreads the drift
 *   over every n alike.
 * - For each n, through the proxy: (a) delivery callbacks at saturation (50 connections) and
 *   at each rate of BENCH_INSTANCES_RATES offered (default 250,500: the shared 2-core VM's
 *   saturation is near 500), requests/s in all and per instance, p99, CPU per request per
 *   instance, callbacks per commit (the group commit's batch); (b) BENCH_INSTANCES_MESSAGES
 *   (default 20 000) messages accepted by POST /v1/messages, 250 a request, and the time
 *   until the outbox is empty, and which instance dispatched them; (c) BENCH_INSTANCES_CALLS
 *   (default 200) calls of bench/flows' appointment reminder started by POST /v1/calls, the
 *   sandbox answering each and pressing 1, until every call has ended.
 * - Nothing lost or duplicated: every callback answered 2xx stored once in the inbox; every
 *   accepted message in the sandbox's own records exactly once; every call ended, with its
 *   follow-up SMS sent once; every callback and webhook the sandbox made answered and stored.
 * - Leadership: the leader lock's holders (pg_locks, bench/instances/leader.ts) sampled every
 *   100 ms through the whole run; then, with 3 instances and 60 000 messages queued, the
 *   leader is SIGKILLed mid-drain: the time until another holds the lock and until the
 *   sandbox accepts the next message; then the new leader is SIGSTOPped for 5 s (a hung
 *   process, its connections open): whether the lock moves, and how soon.
 * - Prints a table and writes `bench/results/instances-<timestamp>.json`.
 *
 * BENCH_SECONDS (default 10) sets each load's length; BENCH_SCALE (default 1) scales the
 * message and call counts; BENCH_INSTANCES (default 1,2,3) the instance counts;
 * BENCH_KEEP_LOGS=1 keeps the children's logs.
 *
 * @example
 * BENCH_SECONDS=5 BENCH_SCALE=0.2 npm run bench:instances
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { startFlags } from '../scripts/start-flags.ts';
import { LEADER_IDLE_TIMEOUT_MS, openDatabase } from '../src/db/client.ts';
import { migrateDatabase } from '../src/db/migrate.ts';
import { CALLBACK_HEADERS, CALLBACK_TOKEN, round, sleep } from './context.ts';
import { becameLeaderAt, type LeaderSeen, leaderHolders, watchLeader } from './instances/leader.ts';
import { type Child, LISTENING, ROOT, spawnChild } from './lib/children.ts';
import {
  type BenchDatabase,
  createBenchDatabase,
  DEFAULT_ADMIN_URL,
  seedMessages,
} from './lib/database.ts';
import { benchCustomerId, benchIdInSet, benchIdPattern, benchProviderId } from './lib/ids.ts';
import { type LoadResult, runLoad } from './lib/load.ts';
import {
  cpuSeconds,
  machineShare,
  machineTicks,
  metricValue,
  postgresSampler,
  scrape,
} from './lib/metrics.ts';
import { printGrid } from './lib/report.ts';
import { median, peerRounds } from './peers.ts';

const FLOW = 'appointment-reminder';
const HOUR = 3_600_000;

interface Setup {
  db: BenchDatabase;
  sandbox: Child;
  proxy: Child;
  instances: Child[];
  log(message: string): void;
  seconds: number;
}

/** What each instance and the rest used over one window. */
interface Usage {
  /** requests each instance answered on the route(s) measured, from its own /metrics */
  perInstance: {
    name: string;
    requests: number;
    rps: number;
    cpuSeconds: number;
    cpuUsPerRequest: number;
  }[];
  proxyCpuUsPerRequest: number;
  postgresCpuUsPerRequest: number;
  sandboxCpuSeconds: number;
}

/** Counts a window: `stop(total)` reads each instance's route counters and every CPU. */
async function usageMeter(s: Setup, count: (metrics: string) => number) {
  const metrics = await Promise.all(s.instances.map((i) => scrape(i.url)));
  const before = s.instances.map((i, k) => ({ cpu: cpuSeconds(i.pid), n: count(metrics[k]!) }));
  const proxyCpu = cpuSeconds(s.proxy.pid);
  const sandboxCpu = cpuSeconds(s.sandbox.pid);
  const pg = postgresSampler(s.db.sql, s.db.name);
  await pg.sample();
  const started = performance.now();
  return {
    /** samples Postgres's processes (call it while a long window runs: backends come and go) */
    sample: () => pg.sample(),
    async stop(total: number, seconds = (performance.now() - started) / 1000): Promise<Usage> {
      await pg.sample();
      const after = await Promise.all(s.instances.map((i) => scrape(i.url)));
      const t = pg.totals();
      const per = (cpu: number, n: number) => (n > 0 ? Math.round((cpu * 1e6) / n) : 0);
      return {
        perInstance: s.instances.map((i, k) => {
          const n = count(after[k]!) - before[k]!.n;
          const cpu = cpuSeconds(i.pid) - before[k]!.cpu;
          return {
            name: i.name,
            requests: n,
            rps: round(n / seconds, 0),
            cpuSeconds: round(cpu, 2),
            cpuUsPerRequest: per(cpu, n),
          };
        }),
        proxyCpuUsPerRequest: per(cpuSeconds(s.proxy.pid) - proxyCpu, total),
        postgresCpuUsPerRequest: per(t.backends + t.autovacuum + t.shared, total),
        sandboxCpuSeconds: round(cpuSeconds(s.sandbox.pid) - sandboxCpu, 2),
      };
    },
  };
}

const requestsOn =
  (...routes: string[]) =>
  (text: string) =>
    routes.reduce((a, route) => a + metricValue(text, 'http_requests_total', { route }), 0);

const ok = (r: LoadResult) =>
  Object.entries(r.statuses)
    .filter(([s]) => s.startsWith('2'))
    .reduce((a, [, n]) => a + n, 0);

export interface IngestRun {
  load: LoadResult;
  usage: Usage;
  /**
   * transactions that stored this load's callbacks (distinct xmin of their inbox rows), and
   * callbacks per transaction: the group commit's batch, smaller when the load is split
   */
  commits: number;
  callbacksPerCommit: number;
}

export interface IngestPart {
  saturation: IngestRun;
  /** one run per offered rate of the ladder (open loop) */
  offered: IngestRun[];
  /** inbox rows stored during both loads, distinct bodies among them, and 2xx answered */
  stored: number;
  distinctBodies: number;
  acknowledged: number;
}

const INGEST_PREFIX = 'ia-';

/** (a): unique delivery callbacks (sent, then delivered) for messages seeded once. */
async function ingestPart(
  s: Setup,
  n: number,
  pass: number,
  messages: number,
  rates: number[],
): Promise<IngestPart> {
  let seq = 0;
  const request = () => {
    const k = seq++;
    const i = 1 + (k % messages);
    const status = Math.floor(k / messages) % 2 === 0 ? 'sent' : 'delivered';
    return {
      path: '/hooks/delivery',
      body: JSON.stringify({
        eventId: `${INGEST_PREFIX}${i}:${status}:${n}.${pass}:${k}`,
        customerMessageId: benchCustomerId(INGEST_PREFIX, i),
        messageId: benchProviderId(INGEST_PREFIX, i),
        status,
        timestamp: new Date().toISOString(),
        channel: 'sms',
      }),
    };
  };
  const load = (rate?: number) =>
    runLoad({
      url: s.proxy.url,
      seconds: s.seconds,
      connections: 50,
      ...(rate !== undefined && { rate }),
      headers: CALLBACK_HEADERS,
      request,
    });
  s.log(`(a) n=${n}, round ${pass}: warming up`);
  // the first time, each instance gets 1/n of it: long enough for the newest one's JIT to
  // settle; later, only the proxy's new connections
  await runLoad({
    url: s.proxy.url,
    seconds: pass === 1 ? 5 : 2,
    connections: 20,
    headers: CALLBACK_HEADERS,
    request,
  });
  const fromId = (
    await s.db.sql<{ id: number }[]>`
    select coalesce(max(id), 0)::bigint as id from inbox`
  )[0]!.id;
  const measure = async (rate?: number): Promise<IngestRun> => {
    const lastId = (
      await s.db.sql<{ id: number }[]>`select coalesce(max(id), 0)::bigint as id from inbox`
    )[0]!.id;
    const meter = await usageMeter(s, requestsOn('/hooks/delivery'));
    const result = await load(rate);
    const usage = await meter.stop(result.requests, result.seconds);
    const [tx] = await s.db.sql<{ n: number; commits: number }[]>`
      select count(*)::int as n, count(distinct xmin::text)::int as commits from inbox
      where kind = 'delivery' and id > ${lastId}`;
    return {
      load: result,
      usage,
      commits: tx!.commits,
      callbacksPerCommit: tx!.commits > 0 ? round(tx!.n / tx!.commits, 1) : 0,
    };
  };
  s.log(`(a) n=${n}, round ${pass}: saturation, 50 connections`);
  const saturation = await measure();
  const offered: IngestRun[] = [];
  for (const rate of rates) {
    s.log(`(a) n=${n}, round ${pass}: ${rate}/s offered`);
    offered.push(await measure(rate));
  }
  const [row] = await s.db.sql<{ n: number; bodies: number }[]>`
    select count(*)::int as n, count(distinct body)::int as bodies from inbox
    where kind = 'delivery' and id > ${fromId}`;
  return {
    saturation,
    offered,
    stored: row!.n,
    distinctBodies: row!.bodies,
    acknowledged: [saturation, ...offered].reduce((a, r) => a + ok(r.load), 0),
  };
}

export interface DispatchPart {
  messages: number;
  /** from the first POST to the last accepted answer */
  acceptSeconds: number;
  /** from the first POST until the outbox was empty */
  seconds: number;
  messagesPerSecond: number;
  /** POST /v1/messages answered 202, and messages they accepted */
  posts: number;
  accepted: number;
  /** messages each instance sent to the sandbox (its switchboard_messages_dispatched_total) */
  dispatchedBy: Record<string, number>;
  usage: Usage;
}

function phone(prefix: string, i: number): string {
  return `${prefix}${String(i).padStart(12 - prefix.length + 1, '0')}`;
}

/** Runs `count` tasks, `concurrency` at a time. */
async function pool(count: number, concurrency: number, task: (i: number) => Promise<void>) {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) await task(next++);
    }),
  );
}

async function waitFor(what: string, timeoutMs: number, done: () => Promise<boolean>) {
  const deadline = Date.now() + timeoutMs;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`${what}: not done after ${timeoutMs / 1000} s`);
    await sleep(100);
  }
}

const outboxEmpty = async (s: Setup) =>
  !(await s.db.sql`select exists(select 1 from outbox) as waiting`)[0]!.waiting;

/** (b): `messages` SMS through the proxy, 250 a request, 4 requests at a time. */
/** The customerMessageId prefix of (b)'s messages in round `round` with `n` instances. */
const dispatchPrefix = (n: number, pass: number) => `ib${n}.${pass}-`;

async function dispatchPart(
  s: Setup,
  n: number,
  pass: number,
  messages: number,
): Promise<DispatchPart> {
  const per = 250;
  const prefix = dispatchPrefix(n, pass);
  const dispatched = dispatchedCount();
  const before = await Promise.all(s.instances.map((i) => scrape(i.url)));
  const meter = await usageMeter(s, requestsOn('/v1/messages'));
  s.log(`(b) n=${n}, round ${pass}: ${messages} messages through POST /v1/messages`);
  let posts = 0;
  let accepted = 0;
  const start = performance.now();
  await pool(Math.ceil(messages / per), 4, async (r) => {
    const batch = Array.from({ length: Math.min(per, messages - r * per) }, (_, k) => {
      const i = r * per + k + 1;
      return {
        type: 'sms',
        from: 'Bench',
        to: phone('+38050', i),
        text: `Your order ${i} is on its way`,
        customerMessageId: benchCustomerId(prefix, i),
      };
    });
    const res = await fetch(`${s.proxy.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ messages: batch }),
    });
    const body = (await res.json()) as { messages?: { status: string }[] };
    if (res.status !== 202)
      throw new Error(`POST /v1/messages: ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
    posts++;
    accepted += body.messages?.filter((m) => m.status === 'queued').length ?? 0;
  });
  const acceptSeconds = (performance.now() - start) / 1000;
  await waitFor('(b) outbox', 300_000, async () => {
    await meter.sample();
    return outboxEmpty(s);
  });
  const seconds = (performance.now() - start) / 1000;
  const after = await Promise.all(s.instances.map((i) => scrape(i.url)));
  return {
    messages,
    acceptSeconds: round(acceptSeconds, 2),
    seconds: round(seconds, 2),
    messagesPerSecond: round(messages / seconds, 0),
    posts,
    accepted,
    dispatchedBy: Object.fromEntries(
      s.instances.map((i, k) => [i.name, dispatched(after[k]!) - dispatched(before[k]!)]),
    ),
    usage: await meter.stop(posts, seconds),
  };
}

/** Messages an instance has sent so far that the provider accepted, from its /metrics. */
function dispatchedCount() {
  return (text: string) =>
    metricValue(text, 'switchboard_messages_dispatched_total', { result: 'accepted' });
}

export interface CallsPart {
  calls: number;
  started: number;
  /** from the first POST /v1/calls until every call had ended */
  seconds: number;
  callsPerSecond: number;
  ended: number;
  confirmed: number;
  /** speech webhooks, delivery callbacks and POST /v1/calls each instance answered */
  byInstance: Record<string, { webhooks: number; callbacks: number; starts: number }>;
  /** what the sandbox made during the part: callbacks and webhooks by final state */
  sandboxCallbacks: Record<string, number>;
  /** the sandbox's webhooks and callbacks answered 2xx, against inbox rows stored meanwhile */
  answered: { webhooks: number; callbacks: number };
  stored: { speechcall: number; delivery: number };
  usage: Usage;
}

interface SandboxCallback {
  id: string;
  kind: string;
  state: string;
  createdAt: string;
  attempts: { status?: number }[];
}

async function sandboxJson<T>(s: Setup, path: string, init?: RequestInit): Promise<T> {
  const res = await fetch(`${s.sandbox.url}${path}`, init);
  if (!res.ok) throw new Error(`sandbox ${path}: ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}

const setTimings = (s: Setup, timings: Record<string, number>) =>
  sandboxJson(s, '/_control/options', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ timings }),
  });

/**
 * (c): `calls` calls through the proxy; the sandbox sends each, answers it half a second
 * later and presses 1 (a script per number), which records `confirmed`, sends an SMS and
 * hangs up. Every webhook and callback goes to the proxy.
 */
/** The numbers (c) calls in round `round` with `n` instances start with. */
const callPrefix = (n: number, pass: number) => `+38067${pass % 10}${n}`;

async function callsPart(s: Setup, n: number, pass: number, calls: number): Promise<CallsPart> {
  const prefix = callPrefix(n, pass);
  const numbers = Array.from({ length: calls }, (_, i) => phone(prefix, i + 1));
  await sandboxJson(s, '/_control/scripts', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ scripts: numbers.map((to) => ({ to, keys: ['1'] })) }),
  });
  const since = new Date();
  const fromId = (
    await s.db.sql<{ id: number }[]>`
    select coalesce(max(id), 0)::bigint as id from inbox`
  )[0]!.id;
  const before = await Promise.all(s.instances.map((i) => scrape(i.url)));
  const meter = await usageMeter(
    s,
    requestsOn('/hooks/speechcall', '/hooks/delivery', '/v1/calls'),
  );
  await setTimings(s, { sentAfterMs: 200, deliveredAfterMs: 500 });
  s.log(`(c) n=${n}, round ${pass}: ${calls} calls through POST /v1/calls`);
  let started = 0;
  const start = performance.now();
  let seconds = 0;
  const made = () =>
    sandboxJson<SandboxCallback[]>(s, '/_control/callbacks').then((all) =>
      all.filter((c) => Date.parse(c.createdAt) >= since.getTime()),
    );
  try {
    await pool(calls, 8, async (i) => {
      const res = await fetch(`${s.proxy.url}/v1/calls`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          flow: FLOW,
          from: 'Clinic',
          to: numbers[i],
          vars: { name: `Client ${i}`, date: '2026-12-01 10:00' },
        }),
      });
      if (res.status >= 300)
        throw new Error(`POST /v1/calls: ${res.status} ${(await res.text()).slice(0, 300)}`);
      await res.arrayBuffer();
      started++;
    });
    await waitFor('(c) calls', 180_000, async () => {
      await meter.sample();
      const [row] = await s.db.sql<{ n: number }[]>`
        select count(*)::int as n from calls where "to" like ${`${prefix}%`}
        and state in ('ended', 'failed')`;
      return row!.n >= calls;
    });
    seconds = (performance.now() - start) / 1000;
    // the follow-up SMS go out, and the sandbox's callbacks for them come back; the short
    // timings stay until then, or an SMS sent after the change would wait an hour
    await waitFor('(c) follow-ups', 60_000, () => outboxEmpty(s));
    // every call and its SMS at the end of its life in the sandbox (delivered: no callback
    // left to make), then no callback of theirs still being tried
    const delivered = async (type: string) =>
      (
        await sandboxJson<{ to: string }[]>(s, `/_control/messages?type=${type}&status=delivered`)
      ).filter((m) => m.to.startsWith(prefix)).length;
    await waitFor(
      '(c) sandbox lifecycles',
      60_000,
      async () => (await delivered('speechcall')) >= calls && (await delivered('sms')) >= calls,
    );
    await waitFor('(c) sandbox callbacks', 60_000, async () =>
      (await made()).every((c) => c.state !== 'pending'),
    );
  } finally {
    await setTimings(s, { sentAfterMs: HOUR, deliveredAfterMs: 2 * HOUR });
  }
  const after = await Promise.all(s.instances.map((i) => scrape(i.url)));
  const usage = await meter.stop(started, seconds);
  const records = await made();
  const sandboxCallbacks: Record<string, number> = {};
  for (const c of records) {
    const key = `${c.kind} ${c.state}`;
    sandboxCallbacks[key] = (sandboxCallbacks[key] ?? 0) + 1;
  }
  const answered = (kind: string) =>
    records.filter(
      (c) =>
        c.kind === kind && c.attempts.some((a) => (a.status ?? 0) < 300 && (a.status ?? 0) >= 200),
    ).length;
  const [state] = await s.db.sql<{ ended: number; confirmed: number }[]>`
    select count(*) filter (where state = 'ended')::int as ended,
           count(*) filter (where outcome = 'confirmed')::int as confirmed
    from calls where "to" like ${`${prefix}%`}`;
  const stored = await s.db.sql<{ kind: string; n: number }[]>`
    select kind, count(*)::int as n from inbox where id > ${fromId} group by kind`;
  const storedOf = (kind: string) => stored.find((r) => r.kind === kind)?.n ?? 0;
  const delta = (k: number, route: string) =>
    requestsOn(route)(after[k]!) - requestsOn(route)(before[k]!);
  return {
    calls,
    started,
    seconds: round(seconds, 2),
    callsPerSecond: round(calls / seconds, 1),
    ended: state!.ended,
    confirmed: state!.confirmed,
    byInstance: Object.fromEntries(
      s.instances.map((i, k) => [
        i.name,
        {
          webhooks: delta(k, '/hooks/speechcall'),
          callbacks: delta(k, '/hooks/delivery'),
          starts: delta(k, '/v1/calls'),
        },
      ]),
    ),
    sandboxCallbacks,
    answered: { webhooks: answered('webhook'), callbacks: answered('delivery') },
    stored: { speechcall: storedOf('speechcall'), delivery: storedOf('delivery') },
    usage,
  };
}

export interface Handover {
  messages: number;
  killed: string;
  /** kill to the new leader's "became dispatcher leader" log line, and who */
  lockMs: number | null;
  newLeader: string | null;
  /** kill to the first sample (every ~10 ms) of pg_locks showing another holder */
  lockSeenMs: number | null;
  /**
   * kill to the sandbox's first acceptance of the new leader's first messagelist (the first
   * list begun after that leader's first claim)
   */
  nextSentMs: number | null;
  /**
   * kill to the new leader's first round: the claim time its sends are recorded with
   * (messages.updated_at), also when the sandbox refuses them as repeats
   */
  nextClaimMs: number | null;
  /**
   * the dead leader's messages the sandbox accepted after the kill: its last request, in
   * flight; their answer was never recorded, so the new leader sends them again, and the
   * sandbox refuses the repeated customerMessageIds (read as sent, src/messages/dispatcher.ts)
   */
  deadLeaderAcceptedAfterKill: number;
  /** kill to the outbox empty */
  drainSeconds: number;
}

const HANDOVER_PREFIX = 'ih-';

/** SIGKILLs the leader once it has begun on `messages` queued ones; the rest is measured. */
async function handover(
  s: Setup,
  messages: number,
): Promise<{ result: Handover; killedAt: number; lockAt?: number }> {
  const names = await leaderHolders(s.db.sql);
  const leader = s.instances.find((i) => names.includes(i.name));
  if (!leader || names.length !== 1)
    throw new Error(`handover: leader holders ${JSON.stringify(names)}`);
  const dispatched = dispatchedCount();
  const before = dispatched(await scrape(leader.url));
  s.log(`(handover) ${messages} messages queued; leader ${leader.name} to be killed once it sends`);
  await seedMessages(s.db.sql, {
    prefix: HANDOVER_PREFIX,
    count: messages,
    outbox: true,
    analyze: false,
  });
  await waitFor(
    '(handover) first send',
    60_000,
    async () => dispatched(await scrape(leader.url)) > before,
  );
  const killedAt = Date.now();
  const killed = performance.now();
  leader.process.kill('SIGKILL');
  let lockSeenMs: number | null = null;
  const deadline = killed + 30_000;
  while (performance.now() < deadline) {
    const now = await leaderHolders(s.db.sql);
    if (now.length > 0 && !now.includes(leader.name)) {
      lockSeenMs = round(performance.now() - killed, 0);
      break;
    }
    await sleep(10);
  }
  await waitFor('(handover) outbox', 300_000, () => outboxEmpty(s));
  const drainSeconds = round((performance.now() - killed) / 1000, 2);
  const [recorded] = await s.db.sql<{ at: Date | null }[]>`
    select min(updated_at) as at from messages
    where customer_message_id like ${benchIdPattern(HANDOVER_PREFIX)} and updated_at > ${new Date(killedAt)}`;
  s.instances = s.instances.filter((i) => i !== leader);
  let lockAt: number | undefined;
  let newLeader: string | null = null;
  // the new leader's log line may land after its lock shows in pg_locks: wait for it
  await waitFor("(handover) the new leader's log line", 10_000, async () => {
    for (const i of s.instances) {
      const at = becameLeaderAt(readFileSync(i.logFile, 'utf8'), killedAt);
      if (at !== undefined && (lockAt === undefined || at < lockAt)) {
        lockAt = at;
        newLeader = i.name;
      }
    }
    return lockAt !== undefined;
  }).catch(() => s.log('(handover) no instance logged that it became the leader'));
  return {
    killedAt,
    ...(lockAt !== undefined && { lockAt }),
    result: {
      messages,
      killed: leader.name,
      lockMs: lockAt === undefined ? null : lockAt - killedAt,
      newLeader,
      lockSeenMs,
      nextSentMs: null,
      nextClaimMs: recorded?.at ? recorded.at.getTime() - killedAt : null,
      deadLeaderAcceptedAfterKill: 0,
      drainSeconds,
    },
  };
}

export interface FrozenLeader {
  leader: string;
  stoppedMs: number;
  /** holders seen while it was stopped (sampled every 100 ms) */
  holdersSeen: string[];
  lockMoved: boolean;
  /** from SIGSTOP until another instance was seen holding the lock */
  movedAfterMs?: number;
}

/**
 * A leader that hangs instead of dying: SIGSTOP for `ms`, then SIGCONT. Its connections stay
 * open; Postgres ends its idle leader session after LEADER_IDLE_TIMEOUT_MS (src/db/client.ts),
 * and another instance, waiting for the lock in Postgres, has it at once: the lock is expected
 * to move.
 */
async function frozenLeader(s: Setup, ms: number): Promise<FrozenLeader | undefined> {
  const names = await leaderHolders(s.db.sql);
  const leader = s.instances.find((i) => names.includes(i.name));
  if (!leader) return undefined;
  s.log(`(frozen) SIGSTOP ${leader.name} for ${ms} ms`);
  const seen = new Set<string>();
  let movedAfterMs: number | undefined;
  leader.process.kill('SIGSTOP');
  const start = performance.now();
  try {
    while (performance.now() - start < ms) {
      for (const h of await leaderHolders(s.db.sql)) {
        seen.add(h);
        if (h !== leader.name) movedAfterMs ??= Math.round(performance.now() - start);
      }
      await sleep(100);
    }
  } finally {
    leader.process.kill('SIGCONT');
  }
  const holdersSeen = [...seen];
  return {
    leader: leader.name,
    stoppedMs: ms,
    holdersSeen,
    lockMoved: holdersSeen.some((h) => h !== leader.name),
    ...(movedAfterMs !== undefined && { movedAfterMs }),
  };
}

interface SandboxMessage {
  messagelistId: number;
  customerMessageId: string | null;
  type: string;
  to: string;
  acceptedAt: string;
}

/** Each prefix's messages in the sandbox's records: how many, how many distinct ids. */
function sentOnce(all: SandboxMessage[], prefix: string, expected: number) {
  const ids = all
    .map((m) => m.customerMessageId)
    .filter((id): id is string => benchIdInSet(id, prefix));
  const distinct = new Set(ids).size;
  return {
    expected,
    inSandbox: ids.length,
    distinct,
    missing: expected - distinct,
    duplicates: ids.length - distinct,
  };
}

type Sent = Record<string, ReturnType<typeof sentOnce>>;

/** Per n: the medians over its rounds, each round's headline figure, and the checks summed. */
function summarize(rounds: Round[], counts: number[], sent: Sent) {
  const med = (xs: number[]) => round(median(xs), 1);
  return counts.map((n) => {
    const rs = rounds.filter((r) => r.instances === n);
    const sat = rs.map((r) => r.ingest.saturation);
    const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
    const bySent = (part: string) => {
      const checks = rs.map(
        (r) => sent[`${part} n=${n}, round ${r.round}${part === '(c)' ? ' follow-ups' : ''}`]!,
      );
      return {
        once: sum(checks.map((c) => c.distinct)),
        missing: sum(checks.map((c) => c.missing)),
        duplicates: sum(checks.map((c) => c.duplicates)),
      };
    };
    const perName = <T>(pick: (r: Round) => Record<string, T>) =>
      rs.map(pick).reduce<Record<string, T[]>>((acc, rec) => {
        for (const [k, v] of Object.entries(rec)) {
          acc[k] = [...(acc[k] ?? []), v];
        }
        return acc;
      }, {});
    return {
      instances: n,
      rounds: rs.length,
      ingest: {
        rpsByRound: sat.map((x) => x.load.rps),
        rps: med(sat.map((x) => x.load.rps)),
        p99: med(sat.map((x) => x.load.p99)),
        perInstanceRps: Object.fromEntries(
          Object.entries(
            perName((r) =>
              Object.fromEntries(r.ingest.saturation.usage.perInstance.map((i) => [i.name, i])),
            ),
          ).map(([k, v]) => [k, med(v.map((i) => i.rps))]),
        ),
        perInstanceCpuUsPerRequest: Object.fromEntries(
          Object.entries(
            perName((r) =>
              Object.fromEntries(r.ingest.saturation.usage.perInstance.map((i) => [i.name, i])),
            ),
          ).map(([k, v]) => [k, med(v.map((i) => i.cpuUsPerRequest))]),
        ),
        proxyCpuUsPerRequest: med(sat.map((x) => x.usage.proxyCpuUsPerRequest)),
        postgresCpuUsPerRequest: med(sat.map((x) => x.usage.postgresCpuUsPerRequest)),
        callbacksPerCommit: med(sat.map((x) => x.callbacksPerCommit)),
        offered: rs[0]!.ingest.offered.map((o, k) => ({
          rate: o.load.offered,
          p99: med(rs.map((r) => r.ingest.offered[k]!.load.p99)),
          rps: med(rs.map((r) => r.ingest.offered[k]!.load.rps)),
        })),
        stored: sum(rs.map((r) => r.ingest.stored)),
        distinctBodies: sum(rs.map((r) => r.ingest.distinctBodies)),
        acknowledged: sum(rs.map((r) => r.ingest.acknowledged)),
      },
      dispatch: {
        messagesPerSecondByRound: rs.map((r) => r.dispatch.messagesPerSecond),
        messagesPerSecond: med(rs.map((r) => r.dispatch.messagesPerSecond)),
        seconds: med(rs.map((r) => r.dispatch.seconds)),
        dispatchedBy: Object.fromEntries(
          Object.entries(perName((r) => r.dispatch.dispatchedBy)).map(([k, v]) => [k, sum(v)]),
        ),
        sandbox: bySent('(b)'),
      },
      calls: {
        callsPerSecondByRound: rs.map((r) => r.calls.callsPerSecond),
        callsPerSecond: med(rs.map((r) => r.calls.callsPerSecond)),
        calls: sum(rs.map((r) => r.calls.calls)),
        ended: sum(rs.map((r) => r.calls.ended)),
        confirmed: sum(rs.map((r) => r.calls.confirmed)),
        byInstance: Object.fromEntries(
          Object.entries(perName((r) => r.calls.byInstance)).map(([k, v]) => [
            k,
            { webhooks: sum(v.map((x) => x.webhooks)), callbacks: sum(v.map((x) => x.callbacks)) },
          ]),
        ),
        answered: {
          webhooks: sum(rs.map((r) => r.calls.answered.webhooks)),
          callbacks: sum(rs.map((r) => r.calls.answered.callbacks)),
        },
        stored: {
          speechcall: sum(rs.map((r) => r.calls.stored.speechcall)),
          delivery: sum(rs.map((r) => r.calls.stored.delivery)),
        },
        followUps: bySent('(c)'),
      },
    };
  });
}

function printSummary(summary: ReturnType<typeof summarize>, rates: number[], rounds: number) {
  const values = (o: Record<string, number>) => Object.values(o).join(' / ');
  console.log(`medians of ${rounds} round(s) per n, n = 1, 2, 3 alternating; checks summed`);
  printGrid(
    [
      'n',
      '(a) sat. req/s by round',
      'median',
      'per instance',
      'p99 ms',
      'CPU us/req per instance (+ proxy, Postgres)',
      'callbacks/commit',
      ...rates.map((rate) => `${rate}/s: p99 ms (answered/s)`),
      'stored / 2xx',
    ],
    summary.map((x) => {
      const a = x.ingest;
      return [
        String(x.instances),
        a.rpsByRound.join(', '),
        String(a.rps),
        values(a.perInstanceRps),
        String(a.p99),
        `${values(a.perInstanceCpuUsPerRequest)} (+ ${a.proxyCpuUsPerRequest}, ${a.postgresCpuUsPerRequest})`,
        String(a.callbacksPerCommit),
        ...a.offered.map((o) => `${o.p99} (${o.rps})`),
        `${a.stored} / ${a.acknowledged}${a.distinctBodies === a.stored ? '' : ' DUPLICATE BODIES'}`,
      ];
    }),
  );
  console.log('');
  printGrid(
    [
      'n',
      '(b) msg/s by round',
      'median',
      'all sent in s',
      'dispatched by',
      'sandbox: once / missing / dup',
    ],
    summary.map((x) => {
      const b = x.dispatch;
      return [
        String(x.instances),
        b.messagesPerSecondByRound.join(', '),
        String(b.messagesPerSecond),
        String(b.seconds),
        Object.entries(b.dispatchedBy)
          .map(([k, v]) => `${k}: ${v}`)
          .join(', '),
        `${b.sandbox.once} / ${b.sandbox.missing} / ${b.sandbox.duplicates}`,
      ];
    }),
  );
  console.log('');
  printGrid(
    [
      'n',
      '(c) calls/s by round',
      'median',
      'ended / confirmed / calls',
      'webhooks, callbacks per instance',
      'sandbox 2xx / inbox (webhooks; callbacks)',
      'follow-up SMS: once / missing / dup',
    ],
    summary.map((x) => {
      const c = x.calls;
      return [
        String(x.instances),
        c.callsPerSecondByRound.join(', '),
        String(c.callsPerSecond),
        `${c.ended} / ${c.confirmed} / ${c.calls}`,
        Object.entries(c.byInstance)
          .map(([k, v]) => `${k}: ${v.webhooks}, ${v.callbacks}`)
          .join('; '),
        `${c.answered.webhooks} / ${c.stored.speechcall}; ${c.answered.callbacks} / ${c.stored.delivery}`,
        `${c.followUps.once} / ${c.followUps.missing} / ${c.followUps.duplicates}`,
      ];
    }),
  );
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

interface Round {
  instances: number;
  round: number;
  ingest: IngestPart;
  dispatch: DispatchPart;
  calls: CallsPart;
  machine: { busyPercent: number; stealPercent: number };
}

async function main(): Promise<void> {
  const adminUrl = process.env.DATABASE_URL ?? DEFAULT_ADMIN_URL;
  const seconds = Number(process.env.BENCH_SECONDS ?? 10);
  const scale = Number(process.env.BENCH_SCALE ?? 1);
  const counts = (process.env.BENCH_INSTANCES ?? '1,2,3').split(',').map(Number);
  const roundCount = peerRounds();
  const rates = (process.env.BENCH_INSTANCES_RATES ?? '250,500').split(',').map(Number);
  const messages = Math.round(Number(process.env.BENCH_INSTANCES_MESSAGES ?? 20_000) * scale);
  const calls = Math.round(Number(process.env.BENCH_INSTANCES_CALLS ?? 200) * scale);
  // enough for a drain of several rounds, so the kill lands mid-drain even at a small scale
  const handoverMessages = Math.max(20_000, Math.round(60_000 * scale));
  const started = Date.now();
  const log = (m: string) =>
    console.error(`[bench:instances ${round((Date.now() - started) / 1000, 0)}s] ${m}`);
  const logDir = mkdtempSync(join(tmpdir(), 'switchboard-instances-'));
  const uptimeBefore = readFileSync('/proc/loadavg', 'utf8').trim();
  const db = await createBenchDatabase(adminUrl);
  const children: Child[] = [];
  let cleaned = false;
  const cleanup = async () => {
    if (cleaned) return;
    cleaned = true;
    await Promise.all(children.map((c) => c.stop()));
    await db.drop().catch((err: unknown) => log(`could not drop ${db.name}: ${String(err)}`));
    if (process.env.BENCH_KEEP_LOGS) log(`logs kept in ${logDir}`);
    else rmSync(logDir, { recursive: true, force: true });
  };
  process.once('SIGINT', () => void cleanup().then(() => process.exit(130)));
  try {
    log(`database ${db.name}; logs in ${logDir}; load average ${uptimeBefore}`);
    const migrator = await openDatabase({ url: db.url, maxConnections: 1 });
    await migrateDatabase(migrator);
    await migrator.close();
    const [pg] = await db.sql`select current_setting('server_version') as v`;
    execFileSync(process.execPath, ['scripts/build.mjs'], { cwd: ROOT, stdio: 'inherit' });
    const proxyPort = await freePort();
    const proxyUrl = `http://127.0.0.1:${proxyPort}`;
    const sandbox = await spawnChild({
      // names of their own: a TypeScript child is bundled to node_modules/.cache under its
      // name, and `npm run bench` (maybe running meanwhile) bundles its sandbox as "sandbox"
      name: 'instances-sandbox',
      entry: 'bench/sandbox-server.ts',
      env: {
        PORT: '0',
        SANDBOX_CALLBACK_URL: `${proxyUrl}/hooks/delivery`,
        SANDBOX_CALLBACK_TOKEN: CALLBACK_TOKEN,
        SANDBOX_KEEP_MESSAGES: String(4 * (messages * counts.length + handoverMessages)),
      },
      ready: LISTENING,
      logDir,
    });
    children.push(sandbox);
    const serverNodeArgs = startFlags();
    const instances: Child[] = [];
    const startInstance = async (k: number) => {
      const name = `sb-${k}`;
      const url = new URL(db.url);
      // each instance's sessions are named in pg_stat_activity: the leader lock's holder
      url.searchParams.set('application_name', name);
      const child = await spawnChild({
        name,
        entry: 'dist/main.js',
        env: {
          PORT: '0',
          HOST: '127.0.0.1',
          DATABASE_URL: url.toString(),
          PROVIDER_BASE_URL: sandbox.url,
          PUBLIC_URL: proxyUrl,
          CALLBACK_TOKEN,
          LOG_LEVEL: 'info',
          FLOWS_DIR: join(ROOT, 'bench/flows'),
        },
        ready: LISTENING,
        logDir,
        nodeArgs: serverNodeArgs,
      });
      children.push(child);
      instances.push(child);
    };
    let proxy: Child | undefined;
    const startProxy = async (behind: Child[]) => {
      if (proxy) await proxy.stop();
      proxy = await spawnChild({
        name: `instances-proxy-${behind.length}`,
        entry: 'bench/instances/proxy-server.ts',
        env: { PORT: String(proxyPort), UPSTREAMS: behind.map((i) => i.url).join(',') },
        ready: LISTENING,
        logDir,
      });
      children.push(proxy);
      return proxy;
    };
    const ingestMessages = Math.round(50_000 * scale);
    log(`(a) seeding ${ingestMessages} accepted messages for the callbacks to find`);
    await seedMessages(db.sql, {
      prefix: INGEST_PREFIX,
      count: ingestMessages,
      outbox: false,
      status: 'accepted',
    });

    const watch = watchLeader(db.sql, 100);
    const rounds: Round[] = [];
    // all instances up from the start; each measurement puts the first n behind the proxy,
    // n = 1, 2, 3 in turn, BENCH_ROUNDS times: the machine's other work drifts over minutes,
    // and alternating spreads that drift over every n alike
    for (let k = 1; k <= Math.max(...counts); k++) await startInstance(k);
    for (let pass = 1; pass <= roundCount; pass++) {
      for (const n of counts) {
        const behind = instances.slice(0, n);
        const s: Setup = {
          db,
          sandbox,
          proxy: await startProxy(behind),
          instances: behind,
          log,
          seconds,
        };
        const ticks = machineTicks();
        const ingest = await ingestPart(s, n, pass, ingestMessages, rates);
        const dispatch = await dispatchPart(s, n, pass, messages);
        const callsResult = await callsPart(s, n, pass, calls);
        rounds.push({
          instances: n,
          round: pass,
          ingest,
          dispatch,
          calls: callsResult,
          machine: machineShare(ticks, machineTicks()),
        });
      }
    }
    if (proxy?.name !== `instances-proxy-${instances.length}`) await startProxy(instances);
    const s: Setup = { db, sandbox, proxy: proxy!, instances: [...instances], log, seconds };
    const h = instances.length >= 2 ? await handover(s, handoverMessages) : undefined;
    // long enough for Postgres to end the hung leader's session and another to take over
    const frozen =
      s.instances.length >= 2 ? await frozenLeader(s, LEADER_IDLE_TIMEOUT_MS + 3000) : undefined;
    const leadership: LeaderSeen = watch.stop();

    log('reading the sandbox records');
    const records = await sandboxJson<SandboxMessage[]>(s, '/_control/messages');
    const sent: Sent = {};
    for (const r of rounds) {
      const tag = `n=${r.instances}, round ${r.round}`;
      sent[`(b) ${tag}`] = sentOnce(records, dispatchPrefix(r.instances, r.round), messages);
      // each call's follow-up SMS, sent once: one SMS in the sandbox per called number
      const prefix = callPrefix(r.instances, r.round);
      const sms = records.filter((m) => m.type === 'sms' && m.to.startsWith(prefix));
      const numbers = new Set(sms.map((m) => m.to)).size;
      sent[`(c) ${tag} follow-ups`] = {
        expected: calls,
        inSandbox: sms.length,
        distinct: numbers,
        missing: calls - numbers,
        duplicates: sms.length - numbers,
      };
    }
    if (h) {
      sent.handover = sentOnce(records, HANDOVER_PREFIX, handoverMessages);
      // the sandbox's messagelists of the handover's messages, each by when its first message
      // was accepted: a list begun before the new leader's first claim is the dead leader's
      // (its last request, still being read when it died), whatever its later messages' times
      const lists = new Map<number, number>();
      for (const m of records) {
        if (!benchIdInSet(m.customerMessageId, HANDOVER_PREFIX)) continue;
        const t = Date.parse(m.acceptedAt);
        lists.set(m.messagelistId, Math.min(lists.get(m.messagelistId) ?? t, t));
      }
      const claimAt = h.result.nextClaimMs === null ? undefined : h.killedAt + h.result.nextClaimMs;
      if (claimAt !== undefined) {
        const firsts = [...lists.values()];
        const next = Math.min(...firsts.filter((t) => t >= claimAt));
        h.result.nextSentMs = Number.isFinite(next) ? next - h.killedAt : null;
        const dead = new Set([...lists].filter(([, t]) => t < claimAt).map(([id]) => id));
        h.result.deadLeaderAcceptedAfterKill = records.filter(
          (m) =>
            benchIdInSet(m.customerMessageId, HANDOVER_PREFIX) &&
            dead.has(m.messagelistId) &&
            Date.parse(m.acceptedAt) >= h.killedAt,
        ).length;
      }
    }
    const [follow] = await db.sql<{ n: number; cmids: number }[]>`
      select count(*)::int as n, count(distinct customer_message_id)::int as cmids
      from messages where type = 'sms' and call_id is not null`;
    const [dbState] = await db.sql<{ queued: number; outbox: number }[]>`
      select (select count(*)::int from messages where status = 'queued') as queued,
             (select count(*)::int from outbox) as outbox`;

    const summary = summarize(rounds, counts, sent);
    console.log('');
    printSummary(summary, rates, roundCount);
    console.log('');
    console.log(
      `leader lock: ${leadership.samples} samples every ${leadership.everyMs} ms, at most ${leadership.mostHolders} holder(s) at once, ${leadership.noHolder} with none; by holder ${JSON.stringify(leadership.bySample)}`,
    );
    if (h) {
      const r = h.result;
      console.log(
        `handover: killed ${r.killed} (SIGKILL) with ${r.messages} queued; ${r.newLeader ?? 'nobody'} took the lock after ${r.lockMs ?? '-'} ms (its log; pg_locks showed it after ${r.lockSeenMs ?? '-'} ms); its first round claimed after ${r.nextClaimMs ?? '-'} ms, next message accepted by the sandbox after ${r.nextSentMs ?? '-'} ms (goal: under 1000; ${r.deadLeaderAcceptedAfterKill} of the dead leader's accepted after the kill); outbox empty after ${r.drainSeconds} s; sandbox: ${sent.handover!.distinct} once, ${sent.handover!.missing} missing, ${sent.handover!.duplicates} duplicated`,
      );
    }
    if (frozen) {
      console.log(
        `frozen leader: ${frozen.leader} SIGSTOPped for ${frozen.stoppedMs} ms; holders seen meanwhile ${JSON.stringify(frozen.holdersSeen)}: the lock ${frozen.lockMoved ? `moved ${frozen.movedAfterMs} ms after SIGSTOP` : 'did not move'}`,
      );
    }
    console.log(
      `afterwards: ${dbState!.queued} messages still queued, ${dbState!.outbox} outbox rows; follow-up SMS ${follow!.n} (${follow!.cmids} distinct)`,
    );
    const uptimeAfter = readFileSync('/proc/loadavg', 'utf8').trim();
    console.log(
      `load average before ${uptimeBefore.split(' ').slice(0, 3).join(' ')}, after ${uptimeAfter.split(' ').slice(0, 3).join(' ')} (${cpus().length} CPUs; other benches may share them)`,
    );

    const at = new Date();
    const durationSeconds = round((Date.now() - started) / 1000, 0);
    mkdirSync(join(ROOT, 'bench/results'), { recursive: true });
    const file = join(
      ROOT,
      'bench/results',
      `instances-${at
        .toISOString()
        .replace(/:/g, '-')
        .replace(/\.\d+Z$/, 'Z')}.json`,
    );
    writeFileSync(
      file,
      `${JSON.stringify(
        {
          at: at.toISOString(),
          seconds,
          scale,
          rates,
          machine: {
            cpus: cpus().length,
            node: process.version,
            postgres: String(pg!.v),
            loadAverage: { before: uptimeBefore, after: uptimeAfter, now: loadavg() },
          },
          serverNodeArgs,
          rounds,
          summary,
          sent,
          leadership,
          handover: h?.result,
          frozen,
          afterwards: { ...dbState, followUps: follow },
          durationSeconds,
        },
        null,
        2,
      )}\n`,
    );
    console.log(`results: ${file.slice(ROOT.length)} (${durationSeconds} s)`);
  } catch (err) {
    for (const c of children) console.error(`--- ${c.name} log (tail) ---\n${c.tail(2000)}`);
    throw err;
  } finally {
    await cleanup();
  }
}

await main();
