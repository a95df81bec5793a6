/**
 * The provider sandbox: the provider's whole interface (messaging, speech calls, cascade, bot
 * users, chat operators) as one Hono app, plus a control API, all state in memory. It speaks
 * one of two dialects (dialect.ts): `docs` (default), as the provider's public docs show, or
 * `compact`, as the condensed interface does.
 *
 * Routes are relative to the app's root, so the main server mounts it with
 * `app.route('/sandbox', sandbox.app)` and `npm run sandbox` serves it at `/`.
 *
 * @example
 * const sandbox = createSandbox({ clock: createManualClock(), callbackUrl: 'http://127.0.0.1:3000/hooks/delivery', dialect: 'docs' });
 * serve({ fetch: sandbox.app.fetch, port: 4010 });
 * await sandbox.close();
 */
import { Hono } from 'hono';
import { createAudioChecker } from '../flows/audio-check.ts';
import { createOutboundPolicy, type OutboundPolicy } from '../http/outbound.ts';
import type { Organization } from '../provider/chat.ts';
import { type SandboxAccessOptions, sandboxAccess } from './access.ts';
import { SandboxCredentials, type SandboxCredentialsInput } from './auth.ts';
import { type BotRegistry, createBotRegistry } from './bots.ts';
import {
  CallbackOptions,
  type CallbackOptionsInput,
  type CallbackSender,
  createCallbackSender,
} from './callbacks.ts';
import { type CascadeEngine, createCascadeEngine } from './cascade.ts';
import { type ChatStore, createChatStore } from './chat.ts';
import { createRealClock, type ManualClock, type SandboxClock, Scheduler } from './clock.ts';
import type {
  Fault,
  FaultBook,
  InboundViberMessage,
  SandboxContext,
  SandboxLogger,
} from './context.ts';
import { DEFAULT_DIALECT, SandboxDialect } from './dialect.ts';
import { eraseFromSandbox, type SandboxErasure } from './erase.ts';
import { providerError, useDocsErrors } from './http.ts';
import {
  createMessageEngine,
  LifecycleTimings,
  type LifecycleTimingsInput,
  type MessageEngine,
} from './messages.ts';
import { createRandom } from './random.ts';
import {
  type BucketLimit,
  createTokenBucket,
  DEFAULT_RATE_LIMITS,
  type RateCategory,
  type TokenBucket,
} from './rate-limit.ts';
import { botRoutes } from './routes/bots.ts';
import { cascadeRoutes } from './routes/cascade.ts';
import { chatRoutes } from './routes/chat.ts';
import { controlRoutes } from './routes/control.ts';
import { messagingRoutes } from './routes/messaging.ts';
import { createScriptBook, type ScriptBook } from './scripts.ts';

export interface CreateSandboxOptions {
  /**
   * What the sandbox reports (dialect.ts): `docs` (default), as the provider's public docs
   * show, or `compact`, as the condensed interface does. Input and lifecycles are the same.
   */
  dialect?: SandboxDialect;
  /** Default: the real clock. Pass `createManualClock()` to drive time from a test. */
  clock?: SandboxClock;
  /** Where delivery callbacks go (the host passes `${PUBLIC_URL}/hooks/delivery`); unset, none. */
  callbackUrl?: string;
  /** Where incoming Viber messages go; default: callbackUrl with /hooks/delivery -> /hooks/viber. */
  viberCallbackUrl?: string;
  /** Sent as X-Callback-Token on delivery and Viber callbacks (the receiver's CALLBACK_TOKEN). */
  callbackToken?: string;
  credentials?: SandboxCredentialsInput;
  /**
   * Every callback and webhook goes out through this (src/http/outbound.ts). Default: a policy
   * of its own that refuses private and loopback addresses except the callback URLs' origins,
   * closed with the sandbox.
   */
  outbound?: OutboundPolicy;
  /**
   * How a speech call's audio is fetched when the call is created (src/flows/audio-check.ts),
   * through `outbound`: the whole check of one URL (default 5000 ms) and the most of a body
   * read. A URL that does not answer with audio fails the call.
   */
  audioCheck?: { timeoutMs?: number; maxBytes?: number };
  logger?: SandboxLogger;
  /** Callback misbehaviour and retry policy; changeable later through /_control/options. */
  options?: CallbackOptionsInput;
  /** How long lifecycle steps take; see messages.ts and speechcall.ts for the defaults. */
  timings?: LifecycleTimingsInput;
  rateLimits?: Partial<Record<RateCategory, BucketLimit>>;
  organizations?: readonly Organization[];
  /** Seed for shuffled callbacks and flash-call codes. */
  seed?: number;
  /** Most SMS parts a message may need (validateMessage's default when unset). */
  maxSmsParts?: number;
  /** About how many messages are kept for lookups (default 100 000); see messages.ts. */
  keepMessages?: number;
  /**
   * Who besides this host may use it (access.ts): SANDBOX_TOKEN, sent as X-Sandbox-Token, and
   * TRUSTED_PROXIES. Unset: loopback clients and in-process requests only.
   */
  access?: SandboxAccessOptions;
}

