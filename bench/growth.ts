/**
 * `npm run bench:growth`: does Switchboard stay as fast as the database grows? (issue 27,
 * point 2; not part of CI). One bench database (`sb_bench_<random>` on DATABASE_URL, default
 * postgres://postgres@127.0.0.1:5432/test) grows step by step to each size of `--sizes`
 * (millions of messages, default 1,5,20): each step seeds the messages still missing
 * (bench/growth/seed.ts: five events and three callback bodies each, spread over the past 30
 * days), runs `vacuum analyze` and a checkpoint (timed apart), and measures, with the main
 * bench's loads (bench/growth/measure.ts): callbacks on `/hooks/delivery` at a fixed rate,
 * a drain of new queued messages (`benchDispatch`), and `GET /v1/messages/{ref}` of random
 * refs of every age and of the last day's; CPU per request of the server and of Postgres,
 * p99, and the tables' sizes. Each load runs `--windows` times (default 3); the step's
 * figures are the windows' medians, and every window's own figures (with its p99 by second,
 * the machine's steal and Postgres's wait events) are in the results file. After the last
 * size, the project's retention removes the oldest day. Before any seeding the disk the
 * largest size needs is checked where Postgres keeps its data.
 *
 * Prints one table (a row per size) and the goal (CPU per request and p99 at the largest size
 * within 20 % of the smallest), writes `bench/results/growth-<timestamp>.json`, and drops the
 * database unless `--keep`. Switchboard runs as in `npm run bench` (bench/run.ts): built by
 * scripts/build.mjs, `node dist/main.js` with npm start's flags, PORT=0, the bench sandbox as
 * its provider.
 *
 * @example
 * npm run bench:growth -- --sizes=0.02,0.1 --seconds=5   # a trial
 * npm run bench:growth -- --sizes=1,5 --keep
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { startFlags } from '../scripts/start-flags.ts';
import { openDatabase } from '../src/db/client.ts';
import { migrateDatabase } from '../src/db/migrate.ts';
import { type BenchContext, CALLBACK_TOKEN, POLL_NEVER_SECONDS, round } from './context.ts';
import { benchDispatch, type DispatchBench } from './dispatch.ts';
import { dataDisk } from './growth/disk.ts';
import {
  type GrowthContext,
  measureIngest,
  measureRead,
  measureRetention,
  type RetentionRun,
  TABLES,
  type TableSizes,
  tableSizes,
  type Windowed,
} from './growth/measure.ts';
import {
  BYTES_PER_MESSAGE_BEFORE_MEASURED,
  diskNeeded,
  parseGrowthArgs,
  SPREAD_DAYS,
  withinGoal,
} from './growth/options.ts';
import {
  eventIdColumn,
  eventIdsFollowTime,
  makeDayPartitions,
  seedHistory,
} from './growth/seed.ts';
import { type Child, LISTENING, ROOT, spawnChild } from './lib/children.ts';
import { createBenchDatabase, DEFAULT_ADMIN_URL } from './lib/database.ts';
import { diskReadKb, type MachineShare, machineShare, machineTicks } from './lib/metrics.ts';
import { machine, printGrid } from './lib/report.ts';

const PREFIX = 'g-';
const POSTGRES_SETTINGS: string[] = [
  'shared_buffers',
  'effective_cache_size',
  'work_mem',
  'max_wal_size',
  'checkpoint_timeout',
  'synchronous_commit',
];

interface Step {
  /** messages of the seeded history (the measurements add a few of their own) */
  messages: number;
  seed: { messages: number; seconds: number; messagesPerSecond: number };
  /** `vacuum analyze` of every table of TABLES the schema has, and a checkpoint */
  vacuumSeconds: number;
  databaseBytes: number;
  sizes: TableSizes;
  ingest: Windowed & { messages: number };
  /** with the kilobytes the machine read from disk per message, queueing and drain */
  dispatch: DispatchBench & { diskKbPerMessage: number };
  /** reads of messages of every age */
  read: Windowed;
  /** reads of messages made in the history's last day, as most reads of a live service are */
  readRecent: Windowed;
  /** the machine's CPUs while this step measured (others' work included) */
  machine: MachineShare & { loadAverage: number };
}

interface GoalRow {
  measurement: string;
  smallest: number;
  largest: number;
  ratio: number;
  met: boolean;
}

const mb = (bytes: number) => round(bytes / 1e6, 0);
const gb = (bytes: number) => round(bytes / 1e9, 1);
const millions = (n: number) => `${round(n / 1e6, 3)} M`;

