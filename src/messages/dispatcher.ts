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
  /**
   * The same, for messages already serialised as JSON (the stored payloads as Postgres gives
   * them), sent without parsing and re-serialising them. Used when the sender has it.
   */
  sendMessagelistJson?(messages: readonly string[]): Promise<NormalisedMessagelistResponse[]>;
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
}

export interface DispatchResult {
  claimed: number;
  /** the round took all it could (the batch size or the byte budget): more is likely waiting */
  full: boolean;
  accepted: number;
  rejected: number;
  failed: number;
}

interface Claimed {
  outbox_id: number | string;
  message_id: string;
  customer_message_id: string;
  /** the stored message object as JSON text, sent as it is */
  payload: string;
  /** its `type` */
  type: string;
  /** the message's role ('call' for a call's own message) */
  role: string | null;
  attempts: number;
  /** how many rows the claim locked: more than it sends when the byte budget cut the list */
  locked: number | string;
}

const EMPTY: DispatchResult = { claimed: 0, full: false, accepted: 0, rejected: 0, failed: 0 };

function retryDelayMs(attempts: number): number {
  return Math.min(60_000, 1000 * 2 ** Math.min(attempts, 6));
}

/**
 * Most stored bytes of payload in one messagelist (Postgres's own size of the jsonb, roughly
 * the JSON's): 5000 SMS fit many times over, a call's menu with its signed tokens is 5-15 KB,
 * so a list of calls stops at a few hundred. Every round holds its payloads three times at
 * once (as received from Postgres, as the request body, in the socket's buffers): without
 * the cap a list of 5000 calls held ~200 MB.
 */
export const MESSAGELIST_BYTES = 4 * 1024 * 1024;

/**
 * Claims up to `limit` due outbox rows (skipping rows another dispatcher holds). The payload
 * comes as text: it goes to the provider as it is, never parsed here.
 */
async function claim(tx: Tx, limit: number, maxBytes: number, now: Date): Promise<Claimed[]> {
  // rows locked first (SKIP LOCKED, so rounds in flight take different ones), then as many
  // of them as fit the byte budget, in queue order; the rest go back at commit, unsent
  const result = await tx.execute(sql`
    with c as (
      select o.id, o.message_id, o.attempts, o.available_at
      from outbox o
      where o.available_at <= ${now.toISOString()}::timestamptz
      order by o.available_at, o.id
      limit ${limit}
      for update skip locked),
    sized as (
      select c.id as outbox_id, c.message_id, c.attempts, m.customer_message_id, m.payload,
        m.role, pg_column_size(m.payload) as size,
        sum(pg_column_size(m.payload)) over (order by c.available_at, c.id) as running
      from c join messages m on m.id = c.message_id)
    select outbox_id, message_id, attempts, customer_message_id, payload::text as payload,
      payload->>'type' as type, role, (select count(*) from c) as locked
    from sized
    where running - size < ${maxBytes}
    order by running`);
  return rowsOf<Claimed>(result);
}

interface Outcome {
  id: string;
  /** the outbox row that goes with it */
  outboxId: number | string;
  role: string | null;
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
  // plain loops: these run over every message of every batch
  const rowList: object[] = new Array(outcomes.length);
  const eventList: object[] = new Array(outcomes.length);
  for (let i = 0; i < outcomes.length; i++) {
    const o = outcomes[i]!;
    rowList[i] = {
      id: o.id,
      status: o.status,
      provider_message_id: o.providerMessageId,
      messagelist_id: o.messagelistId,
      parts: o.parts,
      error: o.error ?? null,
    };
    const detail: Record<string, unknown> = {};
    if (o.providerMessageId) detail.messageId = o.providerMessageId;
    if (o.messagelistId !== null) detail.messagelistId = o.messagelistId;
    if (o.parts !== null) detail.parts = o.parts;
    if (o.text !== null) detail.text = o.text;
    if (o.resent) detail.resent = true;
    if (o.error != null) detail.error = o.error;
    eventList[i] = { message_id: o.id, status: o.status, detail };
  }
  const rows = JSON.stringify(rowList);
  const events = JSON.stringify(eventList);
  const outboxIds = JSON.stringify(outcomes.map((o) => String(o.outboxId)));
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
    delete from outbox where id in (
      select value::bigint from jsonb_array_elements_text(${outboxIds}::jsonb))`);
}

function outcomesFrom(claimed: Claimed[], responses: NormalisedMessagelistResponse[]): Outcome[] {
  // responses come back per chunk, each in request order
  type Answer = NormalisedMessagelistResponse['messages'][number] & {
    messagelistId: number | null;
  };
  const flat: Answer[] = [];
  const byCmid = new Map<string, Answer>();
  for (const r of responses) {
    const messagelistId = r.messagelistId ?? null;
    for (const m of r.messages) {
      const answer: Answer = { ...m, messagelistId };
      flat.push(answer);
      if (m.customerMessageId) byCmid.set(m.customerMessageId, answer);
    }
  }
  return claimed.map((c, i) => {
    const answer = byCmid.get(c.customer_message_id) ?? flat[i];
    if (!answer) {
      return {
        id: c.message_id,
        outboxId: c.outbox_id,
        role: c.role,
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
        outboxId: c.outbox_id,
        role: c.role,
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
      outboxId: c.outbox_id,
      role: c.role,
      status: answer.accepted ? 'accepted' : 'rejected',
      providerMessageId: answer.messageId ?? null,
      messagelistId: answer.messagelistId,
      parts: answer.parts ?? null,
      error: answer.error ?? null,
      text: c.type === 'flashcall' && answer.text ? answer.text : null,
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
    const claimed = await claim(tx, batchSize, opts.maxBytes ?? MESSAGELIST_BYTES, now);
    if (claimed.length === 0) return EMPTY;
    const full =
      Number(claimed[0]!.locked) >= batchSize || claimed.length < Number(claimed[0]!.locked);
    let responses: NormalisedMessagelistResponse[];
    try {
      const payloads = claimed.map((c) => c.payload);
      responses = deps.provider.sendMessagelistJson
        ? await deps.provider.sendMessagelistJson(payloads)
        : await deps.provider.sendMessagelist(payloads.map((p) => JSON.parse(p) as Message));
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
            outboxId: c.outbox_id,
            role: c.role,
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
        full,
        accepted: 0,
        rejected: giveUp.length,
        failed: retry.length,
      };
    }
    const outcomes = outcomesFrom(claimed, responses);
    await recordOutcomes(tx, outcomes, now);
    await deps.onRecorded?.(tx, outcomes);
    const accepted = outcomes.filter((o) => o.status === 'accepted').length;
    return {
      claimed: claimed.length,
      full,
      accepted,
      rejected: outcomes.length - accepted,
      failed: 0,
    };
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