export interface Sandbox {
  app: Hono;
  /** What the sandbox reports: `docs` or `compact`. */
  dialect: SandboxDialect;
  clock: SandboxClock;
  credentials: SandboxCredentials;
  /** Forgets every message, call, callback, script, user and operator; options back to start. */
  reset(): void;
  /** Forgets one person, in every form their number is written (erase.ts); says how much. */
  erase(phone: string): SandboxErasure;
  /** Cancels everything scheduled and waits for callbacks in flight. */
  close(): Promise<void>;
  /** In-process views of the state, for tests (the control API shows the same over HTTP). */
  messages: MessageEngine;
  callbacks: CallbackSender;
  cascade: CascadeEngine;
  bots: BotRegistry;
  chat: ChatStore;
  scripts: ScriptBook;
}

function createFaultBook(): FaultBook {
  let faults: Fault[] = [];
  return {
    add: (fault) => {
      faults.push({ ...fault });
    },
    take(path) {
      const fault = faults.find((f) => path.endsWith(f.path));
      if (fault === undefined) return undefined;
      fault.count--;
      if (fault.count <= 0) faults = faults.filter((f) => f !== fault);
      return fault.status;
    },
    list: () => faults.map((f) => ({ ...f })),
    clear: () => {
      faults = [];
    },
  };
}

/** The Viber callback URL next to a delivery callback URL that ends in /hooks/delivery. */
export function deriveViberCallbackUrl(callbackUrl: string | undefined): string | undefined {
  if (callbackUrl === undefined) return undefined;
  const url = new URL(callbackUrl);
  if (!url.pathname.endsWith('/hooks/delivery')) return undefined;
  url.pathname = url.pathname.replace(/\/hooks\/delivery$/, '/hooks/viber');
  return url.toString();
}

/**
 * Builds a sandbox. Nothing listens: serve `app.fetch` (or mount `app`) to use it over HTTP.
 *
 * @example
 * const sandbox = createSandbox({ callbackUrl: `${publicUrl}/hooks/delivery` });
 * root.route('/sandbox', sandbox.app);
 */
