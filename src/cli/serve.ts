/**
 * `npm start` and `switchboard serve`: config -> server, then wait for SIGTERM or SIGINT to
 * stop taking requests, finish those in flight, close the database and exit 0. Once the
 * server is ready (startServer resolves after its own /readyz answers 200), the log lines so
 * far are flushed and the banner (nextSteps) goes to stderr after them, not among them; the
 * "listening" line follows it.
 */
import { setFlagsFromString } from 'node:v8';
import { ConfigError, loadConfig } from '../config.ts';
import { DataDirLockedError } from '../db/data-dir-lock.ts';
import { EndpointsFileError } from '../events/endpoints-file.ts';
import { createLogger } from '../logger.ts';
import { nextSteps, startServer } from '../server.ts';
import { startTracing, tracingConfigured } from '../tracing.ts';

/**
 * How far V8 lets the old generation grow past what was live after its last full collection
 * before it collects again, in percent. V8's default on a machine with memory to spare is up
 * to 300% (4x), and Switchboard promotes a lot of short-lived data to the old generation
 * (payloads, query parameters and buffers that outlive a scavenge while their statement or
 * messagelist is in flight), so RSS followed the allocation rate, not what is kept: in the
 * bench's part (c) the heap was 30-110 MB live after each full collection while RSS reached
 * 830-1100 MB, nearly all of it garbage. At 50% the heap stays within 1.5x of the live size:
 * starting 6000 calls peaked at ~190 MB instead of ~265 MB, for 7-17% more CPU (20-30 full
 * collections of ~30 MB instead of 6-9). It caps nothing, so it cannot run the server out of
 * memory: the heap still grows to whatever is live. A `--heap-growing-percent` given to node
 * (command line or NODE_OPTIONS) wins. V8 reads it after every full collection, so setting it
 * here, before the server allocates, covers the whole run.
 */
const HEAP_GROWING_PERCENT = 50;

function tuneHeapGrowth(): void {
  const given = [...process.execArgv, process.env.NODE_OPTIONS ?? ''].some((a) =>
    /heap[-_]growing[-_]percent/.test(a),
  );
  if (!given) setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
}

export async function runServe(
  env: Record<string, string | undefined> = process.env,
): Promise<void> {
  tuneHeapGrowth();
  let config: ReturnType<typeof loadConfig>;
  try {
    config = loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`switchboard: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const logger = createLogger({
    level: config.logLevel,
    logPii: config.logPii,
    format: config.logFormat,
  });
  // before the app is built: its request spans are mounted only when tracing is on
  const tracing = tracingConfigured(env) ? await startTracing() : undefined;
  if (tracing) logger.info('tracing: exporting spans over OTLP');
  let server: Awaited<ReturnType<typeof startServer>> | undefined;
  let requested: string | undefined;

  const shutdown = (signal: string) => {
    // a signal during start-up: stop as soon as there is something to stop
    if (!server) {
      requested = signal;
      return;
    }
    logger.info({ signal }, 'shutting down');
    const force = setTimeout(() => {
      logger.error('shutdown took too long; exiting');
      process.exit(1);
    }, config.shutdownTimeoutMs);
    force.unref();
    server
      .stop()
      .then(() => tracing?.stop())
      .then(
        () => process.exit(0),
        (err: unknown) => {
          logger.error({ err }, 'error while shutting down');
          process.exit(1);
        },
      );
  };
  // installed before anything starts, so a signal is never met by the default handler
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  process.once('SIGINT', () => shutdown('SIGINT'));

  try {
    server = await startServer(config, logger);
  } catch (err) {
    if (err instanceof DataDirLockedError || err instanceof EndpointsFileError) {
      // one line naming the other process and what to do, not a stack trace
      process.stderr.write(`switchboard: ${err.message}\n`);
      process.exit(1);
    }
    logger.fatal({ err }, 'could not start');
    process.exit(1);
  }
  // the start-up lines first, then the banner, then the line the tests and the bench wait
  // for: whoever sees "listening" has the banner already (stderr is written synchronously)
  await new Promise<void>((resolve) => logger.flush(() => resolve()));
  process.stderr.write(nextSteps(config, server.port));
  logger.info({ host: config.host, port: server.port }, 'listening');
  if (requested) shutdown(requested);
}
