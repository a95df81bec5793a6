/** What every part of the bench is handed by bench/run.ts. */
import type { Child } from './lib/children.ts';
import type { BenchDatabase } from './lib/database.ts';

export interface BenchContext {
  db: BenchDatabase;
  /** Switchboard (`src/main.ts`) on the bench database, its provider the bench sandbox */
  server: Child;
  /** the sandbox (`bench/sandbox-server.ts`) */
  sandbox: Child;
  /** the bare Hono JSON endpoint (`bench/bare-server.ts`) */
  bare: Child;
  log(message: string): void;
  /** seconds of each measured load (BENCH_SECONDS; default 10) */
  seconds: number;
  /** scale of the data sets, 1 = as the issue asks (BENCH_SCALE, for quick trial runs) */
  scale: number;
}

/**
 * The server's CALLBACK_TOKEN, as deployed against a real provider (it refuses to start
 * without one), and the header the bench's callbacks carry it in.
 */
export const CALLBACK_TOKEN = 'bench-callback-token';
export const CALLBACK_HEADERS = { 'x-callback-token': CALLBACK_TOKEN };

/**
 * The benches' servers run with this POLL_AFTER_SECONDS (a week, longer than any run), so
 * they never poll the provider: the callback parts leave their messages accepted under ids
 * the bench sandbox never issued, and from 15 minutes on (the default) the poller would ask
 * for each every 5 minutes, a load that grows through a run, in the later parts' figures.
 */
export const POLL_NEVER_SECONDS = 7 * 86_400;

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export const round = (n: number, digits = 2) => Math.round(n * 10 ** digits) / 10 ** digits;
