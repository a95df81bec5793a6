/**
 * The dispatcher: takes outbox rows, sends them to the provider in messagelists of up to
 * 5000, and records the answer. Exactly-once comes from three things together:
 * - rows are claimed with FOR UPDATE SKIP LOCKED inside a transaction that stays open for the
 *   send, so two dispatchers never send the same row, and a crash releases the claim;
 * - the provider's answer, the timeline events and the removal of the outbox rows commit
 *   together, so a recorded send is never sent again;
 * - a send that crashed before its commit is repeated with the same customerMessageIds,
 *   which the provider deduplicates (seed 2.3: unique per message), so it is not sent twice.
 * Only one leader dispatches at a time (leader.ts); SKIP LOCKED keeps it safe regardless.
 */
import { sql } from 'drizzle-orm';
import type { Clock } from '../clock.ts';
import { type Db, rowsOf, type Tx } from '../db/client.ts';
import type { Logger } from '../logger.ts';
import type { Message, NormalisedMessagelistResponse } from '../provider/message.ts';
import { rankSql } from './timeline.ts';

/** The part of the provider client the dispatcher needs. */
export interface MessagelistSender {
  sendMessagelist(messages: Message[]): Promise<NormalisedMessagelistResponse[]>;
}

export interface DispatchDeps {
  db: Db;
  provider: MessagelistSender;
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
    outcomes: { id: string; status: 'accepted' | 'rejected' }[],
  ) => Promise<void>;
}

export interface DispatchOptions {
  /** messages per messagelist request (the provider takes at most 5000) */
  batchSize?: number;
  /** after this many failed attempts a message is given up on and marked rejected */
  maxAttempts?: number;
}

export interface DispatchResult {
  claimed: number;
  accepted: number;
  rejected: number;
  failed: number;
}

interface Claimed {
  outbox_id: number;
  message_id: string;
  customer_message_id: string;
  payload: Message;
  attempts: number;
}

const EMPTY: DispatchResult = { claimed: 0, accepted: 0, rejected: 0, failed: 0 };

function retryDelayMs(attempts: number): number {
  return Math.min(60_000, 1000 * 2 ** Math.min(attempts, 6));
}

/** Claims up to `limit` due outbox rows (skipping rows another dispatcher holds). */
async function claim(tx: Tx, limit: number, now: Date): Promise<Claimed[]> {
  const result = await tx.execute(sql`
    select o.id as outbox_id, o.message_id, o.attempts, m.customer_message_id, m.payload
    from outbox o join messages m on m.id = o.message_id
    where o.available_at <= ${now.toISOString()}::timestamptz
    order by o.available_at, o.id
    limit ${limit}
    for update of o skip locked`);
  return rowsOf<Claimed>(result);
}

interface Outcome {
  id: string;
  status: 'accepted' | 'rejected';
  providerMessageId: string | null;
  messagelistId: number | null;
  parts: number | null;
  error: unknown;
  /** flashcall: the code the provider chose */
  text: string | null;
  /** the provider already had it: this send repeated one whose answer was lost */
  resent?: boolean;
}

/** Records the provider's answers for many messages in a few set-based statements. */
async function recordOutcomes(tx: Tx, outcomes: Outcome[], now: Date): Promise<void> {
  const rows = JSON.stringify(
    outcomes.map((o) => ({
      id: o.id,
      status: o.status,
      provider_message_id: o.providerMessageId,
      messagelist_id: o.messagelistId,
      parts: o.parts,
      error: o.error ?? null,
    })),
  );
  const events = JSON.stringify(
    outcomes.map((o) => ({
      message_id: o.id,
      status: o.status,
      detail: {
        ...(o.providerMessageId && { messageId: o.providerMessageId }),
        ...(o.messagelistId !== null && { messagelistId: o.messagelistId }),
        ...(o.parts !== null && { parts: o.parts }),
        ...(o.text !== null && { text: o.text }),
        ...(o.resent && { resent: true }),
        ...(o.error != null && { error: o.error }),
      },
    })),
  );
  const at = now.toISOString();
  // one statement, one round trip, whatever the batch size: the status moves up a rank only
  // (a callback may already have said `delivered`), the timeline gets its events, and the
  // outbox rows go
  await tx.execute(sql`
    with u as (
      update messages as m set
        provider_message_id = coalesce(v.provider_message_id, m.provider_message_id),
        messagelist_id = coalesce(v.messagelist_id, m.messagelist_id),
        parts = coalesce(v.parts, m.parts),
        error = coalesce(v.error, m.error),
        status = case
          when m.status in ('read', 'rejected', 'failed', 'expired') then m.status
          when ${rankSql('v.status')} > ${rankSql('m.status')} then v.status
          else m.status end,
        updated_at = ${at}::timestamptz
      from jsonb_to_recordset(${rows}::jsonb) as v(
        id uuid, status text, provider_message_id text, messagelist_id bigint, parts int, error jsonb)
      where m.id = v.id),
    e as (
      insert into message_events (message_id, status, source, detail, at, received_at)
      select v.message_id, v.status, 'dispatch', v.detail, ${at}::timestamptz, ${at}::timestamptz
      from jsonb_to_recordset(${events}::jsonb) as v(message_id uuid, status text, detail jsonb))
    delete from outbox where message_id in (
      select id from jsonb_to_recordset(${rows}::jsonb) as v(id uuid))`);
}

