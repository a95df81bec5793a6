/**
 * Accepting messages: every message of a request is validated on its own and answered in
 * request order; the accepted ones are stored with status `queued` and their first timeline
 * event, in one transaction, so a message is never half-stored.
 *
 * @example
 * const { results } = await submitMessages({ db, clock }, [{ from: 'Acme', to: '+380501234567', type: 'sms', text: 'Hi' }]);
 */
import { type SQL, sql } from 'drizzle-orm';
import { decideLimits, delayOutbox, type LimitSettings } from '../campaigns/limits.ts';
import type { CallingWindow } from '../campaigns/windows.ts';
import type { Clock } from '../clock.ts';
import { type Db, executePrepared, type Tx } from '../db/client.ts';
import type { NewMessageRow } from '../db/schema/index.ts';
import { type ErrorCode, type ErrorDetail, formatPath } from '../errors.ts';
import { eventsFrom } from '../events/record.ts';
import { QUEUED_RETURNING, queuedSource } from '../events/sources.ts';
import { subscriptionsOf } from '../events/subscriptions.ts';
import { itemInputProblem } from '../http/input.ts';
import { uuidv7 } from '../ids.ts';
import { latestAtMost } from '../instants.ts';
import { optedOutAmong, optedOutRejection } from '../opt-outs/store.ts';
import {
  DEFAULT_LIFETIME_SECONDS,
  deadlineOf,
  toWireMessage,
  validateMessage,
} from '../provider/message.ts';
import { activeTraceparent, inSpan, tracingEnabled } from '../tracing.ts';
import { validateCascadeInput } from './cascade.ts';
import type { SubmitResult } from './views.ts';

export const MAX_MESSAGES_PER_REQUEST = 5000;

export interface SubmitDeps {
  db: Db;
  clock: Clock;
}

export interface SubmitOptions {
  /** the most SMS parts one message may take (MESSAGE_TOO_LONG beyond it) */
  maxSmsParts?: number;
  /** links the stored messages to a call (the call runtime sets these) */
  callId?: string;
  role?: 'call' | 'follow-up';
  /** the life of a message that states none (MESSAGE_LIFETIME_SECONDS) */
  lifetimeSeconds?: number;
  /** a calling window or the frequency cap the request asked for (src/campaigns/limits.ts) */
  limits?: {
    asked: { window?: true | CallingWindow | undefined; cap?: boolean | undefined };
    settings: LimitSettings;
  };
}

/** A message that passed validation, with its ids assigned, ready to be stored. */
export interface PreparedMessage {
  index: number;
  row: NewMessageRow;
}

type Rejection = { code: ErrorCode; message: string; details: ErrorDetail[] };

function rejected(customerMessageId: unknown, error: Rejection): SubmitResult {
  return {
    ...(typeof customerMessageId === 'string' && { customerMessageId }),
    status: 'rejected',
    error,
  };
}

function prefixDetails(prefix: string, details: ErrorDetail[]): ErrorDetail[] {
  return details.map((d) => ({ ...d, path: d.path ? `${prefix}.${d.path}` : prefix }));
}

/** One checked input, ready to be given its ids and stored. */
type Checked =
  | { ok: false; error: Rejection }
  | {
      ok: true;
      type: string;
      from: string;
      to: string;
      customerMessageId: string | undefined;
      parts: number | null;
      expiresAt: Date;
      /** the payload to store, as it is sent, once the customerMessageId is known */
      payload(customerMessageId: string): unknown;
    };

/**
 * One message input checked by every rule of the provider's interface (a `type: "cascade"`
 * message by the cascade's): what `prepareMessages` does for each, without ids.
 */
export function checkMessageInput(input: unknown, opts: SubmitOptions, now: Date): Checked {
  const lifetime = opts.lifetimeSeconds ?? DEFAULT_LIFETIME_SECONDS;
  if ((input as { type?: unknown } | null)?.type === 'cascade') {
    const c = validateCascadeInput(input as Record<string, unknown>);
    if (!c.ok) {
      const recipient = c.details.find((d) => d.code === 'INVALID_RECIPIENT');
      const first = recipient ?? c.details[0];
      return {
        ok: false,
        error: {
          code: recipient ? 'INVALID_RECIPIENT' : 'INVALID_MESSAGE',
          message: first ? `${first.path || 'message'}: ${first.message}` : 'invalid message',
          details: c.details,
        },
      };
    }
    const m = c.message;
    const start = m.scheduledSent !== undefined ? Date.parse(m.scheduledSent) : now.getTime();
    return {
      ok: true,
      type: 'cascade',
      from: m.fromName,
      to: m.toPhone,
      // given, it passed the cascade's id rules; absent, the id is a placeholder
      customerMessageId:
        typeof (input as { customerMessageId?: unknown }).customerMessageId === 'string'
          ? m.id
          : undefined,
      parts: null,
      expiresAt: new Date(
        latestAtMost(Math.max(start, now.getTime()) + (m.ttl ?? lifetime) * 1000),
      ),
      payload: (customerMessageId) => ({ ...m, id: customerMessageId }),
    };
  }
  const checked = validateMessage(input, {
    now,
    ...(opts.maxSmsParts !== undefined && { maxSmsParts: opts.maxSmsParts }),
  });
  if (!checked.ok) return { ok: false, error: checked.error };
  const message = checked.message;
  return {
    ok: true,
    type: message.type,
    from: message.from,
    to: message.to,
    customerMessageId: message.customerMessageId,
    parts: checked.parts ?? null,
    expiresAt: deadlineOf(message, now, lifetime),
    // stored as it is sent: the dispatcher posts the stored text unchanged
    payload: (customerMessageId) => toWireMessage({ ...message, customerMessageId }),
  };
}

