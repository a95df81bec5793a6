/**
 * Everything the sandbox sends out over HTTP: delivery callbacks, speech-call webhooks and
 * incoming Viber messages. Each is retried with exponential backoff until it gets a 2xx,
 * and every attempt is kept so tests and the UI can see what was sent and answered.
 *
 * Options turn on the misbehaviour real providers show: the same callback twice
 * (`duplicateCallbacks`), callbacks out of order (`shuffleCallbacks`: each one waits a
 * random time within `shuffleWindowMs`), and a first attempt that fails with a simulated
 * 503 before reaching the receiver, so the callback arrives only on the retry
 * (`failFirstCallback`).
 *
 * Without shuffling, the first attempts of one message's callbacks go out one at a time in
 * the order they were made, so a receiver sees `sent` before `delivered`; different messages
 * go in parallel, at most `maxConcurrent` requests at once. Retries go out on their own
 * schedule. Only the latest `keepRecords` records are kept for listing.
 *
 * Everything goes out through the outbound policy (src/http/outbound.ts). A speech menu's
 * webhook URL and headers are whoever posted the menu's: the policy may refuse the URL, which
 * fails the record at its first attempt with the reason (a refusal is final, so not retried),
 * and it drops secret and hop-by-hop headers, which the record then does not list either.
 *
 * @example
 * const sender = createCallbackSender({ scheduler, send: outbound.send, options: () => opts, random });
 * await sender.send({ kind: 'delivery', url, body: { status: 'sent' } });
 */
import { z } from 'zod';
import { callerHeaders, OutboundRefusedError, type OutboundSend } from '../http/outbound.ts';
import type { Scheduler } from './clock.ts';
import type { Random } from './random.ts';

export const CallbackKind = z.enum(['delivery', 'webhook', 'viber']);
export type CallbackKind = z.infer<typeof CallbackKind>;

export const CallbackOptions = z.object({
  duplicateCallbacks: z.boolean().default(false),
  shuffleCallbacks: z.boolean().default(false),
  failFirstCallback: z.boolean().default(false),
  /** Longest random delay a shuffled callback waits before its first attempt. */
  shuffleWindowMs: z.number().int().nonnegative().default(2000),
  /** Delay before the first retry; doubled per attempt up to `retryMaxDelayMs`. */
  retryBaseMs: z.number().int().positive().default(1000),
  retryMaxDelayMs: z.number().int().positive().default(60_000),
  /** Attempts in all (the first one included) before the sandbox gives up. */
  maxAttempts: z.number().int().positive().default(8),
  /** How long one attempt waits for an answer (wall-clock time). */
  requestTimeoutMs: z.number().int().positive().default(5000),
  /** Requests in flight at once, across all callbacks. */
  maxConcurrent: z.number().int().positive().default(16),
  /** About how many records GET /_control/callbacks keeps (older ones still finish). */
  keepRecords: z.number().int().positive().default(10_000),
});
export type CallbackOptions = z.infer<typeof CallbackOptions>;
export type CallbackOptionsInput = z.input<typeof CallbackOptions>;

export interface CallbackAttempt {
  attempt: number;
  at: string;
  /** HTTP status of the answer; absent when no answer came (network error, timeout). */
  status?: number;
  /** Why no answer came: the outbound policy's refusal, or that the receiver did not answer. */
  error?: string;
  /** True for the 503 that `failFirstCallback` makes up without sending anything. */
  simulated?: boolean;
}

export interface CallbackRecord {
  id: string;
  kind: CallbackKind;
  url: string;
  body: unknown;
  /** What is sent besides the sandbox's own: a webhook's as the policy passes them on. */
  headers: Record<string, string>;
  /** 0 for the callback itself, 1 for the copy that `duplicateCallbacks` adds. */
  copy: number;
  /** The message the callback is about, when there is one (for listings). */
  messageId?: string;
  createdAt: string;
  state: 'pending' | 'delivered' | 'failed';
  attempts: CallbackAttempt[];
}

export interface OutboundRequest {
  kind: CallbackKind;
  url: string;
  body: unknown;
  headers?: Record<string, string>;
  messageId?: string;
}

export interface CallbackSender {
  /**
   * Queues `request` (twice with `duplicateCallbacks`); resolves once the first attempt of
   * each copy has been made, or at once when they wait for a shuffled time.
   */
  send(request: OutboundRequest): Promise<void>;
  list(): CallbackRecord[];
  /** Forgets the records `match` picks; attempts not made yet of them are not made. */
  forget(match: (record: CallbackRecord) => boolean): number;
  reset(): void;
}

export interface CallbackLogger {
  warn(obj: object, msg?: string): void;
  debug(obj: object, msg?: string): void;
}

export interface CallbackSenderDeps {
  scheduler: Scheduler;
  /** The outbound policy's `send` (src/http/outbound.ts). */
  send: OutboundSend;
  options: () => CallbackOptions;
  random: Random;
  logger?: CallbackLogger;
}

/** Delay before attempt `attempt + 1` after attempt `attempt` failed. */
export function callbackRetryDelayMs(attempt: number, options: CallbackOptions): number {
  return Math.min(options.retryMaxDelayMs, options.retryBaseMs * 2 ** (attempt - 1));
}

