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

/** How many of the test server's last warnings and errors it keeps (TestServer.warnings). */
const KEPT_WARNINGS = 50;

export interface TestServer extends RunningServer {
  /**
   * The server's last warnings and errors, as log lines: for a test's own error message when
   * it times out (what the server saw meanwhile), since the log is not printed. Empty when
   * TEST_LOG_LEVEL prints the log instead.
   */
  warnings(): string[];
}

/** On `database`, or (undefined) on the one its environment names, opened as `npm start` would. */
export async function startTestServer(
  database: Database | undefined,
  opts: { env?: Record<string, string>; sandbox?: StartOptions['sandbox'] } = {},
): Promise<TestServer> {
  const config = loadConfig({ PORT: '0', HOST: '127.0.0.1', ...opts.env });
  const kept: string[] = [];
  const logger = process.env.TEST_LOG_LEVEL
    ? createLogger(process.env.TEST_LOG_LEVEL)
    : createLogger('warn', {
        write: (line: string) => {
          kept.push(line);
          if (kept.length > KEPT_WARNINGS) kept.shift();
        },
      });
  const server = await startServer(config, logger, {
    ...(database && { database }),
    sandbox: {
      timings: FAST_TIMINGS,
      options: { retryBaseMs: 50, retryMaxDelayMs: 500, shuffleWindowMs: 200 },
      ...opts.sandbox,
    },
  });
  return { ...server, warnings: () => [...kept] };
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
