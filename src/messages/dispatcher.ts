/**
 * The dispatcher: takes outbox rows, sends them to the provider in messagelists of up to
 * 5000, and records the answer. Exactly-once comes from three things together:
 * - rows are claimed with FOR UPDATE SKIP LOCKED inside a transaction that stays open for the
 *   send, so two dispatchers never send the same row, and a crash releases the claim;
 * - the provider's answer, the timeline events and the removal of the outbox rows commit
 *   together, so a recorded send is never sent again;
 * - a send that crashed before its commit is repeated with the same customerMessageIds,
 *   unique per message: a provider that refuses a repeat (DUPLICATE_CUSTOMER_MESSAGE_ID, as
 *   the condensed interface and the sandbox do) does not send it twice, and the refusal is
 *   read as "sent". The public docs do not say whether the provider deduplicates
 *   (docs/provider.md, "What the docs leave open").
 * Only one leader dispatches at a time (leader.ts); SKIP LOCKED keeps it safe regardless.
 *
 * A round is claim (`dispatch-claim.ts`), plan (`dispatch-plan.ts`, pure: what to send,
 * what the answers mean), send (here) and write (`dispatch-write.ts`).
 */
import { sql } from 'drizzle-orm';
import type { Clock } from '../clock.ts';
import { type Db, rowsOf, type Tx } from '../db/client.ts';
import { subscriptionsOf } from '../events/subscriptions.ts';
import type { Logger } from '../logger.ts';
import type { CascadeResult, EndpointCascadeMessageInput } from '../provider/cascade.ts';
import { type CallBudget, ProviderError } from '../provider/http.ts';
import type { Message, NormalisedMessagelistResponse } from '../provider/message.ts';
import { inSpan, linkFromTraceparent, tracingEnabled } from '../tracing.ts';
import { type CascadeEndpoint, toCascadeWire } from './cascade.ts';
import { type Claim, type Claimed, claim, MESSAGELIST_BYTES } from './dispatch-claim.ts';
import {
  afterFailure,
  CASCADE_UNAVAILABLE,
  cascadeOutcomes,
  type Outcome,
  outcomesFrom,
  type RoundPart,
  rejectedOutcome,
  retryDelayMs,
  roundParts,
} from './dispatch-plan.ts';
import { lease, postpone, recordOutcomes } from './dispatch-write.ts';

export { MESSAGELIST_BYTES };

/**
 * The longest a round waits for the provider's rate limit, since it holds its claimed rows
 * meanwhile (their locks, a pooled connection, vacuum's horizon; on PGlite the one
 * connection): a longer Retry-After puts the rows back in the outbox until then, with no
 * attempt counted (a 429 is "not processed"), and the round commits at once.
 */
export const ROUND_RATE_LIMIT_WAIT_MS = 2000;

/**
 * The longest a round's sends take, every part and attempt together (`DispatchOptions`
 * `sendDeadlineMs`): what is unanswered then goes back in the outbox with a backoff, so a
 * round holds its claim (on Postgres an open transaction and its rows' locks) this long at most,
 * where the client's own bounds (four attempts of up to 30 s, a round of up to five requests)
 * would allow minutes.
 */
export const ROUND_SEND_DEADLINE_MS = 60_000;

/**
 * Postgres's own bound on a round's transaction waiting for its sends
 * (`idle_in_transaction_session_timeout`, set for the round's transaction only): the deadline
 * and this margin. It frees the rows when the process is gone mid-send (a lost host, a network
 * partition), which Postgres would otherwise notice only by TCP keepalive, hours by default.
 */
export const ROUND_IDLE_MARGIN_MS = 30_000;

/**
 * How long an embedded database's round keeps its rows out of the queue while it sends
 * outside its claim's transaction (`DispatchOptions.leaseMs`): what a crash mid-send delays
 * their resend by. Longer than a round's sends may take.
 */
