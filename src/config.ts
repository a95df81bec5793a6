/**
 * The environment, parsed once with zod. Nothing else in Switchboard reads `process.env`:
 * everything takes a `Config` (or the part it needs) as an argument.
 *
 * @example
 * const config = loadConfig(process.env); // throws ConfigError naming the bad variable
 */
import { isIP } from 'node:net';
import { z } from 'zod';
import { type CallingWindow, parseWindowSetting } from './campaigns/windows.ts';
import { DEFAULT_OPT_OUT_WORDS } from './opt-outs/words.ts';

/** Campaign calls start 09:00-20:00 in the recipient's time zone, not on Sundays. */
export const DEFAULT_CALLING_WINDOW = '09:00-20:00 mon-sat';

import { DEFAULT_LIFETIME_SECONDS } from './provider/message.ts';

/** POLL_EVERY_MAX_SECONDS unset: polls of a quiet message end up an hour apart */
const DEFAULT_POLL_EVERY_MAX_SECONDS = 3600;

const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v.trim()));

/** A retention limit in whole days, at least 1; unset keeps `what` forever. */
function retentionDays(what: string) {
  return optionalString.transform((v, ctx) => {
    if (v === undefined) return undefined;
    if (!/^\d+$/.test(v) || Number(v) < 1) {
      ctx.addIssue({
        code: 'custom',
        message: `must be a whole number of days, at least 1 (unset keeps ${what} forever), got "${v}"`,
      });
      return z.NEVER;
    }
    return Number(v);
  });
}

const url = (what: string) =>
  optionalString.refine(
    (v) => v === undefined || /^https?:\/\/[^\s]+$/i.test(v),
    `must be an absolute http(s) URL (${what})`,
  );

const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no', ''])
  .optional()
  .transform((v) => v === 'true' || v === '1' || v === 'yes');

const postgresUrl = optionalString.refine(
  (v) => v === undefined || /^postgres(ql)?:\/\//.test(v),
  'must be a postgres:// or postgresql:// URL',
);

/** A yes/no setting that is yes unless it says no (false, 0, no). */
const boolDefaultTrue = z
  .enum(['true', 'false', '1', '0', 'yes', 'no', ''])
  .optional()
  .transform((v) => v !== 'false' && v !== '0' && v !== 'no');

/** A whole number; `fallback` when unset (undefined: the variable's absence is kept) */
const positiveInt = <F extends number | undefined>(fallback: F) =>
  z
    .string()
    .optional()
    .transform((v, ctx): number | F => {
      if (v === undefined || v.trim() === '') return fallback;
      if (!/^\d+$/.test(v.trim())) {
        ctx.addIssue({ code: 'custom', message: `must be a whole number, got "${v}"` });
        return z.NEVER;
      }
      return Number(v.trim());
    });

/** where the embedded database lives when DATA_DIR is unset */
export const DEFAULT_DATA_DIR = './.data';

