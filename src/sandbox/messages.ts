/**
 * The messaging side of the sandbox: accepting a messagelist, then playing each accepted
 * message's lifecycle on the sandbox clock and reporting every step to the delivery
 * callback URL.
 *
 * A message is dispatched at its dtSend (or at once), then:
 * - delivered: `sent` after `sentAfterMs`, `delivered` after `deliveredAfterMs`, and for
 *   Viber types `read` after `readAfterMs` (a speech call is answered when delivered, and
 *   then plays its menu; see speechcall.ts);
 * - read: as delivered; for Viber the default; for other types the same as delivered;
 * - failed: `sent`, then `failed` after `failedAfterMs`;
 * - expired: `sent`, then `expired` at the message's deadline when the request set dtExpire
 *   or ttl, else after `expiredAfterMs` (the types' default TTLs are days long).
 * Whatever the outcome, a step that would come after the deadline (dtExpire, else dispatch
 * time + ttl, else + the type's default TTL, 86400 s where the provider gives none) is replaced
 * by `expired` at the deadline. A message that fails or expires sends its fallbacks, one at a
 * time, in order, each with its own lifecycle, until one is not failed or expired.
 *
 * What is reported depends on the dialect (dialect.ts). The compact one calls back every step
 * of every message and fallback. The docs one reports the message as a whole, keyed by the
 * primary's messageId: a status webhook whenever the whole message's `deliverystatus`
 * changes (a primary that fails while a fallback remains changes nothing: the fallback's
 * progress is the message's), `scheduled` only for a message that waits for its dtSend.
 *
 * @example
 * const engine = createMessageEngine(deps);
 * engine.submit([{ from: 'Acme', to: '+380501234567', type: 'sms', text: 'hi' }]);
 */
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { ErrorDetail } from '../errors.ts';
import { type AudioChecker, type AudioCheckResult, checkAudioRefs } from '../flows/audio-check.ts';
import { latestAtMost } from '../instants.ts';
import {
  DEFAULT_TTL_SECONDS,
  type Fallback,
  type Message,
  type MessageType,
  validateMessage,
} from '../provider/message.ts';
import { smsSegments } from '../provider/sms.ts';
import type { CallbackSender } from './callbacks.ts';
import type { Scheduler } from './clock.ts';
import {
  compactType,
  costOf,
  DEFAULT_DIALECT,
  type DocsStatus,
  docsType,
  flashPattern,
  type SandboxDialect,
} from './dialect.ts';
import type { Random } from './random.ts';
import { normalizeNumber, type ScriptBook, type ScriptedOutcome } from './scripts.ts';
import {
  type CallEndReason,
  type CallEvent,
  CallTimings,
  menuIdleMs,
  planCall,
  type ScriptKey,
  stepMenu,
} from './speechcall.ts';

export const LifecycleTimings = CallTimings.extend({
  sentAfterMs: z.number().int().nonnegative().default(500),
  deliveredAfterMs: z.number().int().nonnegative().default(1000),
  readAfterMs: z.number().int().nonnegative().default(2000),
  failedAfterMs: z.number().int().nonnegative().default(1000),
  expiredAfterMs: z.number().int().nonnegative().default(3000),
});
export type LifecycleTimings = z.infer<typeof LifecycleTimings>;
export type LifecycleTimingsInput = z.input<typeof LifecycleTimings>;

/** Seconds a message lives when the provider gives no default TTL for its type. */
export const FALLBACK_TTL_SECONDS = 86_400;

/** A step of a sandbox message's lifecycle, in the words of the compact dialect's callbacks. */
export const LifecycleStatus = z.enum([
  'accepted',
  'sent',
  'delivered',
  'read',
  'failed',
  'expired',
]);
export type LifecycleStatus = z.infer<typeof LifecycleStatus>;

/**
 * The channel a message type travels on, as callbacks name it and as the docs name it in a
 * status record's `extendedStatuses` (status.md: `viber`, `sms`).
 */
export function channelOf(t: string): 'sms' | 'viber' | 'rcs' | 'flashcall' | 'speechcall' {
  if (t === 'sms') return 'sms';
  if (t === 'speechcall') return 'speechcall';
  if (t === 'rcs') return 'rcs';
  if (t === 'flashcall' || t === 'flashcall_callback') return 'flashcall';
  return 'viber';
}

