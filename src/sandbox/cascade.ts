/**
 * The cascade (docs/api/cascade/index.md "How It Works"): one message, tried on channels
 * cheapest first (Telegram bot, Viber bot, Viber business, RCS, SMS) until one reaches the
 * recipient. The Telegram-prioritized endpoint (`tg-viber`) tries the Telegram bot, then the
 * Viber bot. The message type narrows the channels (message-types.md "Overview"): a
 * viber_survey goes on Viber and SMS only, a flashcall is a phone call (channel `flashcall`)
 * and nothing else. A message with a `fallback` (message-types.md "Example with Fallback")
 * goes on with the fallback's type when no channel of its own reached the recipient.
 *
 * Which channels reach a recipient is scriptable through the control API. Unscripted, a
 * recipient is reachable on Viber business, SMS and by a flash call, and on the Telegram or
 * Viber bot when a user of such a bot with that phone was uploaded (bots.ts).
 *
 * A message with `scheduledSent` in the future starts then; one with `ttl` makes no attempt
 * later than its start + ttl (it fails with EXPIRED).
 *
 * What is reported to the delivery callback URL depends on the dialect (dialect.ts):
 * - compact: each channel tried: `failed` for a channel that does not reach the recipient
 *   (then the next is tried, `failedAfterMs` later), and `sent`, `delivered` on the one that
 *   does; `failed` with channel null when none does;
 * - docs: the docs show no cascade webhook, only that `messageId` is for status tracking
 *   (send.md "Response Fields"), so the message as a whole is reported with status.md's
 *   webhook `{messageId, deliverystatus, timestamp, cost}`: `scheduled` while it waits for
 *   scheduledSent, `processing` when a channel sends it, `delivered`, `undeliverable` when no
 *   channel reached the recipient, `permanenterror` when its ttl ran out.
 *
 * Variables uploaded with POST /api/items are kept per account (the auth header's identity),
 * by type and id; a later upload of the same type and id replaces the value.
 *
 * @example
 * substitutePlaceholders('Hi %name=1%', [{ id: 1, value: 'Ann' }]) // { ok: true, text: 'Hi Ann' }
 */
import { createHash, randomUUID } from 'node:crypto';
import { z } from 'zod';
import {
  type CascadeMessageType,
  type CascadeVariable,
  findVariable,
  type TypedCascadeVariable,
  type VariableType,
} from '../provider/cascade.ts';
import type { BotRegistry } from './bots.ts';
import type { CallbackSender } from './callbacks.ts';
import type { Scheduler } from './clock.ts';
import { costOf, type DocsStatus, type SandboxDialect } from './dialect.ts';
import type { LifecycleTimings } from './messages.ts';
import { normalizeNumber } from './scripts.ts';

export const CASCADE_CHANNELS = [
  'telegram_bot',
  'viber_bot',
  'viber_business',
  'rcs',
  'sms',
  'flashcall',
] as const;
export const CascadeChannel = z.enum(CASCADE_CHANNELS);
export type CascadeChannel = z.infer<typeof CascadeChannel>;

export const CASCADE_ROUTES = {
  general: ['telegram_bot', 'viber_bot', 'viber_business', 'rcs', 'sms'],
  'tg-viber': ['telegram_bot', 'viber_bot'],
} as const satisfies Record<string, readonly CascadeChannel[]>;
export type CascadeRoute = keyof typeof CASCADE_ROUTES;

/** The channels of `route` a message of `type` may take (message-types.md "Overview"). */
export function channelsFor(route: CascadeRoute, type: CascadeMessageType): CascadeChannel[] {
  if (type === 'flashcall') return ['flashcall'];
  const channels: readonly CascadeChannel[] = CASCADE_ROUTES[route];
  if (type === 'viber_survey') {
    return channels.filter((c) => c === 'viber_bot' || c === 'viber_business' || c === 'sms');
  }
  return [...channels];
}

/** A variable as index.md writes it (untyped) or variables.md does (typed). */
export type Variable = Pick<CascadeVariable, 'id' | 'value'> & { type?: VariableType | undefined };

const PLACEHOLDER = /%(name|url|short_url)=(\d+)%/g;

/** A stable short link for `url`, as a provider's shortener would make. */
export function shortUrl(url: string): string {
  return `https://sbx.link/${createHash('sha256').update(url).digest('base64url').slice(0, 8)}`;
}