export const EnvSchema = z.object({
  // 0 asks the OS for a free port (tests); the chosen one is logged
  PORT: positiveInt(3000).refine((p) => p < 65536, 'must be a port between 0 and 65535'),
  // unset: loopback without API_TOKEN (nothing guards /v1 and /ui), every interface with it
  HOST: optionalString,
  DATABASE_URL: postgresUrl,
  // behind a pooler in transaction mode (docs/scaling.md, "Behind PgBouncer"): the server
  // itself, for what needs a session of its own (advisory locks, LISTEN, migrations)
  DATABASE_DIRECT_URL: postgresUrl,
  // false: DATABASE_URL's statements are not prepared on the server (PgBouncer before 1.21)
  DATABASE_PREPARE: boolDefaultTrue,
  // a streaming replica the read routes query (docs/scaling.md, "Read replicas")
  DATABASE_READ_URL: postgresUrl,
  // reads go to the primary while the replica is staler than this
  DATABASE_READ_MAX_LAG_MS: positiveInt(2000).refine((n) => n >= 1, 'must be at least 1'),
  DATA_DIR: optionalString,
  PUBLIC_URL: url('the base the provider calls back'),
  PROVIDER_BASE_URL: url("the provider's {base_url}"),
  PROVIDER_LOGIN: optionalString,
  PROVIDER_PASSWORD: optionalString,
  PROVIDER_API_KEY: optionalString,
  CALLBACK_TOKEN: optionalString,
  // against a real provider, a start without CALLBACK_TOKEN is refused unless this says so
  CALLBACKS_OPEN: bool,
  API_TOKEN: optionalString,
  UI_TOKEN: optionalString,
  WEBHOOK_SECRET: optionalString,
  // the built-in sandbox answers loopback peers, and others only with this token
  SANDBOX_TOKEN: optionalString,
  // private and loopback addresses are refused to outbound requests unless this is set
  OUTBOUND_ALLOW_PRIVATE: bool,
  // peers whose X-Forwarded-For / X-Forwarded-Proto are believed: addresses or CIDR ranges
  TRUSTED_PROXIES: optionalString.transform((v, ctx) => {
    const list = (v ?? '')
      .split(',')
      .map((p) => p.trim())
      .filter((p) => p !== '');
    for (const entry of list) {
      const [address, bits, extra] = entry.split('/');
      const family = isIP(address ?? '');
      const maxBits = family === 6 ? 128 : 32;
      if (
        family === 0 ||
        extra !== undefined ||
        (bits !== undefined && (!/^\d{1,3}$/.test(bits) || Number(bits) > maxBits))
      ) {
        ctx.addIssue({
          code: 'custom',
          message: `must be comma-separated IP addresses or CIDR ranges (10.0.0.0/8, ::1), got "${entry}"`,
        });
        return z.NEVER;
      }
    }
    return list;
  }),
  LOG_LEVEL: z
    .enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
    .optional()
    .default('info'),
  LOG_PII: bool,
  // auto: readable lines when stdout is a terminal, JSON lines otherwise
  LOG_FORMAT: z
    .enum(['auto', 'json', 'pretty', ''], {
      error: (issue) => `must be auto, json or pretty, got "${String(issue.input)}"`,
    })
    .optional()
    .transform((v) => (v === undefined || v === '' ? 'auto' : v)),
  FLOWS_DIR: optionalString,
  // the console and PUT /v1/flows/{id} may write flow files (one instance only: docs/flows.md)
  FLOWS_WRITABLE: bool,
  // a YAML file of event endpoints applied at start (src/events/endpoints-file.ts)
  ENDPOINTS_FILE: optionalString,
  SHUTDOWN_TIMEOUT_MS: positiveInt(10_000),
  // the longest an idle leader's dispatcher sleeps between rounds while it listens for queued
  // messages (src/workers.ts): what a notification lost on a broken connection costs at most
  DISPATCH_IDLE_MAX_MS: positiveInt(5000),
  DELIVERY_STATUS_MAP: optionalString.transform((v, ctx) => {
    if (v === undefined) return {};
    const out: Record<string, string> = {};
    const pairs = v.startsWith('{')
      ? Object.entries(safeJson(v) ?? { '': '' })
      : v.split(',').map((p) => p.split('='));
    for (const [word, status] of pairs) {
      if (
        typeof word !== 'string' ||
        typeof status !== 'string' ||
        !word.trim() ||
        !status.trim()
      ) {
        ctx.addIssue({
          code: 'custom',
          message: 'must be "word=status,word=status" or a JSON object of word -> status',
        });
        return z.NEVER;
      }
      out[word.trim()] = status.trim();
    }
    return out;
  }),
  MAX_SMS_PARTS: positiveInt(10).refine((n) => n >= 1, 'must be at least 1'),
  DISPATCH_BATCH_SIZE: positiveInt(5000).refine(
    (n) => n >= 1 && n <= 5000,
    'must be between 1 and 5000 (the provider takes at most 5000 messages per request)',
  ),
  POLL_AFTER_SECONDS: positiveInt(900),
  POLL_EVERY_SECONDS: positiveInt(300).refine((n) => n >= 1, 'must be at least 1'),
  // the wait between polls of one message doubles from POLL_EVERY_SECONDS up to this; unset:
  // an hour, or POLL_EVERY_SECONDS when that is longer
  POLL_EVERY_MAX_SECONDS: positiveInt(undefined),
  // a message that never gets a final status is marked expired this long after its end
  EXPIRE_MARGIN_SECONDS: positiveInt(3600),
  // the life of a message that states none and whose type has no documented default TTL
  MESSAGE_LIFETIME_SECONDS: positiveInt(DEFAULT_LIFETIME_SECONDS).refine(
    (n) => n >= 1,
    'must be at least 1',
  ),
  // what the built-in sandbox reports: as the provider's public docs show, or the condensed interface
  SANDBOX_DIALECT: optionalString.transform((v, ctx) => {
    if (v === undefined) return 'docs' as const;
    if (v === 'docs' || v === 'compact') return v;
    ctx.addIssue({ code: 'custom', message: `must be "docs" or "compact", got "${v}"` });
    return z.NEVER;
  }),
  // unset keeps everything forever; 0 is refused rather than read as "delete at once"
  RETENTION_DAYS: retentionDays('data'),
  // the audit log's own limit: who changed what is often kept longer than what was sent
  AUDIT_RETENTION_DAYS: retentionDays('the audit log'),
  // the timelines' day partitions (src/db/partitions.ts): made by the server, or by another tool
  PARTITIONS: optionalString.transform((v, ctx) => {
    if (v === undefined) return 'switchboard' as const;
    if (v === 'switchboard' || v === 'external') return v;
    ctx.addIssue({ code: 'custom', message: `must be "switchboard" or "external", got "${v}"` });
    return z.NEVER;
  }),
  PARTITIONS_AHEAD_DAYS: positiveInt(7),
  // a Viber reply that is one of these words, as a whole, opts its sender out (docs/opt-outs.md)
  OPT_OUT_WORDS: optionalString.transform((v): readonly string[] => {
    if (v === undefined) return DEFAULT_OPT_OUT_WORDS;
    const words = v
      .split(',')
      .map((w) => w.trim())
      .filter((w) => w !== '');
    return words.length > 0 ? words : DEFAULT_OPT_OUT_WORDS;
  }),
  // campaigns (src/campaigns/, docs/campaigns.md): the default calling window, holidays, the cap
  CALLING_WINDOW: optionalString.transform((v, ctx) => {
    try {
      return parseWindowSetting(v ?? DEFAULT_CALLING_WINDOW);
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: err instanceof Error ? err.message : String(err) });
      return z.NEVER;
    }
  }),
  HOLIDAYS_DIR: optionalString.transform((v) => v ?? 'holidays'),
  CONTACT_CAP_PER_DAY: optionalString.transform((v, ctx) => {
    if (v === undefined) return undefined;
    if (/^[1-9]\d{0,3}$/.test(v)) return Number(v);
    ctx.addIssue({
      code: 'custom',
      message: `must be a whole number from 1 (unset: no cap), got "${v}"`,
    });
    return z.NEVER;
  }),
  // spoken prompts (src/speech/, docs/speech.md): the engine, the file format, where audio lives
  SPEECH_ENGINE: optionalString.transform((v, ctx) => {
    if (v === undefined) return 'espeak' as const;
    if (v === 'espeak' || v === 'http') return v;
    ctx.addIssue({ code: 'custom', message: `must be "espeak" or "http", got "${v}"` });
    return z.NEVER;
  }),
  SPEECH_HTTP_URL: url('the text-to-speech service SPEECH_ENGINE=http posts to'),
  // the languages that service speaks, comma-separated (it is not asked)
  SPEECH_HTTP_LANGUAGES: optionalString.transform((v, ctx) => {
    const list = (v ?? 'en')
      .split(',')
      .map((l) => l.trim().toLowerCase())
      .filter((l) => l !== '');
    const bad = list.find((l) => !/^[a-z]{2,3}(-[a-z0-9]{1,8})*$/.test(l));
    if (bad !== undefined || list.length === 0) {
      ctx.addIssue({
        code: 'custom',
        message: `must be comma-separated language codes (en, en-us, uk), got "${v}"`,
      });
      return z.NEVER;
    }
    return list;
  }),
  SPEECH_FORMAT: optionalString.transform((v, ctx) => {
    if (v === undefined) return 'wav8k' as const;
    if (v === 'wav8k' || v === 'wav16k' || v === 'mp3') return v;
    ctx.addIssue({ code: 'custom', message: `must be wav8k, wav16k or mp3, got "${v}"` });
    return z.NEVER;
  }),
  // the key of prompt URLs' HMAC ids; unset: generated once and kept in the database
  PROMPT_SECRET: optionalString.refine(
    (v) => v === undefined || Buffer.byteLength(v, 'utf8') >= 32,
    'must be at least 32 characters (openssl rand -hex 32); unset: one is generated and kept in the database',
  ),
  // a directory for the audio files instead of the database (shared by every instance)
  PROMPTS_DIR: optionalString,
  // a personal prompt is removed this long after its call ended
  PROMPT_GRACE_MINUTES: positiveInt(60).refine((n) => n >= 1, 'must be at least 1'),
});