export interface CallRecord {
  messageId: string;
  from: string;
  to: string;
  state: 'ringing' | 'in-progress' | 'ended' | 'not-answered';
  keys: ScriptKey[];
  /** Present and true when the keys are pressed live (`POST /_control/calls/{ref}/keys`). */
  live?: true;
  answeredAt?: string;
  endedAt?: string;
  endReason?: CallEndReason;
  path: { menu: number; visit: number; input?: ScriptKey; runs?: string | null; at: string }[];
  webhooks: { menu: number; key: string; index: number; url: string; at: string }[];
  /**
   * What the sandbox found at each distinct intro of the call's menus, fetched as the provider
   * would when the call is placed (src/flows/audio-check.ts): `audio`, `not-audio` (the call
   * fails), `not-checked` (the outbound policy refused it, or its name does not resolve from
   * here) or `provider-id` (an audio id, passed through). Present once the checks are done.
   */
  audio?: AudioCheckResult[];
}

export interface SandboxMessage {
  messageId: string;
  messagelistId: number;
  /** The primary's customerMessageId; fallbacks carry their primary's (callbacks key on it). */
  customerMessageId?: string;
  /** A fallback's own customerMessageId, when it was given one. */
  ownCustomerMessageId?: string;
  parentMessageId?: string;
  fallbackIndex?: number;
  type: MessageType;
  from: string;
  to: string;
  text?: string;
  parts: number;
  status: LifecycleStatus;
  history: { status: LifecycleStatus; at: string }[];
  acceptedAt: string;
  dispatchAt: string;
  expiresAt: string;
  outcome: ScriptedOutcome;
  scripted: boolean;
  fallbacks: { index: number; messageId: string }[];
  error?: { code: string; message: string };
  /** Speech calls: the keys the callee gives, then the call as it went. */
  keys?: ScriptKey[];
  call?: CallRecord;
  /** docs dialect, a primary: the whole message's status (itself and its fallbacks). */
  deliverystatus?: DocsStatus;
  /** docs dialect, a primary with fallbacks: their types, in order, tried or not. */
  fallbackTypes?: string[];
}

export type SubmitItem =
  | {
      messageId: string;
      status: 'accepted';
      parts: number;
      to: string;
      customerMessageId?: string;
      /** flashcall: the code, when the request left it to the provider. */
      text?: string;
    }
  | {
      status: 'rejected';
      to?: string;
      customerMessageId?: string;
      error: { code: string; message: string; details: ErrorDetail[] };
      /** DUPLICATE_CUSTOMER_MESSAGE_ID: the message that already holds this id. */
      existingMessageId?: string;
    };

/**
 * One message of a messagelist answer in the docs dialect (send-message.md, "Success
 * Response"; a flash call's adds callerId, pattern and ttl, flashcall.md "Response Format").
 * A rejected one names no messageId (nothing was made) and says why in the docs' error
 * object (send-message.md, "Error Response"), which the docs show for requests only.
 */
export type DocsSubmitItem =
  | {
      messageId: string;
      status: 'accepted';
      parts: number;
      customerMessageId?: string;
      to: string;
      callerId?: string;
      pattern?: string;
      ttl?: number;
    }
  | {
      status: 'rejected';
      customerMessageId?: string;
      to?: string;
      error: { code: string; message: string };
    };

/** What the sandbox answers to one messagelist: its id and one item per message. */
export interface SandboxSubmitResult {
  messagelistId: number;
  /** SubmitItem in the compact dialect, DocsSubmitItem in the docs one. */
  messages: (SubmitItem | DocsSubmitItem)[];
}

export interface MessageEngineDeps {
  /** What is reported (dialect.ts); default docs. */
  dialect?: SandboxDialect;
  scheduler: Scheduler;
  sender: CallbackSender;
  scripts: ScriptBook;
  random: Random;
  timings: () => LifecycleTimings;
  /** Where delivery callbacks go; unset, none are sent (the lifecycle still runs). */
  callbackUrl: string | undefined;
  /** Headers on every delivery callback (e.g. the receiver's X-Callback-Token). */
  callbackHeaders?: Record<string, string>;
  maxSmsParts?: number;
  /**
   * About how many messages are kept for lookups and listings (default 100 000); older ones
   * are forgotten (their lifecycles still finish), and so is their customerMessageId.
   */
  keepMessages?: number;
  /**
   * Fetches a speech call's audio as the provider would (src/flows/audio-check.ts); a call
   * whose intro does not answer with audio fails. Unset: no audio is fetched.
   */
  checkAudio?: AudioChecker;
}

/** Which messages the control API lists; every field given must match. */
export interface SandboxMessageFilter {
  to?: string;
  customerMessageId?: string;
  type?: string;
  status?: string;
}

