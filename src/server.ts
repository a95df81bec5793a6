/**
 * Runs Switchboard: database -> migrations -> HTTP server -> app (with the sandbox when no
 * provider is configured) -> workers, and the clean shutdown that undoes it in reverse.
 * `npm start` and `switchboard serve` both come here.
 */
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { createApp, databaseGauges } from './app.ts';
import { createFlowRegistry } from './calls/registry.ts';
import { systemClock } from './clock.ts';
import { type Config, isLoopbackHost } from './config.ts';
import { configuredDatabase, type Database, openDatabase } from './db/client.ts';
import { urlOnThisHost } from './db/data-dir-lock.ts';
import { errorFields } from './db/errors.ts';
import { migrateDatabase } from './db/migrate.ts';
import { ensurePartitions } from './db/partitions.ts';
import { openReadReplica } from './db/replica.ts';
import { applyEndpointsFile, loadEndpointsFile } from './events/endpoints-file.ts';
import { createTokenStore } from './http/api-tokens.ts';
import { answerClientErrors } from './http/client-errors.ts';
import { createMetrics } from './http/metrics.ts';
import { createOutboundPolicy } from './http/outbound.ts';
import type { Logger } from './logger.ts';
import { retentionCutoff } from './privacy/retention.ts';
import { loadWebhookSecrets } from './privacy/webhook-secret.ts';
import { type CascadeAuth, createCascadeClient } from './provider/cascade.ts';
import { createProviderClient, type ProviderAuth } from './provider/client.ts';
import { SANDBOX_TOKEN_HEADER } from './sandbox/access.ts';
import { type CreateSandboxOptions, createSandbox, type Sandbox } from './sandbox/app.ts';
import { erasedInSandbox } from './sandbox/erase.ts';
import { loadPromptSecret } from './speech/prompts.ts';
import { createSpeech, speechCapabilities } from './speech/spoken.ts';
import { createPromptStore } from './speech/store.ts';
import { startWorkers } from './workers.ts';

export interface RunningServer {
  url: string;
  port: number;
  publicUrl: string;
  providerBaseUrl: string;
  database: Database;
  sandbox: Sandbox | undefined;
  /** stops taking requests, lets those in flight finish, stops the workers, closes the database */
  stop(): Promise<void>;
}

const STARTING = Response.json(
  {
    error: { code: 'UNAVAILABLE', message: 'Switchboard is starting; retry shortly', details: [] },
  },
  { status: 503, headers: { 'Retry-After': '1' } },
);

/**
 * The sandbox's own credentials (its default API key; src/sandbox/README.md, "Credentials"),
 * used when no provider is configured.
 */
const SANDBOX_AUTH: ProviderAuth = { apiKey: 'sandbox-key' };

/**
 * The cascade API takes an API key (or a bot's token), not a login: with PROVIDER_LOGIN alone
 * there is no cascade, and cascade messages are rejected when their turn comes.
 */
function cascadeAuth(config: Config): CascadeAuth | undefined {
  if (config.provider.apiKey) return { apiKey: config.provider.apiKey };
  return config.providerBaseUrl ? undefined : { apiKey: 'sandbox-key' };
}

function providerAuth(config: Config): ProviderAuth {
  const { login, password, apiKey } = config.provider;
  if (login && password) return { login, password };
  if (apiKey) return { apiKey };
  return SANDBOX_AUTH;
}

export interface StartOptions {
  /** an open database to use (tests); it stays open when the server stops */
  database?: Database;
  /** extra sandbox settings (tests: faster timings, a manual clock, callback misbehaviour) */
  sandbox?: Omit<
    CreateSandboxOptions,
    'callbackUrl' | 'callbackToken' | 'logger' | 'access' | 'outbound'
  >;
}