export function createCallbackSender(deps: CallbackSenderDeps): CallbackSender {
  const { scheduler, random } = deps;
  let records: CallbackRecord[] = [];
  const forgotten = new WeakSet<CallbackRecord>();
  let nextId = 1;
  // Per message (or URL), the tail of its first attempts; see the module comment.
  let chains = new Map<string, Promise<void>>();
  let active = 0;
  const waiting: (() => void)[] = [];

  /** Runs `fn` holding one of `maxConcurrent` slots; a freed slot passes straight to a waiter. */
  async function withSlot(fn: () => Promise<void>): Promise<void> {
    if (active >= deps.options().maxConcurrent) {
      await new Promise<void>((resolve) => waiting.push(resolve));
    } else {
      active++;
    }
    try {
      await fn();
    } finally {
      const next = waiting.shift();
      if (next) next();
      else active--;
    }
  }

  async function attempt(record: CallbackRecord, generation: number): Promise<void> {
    if (!scheduler.isCurrent(generation) || record.state !== 'pending' || forgotten.has(record)) {
      return;
    }
    const options = deps.options();
    const n = record.attempts.length + 1;
    const entry: CallbackAttempt = { attempt: n, at: new Date(scheduler.now()).toISOString() };
    record.attempts.push(entry);
    if (n === 1 && options.failFirstCallback) {
      entry.status = 503;
      entry.simulated = true;
    } else {
      const webhook = record.kind === 'webhook';
      try {
        const response = await deps.send(record.url, {
          method: 'POST',
          headers: webhook ? record.headers : {},
          ownHeaders: {
            'content-type': 'application/json',
            ...(webhook ? {} : record.headers),
            'x-sandbox-callback-id': record.id,
            'x-sandbox-attempt': String(n),
          },
          body: JSON.stringify(record.body),
          signal: AbortSignal.timeout(options.requestTimeoutMs),
        });
        entry.status = response.status;
        // Drain our own receiver's answer so its keep-alive connection is reused; a webhook's
        // receiver is someone else's, and its answer could be endless: drop it unread.
        if (webhook) await response.body?.cancel().catch(() => undefined);
        else await response.arrayBuffer().catch(() => undefined);
      } catch (error) {
        entry.error = error instanceof Error ? error.message : String(error);
        if (error instanceof OutboundRefusedError) {
          record.state = 'failed';
          deps.logger?.warn(
            { callbackId: record.id, kind: record.kind, url: record.url, reason: error.reason },
            'sandbox callback refused by the outbound policy',
          );
          return;
        }
      }
    }
    if (entry.status !== undefined && entry.status >= 200 && entry.status < 300) {
      record.state = 'delivered';
      return;
    }
    if (n >= options.maxAttempts) {
      record.state = 'failed';
      deps.logger?.warn(
        { callbackId: record.id, kind: record.kind, url: record.url, attempts: n },
        'sandbox callback given up',
      );
      return;
    }
    deps.logger?.debug(
      { callbackId: record.id, url: record.url, attempt: n, status: entry.status },
      'sandbox callback failed; retrying',
    );
    scheduler.after(callbackRetryDelayMs(n, options), () =>
      withSlot(() => attempt(record, generation)),
    );
  }

  function queueFirst(record: CallbackRecord): Promise<void> {
    const generation = scheduler.currentGeneration();
    const options = deps.options();
    if (options.shuffleCallbacks) {
      scheduler.after(random.int(options.shuffleWindowMs + 1), () =>
        withSlot(() => attempt(record, generation)),
      );
      return Promise.resolve();
    }
    const key = record.messageId ?? record.url;
    const run = (chains.get(key) ?? Promise.resolve()).then(() =>
      withSlot(() => attempt(record, generation)),
    );
    const tail = run.catch(() => undefined);
    chains.set(key, tail);
    void tail.then(() => {
      if (chains.get(key) === tail) chains.delete(key);
    });
    return run;
  }

  return {
    send(request) {
      const options = deps.options();
      const copies = options.duplicateCallbacks ? 2 : 1;
      const pending: Promise<void>[] = [];
      for (let copy = 0; copy < copies; copy++) {
        const record: CallbackRecord = {
          id: `cb_${nextId++}`,
          kind: request.kind,
          url: request.url,
          body: request.body,
          // a menu's headers are its author's; delivery and Viber ones are the sandbox's own
          headers:
            request.kind === 'webhook'
              ? callerHeaders(request.headers ?? {})
              : (request.headers ?? {}),
          copy,
          ...(request.messageId !== undefined && { messageId: request.messageId }),
          createdAt: new Date(scheduler.now()).toISOString(),
          state: 'pending',
          attempts: [],
        };
        records.push(record);
        // Trimmed in steps, so a burst does not copy the list on every callback.
        if (records.length > options.keepRecords * 1.25) {
          records = records.slice(records.length - options.keepRecords);
        }
        pending.push(queueFirst(record));
      }
      const all = Promise.all(pending).then(() => undefined);
      scheduler.track(all);
      return all;
    },
    list: () => records,
    forget(match) {
      const before = records.length;
      records = records.filter((r) => {
        if (!match(r)) return true;
        forgotten.add(r);
        return false;
      });
      return before - records.length;
    },
    reset() {
      records = [];
      chains = new Map();
    },
  };
}
