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
 */
import { sql } from 'drizzle-orm';
import type { Clock } from '../clock.ts';
import { type Db, executePrepared, rowsOf, type Tx } from '../db/client.ts';
import type { Logger } from '../logger.ts';
import type { CascadeResult, EndpointCascadeMessageInput } from '../provider/cascade.ts';
import type { Message, NormalisedMessagelistResponse } from '../provider/message.ts';
import { type CascadeEndpoint, type StoredCascade, toCascadeWire } from './cascade.ts';
import { nextStatusSql } from './status.ts';

/** The part of the cascade client the dispatcher needs. */
export interface CascadeSender {
  send(
    messages: readonly EndpointCascadeMessageInput[],
    opts: { endpoint: CascadeEndpoint },
  ): Promise<CascadeResult[]>;
}

/** The part of the provider client the dispatcher needs. */
export interface MessagelistSender {
  sendMessagelist(messages: Message[]): Promise<NormalisedMessagelistResponse[]>;
  /**
   * The same, for `count` messages already serialised as JSON and joined with commas (the
   * stored payloads as Postgres gives them), sent without parsing and re-serialising them.
   * Used when the sender has it.
   */
  sendMessagelistText?(list: string, count: number): Promise<NormalisedMessagelistResponse[]>;
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
  outbox_id: string;
  message_id: string;
  customer_message_id: string;
  /** its payload's `type` */
  type: string;
  /** the message's role ('call' for a call's own message) */
  role: string | null;
  attempts: number;
}

interface Claim {
  /** in queue order */
  rows: Claimed[];
  /** their stored message objects as JSON text, joined with commas: sent as they are */
  payloads: string;
  /** how many rows the claim locked: more than it sends when the byte budget cut the list */
  locked: number;
}

const EMPTY: DispatchResult = { claimed: 0, full: false, accepted: 0, rejected: 0, failed: 0 };

function retryDelayMs(attempts: number): number {
  return Math.min(60_000, 1000 * 2 ** Math.min(attempts, 6));
}

/**
 * Most bytes of payload JSON in one messagelist: 5000 SMS fit many times over, a call's menu
 * with its signed tokens is 5-15 KB, so a list of calls stops at a few hundred. Every round
 * holds its payloads three times at once (as received from Postgres, as the request body, in
 * the socket's buffers): without the cap a list of 5000 calls held ~200 MB. Counted on the
 * text that is sent, not on Postgres's stored size of the jsonb: that is compressed (a call's
 * 14 KB of menu is stored in ~4 KB), so a 4 MB budget of stored size let 15 MB lists through.
 */
export const MESSAGELIST_BYTES = 4 * 1024 * 1024;

/**
 * Claims up to `limit` due outbox rows (skipping rows another dispatcher holds). The payloads
 * come as one text: they go to the provider as they are, never parsed here.
 */
async function claim(tx: Tx, limit: number, maxBytes: number, now: Date): Promise<Claim> {
  // rows locked first (SKIP LOCKED, so rounds in flight take different ones), then as many
  // of them as fit the byte budget, in queue order; the rest go back at commit, unsent.
  // The messages are looked up one by one through the primary key (the lateral `limit 1`
  // keeps the planner from a hash join): joined plainly, a full outbox that is a large share
  // of `messages` (a bulk send) made it hash all of `messages` every round, ~75 ms per
  // 1000 rows of a 200 000-row table.
  // One row comes back, not one per message: the payloads joined (the request body's
  // middle) and the rest as one JSON array. Decoding 5000 rows of 8 columns each was ~8 us
  // of this process's CPU per message, more than everything else it does for a send.
  const result = await executePrepared(
    tx,
    sql`
    with c as (
      select o.id, o.message_id, o.attempts, o.available_at
      from outbox o
      where o.available_at <= ${now.toISOString()}::timestamptz
      order by o.available_at, o.id
      limit ${limit}
      for update skip locked),
    sized as (
      select c.id as outbox_id, c.message_id, c.attempts, m.customer_message_id, m.body,
        m.type, m.role, octet_length(m.body) as size,
        sum(octet_length(m.body)) over (order by c.available_at, c.id) as running
      from c cross join lateral (
        select m.customer_message_id, m.payload::text as body, m.payload->>'type' as type,
          m.role from messages m
        where m.id = c.message_id limit 1) m),
    picked as (select * from sized where running - size < ${maxBytes})
    select (select count(*) from c) as locked,
      (select json_agg(json_build_array(outbox_id::text, message_id, customer_message_id,
         type, role, attempts) order by running) from picked)::text as rows,
      (select string_agg(body, ',' order by running) from picked) as payloads`,
  );
  const [row] = result as {
    locked: number | string;
    rows: string | null;
    payloads: string | null;
  }[];
  if (!row?.rows) return { rows: [], payloads: '', locked: Number(row?.locked ?? 0) };
  const tuples = JSON.parse(row.rows) as [string, string, string, string, string | null, number][];
  const rows: Claimed[] = new Array(tuples.length);
  for (let i = 0; i < tuples.length; i++) {
    const t = tuples[i]!;
    rows[i] = {
      outbox_id: t[0],
      message_id: t[1],
      customer_message_id: t[2],
      type: t[3],
      role: t[4],
      attempts: t[5],
    };
  }
  return { rows, payloads: row.payloads ?? '', locked: Number(row.locked) };
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
  /** flashcall: the code the provider chose (the condensed interface's answer) */
  text: string | null;
  /** flashcall: the number that calls, its pattern and validity (flashcall.md's answer) */
  flash?: { callerId?: string; pattern?: string; ttl?: number };
  /** the provider already had it: this send repeated one whose answer was lost */
  resent?: boolean;
}