export async function startServer(
  config: Config,
  logger: Logger,
  opts: StartOptions = {},
): Promise<RunningServer> {
  // read before anything starts: a bad ENDPOINTS_FILE stops the start, naming file:line
  const declaredEndpoints = await loadEndpointsFile(config);
  const database = opts.database ?? (await openDatabase(configuredDatabase(config)));
  logger.info(
    { engine: database.kind, ...(database.kind === 'pglite' && { dataDir: config.dataDir }) },
    'database open',
  );
  await migrateDatabase(database);
  logger.info('migrations applied');
  if (config.partitions.managed) {
    // today's and the next days' partitions before the first write (src/db/partitions.ts)
    const now = systemClock.now();
    const made = await ensurePartitions(database.db, now, config.partitions.aheadDays, {
      keepFrom: config.retentionDays ? retentionCutoff(now, config.retentionDays) : undefined,
    });
    if (made.length > 0) logger.info({ partitions: made.length }, 'day partitions made');
  }
  // DATABASE_READ_URL: the read routes query a streaming replica (docs/scaling.md)
  const replica =
    config.databaseReadUrl === undefined
      ? undefined
      : await openReadReplica({
          url: config.databaseReadUrl,
          primary: database,
          maxLagMs: config.databaseReadMaxLagMs,
          logger: logger.child({ component: 'replica' }),
        });
  if (declaredEndpoints) {
    const applied = await applyEndpointsFile(database.db, declaredEndpoints, systemClock);
    logger.info({ file: declaredEndpoints.file, ...applied }, 'ENDPOINTS_FILE applied');
  }

  // /v1 is open only while API_TOKEN is unset and no token was ever made (http/api-auth.ts)
  if (config.apiTokens.length === 0) {
    const made = await createTokenStore({ db: database.db, clock: systemClock }).anyMade();
    logger.warn(
      made
        ? 'API_TOKEN is not set: /v1 takes the tokens made with POST /v1/tokens; /ui is open unless UI_TOKEN is set'
        : 'API_TOKEN is not set and no API token was made: /v1 (and /ui, unless UI_TOKEN is set) is open to anyone who can reach this port',
    );
    const open = openWithoutToken(config, made);
    if (!isLoopbackHost(config.host) && open.length > 0) {
      // HOST was set on purpose (unset, it is loopback here): start, but say what it opens
      logger.warn(
        { host: config.host },
        `HOST=${config.host} with no API_TOKEN: ${open.join(' and ')} can be used by anyone on the network who reaches this port. Set API_TOKEN (and UI_TOKEN), or HOST=127.0.0.1`,
      );
    }
  }
  if (!config.callbackToken) {
    // against a real provider loadConfig refuses this unless CALLBACKS_OPEN says it is meant
    logger.warn(
      config.callbacksOpen
        ? 'CALLBACK_TOKEN is not set and CALLBACKS_OPEN=true: /hooks/delivery and /hooks/viber are open on purpose'
        : 'CALLBACK_TOKEN is not set: /hooks/delivery and /hooks/viber are open',
    );
  }

  // Listen first: with PORT=0 the port, and so the URLs the sandbox and the provider call
  // back, are known only then. Requests before the app is built get a 503.
  // env: Node's own request and response (@hono/node-server), which src/http/body.ts reads
  let handler: ((req: Request, env: unknown) => Response | Promise<Response>) | undefined;
  const server = await new Promise<ReturnType<typeof serve>>((resolve, reject) => {
    const s = serve(
      {
        fetch: (req, env) => handler?.(req, env) ?? STARTING.clone(),
        port: config.port,
        hostname: config.host,
      },
      () => resolve(s),
    );
    s.once('error', reject);
    // headers over Node's limit and broken HTTP: answered in the envelope (http/client-errors.ts)
    answerClientErrors(s);
  });
  const port = (server.address() as AddressInfo).port;
  const publicUrl = config.publicUrl.replace(/:0$/, `:${port}`);

  // Switchboard reaches its built-in sandbox at PUBLIC_URL, which need not be loopback (a
  // proxy, a LAN name): it always shows a token, SANDBOX_TOKEN or one made for this process.
  const sandboxToken = config.providerBaseUrl
    ? undefined
    : (config.sandboxToken ?? randomBytes(32).toString('base64url'));
  // what Switchboard and its sandbox send to addresses others chose: PUBLIC_URL is its own
  const outbound = createOutboundPolicy({
    allowPrivate: config.outboundAllowPrivate,
    ownOrigins: [publicUrl],
  });
  const sandbox = config.providerBaseUrl
    ? undefined
    : createSandbox({
        dialect: config.sandboxDialect,
        ...opts.sandbox,
        callbackUrl: `${publicUrl}/hooks/delivery`,
        ...(config.callbackToken && { callbackToken: config.callbackToken }),
        logger: logger.child({ component: 'sandbox' }),
        outbound,
        access: { token: sandboxToken, trustedProxies: config.trustedProxies },
      });
  const providerBaseUrl = config.providerBaseUrl ?? `${publicUrl}/sandbox`;
  const toSandbox =
    sandboxToken === undefined ? {} : { extraHeaders: { [SANDBOX_TOKEN_HEADER]: sandboxToken } };
  const metrics = createMetrics(databaseGauges(database));
  const provider = createProviderClient({
    baseUrl: providerBaseUrl,
    ...toSandbox,
    auth: providerAuth(config),
    onEvent: (e) => {
      if (e.type === 'response' && e.status === 429) metrics.provider429.inc();
    },
  });

  const cascadeKey = cascadeAuth(config);
  // one limiter for both clients: the provider's limits count the account's requests
  const cascade =
    cascadeKey &&
    createCascadeClient({
      baseUrl: providerBaseUrl,
      ...toSandbox,
      auth: cascadeKey,
      limiter: provider.limiter,
    });

  // spoken prompts: the engine's voices check the flows' `say:`, and each flow's prompts
  // without params render as it loads (src/speech/spoken.ts)
  const promptStore = createPromptStore(database.db, { dir: config.speech.promptsDir });
  const speech = createSpeech({
    db: database.db,
    config: { ...config, publicUrl },
    store: promptStore,
    secret: await loadPromptSecret(database.db, config.speech),
    clock: systemClock,
  });
  // the renders of the flows as they load at start; once done, the engine lets its memory go
  // at once rather than after its idle timeout (about 50 MB of RSS for eSpeak NG's thread),
  // since a server just started seldom renders again within seconds
  let startupRenders: Promise<void>[] | undefined = [];
  const flows = createFlowRegistry(
    config.flowsDir,
    { speech: await speechCapabilities(speech.engine) },
    {
      onCompiled: (compiled) => {
        const rendered = speech.spoken.prepareFlow(compiled);
        startupRenders?.push(rendered);
        rendered.catch((err: unknown) => {
          logger.warn(
            {
              flow: compiled.id,
              err: errorFields(err),
            },
            'spoken prompts of the flow not rendered yet; they render before its calls go',
          );
        });
      },
    },
  );
  const loaded = await flows.list();
  for (const flow of loaded) {
    if (flow.errors.length > 0) {
      logger.warn(
        { flow: flow.id, errors: flow.errors.length },
        'flow has errors; it cannot start calls',
      );
    }
  }
  logger.info({ flows: loaded.map((f) => f.id), dir: config.flowsDir }, 'flows loaded');
  void Promise.allSettled(startupRenders).then(() => speech.engine.idle?.());
  startupRenders = undefined;
  const secrets = await loadWebhookSecrets(database.db, config);

  let workers: ReturnType<typeof startWorkers> | undefined;
  const { app, ingest, calls, prompts } = createApp({
    flows,
    secrets,
    prompts: promptStore,
    spoken: speech.spoken,
    config: { ...config, publicUrl },
    database,
    ...(replica && { replica }),
    logger,
    metrics,
    ...(sandbox && {
      sandbox: sandbox.app,
      eraseInSandbox: (phone: string) => erasedInSandbox(sandbox.erase(phone)),
    }),
    onQueued: () => workers?.wake(),
  });
  handler = (req, env) => app.fetch(req, env);
  workers = startWorkers({
    database,
    provider,
    ...(cascade && { cascade }),
    clock: systemClock,
    logger,
    metrics,
    ingest,
    calls,
    dispatch: { batchSize: config.dispatchBatchSize, idleMaxMs: config.dispatchIdleMaxMs },
    poll: {
      afterMs: config.pollAfterMs,
      everyMs: config.pollEveryMs,
      maxEveryMs: config.pollEveryMaxMs,
      expireMarginMs: config.expireMarginMs,
    },
    retentionDays: config.retentionDays,
    auditRetentionDays: config.auditRetentionDays,
    partitions: config.partitions.managed ? { aheadDays: config.partitions.aheadDays } : undefined,
    outbound: outbound.send,
    prompts: { graceMs: config.speech.graceMs, removeFiles: prompts.removeFiles },
    spoken: speech.spoken,
    campaigns: {
      ...calls,
      logger: logger.child({ component: 'campaigns' }),
      window: config.campaigns.window,
      holidays: calls.limits!.holidays,
      capPerDay: config.campaigns.capPerDay,
      lifetimeSeconds: config.messageLifetimeSeconds,
    },
  });
  logger.info({ provider: providerBaseUrl, sandbox: sandbox !== undefined }, 'provider');
  await untilReady((req) => app.fetch(req), logger);

  let stopping: Promise<void> | undefined;
  const stop = () => {
    stopping ??= (async () => {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      // idle keep-alive sockets would hold close() open; busy ones finish their request first
      if ('closeIdleConnections' in server) server.closeIdleConnections();
      const deadline = setTimeout(
        () => {
          logger.warn('in-flight requests did not finish in time; closing their connections');
          if ('closeAllConnections' in server) server.closeAllConnections();
        },
        Math.max(1000, config.shutdownTimeoutMs - 3000),
      );
      await Promise.all([closed, workers?.stop(), sandbox?.close()]);
      await outbound.close();
      clearTimeout(deadline);
      await replica?.close();
      if (!opts.database) await database.close();
      logger.info('stopped');
    })();
    return stopping;
  };
  // CLI commands on this host find the server through its DATA_DIR lock (db/data-dir-lock.ts)
  database.dataDirLock?.announce(urlOnThisHost(server.address() as AddressInfo));
  return {
    url: baseUrlFor(config.host, port),
    port,
    publicUrl,
    providerBaseUrl,
    database,
    sandbox,
    stop,
  };
}