function safeJson(v: string): Record<string, unknown> | undefined {
  try {
    const parsed: unknown = JSON.parse(v);
    return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)
      ? (parsed as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

export interface Config {
  port: number;
  host: string;
  /** unset: the embedded PGlite database in `dataDir` */
  databaseUrl: string | undefined;
  /** DATABASE_DIRECT_URL: session work past a pooler (locks, LISTEN, migrations); unset: databaseUrl */
  databaseDirectUrl: string | undefined;
  /** DATABASE_PREPARE: statements on databaseUrl's connections are prepared (default true) */
  databasePrepare: boolean;
  /** DATABASE_READ_URL: a streaming replica for the read routes (src/db/replica.ts); unset: none */
  databaseReadUrl: string | undefined;
  /** DATABASE_READ_MAX_LAG_MS: reads go to the primary while the replica is staler than this */
  databaseReadMaxLagMs: number;
  dataDir: string;
  publicUrl: string;
  /** unset: the built-in sandbox, mounted at `${publicUrl}/sandbox` */
  providerBaseUrl: string | undefined;
  provider: { login?: string; password?: string; apiKey?: string };
  /** the first of CALLBACK_TOKEN's tokens: the one to give the provider (and the sandbox) */
  callbackToken: string | undefined;
  /** CALLBACK_TOKEN (comma-separated, for rotation): every token a callback may carry */
  callbackTokens: string[];
  /** CALLBACKS_OPEN: run without CALLBACK_TOKEN against a real provider, on purpose */
  callbacksOpen: boolean;
  apiTokens: string[];
  /** UI_TOKEN (comma-separated, for rotation): the console's own token; empty: API_TOKEN's */
  uiTokens: string[];
  webhookSecret: string | undefined;
  /** SANDBOX_TOKEN: lets non-loopback clients use the built-in sandbox */
  sandboxToken: string | undefined;
  /** OUTBOUND_ALLOW_PRIVATE: outbound requests may reach private and loopback addresses */
  outboundAllowPrivate: boolean;
  /** TRUSTED_PROXIES: addresses and CIDR ranges whose forwarding headers are believed */
  trustedProxies: string[];
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  logPii: boolean;
  /** LOG_FORMAT: JSON lines, readable lines, or (auto) readable on a terminal only */
  logFormat: 'auto' | 'json' | 'pretty';
  flowsDir: string;
  /** FLOWS_WRITABLE: an admin token may write flow files from the console or the API */
  flowsWritable: boolean;
  /** ENDPOINTS_FILE: event endpoints declared in YAML, applied at start; unset: none */
  endpointsFile: string | undefined;
  /**
   * Reads the variable an ENDPOINTS_FILE entry names for its secret (`secretEnv`), when the
   * file is applied: a function, so no secret sits in the config object itself.
   */
  secretFromEnv: (name: string) => string | undefined;
  shutdownTimeoutMs: number;
  /** vendor status words added to (or overriding) the built-in table */
  deliveryStatusMap: Record<string, string>;
  maxSmsParts: number;
  dispatchBatchSize: number;
  /** DISPATCH_IDLE_MAX_MS: the longest an idle leader's dispatcher sleeps (src/workers.ts) */
  dispatchIdleMaxMs: number;
  /** poll the provider about messages with no final status after this long */
  pollAfterMs: number;
  pollEveryMs: number;
  /** POLL_EVERY_MAX_SECONDS: the longest wait between two polls of one message */
  pollEveryMaxMs: number;
  /** how long after its end a message with no final status is marked expired */
  expireMarginMs: number;
  /** the life of a message that states none (no ttl, no dtExpire, no default for its type) */
  messageLifetimeSeconds: number;
  /** raw callbacks, message texts and events older than this many days are removed; unset: kept */
  retentionDays: number | undefined;
  /** AUDIT_RETENTION_DAYS: audit rows older than this many days are removed; unset: kept */
  auditRetentionDays: number | undefined;
  /**
   * PARTITIONS: who makes and drops the timelines' day partitions: the server (`switchboard`,
   * PARTITIONS_AHEAD_DAYS ahead) or another tool (`external`: pg_partman, docs/scaling.md)
   */
  partitions: { managed: boolean; aheadDays: number };
  /** OPT_OUT_WORDS: a Viber reply that is one of these, as a whole, opts its sender out */
  optOutWords: readonly string[];
  /** SANDBOX_DIALECT: what the built-in sandbox reports (src/sandbox/dialect.ts); default docs */
  sandboxDialect: 'docs' | 'compact';
  /** campaigns (docs/campaigns.md) */
  campaigns: {
    /** CALLING_WINDOW: when campaign calls may start, for campaigns without their own window */
    window: CallingWindow;
    /** HOLIDAYS_DIR: `<ISO country>.txt` files of public holidays (no calls on them) */
    holidaysDir: string;
    /** CONTACT_CAP_PER_DAY: campaign calls per number per local day, across campaigns */
    capPerDay: number | undefined;
  };
  /** spoken prompts: the engine, file format, id secret and store (docs/speech.md) */
  speech: {
    engine: 'espeak' | 'http';
    /** SPEECH_HTTP_URL: where SPEECH_ENGINE=http posts; set whenever the engine is http */
    httpUrl: string | undefined;
    /** SPEECH_HTTP_LANGUAGES: what that service speaks */
    httpLanguages: string[];
    format: 'wav8k' | 'wav16k' | 'mp3';
    /** PROMPT_SECRET; unset: generated once and kept in `settings` (src/speech/prompts.ts) */
    promptSecret: string | undefined;
    /** PROMPTS_DIR: audio files here instead of in the database */
    promptsDir: string | undefined;
    /** how long after its call ends a personal prompt is kept */
    graceMs: number;
  };
}

/** Where the server listens when HOST is unset: loopback unless API_TOKEN guards /v1 and /ui. */
/** A comma-separated list of tokens (rotation: the new one and the old one), blanks dropped. */
function tokenList(value: string | undefined): string[] {
  return (value ?? '')
    .split(',')
    .map((t) => t.trim())
    .filter((t) => t !== '');
}

export function defaultHost(apiTokens: readonly string[]): string {
  return apiTokens.length > 0 ? '0.0.0.0' : '127.0.0.1';
}

/**
 * Whether an address to listen on is reachable from this machine only (127.0.0.0/8, ::1,
 * localhost); the wildcard and every other address are not.
 */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  return (
    h === 'localhost' || h === '::1' || /^127\.\d+\.\d+\.\d+$/.test(h) || h === '::ffff:127.0.0.1'
  );
}

/** A configuration problem, naming the variable and the rule it broke. */
export class ConfigError extends Error {
  constructor(readonly problems: { variable: string; message: string }[]) {
    super(
      `invalid configuration:\n${problems.map((p) => `  ${p.variable}: ${p.message}`).join('\n')}`,
    );
    this.name = 'ConfigError';
  }
}

/** Parses the environment; throws `ConfigError` listing every bad variable. */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const parsed = EnvSchema.safeParse(env);
  if (!parsed.success) {
    throw new ConfigError(
      parsed.error.issues.map((issue) => ({
        variable: String(issue.path[0] ?? 'environment'),
        message: issue.message,
      })),
    );
  }
  const e = parsed.data;
  // the sandbox is reached through this server; a real provider calls back from the internet,
  // where open hooks would let anyone write statuses and incoming messages
  if (e.PROVIDER_BASE_URL !== undefined && e.CALLBACK_TOKEN === undefined && !e.CALLBACKS_OPEN) {
    throw new ConfigError([
      {
        variable: 'CALLBACK_TOKEN',
        message:
          'must be set when PROVIDER_BASE_URL names a real provider: without it anyone can post statuses and incoming messages to /hooks/delivery and /hooks/viber. Set CALLBACK_TOKEN to a long random secret (openssl rand -hex 32) and give the provider callback URLs ending in ?token=<it>, or set CALLBACKS_OPEN=true to run with open callbacks on purpose',
      },
    ]);
  }
  if (e.DATABASE_DIRECT_URL !== undefined && e.DATABASE_URL === undefined) {
    throw new ConfigError([
      {
        variable: 'DATABASE_DIRECT_URL',
        message:
          'is the direct way to the Postgres that DATABASE_URL reaches through a pooler: set DATABASE_URL too (unset, the embedded database is used and needs neither)',
      },
    ]);
  }
  if (e.DATABASE_READ_URL !== undefined && e.DATABASE_URL === undefined) {
    throw new ConfigError([
      {
        variable: 'DATABASE_READ_URL',
        message:
          "is a streaming replica of DATABASE_URL's Postgres: set DATABASE_URL too (the embedded database has no replicas)",
      },
    ]);
  }
  if (e.POLL_EVERY_MAX_SECONDS !== undefined && e.POLL_EVERY_MAX_SECONDS < e.POLL_EVERY_SECONDS) {
    throw new ConfigError([
      {
        variable: 'POLL_EVERY_MAX_SECONDS',
        message: `is the longest wait between two polls of a message, so it must be at least POLL_EVERY_SECONDS (${e.POLL_EVERY_SECONDS}), the first; got ${e.POLL_EVERY_MAX_SECONDS}`,
      },
    ]);
  }
  if (e.SPEECH_ENGINE === 'http' && e.SPEECH_HTTP_URL === undefined) {
    throw new ConfigError([
      {
        variable: 'SPEECH_HTTP_URL',
        message: 'must be set when SPEECH_ENGINE=http: the URL of the text-to-speech service',
      },
    ]);
  }
  const publicUrl = (e.PUBLIC_URL ?? `http://localhost:${e.PORT}`).replace(/\/+$/, '');
  const apiTokens = tokenList(e.API_TOKEN);
  const callbackTokens = tokenList(e.CALLBACK_TOKEN);
  return {
    port: e.PORT,
    host: e.HOST ?? defaultHost(apiTokens),
    databaseUrl: e.DATABASE_URL,
    databaseDirectUrl: e.DATABASE_DIRECT_URL,
    databasePrepare: e.DATABASE_PREPARE,
    databaseReadUrl: e.DATABASE_READ_URL,
    databaseReadMaxLagMs: e.DATABASE_READ_MAX_LAG_MS,
    dataDir: e.DATA_DIR ?? DEFAULT_DATA_DIR,
    publicUrl,
    providerBaseUrl: e.PROVIDER_BASE_URL?.replace(/\/+$/, ''),
    provider: {
      ...(e.PROVIDER_LOGIN !== undefined && { login: e.PROVIDER_LOGIN }),
      ...(e.PROVIDER_PASSWORD !== undefined && { password: e.PROVIDER_PASSWORD }),
      ...(e.PROVIDER_API_KEY !== undefined && { apiKey: e.PROVIDER_API_KEY }),
    },
    callbackToken: callbackTokens[0],
    callbackTokens,
    callbacksOpen: e.CALLBACKS_OPEN,
    apiTokens,
    uiTokens: tokenList(e.UI_TOKEN),
    webhookSecret: e.WEBHOOK_SECRET,
    sandboxToken: e.SANDBOX_TOKEN,
    outboundAllowPrivate: e.OUTBOUND_ALLOW_PRIVATE,
    trustedProxies: e.TRUSTED_PROXIES,
    logLevel: e.LOG_LEVEL,
    logPii: e.LOG_PII,
    logFormat: e.LOG_FORMAT,
    flowsDir: e.FLOWS_DIR ?? './flows',
    flowsWritable: e.FLOWS_WRITABLE,
    endpointsFile: e.ENDPOINTS_FILE,
    secretFromEnv: (name) => env[name],
    shutdownTimeoutMs: e.SHUTDOWN_TIMEOUT_MS,
    deliveryStatusMap: e.DELIVERY_STATUS_MAP,
    maxSmsParts: e.MAX_SMS_PARTS,
    dispatchBatchSize: e.DISPATCH_BATCH_SIZE,
    dispatchIdleMaxMs: e.DISPATCH_IDLE_MAX_MS,
    pollAfterMs: e.POLL_AFTER_SECONDS * 1000,
    pollEveryMs: e.POLL_EVERY_SECONDS * 1000,
    pollEveryMaxMs:
      (e.POLL_EVERY_MAX_SECONDS ?? Math.max(DEFAULT_POLL_EVERY_MAX_SECONDS, e.POLL_EVERY_SECONDS)) *
      1000,
    expireMarginMs: e.EXPIRE_MARGIN_SECONDS * 1000,
    messageLifetimeSeconds: e.MESSAGE_LIFETIME_SECONDS,
    retentionDays: e.RETENTION_DAYS,
    auditRetentionDays: e.AUDIT_RETENTION_DAYS,
    partitions: { managed: e.PARTITIONS === 'switchboard', aheadDays: e.PARTITIONS_AHEAD_DAYS },
    optOutWords: e.OPT_OUT_WORDS,
    sandboxDialect: e.SANDBOX_DIALECT,
    campaigns: {
      window: e.CALLING_WINDOW,
      holidaysDir: e.HOLIDAYS_DIR,
      capPerDay: e.CONTACT_CAP_PER_DAY,
    },
    speech: {
      engine: e.SPEECH_ENGINE,
      httpUrl: e.SPEECH_HTTP_URL,
      httpLanguages: e.SPEECH_HTTP_LANGUAGES,
      format: e.SPEECH_FORMAT,
      promptSecret: e.PROMPT_SECRET,
      promptsDir: e.PROMPTS_DIR,
      graceMs: e.PROMPT_GRACE_MINUTES * 60_000,
    },
  };
}
