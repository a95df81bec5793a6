/**
 * Builds the HTTP app from its parts. Every dependency is passed in (no module globals), so
 * tests build a real app on a real database and call `app.request(...)` with no open port.
 *
 * @example
 * const { app } = createApp({ config, database, logger });
 * const res = await app.request('/healthz');
 */

import { randomBytes } from 'node:crypto';
import { OpenAPIHono } from '@hono/zod-openapi';
import type { Hono, MiddlewareHandler } from 'hono';
import { callStatusHook, type EventDeps } from './calls/events.ts';
import { callsByState } from './calls/read.ts';
import { createFlowRegistry, type FlowRegistry } from './calls/registry.ts';
import type { StartDeps } from './calls/start.ts';
import { loadHolidays } from './campaigns/windows.ts';
import { type Clock, systemClock } from './clock.ts';
import type { Config } from './config.ts';
import { databaseDown } from './db/availability.ts';
import type { Database, Db } from './db/client.ts';
import { partitionHealth } from './db/partitions.ts';
import type { ReadReplica } from './db/replica.ts';
import { createEndpointStore } from './events/endpoints.ts';
import { apiAuth } from './http/api-auth.ts';
import { createTokenStore } from './http/api-tokens.ts';
import { auditRequests } from './http/audit.ts';
import { bodyLimits } from './http/body.ts';
import { docsRoutes } from './http/docs.ts';
import type { AppEnv } from './http/env.ts';
import { notFound, onError, validationHook, whileDatabaseUp } from './http/errors.ts';
import { requestIds } from './http/headers.ts';
import { idempotency } from './http/idempotency.ts';
import { requestChecks } from './http/input.ts';
import {
  createMetrics,
  type MetricReaders,
  type Metrics,
  metricsMiddleware,
} from './http/metrics.ts';
import { createOutboundPolicy } from './http/outbound.ts';
import { pageHeaders } from './http/page-headers.ts';
import { readRouting } from './http/read-routing.ts';
import { auditRoutes } from './http/routes/audit.ts';
import { callRoutes } from './http/routes/calls.ts';
import { campaignRoutes } from './http/routes/campaigns.ts';
import { endpointRoutes } from './http/routes/endpoints.ts';
import { flowReplayRoutes } from './http/routes/flow-replay.ts';
import { flowVersionRoutes } from './http/routes/flow-versions.ts';
import { flowWriteRoutes } from './http/routes/flow-write.ts';
import { flowRoutes } from './http/routes/flows.ts';
import { hookRoutes } from './http/routes/hooks.ts';
import { inboundRoutes } from './http/routes/inbound.ts';
import { messageRoutes } from './http/routes/messages.ts';
import { optOutRoutes } from './http/routes/opt-outs.ts';
import { promptRoutes } from './http/routes/prompts.ts';
import { subjectRoutes } from './http/routes/subjects.ts';
import { systemRoutes } from './http/routes/system.ts';
import { tokenRoutes } from './http/routes/tokens.ts';
import type { Logger } from './logger.ts';
import { statusMapWith } from './messages/delivery-parse.ts';
import { outboxDepth } from './messages/dispatcher.ts';
import type { IngestDeps } from './messages/ingest.ts';
import type { WebhookSecrets } from './privacy/webhook-secret.ts';
import { createSpeech, type SpokenPrompts } from './speech/spoken.ts';
import { createPromptStore, type PromptStore } from './speech/store.ts';
import { httpSpans } from './tracing.ts';
import { consoleRoutes } from './ui/routes.tsx';