const READY_ATTEMPTS = 20;
const READY_EVERY_MS = 500;

/**
 * Resolves once the app's own `/readyz` answers 200 (asked in-process: the database answers and
 * the migrations are applied), so whoever is told the server is ready (the banner, the
 * "listening" line) finds every route answering. After 10 s it gives up with a warning and the
 * server runs on: `/readyz` keeps saying why.
 */
async function untilReady(
  fetchApp: (req: Request) => Response | Promise<Response>,
  logger: Logger,
): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    const res = await fetchApp(new Request('http://switchboard.internal/readyz'));
    if (res.status === 200) return;
    if (attempt >= READY_ATTEMPTS) {
      logger.warn({ readyz: await res.json() }, 'not ready after 10 s; see /readyz');
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, READY_EVERY_MS));
  }
}

/** What `/v1` and `/ui` leave open without API_TOKEN (`made`: tokens exist in the database). */
function openWithoutToken(config: Config, made: boolean): string[] {
  return [...(made ? [] : ['/v1']), ...(config.uiTokens.length > 0 ? [] : ['/ui'])];
}

/**
 * The address people type to reach a server listening on `host`: localhost for the wildcard
 * and the usual loopback names, the address itself otherwise.
 */
export function baseUrlFor(host: string, port: number): string {
  const h = host.replace(/^\[|\]$/g, '');
  if (['0.0.0.0', '::', '127.0.0.1', 'localhost'].includes(h)) return `http://localhost:${port}`;
  return `http://${h.includes(':') ? `[${h}]` : h}:${port}`;
}