export const EMBEDDED_DISPATCH_LEASE_MS = 5 * ROUND_SEND_DEADLINE_MS;

/** The part of the cascade client the dispatcher needs. */
export interface CascadeSender {
  send(
    messages: readonly EndpointCascadeMessageInput[],
    opts: { endpoint: CascadeEndpoint } & CallBudget,
  ): Promise<CascadeResult[]>;
}

/** The part of the provider client the dispatcher needs. */
export interface MessagelistSender {
  sendMessagelist(messages: Message[], opts?: CallBudget): Promise<NormalisedMessagelistResponse[]>;
  /**
   * The same, for `count` messages already serialised as JSON and joined with commas (the
   * stored payloads as Postgres gives them), sent without parsing and re-serialising them.
   * Used when the sender has it.
   */
  sendMessagelistText?(
    list: string,
    count: number,
    opts?: CallBudget,
  ): Promise<NormalisedMessagelistResponse[]>;
}

export interface DispatchDeps {
  db: Db;
  provider: MessagelistSender;
  /** sends messages of type `cascade`; without it they are rejected */
  cascade?: CascadeSender;
  clock: Clock;
  logger: Logger;
  /** called with how many messages were accepted and rejected, for metrics */
  onDispatched?: (accepted: number, rejected: number) => void;
  /**
   * Runs inside the transaction that recorded the provider's answers (the call runtime feeds
   * its machines the call messages' `accepted` or `rejected`).
   */
  onRecorded?: (
    tx: Tx,
    outcomes: { id: string; status: 'accepted' | 'rejected'; role: string | null }[],
  ) => Promise<void>;
}

export interface DispatchOptions {
  /** messages per messagelist request (the provider takes at most 5000) */
  batchSize?: number;
  /** most stored payload bytes in one messagelist (default MESSAGELIST_BYTES) */
  maxBytes?: number;
  /** after this many failed attempts a message is given up on and marked rejected */
  maxAttempts?: number;
  /**
   * Rounds the leader keeps in flight at once while the outbox is full (each its own
   * transaction; SKIP LOCKED keeps them apart), so that the database, this process and the
   * provider work at the same time. Default: 2 on Postgres (3 measured no faster on two
   * cores and cost the database more: each claim passes over the others' locked rows), 1 on
   * PGlite (one connection).
   */
  concurrency?: number;
  /** an empty round reads when the outbox's next row is due (DispatchResult.nextDueAt) */
  nextDue?: boolean;
  /**
   * Send outside the claim's transaction, the rows leased for this long meanwhile (see
   * `dispatchOnce`): for the embedded database. Longer than a send can take.
   */
  leaseMs?: number;
  /** the round's sends end by then (default ROUND_SEND_DEADLINE_MS) */
  sendDeadlineMs?: number;
  /**
   * Postgres ends the round's session when its transaction waits this long between two
   * statements (default: the send deadline and ROUND_IDLE_MARGIN_MS); not with `leaseMs`
   */
  idleTimeoutMs?: number;
}

export interface DispatchResult {
  claimed: number;
  /** the round took all it could (the batch size or the byte budget): more is likely waiting */
  full: boolean;
  accepted: number;
  rejected: number;
  failed: number;
  /**
   * A round that found nothing due: when the outbox's next row is (a retry's or a campaign
   * window's time, or the past for rows another round holds); null when the outbox is empty
   */
  nextDueAt?: Date | null;
}

const EMPTY: DispatchResult = { claimed: 0, full: false, accepted: 0, rejected: 0, failed: 0 };

/** When the outbox's first row is due (outbox_available_idx's first entry), or null. */
async function nextDue(tx: Tx): Promise<Date | null> {
  const [row] = rowsOf<{ at: string | Date | null }>(
    await tx.execute(sql`select min(available_at) as at from outbox`),
  );
  return row?.at == null ? null : new Date(row.at);
}