/**
 * Replaces %name=id%, %url=id% and %short_url=id% with the variable they name: one of
 * `variables` of that type and id, or untyped with that id, else an `uploaded` one of that
 * type and id. A placeholder naming none is reported.
 *
 * @example
 * substitutePlaceholders('Go %short_url=2%', [{ id: 2, value: 'https://example.com/a' }])
 * // { ok: true, text: 'Go https://sbx.link/...' }
 */
export function substitutePlaceholders(
  text: string,
  variables: readonly Variable[],
  uploaded: (type: VariableType, id: number) => string | undefined = () => undefined,
): { ok: true; text: string } | { ok: false; missing: string[] } {
  const missing: string[] = [];
  const out = text.replace(PLACEHOLDER, (whole, kind: VariableType, id: string) => {
    const value =
      findVariable(variables as CascadeVariable[], kind, Number(id))?.value ??
      uploaded(kind, Number(id));
    if (value === undefined) {
      missing.push(whole);
      return whole;
    }
    return kind === 'short_url' ? shortUrl(value) : value;
  });
  return missing.length > 0 ? { ok: false, missing } : { ok: true, text: out };
}

export type CascadeStatus = 'accepted' | 'sent' | 'delivered' | 'failed';

export interface CascadeRecord {
  messageId: string;
  /** The request's `id` (send.md), or one the sandbox made for a condensed-form message. */
  trackinId: string;
  route: CascadeRoute;
  recipient: string;
  messageType: CascadeMessageType;
  /** Null for a condensed-form message, which names no sender. */
  fromName: string | null;
  /** As delivered: placeholders replaced. Null for a flash call without text. */
  text: string | null;
  surveyOptions?: string[];
  fallback?: { messageType: CascadeMessageType; text: string | null; surveyOptions?: string[] };
  scheduledSent?: string;
  ttl?: number;
  status: CascadeStatus;
  /** The channel that reached the recipient, once one did. */
  channel: CascadeChannel | null;
  attempts: {
    channel: CascadeChannel;
    status: 'sent' | 'delivered' | 'failed';
    at: string;
    /** True for an attempt of the fallback. */
    fallback?: boolean;
  }[];
  acceptedAt: string;
  error?: { code: string; message: string };
}

/** One message for the engine: its text (and the fallback's) already substituted. */
export interface CascadeSubmission {
  recipient: string;
  messageType: CascadeMessageType;
  fromName: string | null;
  text: string | null;
  trackinId?: string;
  surveyOptions?: string[];
  ttl?: number;
  scheduledSent?: string;
  fallback?: { messageType: CascadeMessageType; text: string | null; surveyOptions?: string[] };
}

export interface CascadeDeps {
  scheduler: Scheduler;
  sender: CallbackSender;
  bots: BotRegistry;
  timings: () => LifecycleTimings;
  callbackUrl: string | undefined;
  callbackHeaders?: Record<string, string>;
  /** What callbacks look like; default compact (the condensed interface's). */
  dialect?: SandboxDialect;
}

export interface CascadeEngine {
  /** Starts one cascade message. */
  send(route: CascadeRoute, message: CascadeSubmission): CascadeRecord;
  setReachable(recipient: string, channels: readonly CascadeChannel[]): void;
  reachable(recipient: string): CascadeChannel[];
  /** Stores uploaded variables for `account`, replacing any of the same type and id. */
  uploadVariables(account: string, variables: readonly TypedCascadeVariable[]): void;
  /** The value `account` uploaded for this type and id. */
  variable(account: string, type: VariableType, id: number): string | undefined;
  /** Every variable `account` uploaded. */
  variables(account: string): TypedCascadeVariable[];
  get(id: string): CascadeRecord | undefined;
  list(): CascadeRecord[];
  /**
   * Forgets what `mentions` picks: messages (their lifecycles report nothing more), scripted
   * reachability of a recipient, uploaded variables; returns the messages forgotten and how
   * many other records went.
   */
  forget(mentions: (value: unknown) => boolean): { messages: CascadeRecord[]; other: number };
  reset(): void;
}

/** Most uploaded variables kept per account; the oldest are forgotten beyond it. */
export const MAX_VARIABLES_PER_ACCOUNT = 100_000;

