/**
 * Builds the HTTP app from its parts. Every dependency is passed in (no module globals), so
 * tests build a real app on a real database and call `app.request(...)` with no open port.
 *
 * @example
 * const { app } = createApp({ config, database, logger });
 * const res = await app.request('/healthz');
 */
import { OpenAPIHono } from '@hono/zod-openapi';
import type { Hono, MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { requestId } from 'hono/request-id';
import { type Clock, systemClock } from './clock.ts';
import type { Config } from './config.ts';
import type { Database } from './db/client.ts';
import { docsRoutes } from './http/docs.ts';
import type { AppEnv } from './http/env.ts';
import { errorResponse, notFound, onError, validationHook } from './http/errors.ts';
import { createMetrics, type Metrics, metricsMiddleware } from './http/metrics.ts';
import { hookRoutes } from './http/routes/hooks.ts';
import { inboundRoutes } from './http/routes/inbound.ts';
import { messageRoutes } from './http/routes/messages.ts';
import { systemRoutes } from './http/routes/system.ts';
import type { Logger } from './logger.ts';
import { statusMapWith } from './messages/delivery-parse.ts';
import { outboxDepth } from './messages/dispatcher.ts';
import type { IngestDeps } from './messages/ingest.ts';

export interface AppDeps {
  config: Config;
  database: Database;
  logger: Logger;
  clock?: Clock;
  metrics?: Metrics;
  /** the built-in provider sandbox, mounted at /sandbox when no PROVIDER_BASE_URL is set */
  sandbox?: Hono;
  /** told when messages were queued, so this instance's dispatcher sends them at once */
  onQueued?: () => void;
}

export const VERSION = '0.1.0';

const KiB = 1024;
const MiB = 1024 * KiB;
// 5000 messages of a few KiB each; the hooks take arrays of events as large
const LARGE_BODY = 32 * MiB;
const DEFAULT_BODY = 1 * MiB;

function bodyLimits(): MiddlewareHandler<AppEnv> {
  const tooLarge = (max: number) =>
    bodyLimit({
      maxSize: max,
      onError: (c) =>
        errorResponse(c, 'PAYLOAD_TOO_LARGE', `the request body is larger than ${max / MiB} MiB`),
    });
  const large = tooLarge(LARGE_BODY);
  const small = tooLarge(DEFAULT_BODY);
  return (c, next) => {
    const path = c.req.path;
    const big =
      path === '/v1/messages' || path.startsWith('/hooks/') || path.startsWith('/sandbox/');
    return (big ? large : small)(c, next);
  };
}

function requestLogger(logger: Logger): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const start = performance.now();
    const log = logger.child({ requestId: c.get('requestId') });
    c.set('logger', log);
    await next();
    log.info(
      {
        method: c.req.method,
        path: c.req.path,
        status: c.res.status,
        ms: Math.round((performance.now() - start) * 10) / 10,
      },
      'request',
    );
  };
}

export function createApp(deps: AppDeps) {
  const clock = deps.clock ?? systemClock;
  const db = deps.database.db;
  const metrics = deps.metrics ?? createMetrics(() => outboxDepth(db));
  const ingest: IngestDeps = {
    db,
    clock,
    statusMap: statusMapWith(deps.config.deliveryStatusMap),
  };
  const app = new OpenAPIHono<AppEnv>({ defaultHook: validationHook });

  app.use('*', requestId());
  app.use('*', requestLogger(deps.logger));
  app.use('*', metricsMiddleware(metrics));
  app.use('*', bodyLimits());
  app.onError(onError);
  app.notFound(notFound);

  app.route('/', systemRoutes({ database: deps.database, metrics }));
  app.route(
    '/',
    messageRoutes({
      db,
      clock,
      maxSmsParts: deps.config.maxSmsParts,
      ...(deps.onQueued && { onQueued: deps.onQueued }),
    }),
  );
  app.route('/', inboundRoutes({ db }));
  app.route('/', hookRoutes({ config: deps.config, ingest, metrics }));
  if (deps.sandbox) app.route('/sandbox', deps.sandbox);

  app.doc31('/openapi.json', {
    openapi: '3.1.0',
    info: {
      title: 'Switchboard',
      version: VERSION,
      description:
        'IVR flows compiled to provider speech-call menus, callbacks correlated in Postgres, and status timelines.',
    },
    tags: [
      { name: 'system', description: 'liveness, readiness, metrics' },
      { name: 'messages', description: 'outbound messages and their timelines' },
      { name: 'inbound', description: 'incoming Viber messages' },
      { name: 'hooks', description: 'callbacks from the provider' },
    ],
  });
  app.route('/', docsRoutes());
  return { app, metrics, ingest };
}

export type App = ReturnType<typeof createApp>['app'];