/** Records the provider's answers for many messages in one set-based statement. */
async function recordOutcomes(tx: Tx, outcomes: Outcome[], now: Date): Promise<void> {
  // The list goes as one JSON text, written here directly rather than built as objects and
  // stringified (5000 rows of objects a round were much of this process's garbage), with
  // one-letter keys and no nulls (a missing key reads as null): Postgres parses every byte
  // of it. i: message id, o: outbox id, s: status, p: provider message id, l: messagelist
  // id, n: parts, e: error, d: the event's detail, left out when it is just p, l and n (as
  // for nearly every message; Postgres builds it then, cheaper than reading it twice).
  const rows: string[] = new Array(outcomes.length);
  for (let i = 0; i < outcomes.length; i++) {
    const o = outcomes[i]!;
    // ids (uuid, bigint) and the status need no escaping; the provider's words do
    const pmid = o.providerMessageId === null ? undefined : JSON.stringify(o.providerMessageId);
    let row = `{"i":"${o.id}","o":"${o.outboxId}","s":"${o.status}"`;
    if (pmid !== undefined) row += `,"p":${pmid}`;
    if (o.messagelistId !== null) row += `,"l":${o.messagelistId}`;
    if (o.parts !== null) row += `,"n":${o.parts}`;
    const error = o.error == null ? undefined : JSON.stringify(o.error);
    if (error !== undefined) row += `,"e":${error}`;
    const plain =
      o.providerMessageId &&
      o.messagelistId !== null &&
      o.parts !== null &&
      o.text === null &&
      o.flash === undefined &&
      !o.resent &&
      error === undefined;
    if (plain) {
      rows[i] = `${row}}`;
      continue;
    }
    let detail = '';
    if (o.providerMessageId) detail += `,"messageId":${pmid}`;
    if (o.messagelistId !== null) detail += `,"messagelistId":${o.messagelistId}`;
    if (o.parts !== null) detail += `,"parts":${o.parts}`;
    if (o.text !== null) detail += `,"text":${JSON.stringify(o.text)}`;
    if (o.flash?.callerId !== undefined)
      detail += `,"callerId":${JSON.stringify(o.flash.callerId)}`;
    if (o.flash?.pattern !== undefined) detail += `,"pattern":${JSON.stringify(o.flash.pattern)}`;
    if (o.flash?.ttl !== undefined) detail += `,"ttl":${o.flash.ttl}`;
    if (o.resent) detail += ',"resent":true';
    if (error !== undefined) detail += `,"error":${error}`;
    rows[i] = `${row},"d":{${detail.slice(1)}}}`;
  }
  const at = now.toISOString();
  // one statement, one round trip and one parse of the list, whatever the batch size: the
  // status moves up a rank only (a callback may already have said `delivered`), and the
  // messages the update found (so no event without its message: message_events has no
  // foreign key) get their timeline events and lose their outbox rows
  await executePrepared(
    tx,
    sql`
    with u as (
      update messages as m set
        provider_message_id = coalesce(v.p, m.provider_message_id),
        messagelist_id = coalesce(v.l, m.messagelist_id),
        parts = coalesce(v.n, m.parts),
        error = coalesce(v.e, m.error),
        status = ${nextStatusSql(sql`m.status`, sql`v.s`)},
        updated_at = ${at}::timestamptz
      from jsonb_to_recordset(${`[${rows.join(',')}]`}::jsonb)
        as v(i uuid, o bigint, s text, p text, l bigint, n int, e jsonb, d jsonb)
      where m.id = v.i
      returning m.id, v.o, v.s,
        coalesce(v.d, jsonb_build_object('messageId', v.p, 'messagelistId', v.l, 'parts', v.n))
          as d),
    e as (
      insert into message_events (message_id, status, source, detail, at, received_at)
      select u.id, u.s, 'dispatch', u.d, ${at}::timestamptz, ${at}::timestamptz
      from u)
    delete from outbox where id = any(array(select o from u))`,
  );
}