export interface AppDeps {
  config: Config;
  database: Database;
  logger: Logger;
  clock?: Clock;
  metrics?: Metrics;
  /** the built-in provider sandbox, mounted at /sandbox when no PROVIDER_BASE_URL is set */
  sandbox?: Hono;
  /** that sandbox's `erase`, counted: DELETE /v1/subjects/{phone} forgets the number there too */
  eraseInSandbox?: (phone: string) => number;
  /** told when messages were queued, so this instance's dispatcher sends them at once */
  onQueued?: () => void;
  /** the flows (default: the files in config.flowsDir) */
  flows?: FlowRegistry;
  /**
   * Speech-call token secrets (src/privacy/webhook-secret.ts). The server always passes the
   * configured or stored ones; without them (tests) the app makes a random one of its own.
   */
  secrets?: WebhookSecrets;
  /** rendered prompts (src/speech/store.ts); default: the database, or PROMPTS_DIR */
  prompts?: PromptStore;
  /**
   * `say:` prompts (src/speech/spoken.ts). The server passes them with the stored id secret;
   * without them (tests) the app makes its own, on SPEECH_ENGINE with a random secret.
   */
  spoken?: SpokenPrompts;
  /**
   * DATABASE_READ_URL's replica (src/db/replica.ts): the read routes (timelines, lists, stats,
   * the console's pages) query it, with read-your-writes (src/http/read-routing.ts)
   */
  replica?: ReadReplica;
}

export const VERSION = '0.1.0';

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

/** The /metrics gauges that are read from the database at each scrape, and whether it is up. */
export function databaseGauges(database: Database): MetricReaders {
  const { db, availability } = database;
  // known down: the scrape answers at once, and these gauges keep their last values
  const whileUp =
    <T>(read: (db: Db) => Promise<T>) =>
    () =>
      availability.up ? read(db) : Promise.reject(databaseDown());
  return {
    outboxDepth: whileUp(outboxDepth),
    callsByState: whileUp(callsByState),
    partitions: whileUp((db) => partitionHealth(db, new Date())),
    databaseUp: () => availability.up,
  };
}

