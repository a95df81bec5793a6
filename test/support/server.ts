/**
 * The real server in-process, listening on a free port, with the built-in sandbox calling it
 * back over real HTTP, on a test database of its own.
 */
import { loadConfig } from '../../src/config.ts';
import type { Database } from '../../src/db/client.ts';
import { createLogger } from '../../src/logger.ts';
import { type RunningServer, type StartOptions, startServer } from '../../src/server.ts';

/** Sandbox lifecycles in tens of milliseconds rather than seconds. */
export const FAST_TIMINGS = {
  sentAfterMs: 20,
  deliveredAfterMs: 40,
  readAfterMs: 60,
  failedAfterMs: 40,
  expiredAfterMs: 80,
  keyPressMs: 20,
  maxIdleTimeoutMs: 100,
};

/** On `database`, or (undefined) on the one its environment names, opened as `npm start` would. */
export async function startTestServer(
  database: Database | undefined,
  opts: { env?: Record<string, string>; sandbox?: StartOptions['sandbox'] } = {},
): Promise<RunningServer> {
  const config = loadConfig({ PORT: '0', HOST: '127.0.0.1', ...opts.env });
  return startServer(config, createLogger(process.env.TEST_LOG_LEVEL ?? 'silent'), {
    ...(database && { database }),
    sandbox: {
      timings: FAST_TIMINGS,
      options: { retryBaseMs: 50, retryMaxDelayMs: 500, shuffleWindowMs: 200 },
      ...opts.sandbox,
    },
  });
}

/** Polls `fn` until it returns a truthy value (or throws after `timeoutMs`). */
export async function eventually<T>(
  fn: () => Promise<T | undefined | null | false>,
  timeoutMs = 10_000,
  what = 'condition',
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    // the poll's interval: `eventually` is a barrier on a real condition, with a deadline
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
}