function outcomesFrom(claimed: Claimed[], responses: NormalisedMessagelistResponse[]): Outcome[] {
  // responses come back per chunk, each in request order: answer i is for claimed row i,
  // unless the provider reordered or left some out, when the customerMessageIds match them
  type Answer = NormalisedMessagelistResponse['messages'][number];
  const flat: Answer[] = [];
  const listIds: (number | null)[] = [];
  for (const r of responses) {
    const messagelistId = r.messagelistId ?? null;
    for (const m of r.messages) {
      flat.push(m);
      listIds.push(messagelistId);
    }
  }
  let byCmid: Map<string, number> | undefined;
  const indexOf = (c: Claimed, i: number): number => {
    const inPlace = flat[i];
    if (inPlace !== undefined && inPlace.customerMessageId === c.customer_message_id) return i;
    if (byCmid === undefined) {
      byCmid = new Map();
      for (let j = 0; j < flat.length; j++) {
        const key = flat[j]!.customerMessageId;
        if (key !== undefined) byCmid.set(key, j);
      }
    }
    const named = byCmid.get(c.customer_message_id);
    if (named !== undefined) return named;
    // no answer names it: the one in its place, unless that one names another message (whose
    // answer it is: taking it gave two messages one provider id)
    return inPlace !== undefined && inPlace.customerMessageId === undefined ? i : -1;
  };
  // a plain loop, fields read where they are: this runs for every message of every batch
  const outcomes: Outcome[] = new Array(claimed.length);
  for (let i = 0; i < claimed.length; i++) {
    const c = claimed[i]!;
    const k = indexOf(c, i);
    const answer = flat[k];
    if (answer === undefined) {
      outcomes[i] = rejectedOutcome(c, NO_ANSWER);
    } else if (!answer.accepted && answer.error?.code === 'DUPLICATE_CUSTOMER_MESSAGE_ID') {
      // a resend after an interrupted dispatch: the provider has it already, under the id it
      // names (the condensed interface names it; the docs' answer does not, and then the
      // message's id stays unknown: docs/provider.md, "What the docs leave open")
      outcomes[i] = {
        id: c.message_id,
        outboxId: c.outbox_id,
        role: c.role,
        status: 'accepted',
        providerMessageId: answer.existingMessageId ?? null,
        messagelistId: listIds[k]!,
        parts: answer.parts ?? null,
        error: null,
        text: null,
        resent: true,
      };
    } else {
      outcomes[i] = {
        id: c.message_id,
        outboxId: c.outbox_id,
        role: c.role,
        status: answer.accepted ? 'accepted' : 'rejected',
        providerMessageId: answer.messageId ?? null,
        messagelistId: listIds[k]!,
        parts: answer.parts ?? null,
        error: answer.error ?? null,
        text: c.type === 'flashcall' && answer.text ? answer.text : null,
      };
      if (
        c.type === 'flashcall' &&
        (answer.callerId ?? answer.pattern ?? answer.ttl) !== undefined
      ) {
        const flash: NonNullable<Outcome['flash']> = {};
        if (answer.callerId !== undefined) flash.callerId = answer.callerId;
        if (answer.pattern !== undefined) flash.pattern = answer.pattern;
        if (answer.ttl !== undefined) flash.ttl = answer.ttl;
        outcomes[i]!.flash = flash;
      }
    }
  }
  return outcomes;
}

const NO_ANSWER = { code: 'NO_ANSWER', message: 'the provider answered without this message' };

function rejectedOutcome(c: Claimed, error: { code: string; message: string }): Outcome {
  return {
    id: c.message_id,
    outboxId: c.outbox_id,
    role: c.role,
    status: 'rejected',
    providerMessageId: null,
    messagelistId: null,
    parts: null,
    error,
    text: null,
  };
}

