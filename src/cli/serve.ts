/**
 * `npm start` and `switchboard serve`: config -> server, then wait for SIGTERM or SIGINT to
 * stop taking requests, finish those in flight, close the database and exit 0.
 */
import { ConfigError, loadConfig } from '../config.ts';
import { createLogger } from '../logger.ts';
import { nextSteps, startServer } from '../server.ts';

export async function runServe(
  env: Record<string, string | undefined> = process.env,
): Promise<void> {
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
  const logger = createLogger({ level: config.logLevel, logPii: config.logPii });
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
    server.stop().then(
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
    logger.fatal({ err }, 'could not start');
    process.exit(1);
  }
  logger.info({ port: server.port }, 'listening');
  process.stderr.write(nextSteps(config, server.port));
  if (requested) shutdown(requested);
}