export function createApp(deps: AppDeps) {
  const clock = deps.clock ?? systemClock;
  const db = deps.database.db;
  // what the read routes query: the replica's routed db, or the primary itself
  const readDb = deps.replica?.db ?? db;
  const metrics = deps.metrics ?? createMetrics(databaseGauges(deps.database));
  const flows = deps.flows ?? createFlowRegistry(deps.config.flowsDir);
  const secret = { id: 'local', key: randomBytes(32) };
  const secrets = deps.secrets ?? { signing: secret, verifying: [secret] };
  const prompts = deps.prompts ?? createPromptStore(db, { dir: deps.config.speech.promptsDir });
  const spoken =
    deps.spoken ??
    createSpeech({
      db,
      config: deps.config,
      store: prompts,
      secret: randomBytes(32).toString('base64url'),
      clock,
    }).spoken;
  const calls: StartDeps & EventDeps = {
    db,
    clock,
    flows,
    spoken,
    // windows, holidays and the cap: campaigns', and plain sends' that ask for them
    limits: {
      window: deps.config.campaigns.window,
      holidays: loadHolidays(deps.config.campaigns.holidaysDir),
      capPerDay: deps.config.campaigns.capPerDay,
    },
    maxSmsParts: deps.config.maxSmsParts,
    signingSecret: secrets.signing,
    verifyingSecrets: secrets.verifying,
    hookUrl: `${deps.config.publicUrl}/hooks/speechcall`,
    ...(deps.onQueued && { onQueued: deps.onQueued }),
  };
  const ingest: IngestDeps & { optOutWords: readonly string[] } = {
    db,
    clock,
    optOutWords: deps.config.optOutWords,
    statusMap: statusMapWith(deps.config.deliveryStatusMap),
    onRecorded: callStatusHook(calls),
  };
  const app = new OpenAPIHono<AppEnv>({ defaultHook: validationHook });

  // a server span per request, the parent of its database writes and provider requests;
  // mounted only when tracing is on (tracing.ts), so it costs nothing otherwise
  const spans = httpSpans();
  if (spans) app.use('*', spans);
  app.use('*', requestIds());
  app.use('*', requestLogger(deps.logger));
  app.use('*', metricsMiddleware(metrics));
  // the routes that need the database; /healthz, /readyz, /metrics and the docs stay open
  const gate = whileDatabaseUp(deps.database.availability);
  app.use('/hooks/*', gate);
  app.use('/v1/*', gate);
  const tokens = createTokenStore({ db, clock });
  const auth = apiAuth({ apiTokens: deps.config.apiTokens, store: tokens });
  // around the auth: it writes the row of every changing /v1 request the auth let through
  // (mounted on /v1 only, so the callbacks' hot path does not pass through it)
  app.use('/v1/*', auditRequests(db, clock));
  // before the body limit: a request without the token is refused before its body is read
  app.use('*', auth.middleware);
  // after the auth (a write's position is remembered per token): which reads may use the replica
  if (deps.replica) {
    const reads = readRouting(deps.replica);
    app.use('/v1/*', reads);
    app.use('/ui/*', reads);
  }
  app.use('*', bodyLimits());
  // URL length, path and query characters, a JSON body's charset and bytes (http/input.ts)
  app.use('*', requestChecks());
  // Idempotency-Key on the creating POSTs: after the auth (keys are the caller's) and the body
  // checks; without the header it does no database work (http/idempotency.ts)
  app.use('/v1/*', idempotency({ db, clock }));
  app.use('/ui/*', pageHeaders());
  app.use('/docs/*', pageHeaders());
  app.onError((err, c) => onError(err, c, deps.database.availability));
  app.notFound(notFound);

  app.route('/', systemRoutes({ database: deps.database, metrics }));
  app.route(
    '/',
    messageRoutes({
      db,
      readDb,
      clock,
      maxSmsParts: deps.config.maxSmsParts,
      lifetimeSeconds: deps.config.messageLifetimeSeconds,
      limits: calls.limits!,
      ...(deps.onQueued && { onQueued: deps.onQueued }),
    }),
  );
  app.route('/', inboundRoutes({ db: readDb }));
  app.route('/', optOutRoutes({ db, clock }));
  app.route(
    '/',
    subjectRoutes({
      db,
      clock,
      ...(deps.eraseInSandbox && { eraseInSandbox: deps.eraseInSandbox }),
      removePromptFiles: prompts.removeFiles,
    }),
  );
  app.route('/', callRoutes(calls, readDb));
  app.route(
    '/',
    campaignRoutes({ db, readDb, clock, flows, maxSmsParts: deps.config.maxSmsParts }),
  );
  app.route('/', flowRoutes({ db: readDb, flows }));
  app.route('/', flowVersionRoutes({ db: readDb, flows }));
  app.route('/', flowReplayRoutes({ db, flows, clock }));
  // PUT /v1/flows/{id}: off unless FLOWS_WRITABLE (a single-instance convenience)
  app.route(
    '/',
    flowWriteRoutes({ flows, dir: deps.config.flowsDir, writable: deps.config.flowsWritable }),
  );
  app.route('/', tokenRoutes({ store: tokens }));
  app.route('/', auditRoutes({ db: readDb }));
  // an endpoint's URL is held to the outbound policy when stored (the worker sends through it)
  const outbound = createOutboundPolicy({
    allowPrivate: deps.config.outboundAllowPrivate,
    ownOrigins: [deps.config.publicUrl],
  });
  const endpoints = createEndpointStore({ db, clock, checkUrl: outbound.check });
  app.route('/', endpointRoutes({ db, clock, store: endpoints }));
  app.route('/', hookRoutes({ config: deps.config, ingest, calls, metrics }));
  // rendered prompts, public: the provider fetches them (docs/speech.md)
  app.route('/', promptRoutes({ store: prompts, spoken }));
  if (deps.sandbox) app.route('/sandbox', deps.sandbox);
  app.route(
    '/ui',
    consoleRoutes({
      config: deps.config,
      db,
      readDb,
      clock,
      flows,
      calls,
      sandbox: deps.sandbox,
      tokens,
      spoken,
      availability: deps.database.availability,
    }),
  );

  // after every route is mounted: throws when a /v1 route declares no scope
  const routes = auth.seal(app);
  // /openapi.json (its info, servers, tags and error responses) and /docs: http/docs.ts
  app.route('/', docsRoutes(app, { version: VERSION, publicUrl: deps.config.publicUrl }));
  return { app, metrics, ingest, calls, routes, tokens, prompts, spoken };
}

export type App = ReturnType<typeof createApp>['app'];