/** Sends one part of a round and reads the answers; throws when the send failed. */
async function send(deps: DispatchDeps, part: RoundPart, budget: CallBudget): Promise<Outcome[]> {
  if (part.what === 'messagelist') {
    const { body } = part;
    const answers =
      'text' in body && deps.provider.sendMessagelistText
        ? await deps.provider.sendMessagelistText(body.text, part.rows.length, budget)
        : await deps.provider.sendMessagelist(
            'text' in body ? (JSON.parse(`[${body.text}]`) as Message[]) : body.messages,
            budget,
          );
    return outcomesFrom(part.rows, answers);
  }
  if (!deps.cascade) return part.rows.map((c) => rejectedOutcome(c, CASCADE_UNAVAILABLE));
  const results = await deps.cascade.send(part.messages.map(toCascadeWire), {
    endpoint: part.endpoint,
    ...budget,
  });
  return cascadeOutcomes(part.rows, results);
}

/** What a round's sends came to, before anything of it is written. */
interface Sent {
  outcomes: Outcome[];
  /** rows to put back: after a failure (`attempted`), or until the rate limit lets them go */
  later: { rows: Claimed[]; error: string; due: Date; attempted: boolean }[];
}

/**
 * One round: claim up to `batchSize` due messages, send them as one messagelist (cascade
 * messages through the cascade API), record the answer. A failed send (after the client's own
 * retries) puts the rows back with a backoff.
 *
 * By default the round is one transaction that holds its rows locked through the send (ADR
 * 0001). With `leaseMs` (the embedded database, whose one connection a transaction holds for
 * every other query of the process) the claim commits with the rows leased (not due) for
 * that long, the send runs outside any transaction, and a second transaction records the
 * answers of the rows still queued; a crash in between sends the rows again once the lease
 * ends, with the same customerMessageIds, as a crash inside the one transaction would.
 */
