/**
 * Runs Switchboard: config -> database -> migrations -> app -> HTTP server, and the clean
 * shutdown that undoes it. `main.ts` and `switchboard serve` both call `startServer`.
 */
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { createApp } from './app.ts';
import type { Config } from './config.ts';
import { type Database, openDatabase } from './db/client.ts';
import { migrateDatabase } from './db/migrate.ts';
import type { Logger } from './logger.ts';

export interface RunningServer {
  url: string;
  port: number;
  database: Database;
  /** stops taking requests, lets those in flight finish, closes the database */
  stop(): Promise<void>;
}

export async function startServer(config: Config, logger: Logger): Promise<RunningServer> {
  const database = await openDatabase({ url: config.databaseUrl, dataDir: config.dataDir });
  logger.info(
    { engine: database.kind, ...(database.kind === 'pglite' && { dataDir: config.dataDir }) },
    'database open',
  );
  await migrateDatabase(database);
  logger.info('migrations applied');

  if (config.apiTokens.length === 0) {
    logger.warn('API_TOKEN is not set: /v1 is open to anyone who can reach this port');
  }
  if (!config.callbackToken) {
    logger.warn('CALLBACK_TOKEN is not set: /hooks/delivery and /hooks/viber are open');
  }

  const { app } = createApp({ config, database, logger });
  const server = await new Promise<ReturnType<typeof serve>>((resolve, reject) => {
    const s = serve({ fetch: app.fetch, port: config.port, hostname: config.host }, () =>
      resolve(s),
    );
    s.once('error', reject);
  });
  const port = (server.address() as AddressInfo).port;

  let stopping: Promise<void> | undefined;
  const stop = () => {
    stopping ??= (async () => {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      // idle keep-alive sockets would hold close() open; busy ones finish their request first
      if ('closeIdleConnections' in server) server.closeIdleConnections();
      const deadline = setTimeout(() => {
        logger.warn('in-flight requests did not finish in time; closing their connections');
        if ('closeAllConnections' in server) server.closeAllConnections();
      }, config.shutdownTimeoutMs - 2000);
      await closed;
      clearTimeout(deadline);
      await database.close();
      logger.info('stopped');
    })();
    return stopping;
  };
  return { url: `http://localhost:${port}`, port, database, stop };
}

/** What a new user can try against a freshly started server. */
export function nextSteps(config: Config, port: number): string {
  const base = `http://localhost:${port}`;
  return [
    '',
    `Switchboard is listening on ${base}  (database: ${config.databaseUrl ? 'Postgres' : `embedded, in ${config.dataDir}`})`,
    '',
    'Try:',
    `  curl -s ${base}/healthz`,
    `  curl -s -X POST ${base}/v1/messages -H 'content-type: application/json' \\`,
    `    -d '{"messages":[{"from":"Acme","to":"+380501234567","type":"sms","text":"Hello from Switchboard","customerMessageId":"hello-1"}]}'`,
    `  curl -s ${base}/v1/messages/hello-1`,
    `  curl -s '${base}/v1/messages?limit=10'`,
    '',
    `API reference: ${base}/docs   OpenAPI: ${base}/openapi.json   Metrics: ${base}/metrics`,
    '',
  ].join('\n');
}