/** Per measurement: its value at the smallest and the largest size, against the goal. */
function goals(steps: Step[]): GoalRow[] {
  const first = steps[0]!;
  const last = steps.at(-1)!;
  const rows: [string, (s: Step) => number][] = [
    ['ingestion: server CPU us/request', (s) => s.ingest.cpu.switchboardUsPerRequest],
    ['ingestion: Postgres CPU us/request', (s) => s.ingest.cpu.postgresUsPerRequest],
    ['ingestion: p99 ms', (s) => s.ingest.load.p99],
    ['dispatch: server CPU us/message', (s) => s.dispatch.cpuUsPerMessage.switchboard],
    ['dispatch: Postgres CPU us/message', (s) => s.dispatch.cpuUsPerMessage.postgres],
    ['GET /v1/messages/{ref}: server CPU us/request', (s) => s.read.cpu.switchboardUsPerRequest],
    ['GET /v1/messages/{ref}: Postgres CPU us/request', (s) => s.read.cpu.postgresUsPerRequest],
    ['GET /v1/messages/{ref}: p99 ms', (s) => s.read.load.p99],
    ['GET, last day: server CPU us/request', (s) => s.readRecent.cpu.switchboardUsPerRequest],
    ['GET, last day: Postgres CPU us/request', (s) => s.readRecent.cpu.postgresUsPerRequest],
    ['GET, last day: p99 ms', (s) => s.readRecent.load.p99],
  ];
  return rows.map(([measurement, of]) => ({
    measurement,
    smallest: of(first),
    largest: of(last),
    ratio: round(of(last) / of(first), 2),
    met: withinGoal(of(first), of(last)),
  }));
}

function printSteps(steps: Step[]): void {
  const cpu = (m: Windowed) => `${m.cpu.switchboardUsPerRequest} + ${m.cpu.postgresUsPerRequest}`;
  const size = (s: Step, t: string) =>
    `${mb(s.sizes[t]!.totalBytes)} (${mb(s.sizes[t]!.indexBytes)})`;
  printGrid(
    [
      'messages',
      'ingest us/req (+PG)',
      'ingest p99 ms',
      'ingest disk kB/req',
      'dispatch msg/s',
      'dispatch us/msg (+PG)',
      'dispatch disk kB/msg',
      'read us/req (+PG)',
      'read p99 ms',
      'read disk kB/req',
      'last-day read us/req (+PG)',
      'last-day p99 ms',
      'last-day disk kB/req',
      ...TABLES.map((t) => `${t} MB (idx)`),
      'seed s',
      'vacuum s',
      'busy %',
    ],
    steps.map((s) => [
      millions(s.messages),
      cpu(s.ingest),
      String(s.ingest.load.p99),
      String(s.ingest.diskKbPerRequest),
      String(s.dispatch.messagesPerSecond),
      `${s.dispatch.cpuUsPerMessage.switchboard} + ${s.dispatch.cpuUsPerMessage.postgres}`,
      String(s.dispatch.diskKbPerMessage),
      cpu(s.read),
      String(s.read.load.p99),
      String(s.read.diskKbPerRequest),
      cpu(s.readRecent),
      String(s.readRecent.load.p99),
      String(s.readRecent.diskKbPerRequest),
      ...TABLES.map((t) => size(s, t)),
      String(s.seed.seconds),
      String(s.vacuumSeconds),
      String(s.machine.busyPercent),
    ]),
  );
}

function printRetention(r: RetentionRun): void {
  const removed = Object.entries(r.removed)
    .filter(([, n]) => n > 0)
    .map(([k, n]) => `${k} ${n}`)
    .join(', ');
  console.log(
    `\nretention of the oldest day (cutoff ${r.cutoff}): ${r.seconds} s, ${r.rounds} rounds${r.unfinished ? ' (stopped at the time limit, more left)' : ''}; removed ${removed || 'nothing'}`,
  );
  const d = r.partitionDrop;
  console.log(
    `the day partitions alone first: ${d.seconds} s to drop ${d.dropped.map((p) => `${p.name} (${p.rows} rows)`).join(', ') || 'none'}`,
  );
  printGrid(
    ['table', 'before MB (idx)', 'partitions dropped MB (idx)', 'after MB (idx)'],
    TABLES.map((t) => [
      t,
      `${mb(r.before[t]!.totalBytes)} (${mb(r.before[t]!.indexBytes)})`,
      `${mb(d.after[t]!.totalBytes)} (${mb(d.after[t]!.indexBytes)})`,
      `${mb(r.after[t]!.totalBytes)} (${mb(r.after[t]!.indexBytes)})`,
    ]),
  );
}