/** What pressing keys on a live call did. */
export type PressResult =
  | { ok: true; call: CallRecord }
  | { ok: false; reason: 'not-found' | 'not-live' | 'ended'; call?: CallRecord };

export interface MessageEngine {
  /** Validates and accepts what it can of one messagelist (already checked to be 1..5000). */
  submit(inputs: readonly unknown[]): SandboxSubmitResult;
  get(messageId: string): SandboxMessage | undefined;
  list(filter?: SandboxMessageFilter): SandboxMessage[];
  calls(): CallRecord[];
  /**
   * Presses `keys` on the live call of message `ref` (its messageId or customerMessageId):
   * taken at once by the menu that waits, or queued while the call rings.
   */
  pressKeys(ref: string, keys: readonly ScriptKey[]): PressResult;
  /**
   * Forgets the messages `match` picks, with their fallbacks, and stops their lifecycles (no
   * more callbacks or webhooks about them); returns what was forgotten.
   */
  forget(match: (m: SandboxMessage) => boolean): SandboxMessage[];
  reset(): void;
}

/** A live call's keys not yet taken, and how to wake the menu that waits for one. */
interface LiveKeys {
  queue: ScriptKey[];
  wake?: () => void;
}

/** A primary message or one of its fallbacks, as validated. */
type AnyMessage = Message | Fallback;

function isViber(type: MessageType): boolean {
  return channelOf(type) === 'viber';
}

function field(input: unknown, name: string): unknown {
  return typeof input === 'object' && input !== null && !Array.isArray(input)
    ? (input as Record<string, unknown>)[name]
    : undefined;
}

function stringField(input: unknown, name: string): string | undefined {
  const value = field(input, name);
  return typeof value === 'string' ? value : undefined;
}

/** `fn` with a memo of its last argument and result. */
function memo<A, R>(fn: (arg: A) => R): (arg: A) => R {
  let last: { arg: A; result: R } | undefined;
  return (arg) => {
    if (last === undefined || !Object.is(last.arg, arg)) last = { arg, result: fn(arg) };
    return last.result;
  };
}