export async function dispatchOnce(
  deps: DispatchDeps,
  opts: DispatchOptions = {},
): Promise<DispatchResult> {
  const batchSize = Math.min(opts.batchSize ?? 5000, 5000);
  const maxAttempts = opts.maxAttempts ?? 10;
  const maxBytes = opts.maxBytes ?? MESSAGELIST_BYTES;
  const deadlineMs = opts.sendDeadlineMs ?? ROUND_SEND_DEADLINE_MS;
  const idleTimeoutMs = opts.idleTimeoutMs ?? deadlineMs + ROUND_IDLE_MARGIN_MS;
  const result =
    opts.leaseMs === undefined
      ? await deps.db.transaction(async (tx): Promise<DispatchResult> => {
          const now = deps.clock.now();
          const taken = await claim(tx, batchSize, maxBytes, now);
          if (taken.rows.length === 0)
            return opts.nextDue ? { ...EMPTY, nextDueAt: await nextDue(tx) } : EMPTY;
          // for this transaction only; a parameter, which SET LOCAL cannot take
          await tx.execute(
            sql`select set_config('idle_in_transaction_session_timeout', ${String(idleTimeoutMs)}, true)`,
          );
          return traced(taken, async () => write(tx, taken, await sendAll(taken, now), now));
        })
      : await leasedRound(opts.leaseMs);
  if (result.accepted + result.rejected > 0) deps.onDispatched?.(result.accepted, result.rejected);
  return result;

  async function leasedRound(leaseMs: number): Promise<DispatchResult> {
    const now = deps.clock.now();
    let nextDueAt: Date | null = null;
    const taken = await deps.db.transaction(async (tx) => {
      const t = await claim(tx, batchSize, maxBytes, now);
      if (t.rows.length > 0) await lease(tx, t.rows, new Date(now.getTime() + leaseMs));
      else if (opts.nextDue) nextDueAt = await nextDue(tx);
      return t;
    });
    if (taken.rows.length === 0) return opts.nextDue ? { ...EMPTY, nextDueAt } : EMPTY;
    return traced(taken, async () => {
      const sent = await sendAll(taken, now);
      return deps.db.transaction((tx) => write(tx, taken, sent, now, true));
    });
  }

  function traced(taken: Claim, fn: () => Promise<DispatchResult>): Promise<DispatchResult> {
    if (!tracingEnabled()) return fn();
    const links = taken.traceparents.map(linkFromTraceparent).filter((l) => l !== undefined);
    const attributes = { 'messaging.batch.message_count': taken.rows.length };
    return inSpan('dispatch', { links, attributes }, fn);
  }

  /** Sends every part of the round, until the round's deadline; writes nothing. */
  async function sendAll(taken: Claim, now: Date): Promise<Sent> {
    const sent: Sent = { outcomes: [], later: [] };
    const deadline = AbortSignal.timeout(deadlineMs);
    const budget: CallBudget = { maxRateLimitWaitMs: ROUND_RATE_LIMIT_WAIT_MS, signal: deadline };
    for (const part of roundParts(taken.rows, taken.payloads)) {
      if (deadline.aborted) {
        // not sent: back at once, uncounted, for the next round
        const error = `not sent: the round's ${deadlineMs} ms for its sends had passed`;
        sent.later.push({ rows: part.rows, error, due: deps.clock.now(), attempted: false });
        continue;
      }
      try {
        for (const o of await send(deps, part, budget)) sent.outcomes.push(o);
      } catch (err) {
        // the client rethrows the signal's reason wherever the deadline stopped it
        const message =
          deadline.aborted && err === deadline.reason
            ? `no answer within the round's ${deadlineMs} ms for its sends`
            : err instanceof Error
              ? err.message
              : String(err);
        if (err instanceof ProviderError && err.retryAfterMs !== undefined) {
          // rate limited past ROUND_RATE_LIMIT_WAIT_MS: nothing was processed
          const due = new Date(deps.clock.now().getTime() + err.retryAfterMs);
          deps.logger.warn(
            { err: { message }, count: part.rows.length, until: due.toISOString() },
            `${part.what} rate limited: back in the outbox until then`,
          );
          sent.later.push({ rows: part.rows, error: message, due, attempted: false });
          continue;
        }
        deps.logger.warn({ err: { message }, count: part.rows.length }, `${part.what} send failed`);
        const { retry, givenUp } = afterFailure(part.rows, maxAttempts, message);
        if (retry.length > 0) {
          const due = new Date(now.getTime() + retryDelayMs(retry[0]!.attempts));
          sent.later.push({ rows: retry, error: message, due, attempted: true });
        }
        for (const o of givenUp) sent.outcomes.push(o);
      }
    }
    return sent;
  }

  /** Writes what the sends came to; `leased`: only for rows still queued (leasedRound). */
  async function write(
    tx: Tx,
    taken: Claim,
    sent: Sent,
    now: Date,
    leased = false,
  ): Promise<DispatchResult> {
    for (const p of sent.later) await postpone(tx, p.rows, p.error, p.due, p.attempted);
    let outcomes = sent.outcomes;
    if (outcomes.length > 0) {
      const events = subscriptionsOf(deps.db).wants('message.status');
      const recorded = await recordOutcomes(tx, outcomes, now, events, leased);
      if (recorded) outcomes = outcomes.filter((o) => recorded.has(String(o.outboxId)));
      await deps.onRecorded?.(tx, outcomes);
    }
    const accepted = outcomes.filter((o) => o.status === 'accepted').length;
    return {
      claimed: taken.rows.length,
      full: taken.locked >= batchSize || taken.rows.length < taken.locked,
      accepted,
      rejected: outcomes.length - accepted,
      failed: sent.later.reduce((n, p) => n + p.rows.length, 0),
    };
  }
}

/** Messages waiting to be sent (the outbox depth metric). */
export async function outboxDepth(db: Db): Promise<number> {
  const [row] = rowsOf<{ n: number | string }>(
    await db.execute(sql`select count(*) as n from outbox`),
  );
  return Number(row?.n ?? 0);
}