function writeResults(at: Date, out: Record<string, unknown>): string {
  mkdirSync(join(ROOT, 'bench/results'), { recursive: true });
  const stamp = at
    .toISOString()
    .replace(/:/g, '-')
    .replace(/\.\d+Z$/, 'Z');
  const file = join(ROOT, 'bench/results', `growth-${stamp}.json`);
  writeFileSync(file, `${JSON.stringify({ at: at.toISOString(), ...out }, null, 2)}\n`);
  return file.slice(ROOT.length);
}

async function main(): Promise<void> {
  const opts = parseGrowthArgs(process.argv.slice(2));
  const adminUrl = process.env.DATABASE_URL ?? DEFAULT_ADMIN_URL;
  const started = Date.now();
  const runTicks = machineTicks();
  const loadBefore = loadavg()[0]!;
  // the seeded history ends here; everything the server writes comes after it
  const anchor = new Date(started);
  const log = (m: string) =>
    console.error(`[growth ${round((Date.now() - started) / 1000, 0)}s] ${m}`);
  const largest = opts.sizes.at(-1)!;
  const logDir = mkdtempSync(join(tmpdir(), 'switchboard-growth-'));
  const db = await createBenchDatabase(adminUrl);
  // pg_stat_activity's sampler, from outside the bench database (bench/lib/metrics.ts)
  const monitor = postgres(adminUrl, { max: 1, onnotice: () => {} });
  const children: Child[] = [];
  let cleaned = false;
  const cleanup = async () => {
    if (cleaned) return;
    cleaned = true;
    await Promise.all(children.map((c) => c.stop()));
    await monitor.end({ timeout: 5 });
    if (opts.keep) {
      await db.sql.end({ timeout: 5 });
      log(`database ${db.name} kept (--keep); drop it with: drop database "${db.name}"`);
    } else {
      await db.drop().catch((err: unknown) => log(`could not drop ${db.name}: ${String(err)}`));
    }
    rmSync(logDir, { recursive: true, force: true });
  };
  process.once('SIGINT', () => void cleanup().then(() => process.exit(130)));
  try {
    log(`database ${db.name}; sizes ${opts.sizes.map(millions).join(', ')}`);
    const migrator = await openDatabase({ url: db.url, maxConnections: 1 });
    await migrateDatabase(migrator);
    await migrator.close();
    const [pg] = await db.sql`select current_setting('server_version') as v`;
    // the memory and WAL Postgres ran with: what decides when the data stops fitting
    const postgresSettings = Object.fromEntries(
      (
        await db.sql<{ name: string; value: string }[]>`
          select name, current_setting(name) as value from pg_settings
          where name = any(${POSTGRES_SETTINGS}::text[]) order by name`
      ).map((r) => [r.name, r.value]),
    );
    log(`Postgres ${pg!.v}: ${JSON.stringify(postgresSettings)}`);

    // room for the largest size, before anything is seeded: at a stated bytes per message
    // now, at the one the first step measured before each later step
    const disk = await dataDisk(db.sql, db.url);
    const checkDisk = async (stored: number, bytesPerMessage: number) => {
      const need = diskNeeded({
        targetMessages: largest,
        storedMessages: stored,
        bytesPerMessage,
        walBytes: disk.walBytes,
      });
      const now = await dataDisk(db.sql, db.url);
      if (now.freeBytes === undefined) {
        log(`${now.why}; the run needs about ${gb(need)} GB more`);
        return { needBytes: need, freeBytes: null };
      }
      log(
        `disk: ${gb(need)} GB needed for ${millions(largest)} messages (${round(bytesPerMessage, 0)} bytes each, WAL ${gb(disk.walBytes)} GB), ${gb(now.freeBytes)} GB free in ${now.dataDirectory}`,
      );
      if (need > now.freeBytes) {
        throw new Error(
          `not enough disk for ${millions(largest)} messages: about ${gb(need)} GB needed, ${gb(now.freeBytes)} GB free in ${now.dataDirectory} (Postgres's data directory); choose smaller --sizes`,
        );
      }
      return { needBytes: need, freeBytes: now.freeBytes };
    };
    const diskAtStart = await checkDisk(0, BYTES_PER_MESSAGE_BEFORE_MEASURED);

    // a schema with day partitions gets the history's days made, as a live server makes them
    const partitioned = await makeDayPartitions(db.sql, anchor, SPREAD_DAYS);
    log(
      partitioned.length > 0
        ? `day partitions made for the ${SPREAD_DAYS} days of history: ${partitioned.join(', ')}`
        : 'no day partitions in this schema',
    );
    // seeded events get ids in time order, and the server's come after them
    const sequence = await eventIdColumn(db.sql);
    if (sequence) await eventIdsFollowTime(db.sql, sequence, anchor);
    else log('message_events has no bigint sequence id: seeded events keep their default ids');

    const sandbox = await spawnChild({
      name: 'sandbox',
      entry: 'bench/sandbox-server.ts',
      env: { PORT: '0' },
      ready: LISTENING,
      logDir,
    });
    children.push(sandbox);
    execFileSync(process.execPath, ['scripts/build.mjs'], { cwd: ROOT, stdio: 'inherit' });
    const serverNodeArgs = startFlags();
    const server = await spawnChild({
      name: 'switchboard',
      entry: 'dist/main.js',
      env: {
        PORT: '0',
        HOST: '127.0.0.1',
        DATABASE_URL: db.url,
        PROVIDER_BASE_URL: sandbox.url,
        CALLBACK_TOKEN,
        LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'info',
        FLOWS_DIR: join(ROOT, 'bench/flows'),
        // no status polls: each step's callbacks leave their messages accepted under ids the
        // sandbox never issued (bench/context.ts)
        POLL_AFTER_SECONDS: String(POLL_NEVER_SECONDS),
      },
      ready: LISTENING,
      logDir,
      nodeArgs: serverNodeArgs,
    });
    children.push(server);
    // the parts reused here load the server and the sandbox only, never the bare endpoint
    const ctx: GrowthContext = {
      monitor,
      windows: opts.windows,
      db,
      server,
      sandbox,
      bare: sandbox,
      log,
      seconds: opts.seconds,
      scale: 1,
    };
    // benchDispatch queues 200 000 x scale messages
    const dispatchCtx: BenchContext = { ...ctx, scale: opts.dispatch / 200_000 };

    const steps: Step[] = [];
    let stored = 0;
    let bytesPerMessage = BYTES_PER_MESSAGE_BEFORE_MEASURED;
    let measuredBytesPerMessage: number | undefined;
    const diskChecks = [{ beforeMessages: 0, ...diskAtStart }];
    for (const [k, size] of opts.sizes.entries()) {
      if (k > 0)
        diskChecks.push({ beforeMessages: stored, ...(await checkDisk(stored, bytesPerMessage)) });
      const dbBefore = await databaseBytes(db);
      log(`seeding messages ${stored + 1}..${size} (5 events, 3 callback bodies each)`);
      const seedStart = performance.now();
      await seedHistory(db.sql, {
        prefix: PREFIX,
        from: stored + 1,
        to: size,
        anchor,
        eventIds: sequence !== undefined,
        onChunk: (n) => log(`  ${n} of ${size - stored} seeded`),
      });
      const seedSeconds = (performance.now() - seedStart) / 1000;
      log('vacuum analyze, checkpoint');
      const vacuumStart = performance.now();
      // every table whose size is reported that this schema has (the dedup keys from
      // migration 0019, the numbers' table its trigger fills from 0024): no autovacuum of one
      // the seeding wrote runs into the measurements, and their row counts are exact
      const written = await db.sql<{ name: string }[]>`
        select t.name from unnest(${[...TABLES]}::text[]) as t(name)
        where to_regclass(t.name) is not null`;
      await db.sql.unsafe(`vacuum (analyze) ${written.map((t) => t.name).join(', ')}`);
      await db.sql.unsafe('checkpoint');
      const vacuumSeconds = round((performance.now() - vacuumStart) / 1000, 1);
      const seeded = size - stored;
      const dbAfter = await databaseBytes(db);
      if (k === 0) {
        measuredBytesPerMessage = round((dbAfter - dbBefore) / seeded, 0);
        bytesPerMessage = measuredBytesPerMessage;
      }
      stored = size;
      const sizes = await tableSizes(ctx);
      const ticks = machineTicks();
      const read = await measureRead(ctx, { prefix: PREFIX, count: size, rate: opts.readRate });
      const readRecent = await measureRead(ctx, {
        prefix: PREFIX,
        count: size,
        rate: opts.readRate,
        recentDays: 1,
      });
      const ingest = await measureIngest(ctx, { prefix: `gi${k}-`, rate: opts.ingestRate });
      const readBeforeDispatch = diskReadKb();
      const dispatch = await benchDispatch(dispatchCtx, `gd${k}-`);
      const dispatchDiskKb = diskReadKb() - readBeforeDispatch;
      steps.push({
        messages: size,
        seed: {
          messages: seeded,
          seconds: round(seedSeconds, 1),
          messagesPerSecond: round(seeded / seedSeconds, 0),
        },
        vacuumSeconds,
        databaseBytes: dbAfter,
        sizes,
        ingest,
        dispatch: {
          ...dispatch,
          diskKbPerMessage: round(dispatchDiskKb / Math.max(1, dispatch.messages), 2),
        },
        read,
        readRecent,
        machine: { ...machineShare(ticks, machineTicks()), loadAverage: round(loadavg()[0]!, 2) },
      });
      log(
        `${millions(size)}: ingestion ${ingest.cpu.switchboardUsPerRequest} + ${ingest.cpu.postgresUsPerRequest} us, p99 ${ingest.load.p99} ms, ${ingest.diskKbPerRequest} kB read; dispatch ${dispatch.messagesPerSecond} msg/s; reads ${read.cpu.switchboardUsPerRequest} + ${read.cpu.postgresUsPerRequest} us, p99 ${read.load.p99} ms, ${read.diskKbPerRequest} kB read; last day's ${readRecent.cpu.switchboardUsPerRequest} + ${readRecent.cpu.postgresUsPerRequest} us, p99 ${readRecent.load.p99} ms, ${readRecent.diskKbPerRequest} kB read`,
      );
    }

    log(`retention: removing the oldest of the ${SPREAD_DAYS} days`);
    const retention = await measureRetention(ctx, {
      anchor,
      days: SPREAD_DAYS - 1,
      limitSeconds: 1800,
    });
    const diskAtEnd = await dataDisk(db.sql, db.url);

    const goalRows = goals(steps);
    console.log('');
    printSteps(steps);
    console.log(
      '\nCPU per request in microseconds, the server + Postgres (+PG); sizes in MB, indexes in brackets; busy %: the whole machine while the step measured',
    );
    printRetention(retention);
    console.log(
      `\ngoal: at ${millions(largest)} within 20 % of ${millions(opts.sizes[0]!)} (lower is better; each the median of ${opts.windows} windows)`,
    );
    printGrid(
      ['measurement', millions(opts.sizes[0]!), millions(largest), 'ratio', 'met'],
      goalRows.map((g) => [
        g.measurement,
        String(g.smallest),
        String(g.largest),
        String(g.ratio),
        g.met ? 'met' : 'NOT MET',
      ]),
    );
    const durationSeconds = round((Date.now() - started) / 1000, 0);
    const file = writeResults(new Date(), {
      options: opts,
      anchor: anchor.toISOString(),
      machine: machine(String(pg!.v)),
      postgresSettings,
      serverNodeArgs,
      disk: {
        dataDirectory: disk.dataDirectory,
        ...(disk.why !== undefined && { why: disk.why }),
        bytesPerMessageEstimate: BYTES_PER_MESSAGE_BEFORE_MEASURED,
        bytesPerMessageMeasured: measuredBytesPerMessage,
        checks: diskChecks,
        databaseBytesAtEnd: await databaseBytes(db),
        freeBytesAtEnd: diskAtEnd.freeBytes ?? null,
      },
      schema: { dayPartitioned: partitioned, eventIdsByTime: sequence !== undefined },
      steps,
      retention,
      goals: goalRows,
      loadAverage: { before: round(loadBefore, 2), after: round(loadavg()[0]!, 2) },
      machineCpu: machineShare(runTicks, machineTicks()),
      durationSeconds,
    });
    console.log(`\nresults: ${file} (${durationSeconds} s)`);
  } catch (err) {
    for (const c of children) console.error(`--- ${c.name} log (tail) ---\n${c.tail(3000)}`);
    throw err;
  } finally {
    await cleanup();
  }
}

async function databaseBytes(db: BenchContext['db']): Promise<number> {
  const [row] = await db.sql`select pg_database_size(current_database())::bigint as n`;
  return Number(row!.n);
}

await main();