function reusedId(customerMessageId: string, path: string, message: string): SubmitResult {
  return rejected(customerMessageId, {
    code: 'DUPLICATE_CUSTOMER_MESSAGE_ID',
    message,
    details: [
      {
        path,
        code: 'DUPLICATE_CUSTOMER_MESSAGE_ID',
        message: 'already names a message with other content',
      },
    ],
  });
}

/** The same content: the payloads as they are stored (key order is the validator's). */
function sameContent(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/**
 * Validates each input (every rule of the provider's interface, through the provider models;
 * a `type: "cascade"` message through the cascade's) and assigns ids. Returns the per-input
 * results (rejections filled in), the messages to store, and `repeats`: inputs that repeat an
 * earlier one of the request (same customerMessageId, same content), answered as it is.
 */
export function prepareMessages(
  inputs: unknown[],
  opts: SubmitOptions,
  now: Date,
): {
  results: (SubmitResult | undefined)[];
  prepared: PreparedMessage[];
  repeats: { index: number; of: number }[];
} {
  const results: (SubmitResult | undefined)[] = new Array(inputs.length);
  const prepared: PreparedMessage[] = [];
  const repeats: { index: number; of: number }[] = [];
  const seen = new Map<string, PreparedMessage>();
  inputs.forEach((input, index) => {
    const prefix = formatPath(['messages', index]);
    const cmid = (input as { customerMessageId?: unknown } | null)?.customerMessageId;
    const unstorable = itemInputProblem('messages', index, input);
    if (unstorable) {
      results[index] = rejected(cmid, unstorable);
      return;
    }
    const checked = checkMessageInput(input, opts, now);
    if (!checked.ok) {
      results[index] = rejected(cmid, {
        ...checked.error,
        details: prefixDetails(prefix, checked.error.details),
      });
      return;
    }
    const id = uuidv7(now.getTime());
    const customerMessageId = checked.customerMessageId ?? id;
    const earlier = seen.get(customerMessageId);
    if (earlier !== undefined) {
      if (sameContent(earlier.row.payload, checked.payload(customerMessageId))) {
        repeats.push({ index, of: earlier.index });
      } else {
        results[index] = reusedId(
          customerMessageId,
          `${prefix}.customerMessageId`,
          `customerMessageId "${customerMessageId}" is already used by messages[${earlier.index}] of this request, with other content`,
        );
      }
      return;
    }
    const message: PreparedMessage = {
      index,
      row: {
        id,
        customerMessageId,
        type: checked.type,
        from: checked.from,
        to: checked.to,
        payload: checked.payload(customerMessageId),
        status: 'queued',
        parts: checked.parts,
        expiresAt: checked.expiresAt,
        callId: opts.callId ?? null,
        role: opts.role ?? null,
        createdAt: now,
        updatedAt: now,
      },
    };
    seen.set(customerMessageId, message);
    prepared.push(message);
  });
  return { results, prepared, repeats };
}

/**
 * The statement parts that store prepared messages, as common table expressions to put after
 * `with`: `msg_keys` claims the messages' customerMessageIds (src/db/schema/message-keys.ts; one
 * that already exists is skipped, ON CONFLICT DO NOTHING, so concurrent requests cannot store it
 * twice; with `unlessOptedOut`, so is a message to a number on the opt-out list) and `msg`
 * inserts the messages whose key it got and returns their ids; `msg_events` and `msg_outbox`
 * give each of those its first timeline event and its outbox row (the outbox row commits with
 * its message: nothing accepted is ever left unsent).
 * The rows travel as one JSON parameter, so the text is the same whatever their number:
 * no bind-parameter limit, and no query building per row (call runtime: one statement with
 * its other writes). With `events`, `msg` also returns what the `queued` steps' events need
 * (src/events/sources.ts `queuedSource`).
 */
export function messageInserts(
  prepared: PreparedMessage[],
  now: Date,
  events = false,
  /** skip a message to a number on the opt-out list (a call's follow-ups; submit filters first) */
  unlessOptedOut = false,
): SQL {
  const rows = prepared.map(({ row: r }) => ({
    id: r.id,
    customer_message_id: r.customerMessageId,
    type: r.type,
    from: r.from,
    to: r.to,
    payload: r.payload,
    status: r.status,
    parts: r.parts ?? null,
    expires_at: r.expiresAt ?? null,
    call_id: r.callId ?? null,
    role: r.role ?? null,
    created_at: r.createdAt ?? now,
    updated_at: r.updatedAt ?? now,
  }));
  const at = now.toISOString();
  return sql`msg_rows as (
      select * from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
        as v(id uuid, customer_message_id text, type text, "from" text, "to" text, payload jsonb,
             status text, parts int, expires_at timestamptz, call_id uuid, role text,
             created_at timestamptz, updated_at timestamptz)
      ${unlessOptedOut ? sql`where not exists (select 1 from opt_outs o where o.phone = v."to")` : sql``}),
    msg_keys as (
      insert into message_customer_ids (customer_message_id, message_id)
      select customer_message_id, id from msg_rows
      on conflict (customer_message_id) do nothing
      returning message_id),
    msg as (
      insert into messages (id, customer_message_id, type, "from", "to", payload, status, parts,
                            expires_at, call_id, role, created_at, updated_at)
      select v.id, v.customer_message_id, v.type, v."from", v."to", v.payload, v.status, v.parts,
             v.expires_at, v.call_id, v.role, v.created_at, v.updated_at
      from msg_rows v
      where v.id in (select message_id from msg_keys)
      returning id, parts, octet_length(payload::text) as payload_bytes${events ? QUEUED_RETURNING : sql``}),
    msg_events as (
      insert into message_events (message_id, status, source, detail, at, received_at)
      select id, 'queued', 'api',
             case when parts is not null then jsonb_build_object('parts', parts) end,
             ${at}::timestamptz, ${at}::timestamptz
      from msg),
    msg_outbox as (
      insert into outbox (message_id, available_at, trace_parent, payload_bytes)
      select id, ${at}::timestamptz, ${activeTraceparent() ?? null}::text, payload_bytes from msg)`;
}

/**
 * Stores prepared messages inside `tx`, in one statement (`messageInserts`): a
 * customerMessageId that already exists is skipped and reported back. Returns the ids
 * actually inserted.
 */
export async function storeMessages(
  tx: Tx,
  prepared: PreparedMessage[],
  now: Date,
  /** record the `queued` steps' `message.status` events too (some endpoint wants them) */
  events = false,
): Promise<Set<string>> {
  if (prepared.length === 0) return new Set();
  const inserts = messageInserts(prepared, now, events);
  const ctes = events ? sql`${inserts}, ${eventsFrom(queuedSource(now.toISOString()))}` : inserts;
  const rows = await executePrepared<{ id: string }>(tx, sql`with ${ctes} select id from msg`);
  return new Set(rows.map((r) => r.id));
}

/** A message already stored under a customerMessageId a request names again. */
interface Stored {
  id: string;
  parts: number | null;
  /** its payload is the one the request would store */
  same: boolean;
  /** retention removed its texts: the content cannot be compared any more */
  removed: boolean;
}

/**
 * The messages that already hold these customerMessageIds, each compared with what the
 * request would store (jsonb equality: the same fields and values, whatever their order).
 * Only asked when the insert skipped some (a retry), so the usual submit pays nothing.
 */
async function storedUnder(tx: Tx, skipped: PreparedMessage[]): Promise<Map<string, Stored>> {
  const rows = skipped.map(({ row }) => ({
    customer_message_id: row.customerMessageId,
    payload: row.payload,
  }));
  const found = await executePrepared<{
    customer_message_id: string;
    id: string;
    parts: number | null;
    same: boolean;
    removed: boolean;
  }>(
    tx,
    sql`select m.customer_message_id, m.id, m.parts, m.payload = v.payload as same,
               m.content_removed_at is not null as removed
        from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
          as v(customer_message_id text, payload jsonb)
        join message_customer_ids k on k.customer_message_id = v.customer_message_id
        join messages m on m.id = k.message_id`,
  );
  return new Map(found.map((r) => [r.customer_message_id, r]));
}

function queuedResult(id: string, customerMessageId: string, parts: number | null | undefined) {
  return { id, customerMessageId, status: 'queued' as const, ...(parts != null && { parts }) };
}

/** The answer to a prepared message the insert skipped: its customerMessageId is taken. */
function answerForStored(p: PreparedMessage, stored: Stored | undefined): SubmitResult {
  const customerMessageId = p.row.customerMessageId;
  const path = `messages[${p.index}].customerMessageId`;
  // the first answer again: same id, and `queued` as it was then
  if (stored?.same) return queuedResult(stored.id, customerMessageId, stored.parts);
  return reusedId(
    customerMessageId,
    path,
    stored?.removed
      ? `customerMessageId "${customerMessageId}" was already submitted, and retention has removed its content since: use a new customerMessageId`
      : `customerMessageId "${customerMessageId}" was already submitted with other content`,
  );
}

export interface SubmitAnswer {
  /** one per input, in request order */
  results: SubmitResult[];
  /** how many messages this request stored (repeats of earlier ones not counted) */
  accepted: number;
  /** the ids of the messages this request stored */
  created: string[];
}

/**
 * Validates, stores and answers a batch of messages: every input gets its result, queued or
 * rejected, whatever the mix (all rejected too); one to a number on the opt-out list is
 * rejected as OPTED_OUT (one lookup for the whole request). A customerMessageId already
 * stored with the same content (a retry) is answered as the first time (its id, `queued`)
 * and not stored again; with other content it is rejected as DUPLICATE_CUSTOMER_MESSAGE_ID. `record`, when
 * given, runs inside the transaction that stores the messages, with the final results (the
 * Idempotency-Key's answer is kept there, src/http/idempotency.ts).
 */
export async function submitMessages(
  deps: SubmitDeps,
  inputs: unknown[],
  opts: SubmitOptions = {},
  record?: (tx: Tx, results: SubmitResult[]) => Promise<void>,
): Promise<SubmitAnswer> {
  const now = deps.clock.now();
  const checked = prepareMessages(inputs, opts, now);
  const { results, repeats } = checked;
  // opted-out numbers: one query for the whole request, and nothing stored for them
  const optedOut = await optedOutAmong(
    deps.db,
    checked.prepared.map((p) => p.row.to),
  );
  let prepared = checked.prepared.filter((p) => {
    if (!optedOut.has(p.row.to)) return true;
    const cmid = (inputs[p.index] as { customerMessageId?: unknown }).customerMessageId;
    results[p.index] = rejected(cmid, optedOutRejection(`messages[${p.index}].to`, p.row.to));
    return false;
  });
  const answer = (inserted: Set<string>, stored: Map<string, Stored>): SubmitAnswer => {
    const created: string[] = [];
    for (const p of prepared) {
      const { id, customerMessageId, parts } = p.row;
      if (inserted.has(id!)) {
        created.push(id!);
        results[p.index] = queuedResult(id!, customerMessageId, parts);
      } else results[p.index] = answerForStored(p, stored.get(customerMessageId));
    }
    for (const r of repeats) results[r.index] = results[r.of];
    return { results: results as SubmitResult[], accepted: created.length, created };
  };
  if (prepared.length === 0) return answer(new Set(), new Map());
  const store = () =>
    deps.db.transaction(async (tx) => {
      const events = subscriptionsOf(deps.db).wants('message.status');
      // a window or the cap, when asked: decided in this transaction (the cap is taken here)
      const limits = opts.limits;
      const decisions = limits
        ? await decideLimits(
            tx,
            limits.settings,
            limits.asked,
            prepared.map((p) => ({ to: p.row.to, path: `messages[${p.index}].to` })),
            now,
          )
        : [];
      const delays: Array<{ messageId: string; availableAt: Date }> = [];
      if (limits) {
        prepared = prepared.filter((p, i) => {
          const d = decisions[i]!;
          if (d.ok) {
            if (d.availableAt) delays.push({ messageId: p.row.id!, availableAt: d.availableAt });
            return true;
          }
          const cmid = (inputs[p.index] as { customerMessageId?: unknown }).customerMessageId;
          results[p.index] = rejected(cmid, {
            code: d.code,
            message: d.message,
            details: d.details,
          });
          return false;
        });
      }
      const inserted = await storeMessages(tx, prepared, now, events);
      await delayOutbox(
        tx,
        delays.filter((d) => inserted.has(d.messageId)),
      );
      const skipped = prepared.filter((p) => !inserted.has(p.row.id!));
      const stored = skipped.length > 0 ? await storedUnder(tx, skipped) : new Map();
      const out = answer(inserted, stored);
      await record?.(tx, out.results);
      return out;
    });
  if (!tracingEnabled()) return store();
  const attributes = { 'db.batch.size': prepared.length };
  return inSpan('db.transaction submit-messages', { attributes }, store);
}
