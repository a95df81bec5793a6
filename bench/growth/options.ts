/**
 * The growth bench's pure logic (bench/growth.ts): its flags, the disk a run will need, the
 * spread of seeded messages over the past days, and the goal (issue 27 point 2: CPU per
 * request and p99 at the largest size within 20 % of the smallest).
 *
 * @example
 * const opts = parseGrowthArgs(['--sizes=0.05,0.2', '--keep']);
 * diskNeeded({ targetMessages: 5e6, storedMessages: 1e6, bytesPerMessage: 3000, walBytes: 2 ** 30 });
 */

export interface GrowthOptions {
  /** database sizes to measure at, in messages, ascending */
  sizes: number[];
  /** seconds of each measured load */
  seconds: number;
  /** windows of each load per step; the step's figures are their medians */
  windows: number;
  /** callbacks per second offered to /hooks/delivery (part (a)'s rate) */
  ingestRate: number;
  /** reads per second offered to GET /v1/messages/{ref} (part (d)'s rate) */
  readRate: number;
  /** new messages queued at once for each dispatch measurement */
  dispatch: number;
  /** keep the bench database at the end */
  keep: boolean;
}

export const DEFAULT_SIZES_MILLIONS = [1, 5, 20];

const USAGE =
  'usage: npm run bench:growth -- [--sizes=1,5,20] [--seconds=10] [--windows=3] [--ingest-rate=2000] [--read-rate=500] [--dispatch=50000] [--keep]';

function positive(flag: string, value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n) || n <= 0) {
    throw new Error(`${flag} wants a positive number, not "${value}"\n${USAGE}`);
  }
  return n;
}

/**
 * `--sizes` in millions of messages (decimals allowed: `0.05` is 50 000), sorted and
 * deduplicated; each at least 1000 messages, so every step seeds something to measure.
 */
export function parseSizes(value: string): number[] {
  const sizes = value.split(',').map((v) => Math.round(positive('--sizes', v) * 1e6));
  const small = sizes.find((s) => s < 1000);
  if (small !== undefined) {
    throw new Error(`--sizes: ${small / 1e6} million is below 1000 messages\n${USAGE}`);
  }
  return [...new Set(sizes)].sort((a, b) => a - b);
}

/** The bench's flags from `args` (what follows `npm run bench:growth --`). */
export function parseGrowthArgs(args: readonly string[]): GrowthOptions {
  const opts: GrowthOptions = {
    sizes: DEFAULT_SIZES_MILLIONS.map((m) => m * 1e6),
    seconds: 10,
    windows: 3,
    ingestRate: 2000,
    readRate: 500,
    dispatch: 50_000,
    keep: false,
  };
  for (const arg of args) {
    const m = arg.match(/^--([a-z-]+)(?:=(.*))?$/);
    const [flag, value] = [m?.[1], m?.[2]];
    if (flag === 'keep' && value === undefined) opts.keep = true;
    else if (value === undefined) throw new Error(`unknown argument "${arg}"\n${USAGE}`);
    else if (flag === 'sizes') opts.sizes = parseSizes(value);
    else if (flag === 'seconds') opts.seconds = positive('--seconds', value);
    else if (flag === 'windows')
      opts.windows = Math.max(1, Math.round(positive('--windows', value)));
    else if (flag === 'ingest-rate') opts.ingestRate = Math.round(positive('--ingest-rate', value));
    else if (flag === 'read-rate') opts.readRate = Math.round(positive('--read-rate', value));
    else if (flag === 'dispatch') opts.dispatch = Math.round(positive('--dispatch', value));
    else throw new Error(`unknown flag "--${flag}"\n${USAGE}`);
  }
  return opts;
}

/**
 * Bytes a message takes with its five events and three callback bodies (tables and indexes),
 * before the first step has measured it: about what a 1-million step measured on Postgres 15
 * (4091 and 4112 with random ids and the ids' own tables, migrations 0030 and 0031; 3474
 * before, with ids in order).
 */
export const BYTES_PER_MESSAGE_BEFORE_MEASURED = 4100;

/**
 * Free bytes the rest of a run needs where Postgres keeps its data: the messages still to
 * seed at `bytesPerMessage`, a tenth more (indexes grow less evenly than rows), and the WAL
 * Postgres may keep between checkpoints (`max_wal_size`).
 */
export function diskNeeded(p: {
  targetMessages: number;
  storedMessages: number;
  bytesPerMessage: number;
  walBytes: number;
}): number {
  const more = Math.max(0, p.targetMessages - p.storedMessages);
  return Math.ceil(more * p.bytesPerMessage * 1.1 + p.walBytes);
}

/** `max_wal_size` as Postgres shows it (`1GB`, `512MB`, `80kB`) in bytes. */
export function settingBytes(value: string): number {
  const m = value.trim().match(/^(\d+)\s*(B|kB|MB|GB|TB)?$/);
  if (!m) throw new Error(`not a size: "${value}"`);
  const unit = { B: 1, kB: 2 ** 10, MB: 2 ** 20, GB: 2 ** 30, TB: 2 ** 40 }[m[2] ?? 'B']!;
  return Number(m[1]) * unit;
}

/**
 * Seeded messages are spread over the past SPREAD_DAYS: message `i` was made
 * `(i * SPREAD_STEP_MS) mod SPREAD_MS` milliseconds into that window. The step is coprime with
 * the window's length, so distinct messages get distinct milliseconds (their UUIDv7 ids and
 * their events' time-ordered ids are unique), and each step's range of `i` covers every day.
 */
export const SPREAD_DAYS = 30;
export const SPREAD_MS = SPREAD_DAYS * 86_400_000;
// about the window's length over the golden ratio: consecutive messages land far apart
export const SPREAD_STEP_MS = 1_601_915_903;

/** Milliseconds into the window of message `i` (the SQL the seeding runs, in TypeScript). */
export function spreadOffsetMs(i: number): number {
  return Number((BigInt(i) * BigInt(SPREAD_STEP_MS)) % BigInt(SPREAD_MS));
}

/**
 * `n` messages drawn at random among 1..`count` made in the history's last `days` (by
 * `spreadOffsetMs`), for reads of recent messages, as a live service mostly gets: an app
 * polls what it just sent, an agent looks up today's. Fewer when the history has fewer.
 */
export function recentMessages(count: number, days: number, n: number): number[] {
  const since = SPREAD_MS - days * 86_400_000;
  const picked = new Set<number>();
  // a recent message is about one in SPREAD_DAYS / days: enough draws for n of them
  for (let tries = 0; picked.size < n && tries < n * (SPREAD_DAYS / days) * 20; tries++) {
    const i = 1 + Math.floor(Math.random() * count);
    if (spreadOffsetMs(i) >= since) picked.add(i);
  }
  return [...picked];
}

export function gcd(a: number, b: number): number {
  return b === 0 ? a : gcd(b, a % b);
}

/** The goal: `largest` within `tolerance` (20 %) above `smallest`; lower is better. */
export function withinGoal(smallest: number, largest: number, tolerance = 0.2): boolean {
  return largest <= smallest * (1 + tolerance);
}