function outcomesFrom(claimed: Claimed[], responses: NormalisedMessagelistResponse[]): Outcome[] {
  // responses come back per chunk, each in request order
  const flat = responses.flatMap((r) =>
    r.messages.map((m) => ({ ...m, messagelistId: r.messagelistId ?? null })),
  );
  const byCmid = new Map(
    flat.filter((m) => m.customerMessageId).map((m) => [m.customerMessageId, m]),
  );
  return claimed.map((c, i) => {
    const answer = byCmid.get(c.customer_message_id) ?? flat[i];
    if (!answer) {
      return {
        id: c.message_id,
        status: 'rejected',
        providerMessageId: null,
        messagelistId: null,
        parts: null,
        error: { code: 'NO_ANSWER', message: 'the provider answered without this message' },
        text: null,
      };
    }
    if (
      !answer.accepted &&
      answer.error?.code === 'DUPLICATE_CUSTOMER_MESSAGE_ID' &&
      answer.existingMessageId
    ) {
      // a resend after an interrupted dispatch: the provider has it already, under this id
      return {
        id: c.message_id,
        status: 'accepted',
        providerMessageId: answer.existingMessageId,
        messagelistId: answer.messagelistId,
        parts: answer.parts ?? null,
        error: null,
        text: null,
        resent: true,
      };
    }
    return {
      id: c.message_id,
      status: answer.accepted ? 'accepted' : 'rejected',
      providerMessageId: answer.messageId ?? null,
      messagelistId: answer.messagelistId,
      parts: answer.parts ?? null,
      error: answer.error ?? null,
      text: c.payload.type === 'flashcall' && answer.text ? answer.text : null,
    };
  });
}

/**
 * One round: claim up to `batchSize` due messages, send them as one messagelist, record the
 * answer. A failed send (after the client's own retries) puts the rows back with a backoff.
 */
export async function dispatchOnce(
  deps: DispatchDeps,
  opts: DispatchOptions = {},
): Promise<DispatchResult> {
  const batchSize = Math.min(opts.batchSize ?? 5000, 5000);
  const maxAttempts = opts.maxAttempts ?? 10;
  const result = await deps.db.transaction(async (tx): Promise<DispatchResult> => {
    const now = deps.clock.now();
    const claimed = await claim(tx, batchSize, now);
    if (claimed.length === 0) return EMPTY;
    let responses: NormalisedMessagelistResponse[];
    try {
      responses = await deps.provider.sendMessagelist(claimed.map((c) => c.payload));
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      deps.logger.warn({ err: { message }, count: claimed.length }, 'messagelist send failed');
      const giveUp = claimed.filter((c) => c.attempts + 1 >= maxAttempts);
      const retry = claimed.filter((c) => c.attempts + 1 < maxAttempts);
      if (retry.length > 0) {
        const ids = JSON.stringify(retry.map((c) => c.outbox_id));
        await tx.execute(sql`
          update outbox set attempts = attempts + 1, last_error = ${message},
            available_at = ${new Date(now.getTime() + retryDelayMs(retry[0]!.attempts)).toISOString()}::timestamptz
          where id in (select value::bigint from jsonb_array_elements_text(${ids}::jsonb))`);
      }
      if (giveUp.length > 0) {
        const rejected = giveUp.map(
          (c): Outcome => ({
            id: c.message_id,
            status: 'rejected',
            providerMessageId: null,
            messagelistId: null,
            parts: null,
            error: {
              code: 'DISPATCH_FAILED',
              message: `gave up after ${maxAttempts} attempts: ${message}`,
            },
            text: null,
          }),
        );
        await recordOutcomes(tx, rejected, now);
        await deps.onRecorded?.(tx, rejected);
      }
      return {
        claimed: claimed.length,
        accepted: 0,
        rejected: giveUp.length,
        failed: retry.length,
      };
    }
    const outcomes = outcomesFrom(claimed, responses);
    await recordOutcomes(tx, outcomes, now);
    await deps.onRecorded?.(tx, outcomes);
    const accepted = outcomes.filter((o) => o.status === 'accepted').length;
    return { claimed: claimed.length, accepted, rejected: outcomes.length - accepted, failed: 0 };
  });
  if (result.accepted + result.rejected > 0) deps.onDispatched?.(result.accepted, result.rejected);
  return result;
}

/** Messages waiting to be sent (the outbox depth metric). */
export async function outboxDepth(db: Db): Promise<number> {
  const [row] = rowsOf<{ n: number | string }>(
    await db.execute(sql`select count(*) as n from outbox`),
  );
  return Number(row?.n ?? 0);
}