/** Who can reach the server, and (when nothing guards it) how to open it safely. */
function reachLine(config: Config): string {
  const guarded = config.apiTokens.length > 0;
  if (isLoopbackHost(config.host)) {
    return guarded
      ? `Listening on ${config.host}: this machine only (HOST=0.0.0.0 opens it to the network).`
      : `Listening on ${config.host}: this machine only. To open it to the network, set API_TOKEN and UI_TOKEN (long random secrets: openssl rand -hex 32), then HOST=0.0.0.0.`;
  }
  return guarded
    ? `Listening on ${config.host}: reachable from the network; /v1 and /ui need a token.`
    : `WARNING: listening on ${config.host} with no API_TOKEN: anyone who reaches this port can use ${['/v1 (until a token is made with POST /v1/tokens)', ...(config.uiTokens.length > 0 ? [] : ['/ui'])].join(' and ')}. Set API_TOKEN and UI_TOKEN, or HOST=127.0.0.1.`;
}

/** What a new user can try against a freshly started server. */
export function nextSteps(config: Config, port: number): string {
  const base = baseUrlFor(config.host, port);
  return [
    '',
    `Switchboard is ready at ${base}  (database: ${config.databaseUrl ? 'Postgres' : `embedded, in ${config.dataDir}`}; provider: ${config.providerBaseUrl ?? `the built-in sandbox at ${base}/sandbox`})`,
    reachLine(config),
    '',
    `Console: ${base}/ui`,
    '',
    'Try:',
    `  curl -s ${base}/v1/flows`,
    // the sandbox's script of the keys the callee will press (only when it plays the provider)
    ...(config.providerBaseUrl
      ? []
      : [
          `  curl -s -X POST ${base}/sandbox/_control/scripts -H 'content-type: application/json' -d '{"to":"+380501234567","keys":["1"]}'`,
        ]),
    `  curl -s -X POST ${base}/v1/calls -H 'content-type: application/json' \\`,
    `    -d '{"flow":"appointment-reminder","to":"+380501234567","from":"Clinic","vars":{"name":"Ann","date":"Monday 10:00"}}'`,
    `  curl -s ${base}/v1/calls/<id from the answer>      # path, outcome, the follow-up SMS`,
    `  curl -s -X POST ${base}/v1/messages -H 'content-type: application/json' \\`,
    `    -d '{"messages":[{"from":"Acme","to":"+380501234567","type":"sms","text":"Hello","customerMessageId":"hello-1"}]}'`,
    `  curl -s ${base}/v1/messages/hello-1               # queued, accepted, sent, delivered`,
    '',
    `API reference: ${base}/docs   OpenAPI: ${base}/openapi.json   Metrics: ${base}/metrics   Readiness: ${base}/readyz`,
    '',
  ].join('\n');
}