export function createMessageEngine(deps: MessageEngineDeps): MessageEngine {
  const { scheduler, sender, scripts, random } = deps;
  const docs = (deps.dialect ?? DEFAULT_DIALECT) === 'docs';
  let messages = new Map<string, SandboxMessage>();
  let byCustomerId = new Map<string, string>();
  // What each message was accepted as (and the raw input, to tell a fallback's explicit ttl
  // from the default that validation fills in), and its primary. Held by the record itself,
  // so a lifecycle still finishes after the store has forgotten the message. Kept only for
  // the messages that need it later (a speech call's menu, fallbacks to send): not for most,
  // since every entry is work for the garbage collector for as long as the message lives.
  const originals = new WeakMap<
    SandboxMessage,
    { message: AnyMessage; raw: unknown; primary: SandboxMessage }
  >();
  let nextMessagelistId = 1001;
  const liveKeys = new WeakMap<SandboxMessage, LiveKeys>();
  // erased (forget): their scheduled steps find them ended and report nothing more
  const forgotten = new WeakSet<SandboxMessage>();
  // a speech call's audio checks, started when it is accepted, awaited when it would be answered
  const audioChecks = new WeakMap<SandboxMessage, Promise<AudioCheckResult[]>>();

  // The messages of one request share their times: one-entry memos spare most of the
  // conversions (same results, so the same records). A memo each for the times of steps and
  // for deadlines, which alternate per message and would miss in a shared one.
  const toIso = (ms: number) => new Date(ms).toISOString();
  const iso = memo(toIso);
  const isoDeadline = memo(toIso);
  const parseDispatchAt = memo(Date.parse);
  const parseExpiresAt = memo(Date.parse);
  const terminal = (m: SandboxMessage) =>
    m.status === 'failed' || m.status === 'expired' || forgotten.has(m);

  function callbackBody(m: SandboxMessage, status: LifecycleStatus, at: number) {
    return {
      eventId: `${m.messageId}:${status}`,
      customerMessageId: m.customerMessageId ?? null,
      messageId: m.messageId,
      messagelistId: m.messagelistId,
      status,
      timestamp: iso(at),
      type: compactType(m.type),
      channel: channelOf(m.type),
      from: m.from,
      to: m.to,
      parts: m.parts,
      fallbackIndex: m.fallbackIndex ?? null,
      parentMessageId: m.parentMessageId ?? null,
      ...(m.ownCustomerMessageId !== undefined && {
        fallbackCustomerMessageId: m.ownCustomerMessageId,
      }),
      error: status === 'failed' || status === 'expired' ? (m.error ?? null) : null,
    };
  }

  /** Records a status and reports it; returns the callback's first attempt. */
  function setStatus(m: SandboxMessage, status: LifecycleStatus, at: number): Promise<void> {
    if (forgotten.has(m)) return Promise.resolve();
    m.status = status;
    m.history.push({ status, at: iso(at) });
    if (docs) return reportWhole(m, status, at);
    if (deps.callbackUrl === undefined) return Promise.resolve();
    return sender.send({
      kind: 'delivery',
      url: deps.callbackUrl,
      body: callbackBody(m, status, at),
      headers: deps.callbackHeaders ?? {},
      messageId: m.messageId,
    });
  }

  /** True when `m` failing or expiring sends another fallback of its primary. */
  function hasNextFallback(m: SandboxMessage): boolean {
    const primary = originals.get(m)?.primary;
    const original = primary && originals.get(primary)?.message;
    const count =
      original !== undefined && 'fallbacks' in original ? (original.fallbacks?.length ?? 0) : 0;
    return count > (m.fallbackIndex === undefined ? 0 : m.fallbackIndex + 1);
  }

  /**
   * docs dialect: what step `status` of `m` (the primary or one of its fallbacks) makes of the
   * whole message, and the status webhook when that changed (status.md, "Webhook
   * Alternative"): sent -> processing; delivered -> delivered (read changes nothing); failed
   * or expired with a fallback still to try -> nothing; otherwise undeliverable or
   * permanenterror.
   */
  function reportWhole(m: SandboxMessage, status: LifecycleStatus, at: number): Promise<void> {
    const primary = m.parentMessageId === undefined ? m : originals.get(m)?.primary;
    if (primary === undefined) return Promise.resolve();
    let whole: DocsStatus;
    switch (status) {
      case 'sent':
        whole = 'processing';
        break;
      case 'delivered':
        whole = 'delivered';
        break;
      case 'failed':
      case 'expired':
        if (hasNextFallback(m)) return Promise.resolve();
        whole = status === 'failed' ? 'undeliverable' : 'permanenterror';
        break;
      default:
        return Promise.resolve();
    }
    if (primary.deliverystatus === whole) return Promise.resolve();
    primary.deliverystatus = whole;
    return sendWhole(primary, whole, at, whole === 'delivered' ? costOf(m.parts) : 0);
  }

  /** The docs status webhook: `{messageId, deliverystatus, timestamp, cost}` (status.md). */
  function sendWhole(primary: SandboxMessage, whole: DocsStatus, at: number, cost: number) {
    if (deps.callbackUrl === undefined || forgotten.has(primary)) return Promise.resolve();
    return sender.send({
      kind: 'delivery',
      url: deps.callbackUrl,
      body: { messageId: primary.messageId, deliverystatus: whole, timestamp: iso(at), cost },
      headers: deps.callbackHeaders ?? {},
      messageId: primary.messageId,
    });
  }

  function expire(m: SandboxMessage, at: number, reason?: string): Promise<void> {
    m.error = {
      code: 'EXPIRED',
      message: reason ?? `not delivered before its deadline ${m.expiresAt}`,
    };
    if (m.call) m.call.state = 'not-answered';
    return setStatus(m, 'expired', at).then(() => startNextFallback(m));
  }

  function fail(m: SandboxMessage, at: number, reason?: string): Promise<void> {
    m.error = {
      code: 'DELIVERY_FAILED',
      message: reason ?? (m.type === 'speechcall' ? 'the call was not answered' : 'not delivered'),
    };
    if (m.call) m.call.state = 'not-answered';
    return setStatus(m, 'failed', at).then(() => startNextFallback(m));
  }

  /**
   * Schedules `step` at `at`, unless `at` is past the deadline of a message not yet
   * delivered: then it expires at the deadline instead.
   */
  function stepAt(m: SandboxMessage, at: number, step: () => Promise<void>): void {
    const deadline = parseExpiresAt(m.expiresAt);
    const delivered = m.status === 'delivered' || m.status === 'read';
    if (at > deadline && !delivered) {
      scheduler.at(deadline, () => (terminal(m) ? undefined : expire(m, deadline)));
      return;
    }
    scheduler.at(at, () => (terminal(m) ? undefined : step()));
  }

  function dispatch(
    m: SandboxMessage,
    reason: string | undefined,
    explicitDeadline: boolean,
  ): void {
    const t = deps.timings();
    const start = parseDispatchAt(m.dispatchAt);
    stepAt(m, start + t.sentAfterMs, async () => {
      await setStatus(m, 'sent', start + t.sentAfterMs);
      switch (m.outcome) {
        case 'failed':
          stepAt(m, start + t.failedAfterMs, () => fail(m, start + t.failedAfterMs, reason));
          return;
        case 'expired': {
          const at = explicitDeadline ? parseExpiresAt(m.expiresAt) : start + t.expiredAfterMs;
          scheduler.at(at, () => (terminal(m) ? undefined : expire(m, at, reason)));
          return;
        }
        default: {
          // a provider fetches the menu's audio to place the call: audio that is not there
          // fails the call, as the scripted failure does
          const bad = (await audioChecks.get(m))?.find((a) => a.result === 'not-audio');
          if (bad !== undefined) {
            const why = `the call's audio ${bad.url} did not answer with audio: ${bad.detail}`;
            stepAt(m, start + t.failedAfterMs, () => fail(m, start + t.failedAfterMs, why));
            return;
          }
          stepAt(m, start + t.deliveredAfterMs, () => deliver(m, start + t.deliveredAfterMs));
        }
      }
    });
  }

  async function deliver(m: SandboxMessage, at: number): Promise<void> {
    await setStatus(m, 'delivered', at);
    const t = deps.timings();
    if (isViber(m.type) && m.outcome === 'read') {
      scheduler.at(at - t.deliveredAfterMs + t.readAfterMs, () =>
        m.status === 'delivered'
          ? setStatus(m, 'read', at - t.deliveredAfterMs + t.readAfterMs)
          : undefined,
      );
    }
    if (m.type === 'speechcall') playCall(m, at);
  }

  /** Records one call event; a webhook is sent (the promise of its first attempt). */
  function applyCallEvent(
    m: SandboxMessage,
    call: CallRecord,
    event: CallEvent,
    at: number,
  ): Promise<void> | undefined {
    if (forgotten.has(m)) return;
    switch (event.type) {
      case 'menu':
        call.path.push({ menu: event.menu, visit: event.visit, at: iso(at) });
        return;
      case 'input': {
        const last = call.path[call.path.length - 1];
        if (last) {
          last.input = event.input;
          last.runs = event.runs;
        }
        return;
      }
      case 'goto':
        return;
      case 'hangup':
        call.state = 'ended';
        call.endedAt = iso(at);
        call.endReason = event.reason;
        return;
      case 'webhook':
        call.webhooks.push({
          menu: event.menu,
          key: event.key,
          index: event.index,
          url: event.url,
          at: iso(at),
        });
        return sender.send({
          kind: 'webhook',
          url: event.url,
          body: { from: m.from, to: m.to, mid: m.messageId, action: event.body },
          headers: event.headers,
          messageId: m.messageId,
        });
    }
  }

  function playCall(m: SandboxMessage, answeredAt: number): void {
    const original = originals.get(m)?.message;
    const call = m.call;
    if (original?.type !== 'speechcall' || call === undefined) return;
    call.state = 'in-progress';
    call.answeredAt = iso(answeredAt);
    const live = liveKeys.get(m);
    if (live !== undefined) {
      playLive(m, call, original.menu, answeredAt, live);
      return;
    }
    const plan = planCall(original.menu, call.keys, deps.timings());
    for (const event of plan.events) {
      const at = answeredAt + event.at;
      scheduler.at(at, () => applyCallEvent(m, call, event, at));
    }
  }

  /**
   * A live call, menu by menu: each menu waits for a pressed key (a queued one is taken
   * `keyPressMs` after the menu starts, as a scripted one) or its idle timeout, then steps
   * as the scripted plan would. Every wait has a number, so a timeout that lost the race
   * to a key does nothing.
   */
  function playLive(
    m: SandboxMessage,
    call: CallRecord,
    menu: Parameters<typeof planCall>[0],
    answeredAt: number,
    live: LiveKeys,
  ): void {
    const t = deps.timings();
    let current = 0;
    let visit = 0;
    let wait = 0;
    let waiting = false;
    const takeAt = (at: number) => {
      const mine = ++wait;
      scheduler.at(at, () => {
        if (mine !== wait || call.state !== 'in-progress') return;
        return input(live.queue.shift() ?? 'timeout', at);
      });
    };
    const enter = (at: number) => {
      visit++;
      if (visit > t.maxMenuVisits) {
        applyCallEvent(m, call, { at, type: 'hangup', reason: 'max-visits' }, at);
        return;
      }
      applyCallEvent(m, call, { at, type: 'menu', menu: current, visit }, at);
      waiting = true;
      takeAt(
        live.queue.length > 0
          ? at + t.keyPressMs
          : at + menuIdleMs(menu, current, t, Number.POSITIVE_INFINITY),
      );
    };
    const input = async (key: ScriptKey, at: number): Promise<void> => {
      waiting = false;
      const step = stepMenu(menu, current, key, at);
      const sent = step.events.map((e) => applyCallEvent(m, call, e, at));
      if ('end' in step) applyCallEvent(m, call, { at, type: 'hangup', reason: step.end }, at);
      else {
        current = step.next;
        enter(at);
      }
      await Promise.all(sent);
    };
    live.wake = () => {
      if (waiting) takeAt(scheduler.now());
    };
    enter(answeredAt);
  }

  function deadlineOf(message: AnyMessage, dispatchAt: number): number {
    if (message.dtExpire !== undefined) return Date.parse(message.dtExpire);
    const ttl = message.ttl ?? DEFAULT_TTL_SECONDS[message.type] ?? FALLBACK_TTL_SECONDS;
    // a TTL that would run past year 9999 (no Date to write) runs to its end
    return latestAtMost(dispatchAt + ttl * 1000);
  }

  /** Creates the record, takes its script, and schedules its dispatch. */
  function start(
    message: AnyMessage,
    raw: unknown,
    opts: {
      messagelistId: number;
      parts: number;
      parent?: SandboxMessage;
      fallbackIndex?: number;
      text?: string;
    },
  ): SandboxMessage {
    const now = scheduler.now();
    const dispatchAt = Math.max(
      now,
      message.dtSend === undefined ? now : Date.parse(message.dtSend),
    );
    const script = scripts.take(message.to, message.type);
    const outcome: ScriptedOutcome =
      script?.outcome ?? (isViber(message.type) ? 'read' : 'delivered');
    const messageId = randomUUID();
    const acceptedAt = iso(now);
    const m: SandboxMessage = {
      messageId,
      messagelistId: opts.messagelistId,
      type: message.type,
      from: message.from,
      to: normalizeNumber(message.to),
      parts: opts.parts,
      status: 'accepted',
      history: [{ status: 'accepted', at: acceptedAt }],
      acceptedAt,
      dispatchAt: iso(dispatchAt),
      expiresAt: isoDeadline(deadlineOf(message, dispatchAt)),
      outcome,
      scripted: script !== undefined,
      fallbacks: [],
    };
    // the optional fields only when there is something to say (assigned rather than spread
    // in: this runs for every message)
    const parent = opts.parent;
    if (parent !== undefined) {
      m.parentMessageId = parent.messageId;
      m.fallbackIndex = opts.fallbackIndex ?? 0;
      if (parent.customerMessageId !== undefined) m.customerMessageId = parent.customerMessageId;
      if (message.customerMessageId !== undefined) {
        m.ownCustomerMessageId = message.customerMessageId;
      }
    } else if (message.customerMessageId !== undefined) {
      m.customerMessageId = message.customerMessageId;
    }
    const fallbacks = 'fallbacks' in message ? message.fallbacks : undefined;
    if (docs && parent === undefined) {
      m.deliverystatus = 'scheduled';
      if (fallbacks !== undefined && fallbacks.length > 0) {
        m.fallbackTypes = fallbacks.map((f) => docsType(f.type));
      }
    }
    const text = opts.text ?? message.text;
    if (text !== undefined) m.text = text;
    if (message.type === 'speechcall') {
      m.keys = script?.keys ?? [];
      m.call = {
        messageId,
        from: m.from,
        to: m.to,
        state: 'ringing',
        keys: m.keys,
        ...(script?.live === true && { live: true as const }),
        path: [],
        webhooks: [],
      };
      if (script?.live === true) liveKeys.set(m, { queue: [...m.keys] });
      if (deps.checkAudio !== undefined && 'menu' in message) {
        const call = m.call;
        const checks = checkAudioRefs(
          deps.checkAudio,
          message.menu.map((item) => item.introUrl),
        ).then((results) => {
          call.audio = results;
          return results;
        });
        audioChecks.set(m, checks);
        scheduler.track(checks);
      }
    }
    messages.set(messageId, m);
    forgetOldest();
    if (parent !== undefined || message.type === 'speechcall' || (fallbacks?.length ?? 0) > 0) {
      originals.set(m, { message, raw, primary: parent ?? m });
    }
    // docs dialect: a message that waits for its dtSend says so (status.md, "Scheduled")
    if (docs && parent === undefined && dispatchAt > now) void sendWhole(m, 'scheduled', now, 0);
    const deadline = parseExpiresAt(m.expiresAt);
    if (deadline <= dispatchAt) {
      // dtSend at or after the deadline: it can never go out.
      scheduler.at(dispatchAt, () => (terminal(m) ? undefined : expire(m, dispatchAt)));
    } else {
      const explicitDeadline =
        field(raw, 'dtExpire') !== undefined || field(raw, 'ttl') !== undefined;
      dispatch(m, script?.reason, explicitDeadline);
    }
    return m;
  }

  function forgetOldest(): void {
    const keep = deps.keepMessages ?? 100_000;
    // Trimmed in steps, so a full store does not pay on every message.
    if (messages.size <= keep * 1.25) return;
    for (const [id, m] of messages) {
      if (messages.size <= keep) break;
      messages.delete(id);
      const cmid = m.customerMessageId;
      if (cmid !== undefined && byCustomerId.get(cmid) === id) byCustomerId.delete(cmid);
    }
  }

  function startNextFallback(m: SandboxMessage): void {
    if (forgotten.has(m)) return;
    const primary = originals.get(m)?.primary;
    const original = primary && originals.get(primary);
    if (primary === undefined || original === undefined) return;
    const fallbacks =
      'fallbacks' in original.message ? ((original.message as Message).fallbacks ?? []) : [];
    const index = m.fallbackIndex === undefined ? 0 : m.fallbackIndex + 1;
    const next = fallbacks[index];
    if (next === undefined) return;
    // the request's own words, in either form: `fallbacks` (a list) or `fallback` (one)
    const rawFallbacks = field(original.raw, 'fallbacks');
    const rawFallback = Array.isArray(rawFallbacks)
      ? rawFallbacks[index]
      : index === 0
        ? field(original.raw, 'fallback')
        : undefined;
    const fb = start(next, rawFallback, {
      messagelistId: primary.messagelistId,
      parts: next.type === 'sms' ? smsSegments(next.text).parts : 1,
      parent: primary,
      fallbackIndex: index,
    });
    primary.fallbacks.push({ index, messageId: fb.messageId });
  }

  /** docs dialect: an accepted message's entry (send-message.md; flashcall.md for a flash call). */
  function docsAccepted(
    m: SandboxMessage,
    message: Message,
    to: string | undefined,
    customerMessageId: string | undefined,
    code: string | undefined,
  ): DocsSubmitItem {
    const item: DocsSubmitItem & { status: 'accepted' } = {
      messageId: m.messageId,
      status: 'accepted',
      parts: m.parts,
      to: to ?? message.to,
    };
    if (customerMessageId !== undefined) item.customerMessageId = customerMessageId;
    if (message.type === 'flashcall') {
      // messageData.callerId (flashcall.md), else a sandbox number ending in the code
      const given = stringField(field(message, 'messageData'), 'callerId');
      const callerId = given ?? sandboxCallerId(code ?? message.text ?? '');
      item.callerId = callerId;
      item.pattern = flashPattern(callerId);
      item.ttl = message.ttl ?? DEFAULT_TTL_SECONDS.flashcall;
    }
    return item;
  }

  /** docs dialect: a rejected message's entry, its reason in the docs' error object. */
  function docsRejected(
    to: string | undefined,
    customerMessageId: string | undefined,
    error: { code: string; message: string },
  ): DocsSubmitItem {
    return {
      status: 'rejected',
      ...(customerMessageId !== undefined && { customerMessageId }),
      ...(to !== undefined && { to }),
      error: { code: error.code, message: error.message },
    };
  }

  /** A Ukrainian-shaped number whose last digits are the flash call's code. */
  function sandboxCallerId(code: string): string {
    return code.length >= 9 ? `+${code}` : `+380${random.digits(9 - code.length)}${code}`;
  }

  return {
    submit(inputs) {
      const messagelistId = nextMessagelistId++;
      const now = new Date(scheduler.now());
      const validation = {
        now,
        ...(deps.maxSmsParts !== undefined && { maxSmsParts: deps.maxSmsParts }),
      };
      // a plain loop: it runs for each of up to 5000 messages
      const items: (SubmitItem | DocsSubmitItem)[] = new Array(inputs.length);
      for (let i = 0; i < inputs.length; i++) {
        const raw = inputs[i];
        const result = validateMessage(raw, validation);
        if (!result.ok) {
          const to = stringField(raw, 'to');
          const customerMessageId = stringField(raw, 'customerMessageId');
          if (docs) {
            items[i] = docsRejected(to, customerMessageId, result.error);
            continue;
          }
          items[i] = {
            status: 'rejected',
            ...(to !== undefined && { to }),
            ...(customerMessageId !== undefined && { customerMessageId }),
            error: {
              ...result.error,
              details: result.error.details.map((d) => ({
                ...d,
                path: `messages[${i}]${d.path === '' ? '' : `.${d.path}`}`,
              })),
            },
          };
          continue;
        }
        const message = result.message;
        // the echo is of the request's own words (validation may rewrite them)
        const to = stringField(raw, 'to');
        const customerMessageId = stringField(raw, 'customerMessageId');
        if (message.customerMessageId !== undefined) {
          const existing = byCustomerId.get(message.customerMessageId);
          if (existing !== undefined) {
            const text = `customerMessageId "${message.customerMessageId}" was already used by message ${existing}`;
            if (docs) {
              items[i] = docsRejected(to, customerMessageId, {
                code: 'DUPLICATE_CUSTOMER_MESSAGE_ID',
                message: text,
              });
              continue;
            }
            items[i] = {
              status: 'rejected',
              ...(to !== undefined && { to }),
              ...(customerMessageId !== undefined && { customerMessageId }),
              error: {
                code: 'DUPLICATE_CUSTOMER_MESSAGE_ID',
                message: text,
                details: [
                  {
                    path: `messages[${i}].customerMessageId`,
                    code: 'DUPLICATE_CUSTOMER_MESSAGE_ID',
                    message: text,
                  },
                ],
              },
              existingMessageId: existing,
            };
            continue;
          }
        }
        const code =
          message.type === 'flashcall' && message.text === undefined ? random.digits(4) : undefined;
        const m = start(message, raw, {
          messagelistId,
          parts: result.parts ?? 1,
          ...(code !== undefined && { text: code }),
        });
        if (message.customerMessageId !== undefined) {
          byCustomerId.set(message.customerMessageId, m.messageId);
        }
        if (docs) {
          items[i] = docsAccepted(m, message, to, customerMessageId, code);
          continue;
        }
        const item: SubmitItem = {
          messageId: m.messageId,
          status: 'accepted',
          parts: m.parts,
          to: message.to,
        };
        if (customerMessageId !== undefined) item.customerMessageId = customerMessageId;
        if (code !== undefined) item.text = code;
        items[i] = item;
      }
      return { messagelistId, messages: items };
    },
    get: (id) => messages.get(id),
    list(filter = {}) {
      const to = filter.to === undefined ? undefined : normalizeNumber(filter.to);
      return [...messages.values()].filter(
        (m) =>
          (to === undefined || m.to === to) &&
          (filter.customerMessageId === undefined ||
            m.customerMessageId === filter.customerMessageId) &&
          (filter.type === undefined ||
            compactType(m.type) === filter.type ||
            docsType(m.type) === filter.type) &&
          (filter.status === undefined || m.status === filter.status),
      );
    },
    calls: () => [...messages.values()].flatMap((m) => (m.call === undefined ? [] : [m.call])),
    pressKeys(ref, keys) {
      const m = messages.get(ref) ?? messages.get(byCustomerId.get(ref) ?? '');
      const call = m?.call;
      if (m === undefined || call === undefined) return { ok: false, reason: 'not-found' };
      const live = liveKeys.get(m);
      if (live === undefined) return { ok: false, reason: 'not-live', call };
      if (call.state === 'ended' || call.state === 'not-answered' || terminal(m)) {
        return { ok: false, reason: 'ended', call };
      }
      call.keys.push(...keys);
      live.queue.push(...keys);
      live.wake?.();
      return { ok: true, call };
    },
    forget(match) {
      const gone: SandboxMessage[] = [];
      const ids = new Set<string>();
      for (const m of messages.values()) {
        if (match(m)) ids.add(m.messageId);
      }
      // a fallback goes with its primary, and a primary with its fallbacks (the Set's
      // iteration visits what is added to it meanwhile)
      for (const m of messages.values()) {
        if (m.parentMessageId !== undefined && ids.has(m.messageId)) ids.add(m.parentMessageId);
      }
      for (const id of ids) {
        const m = messages.get(id);
        if (m === undefined) continue;
        for (const fb of m.fallbacks) ids.add(fb.messageId);
      }
      for (const id of ids) {
        const m = messages.get(id);
        if (m === undefined) continue;
        forgotten.add(m);
        messages.delete(id);
        for (const cmid of [m.customerMessageId, m.ownCustomerMessageId]) {
          if (cmid !== undefined && byCustomerId.get(cmid) === id) byCustomerId.delete(cmid);
        }
        gone.push(m);
      }
      return gone;
    },
    reset() {
      messages = new Map();
      byCustomerId = new Map();
      nextMessagelistId = 1001;
    },
  };
}
