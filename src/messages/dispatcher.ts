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
import { type Claim, claim, MESSAGELIST_BYTES } from './dispatch-claim.ts';
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
import { postpone, recordOutcomes } from './dispatch-write.ts';

export { MESSAGELIST_BYTES };

/**
 * The longest a round waits for the provider's rate limit, since it holds its claimed rows
 * meanwhile (their locks, a pooled connection, vacuum's horizon; on PGlite the one
 * connection): a longer Retry-After puts the rows back in the outbox until then, with no
 * attempt counted (a 429 is "not processed"), and the round commits at once.
 */
export const ROUND_RATE_LIMIT_WAIT_MS = 2000;
const BUDGET: CallBudget = { maxRateLimitWaitMs: ROUND_RATE_LIMIT_WAIT_MS };

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
async function send(deps: DispatchDeps, part: RoundPart): Promise<Outcome[]> {
  if (part.what === 'messagelist') {
    const { body } = part;
    const answers =
      'text' in body && deps.provider.sendMessagelistText
        ? await deps.provider.sendMessagelistText(body.text, part.rows.length, BUDGET)
        : await deps.provider.sendMessagelist(
            'text' in body ? (JSON.parse(`[${body.text}]`) as Message[]) : body.messages,
            BUDGET,
          );
    return outcomesFrom(part.rows, answers);
  }
  if (!deps.cascade) return part.rows.map((c) => rejectedOutcome(c, CASCADE_UNAVAILABLE));
  const results = await deps.cascade.send(part.messages.map(toCascadeWire), {
    endpoint: part.endpoint,
    ...BUDGET,
  });
  return cascadeOutcomes(part.rows, results);
}

/**
 * One round: claim up to `batchSize` due messages, send them as one messagelist (cascade
 * messages through the cascade API), record the answer. A failed send (after the client's own
 * retries) puts the rows back with a backoff.
 */
export async function dispatchOnce(
  deps: DispatchDeps,
  opts: DispatchOptions = {},
): Promise<DispatchResult> {
  const batchSize = Math.min(opts.batchSize ?? 5000, 5000);
  const maxAttempts = opts.maxAttempts ?? 10;
  const result = await deps.db.transaction(async (tx): Promise<DispatchResult> => {
    const now = deps.clock.now();
    const taken = await claim(tx, batchSize, opts.maxBytes ?? MESSAGELIST_BYTES, now);
    const claimed = taken.rows;
    if (claimed.length === 0)
      return opts.nextDue ? { ...EMPTY, nextDueAt: await nextDue(tx) } : EMPTY;
    if (!tracingEnabled()) return sendAndRecord(tx, taken, now);
    const links = taken.traceparents.map(linkFromTraceparent).filter((l) => l !== undefined);
    const attributes = { 'messaging.batch.message_count': claimed.length };
    return inSpan('dispatch', { links, attributes }, () => sendAndRecord(tx, taken, now));
  });
  if (result.accepted + result.rejected > 0) deps.onDispatched?.(result.accepted, result.rejected);
  return result;

  async function sendAndRecord(tx: Tx, taken: Claim, now: Date): Promise<DispatchResult> {
    const claimed = taken.rows;
    const full = taken.locked >= batchSize || claimed.length < taken.locked;
    const outcomes: Outcome[] = [];
    let failed = 0;
    for (const part of roundParts(claimed, taken.payloads)) {
      try {
        for (const o of await send(deps, part)) outcomes.push(o);
      } catch (err) {
        const message = err instanceof Error ? err.message : String(err);
        if (err instanceof ProviderError && err.retryAfterMs !== undefined) {
          // rate limited past ROUND_RATE_LIMIT_WAIT_MS: nothing was processed
          const due = new Date(deps.clock.now().getTime() + err.retryAfterMs);
          deps.logger.warn(
            { err: { message }, count: part.rows.length, until: due.toISOString() },
            `${part.what} rate limited: back in the outbox until then`,
          );
          await postpone(tx, part.rows, message, due, false);
          failed += part.rows.length;
          continue;
        }
        deps.logger.warn({ err: { message }, count: part.rows.length }, `${part.what} send failed`);
        const { retry, givenUp } = afterFailure(part.rows, maxAttempts, message);
        if (retry.length > 0) {
          const due = new Date(now.getTime() + retryDelayMs(retry[0]!.attempts));
          await postpone(tx, retry, message, due, true);
        }
        for (const o of givenUp) outcomes.push(o);
        failed += retry.length;
      }
    }
    if (outcomes.length > 0) {
      await recordOutcomes(tx, outcomes, now, subscriptionsOf(deps.db).wants('message.status'));
      await deps.onRecorded?.(tx, outcomes);
    }
    const accepted = outcomes.filter((o) => o.status === 'accepted').length;
    return {
      claimed: claimed.length,
      full,
      accepted,
      rejected: outcomes.length - accepted,
      failed,
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