interface RoundPart {
  what: 'messagelist' | 'cascade';
  rows: Claimed[];
  send(): Promise<Outcome[]>;
}

/**
 * What a round sends: its messages as one messagelist, their stored text as it is; and, when
 * the round holds cascade messages (rare: only then is the text parsed), those apart, through
 * the cascade endpoint they name. Each part fails or succeeds on its own.
 */
function roundParts(deps: DispatchDeps, claimed: Claimed[], payloads: string): RoundPart[] {
  const sendList = (rows: Claimed[], messages: () => Message[]) => async () =>
    outcomesFrom(
      rows,
      deps.provider.sendMessagelistText && rows === claimed
        ? await deps.provider.sendMessagelistText(payloads, claimed.length)
        : await deps.provider.sendMessagelist(messages()),
    );
  if (!claimed.some((c) => c.type === 'cascade')) {
    return [
      {
        what: 'messagelist',
        rows: claimed,
        send: sendList(claimed, () => JSON.parse(`[${payloads}]`) as Message[]),
      },
    ];
  }
  const parsed = JSON.parse(`[${payloads}]`) as Record<string, unknown>[];
  const list: Claimed[] = [];
  const listMessages: Message[] = [];
  const byEndpoint = new Map<CascadeEndpoint, { rows: Claimed[]; messages: StoredCascade[] }>();
  claimed.forEach((c, i) => {
    if (c.type !== 'cascade') {
      list.push(c);
      listMessages.push(parsed[i] as unknown as Message);
      return;
    }
    const stored = parsed[i] as unknown as StoredCascade;
    const endpoint = stored.endpoint ?? 'general';
    const group = byEndpoint.get(endpoint) ?? { rows: [], messages: [] };
    group.rows.push(c);
    group.messages.push(stored);
    byEndpoint.set(endpoint, group);
  });
  const parts: RoundPart[] = [];
  if (list.length > 0) {
    parts.push({ what: 'messagelist', rows: list, send: sendList(list, () => listMessages) });
  }
  for (const [endpoint, group] of byEndpoint) {
    parts.push({
      what: 'cascade',
      rows: group.rows,
      send: async () => {
        if (!deps.cascade) {
          return group.rows.map((c) =>
            rejectedOutcome(c, {
              code: 'CASCADE_UNAVAILABLE',
              message: 'no cascade client: the cascade API needs PROVIDER_API_KEY',
            }),
          );
        }
        const results = await deps.cascade.send(group.messages.map(toCascadeWire), { endpoint });
        return group.rows.map((c, i): Outcome => {
          const r = results[i];
          if (!r) {
            return rejectedOutcome(c, NO_ANSWER);
          }
          return {
            id: c.message_id,
            outboxId: c.outbox_id,
            role: c.role,
            status: 'accepted',
            providerMessageId: r.messageId,
            messagelistId: null,
            parts: null,
            error: null,
            text: null,
          };
        });
      },
    });
  }
  return parts;
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
    if (claimed.length === 0) return EMPTY;
    const full = taken.locked >= batchSize || claimed.length < taken.locked;
    const outcomes: Outcome[] = [];
    let failed = 0;
    for (const part of roundParts(deps, claimed, taken.payloads)) {
      try {
        for (const o of await part.send()) outcomes.push(o);
      } catch (err) {
        const message = err instanceof Error ? err.message : String(err);
        deps.logger.warn({ err: { message }, count: part.rows.length }, `${part.what} send failed`);
        const giveUp = part.rows.filter((c) => c.attempts + 1 >= maxAttempts);
        const retry = part.rows.filter((c) => c.attempts + 1 < maxAttempts);
        if (retry.length > 0) {
          const ids = JSON.stringify(retry.map((c) => c.outbox_id));
          await tx.execute(sql`
            update outbox set attempts = attempts + 1, last_error = ${message},
              available_at = ${new Date(now.getTime() + retryDelayMs(retry[0]!.attempts)).toISOString()}::timestamptz
            where id in (select value::bigint from jsonb_array_elements_text(${ids}::jsonb))`);
        }
        for (const c of giveUp) {
          outcomes.push(
            rejectedOutcome(c, {
              code: 'DISPATCH_FAILED',
              message: `gave up after ${maxAttempts} attempts: ${message}`,
            }),
          );
        }
        failed += retry.length;
      }
    }
    if (outcomes.length > 0) {
      await recordOutcomes(tx, outcomes, now);
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