export function createCascadeEngine(deps: CascadeDeps): CascadeEngine {
  const { scheduler } = deps;
  const dialect = deps.dialect ?? 'compact';
  let records = new Map<string, CascadeRecord>();
  let scripted = new Map<string, CascadeChannel[]>();
  let uploads = new Map<string, Map<string, TypedCascadeVariable>>();
  let nextTrackin = 1;
  const iso = (ms: number) => new Date(ms).toISOString();
  const forgotten = new WeakSet<CascadeRecord>();

  function reachable(recipient: string): CascadeChannel[] {
    const key = normalizeNumber(recipient);
    const set = scripted.get(key);
    if (set !== undefined) return [...set];
    return CASCADE_CHANNELS.filter(
      (c) =>
        c === 'viber_business' ||
        c === 'sms' ||
        c === 'flashcall' ||
        (c === 'telegram_bot' && deps.bots.hasPhone('tg', key)) ||
        (c === 'viber_bot' && deps.bots.hasPhone('viber', key)),
    );
  }

  /** docs dialect: the whole message's status, sent when it changes. */
  const whole = new Map<string, DocsStatus>();

  function report(
    r: CascadeRecord,
    status: CascadeStatus | 'expired' | 'scheduled',
    channel: CascadeChannel | null,
    at: number,
    error: { code: string; message: string } | null = null,
  ): Promise<void> {
    if (status === 'expired') r.status = 'failed';
    else if (status !== 'accepted' && status !== 'scheduled') r.status = status;
    if (deps.callbackUrl === undefined || forgotten.has(r)) return Promise.resolve();
    if (dialect === 'docs') {
      const word: DocsStatus | undefined =
        status === 'scheduled'
          ? 'scheduled'
          : status === 'sent'
            ? 'processing'
            : status === 'delivered'
              ? 'delivered'
              : status === 'expired'
                ? 'permanenterror'
                : status === 'failed' && channel === null
                  ? 'undeliverable'
                  : undefined;
      if (word === undefined || whole.get(r.messageId) === word) return Promise.resolve();
      whole.set(r.messageId, word);
      return deps.sender.send({
        kind: 'delivery',
        url: deps.callbackUrl,
        body: {
          messageId: r.messageId,
          deliverystatus: word,
          timestamp: iso(at),
          cost: word === 'delivered' ? costOf(1) : 0,
        },
        headers: deps.callbackHeaders ?? {},
        messageId: r.messageId,
      });
    }
    if (status === 'scheduled') return Promise.resolve();
    const failed = status === 'failed' || status === 'expired';
    return deps.sender.send({
      kind: 'delivery',
      url: deps.callbackUrl,
      body: {
        eventId: `${r.messageId}:${channel ?? 'none'}:${failed ? 'failed' : status}`,
        customerMessageId: null,
        messageId: r.messageId,
        trackinId: r.trackinId,
        cascade: true,
        status: failed ? 'failed' : status,
        timestamp: iso(at),
        channel,
        type: 'cascade',
        to: r.recipient,
        error,
      },
      headers: deps.callbackHeaders ?? {},
      messageId: r.messageId,
    });
  }

  interface Plan {
    channels: Array<{ channel: CascadeChannel; fallback: boolean }>;
    deadline: number;
    canReach: CascadeChannel[];
  }

  function giveUp(r: CascadeRecord, at: number, expired: boolean) {
    const error = expired
      ? { code: 'EXPIRED', message: `not delivered within its ttl of ${r.ttl} s` }
      : { code: 'NO_CHANNEL', message: 'no channel of the cascade reached the recipient' };
    scheduler.at(at, () => {
      r.error = error;
      return report(r, expired ? 'expired' : 'failed', null, at, error);
    });
  }

  function tryChannel(r: CascadeRecord, index: number, at: number, plan: Plan) {
    const t = deps.timings();
    const step = plan.channels[index];
    if (step === undefined) return giveUp(r, at, false);
    if (at > plan.deadline) return giveUp(r, at, true);
    const { channel, fallback } = step;
    const mark = fallback ? { fallback: true } : {};
    if (!plan.canReach.includes(channel)) {
      const failedAt = at + t.failedAfterMs;
      scheduler.at(failedAt, async () => {
        r.attempts.push({ channel, status: 'failed', at: iso(failedAt), ...mark });
        await report(r, 'failed', channel, failedAt, {
          code: 'CHANNEL_UNREACHABLE',
          message: `the recipient is not reachable on ${channel}`,
        });
        tryChannel(r, index + 1, failedAt, plan);
      });
      return;
    }
    const sentAt = at + t.sentAfterMs;
    const deliveredAt = at + t.deliveredAfterMs;
    scheduler.at(sentAt, () => {
      r.channel = channel;
      r.attempts.push({ channel, status: 'sent', at: iso(sentAt), ...mark });
      return report(r, 'sent', channel, sentAt);
    });
    scheduler.at(deliveredAt, () => {
      r.attempts.push({ channel, status: 'delivered', at: iso(deliveredAt), ...mark });
      return report(r, 'delivered', channel, deliveredAt);
    });
  }

  return {
    send(route, m) {
      const now = scheduler.now();
      const record: CascadeRecord = {
        messageId: randomUUID(),
        trackinId: m.trackinId ?? `trk-${String(nextTrackin++).padStart(8, '0')}`,
        route,
        recipient: normalizeNumber(m.recipient),
        messageType: m.messageType,
        fromName: m.fromName,
        text: m.text,
        ...(m.surveyOptions !== undefined && { surveyOptions: [...m.surveyOptions] }),
        ...(m.fallback !== undefined && { fallback: m.fallback }),
        ...(m.scheduledSent !== undefined && { scheduledSent: m.scheduledSent }),
        ...(m.ttl !== undefined && { ttl: m.ttl }),
        status: 'accepted',
        channel: null,
        attempts: [],
        acceptedAt: iso(now),
      };
      records.set(record.messageId, record);
      // Forget the oldest beyond about 100 000 (a long-running sandbox must not grow forever).
      if (records.size > 125_000) {
        for (const id of records.keys()) {
          if (records.size <= 100_000) break;
          records.delete(id);
          whole.delete(id);
        }
      }
      const scheduledAt = m.scheduledSent === undefined ? now : Date.parse(m.scheduledSent);
      const start = Math.max(now, scheduledAt);
      const plan: Plan = {
        channels: [
          ...channelsFor(route, m.messageType).map((channel) => ({ channel, fallback: false })),
          ...(m.fallback === undefined
            ? []
            : channelsFor(route, m.fallback.messageType).map((channel) => ({
                channel,
                fallback: true,
              }))),
        ],
        deadline: m.ttl === undefined ? Number.POSITIVE_INFINITY : start + m.ttl * 1000,
        // Reachability is fixed when the cascade is accepted, like a script.
        canReach: reachable(record.recipient),
      };
      if (start > now) void report(record, 'scheduled', null, now);
      tryChannel(record, 0, start, plan);
      return record;
    },
    setReachable(recipient, channels) {
      scripted.set(normalizeNumber(recipient), [...channels]);
    },
    reachable,
    uploadVariables(account, variables) {
      let mine = uploads.get(account);
      if (mine === undefined) {
        mine = new Map();
        uploads.set(account, mine);
      }
      for (const v of variables) {
        const key = `${v.type}=${v.id}`;
        mine.delete(key); // re-inserted last: the newest is forgotten last
        mine.set(key, { id: v.id, type: v.type, value: v.value });
      }
      for (const key of mine.keys()) {
        if (mine.size <= MAX_VARIABLES_PER_ACCOUNT) break;
        mine.delete(key);
      }
    },
    variable: (account, type, id) => uploads.get(account)?.get(`${type}=${id}`)?.value,
    variables: (account) => [...(uploads.get(account)?.values() ?? [])],
    get: (id) => records.get(id) ?? [...records.values()].find((r) => r.trackinId === id),
    list: () => [...records.values()],
    forget(mentions) {
      const gone = [...records.values()].filter(mentions);
      for (const r of gone) {
        forgotten.add(r);
        records.delete(r.messageId);
        whole.delete(r.messageId);
      }
      let other = 0;
      for (const recipient of [...scripted.keys()]) {
        if (mentions(recipient)) other += Number(scripted.delete(recipient));
      }
      for (const mine of uploads.values()) {
        for (const [key, v] of [...mine]) {
          if (mentions(v.value)) other += Number(mine.delete(key));
        }
      }
      return { messages: gone, other };
    },
    reset() {
      records = new Map();
      scripted = new Map();
      uploads = new Map();
      whole.clear();
      nextTrackin = 1;
    },
  };
}