export function createSandbox(opts: CreateSandboxOptions = {}): Sandbox {
  const dialect = SandboxDialect.parse(opts.dialect ?? DEFAULT_DIALECT);
  const clock = opts.clock ?? createRealClock();
  const manualClock = clock.manual ? (clock as ManualClock) : undefined;
  const scheduler = new Scheduler(clock);
  const credentials = SandboxCredentials.parse(opts.credentials ?? {});
  const initialOptions = CallbackOptions.parse(opts.options ?? {});
  const initialTimings = LifecycleTimings.parse(opts.timings ?? {});
  let options = initialOptions;
  let timings = initialTimings;
  const random = createRandom(opts.seed);
  const limits = { ...DEFAULT_RATE_LIMITS, ...opts.rateLimits };
  const makeBuckets = (): Record<RateCategory, TokenBucket> => ({
    messaging: createTokenBucket(limits.messaging, clock),
    data: createTokenBucket(limits.data, clock),
    chat: createTokenBucket(limits.chat, clock),
  });
  let buckets = makeBuckets();
  const callbackHeaders: Record<string, string> =
    opts.callbackToken === undefined ? {} : { 'x-callback-token': opts.callbackToken };
  const callbackUrl = opts.callbackUrl;
  const viberCallbackUrl = opts.viberCallbackUrl ?? deriveViberCallbackUrl(callbackUrl);
  const outbound =
    opts.outbound ??
    createOutboundPolicy({ allowPrivate: false, ownOrigins: [callbackUrl, viberCallbackUrl] });

  // a speech call's audio checks still under way when the sandbox closes stop at once
  const stopChecks = new AbortController();
  const sender = createCallbackSender({
    scheduler,
    send: outbound.send,
    options: () => options,
    random,
    ...(opts.logger !== undefined && { logger: opts.logger }),
  });
  const scripts = createScriptBook();
  const bots = createBotRegistry();
  const messages = createMessageEngine({
    dialect,
    scheduler,
    sender,
    scripts,
    random,
    timings: () => timings,
    callbackUrl,
    callbackHeaders,
    ...(opts.maxSmsParts !== undefined && { maxSmsParts: opts.maxSmsParts }),
    ...(opts.keepMessages !== undefined && { keepMessages: opts.keepMessages }),
    checkAudio: createAudioChecker({ outbound, signal: stopChecks.signal, ...opts.audioCheck }),
  });
  const cascade = createCascadeEngine({
    dialect,
    scheduler,
    sender,
    bots,
    timings: () => timings,
    callbackUrl,
    callbackHeaders,
  });
  const chat = createChatStore({
    clock,
    credentials,
    ...(opts.organizations !== undefined && { organizations: opts.organizations }),
  });
  let inbound: InboundViberMessage[] = [];
  const faults = createFaultBook();

  function reset(): void {
    scheduler.cancelAll();
    sender.reset();
    scripts.clear();
    bots.reset();
    messages.reset();
    cascade.reset();
    chat.reset();
    inbound = [];
    faults.clear();
    options = initialOptions;
    timings = initialTimings;
    buckets = makeBuckets();
  }

  const ctx: SandboxContext = {
    dialect,
    clock,
    manualClock,
    scheduler,
    credentials,
    messages,
    cascade,
    bots,
    chat,
    sender,
    scripts,
    buckets: () => buckets,
    options: {
      get: () => options,
      set: (patch) => {
        options = CallbackOptions.parse({ ...options, ...patch });
        return options;
      },
    },
    timings: {
      get: () => timings,
      set: (patch) => {
        timings = LifecycleTimings.parse({ ...timings, ...patch });
        return timings;
      },
    },
    callbackUrl,
    viberCallbackUrl,
    callbackHeaders,
    faults,
    inbound: {
      add: (m) => {
        inbound.push(m);
      },
      list: () => inbound,
      forget: (mentions) => {
        const before = inbound.length;
        inbound = inbound.filter((m) => !mentions(m));
        return before - inbound.length;
      },
    },
    reset,
    ...(opts.logger !== undefined && { logger: opts.logger }),
  };

  const app = new Hono();
  app.onError((error, c) => {
    opts.logger?.error({ err: error, path: c.req.path }, 'sandbox error');
    return providerError(c, 500, 'INTERNAL', 'the sandbox failed to handle this request');
  });
  // docs dialect: the messaging API's errors take the docs' body (send-message.md).
  if (dialect === 'docs') {
    app.use('*', async (c, next) => {
      if (/\/bat\//.test(c.req.path) && !c.req.path.includes('/_control')) useDocsErrors(c);
      await next();
    });
  }
  // Only this host or SANDBOX_TOKEN, before anything else happens (a fault is not taken).
  app.use('*', sandboxAccess(opts.access));
  // Injected server errors (POST /_control/faults), answered before anything else.
  app.use('*', async (c, next) => {
    if (c.req.path.includes('/_control')) return next();
    const status = faults.take(c.req.path);
    if (status === undefined) return next();
    return providerError(c, status, 'INTERNAL', 'injected server error (POST /_control/faults)');
  });
  app.route('/', messagingRoutes(ctx));
  app.route('/', cascadeRoutes(ctx));
  app.route('/', botRoutes(ctx));
  app.route('/chat', chatRoutes(ctx));
  app.route('/_control', controlRoutes(ctx));
  // Mounted under a prefix, the host's notFound would answer; this keeps the sandbox's body.
  app.all('*', (c) =>
    providerError(c, 404, 'NOT_FOUND', `no such endpoint: ${c.req.method} ${c.req.path}`),
  );

  return {
    app,
    dialect,
    clock,
    credentials,
    reset,
    erase: (phone) => eraseFromSandbox(ctx, phone),
    async close() {
      scheduler.cancelAll();
      stopChecks.abort();
      await clock.settled();
      if (opts.outbound === undefined) await outbound.close();
    },
    messages,
    callbacks: sender,
    cascade,
    bots,
    chat,
    scripts,
  };
}
