/**
 * Accepting messages: every message of a request is validated on its own and answered in
 * request order; the accepted ones are stored with status `queued` and their first timeline
 * event, in one transaction, so a message is never half-stored.
 *
 * @example
 * const { results } = await submitMessages({ db, clock }, [{ from: 'Acme', to: '+380501234567', type: 'sms', text: 'Hi' }]);
 */
import { type SQL, sql } from 'drizzle-orm';
import type { Clock } from '../clock.ts';
import { type Db, executePrepared, type Tx } from '../db/client.ts';
import type { NewMessageRow } from '../db/schema/index.ts';
import { AppError, type ErrorCode, type ErrorDetail, formatPath } from '../errors.ts';
import { uuidv7 } from '../ids.ts';
import {
  DEFAULT_LIFETIME_SECONDS,
  deadlineOf,
  toWireMessage,
  validateMessage,
} from '../provider/message.ts';
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

function checkOne(input: unknown, opts: SubmitOptions, now: Date): Checked {
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
      expiresAt: new Date(Math.max(start, now.getTime()) + (m.ttl ?? lifetime) * 1000),
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

/**
 * Validates each input (every rule of the provider's interface, through the provider models;
 * a `type: "cascade"` message through the cascade's) and assigns ids. Returns the per-input
 * results (rejections filled in) and the messages to store.
 */
export function prepareMessages(
  inputs: unknown[],
  opts: SubmitOptions,
  now: Date,
): { results: (SubmitResult | undefined)[]; prepared: PreparedMessage[] } {
  const results: (SubmitResult | undefined)[] = new Array(inputs.length);
  const prepared: PreparedMessage[] = [];
  const seen = new Map<string, number>();
  inputs.forEach((input, index) => {
    const prefix = formatPath(['messages', index]);
    const cmid = (input as { customerMessageId?: unknown } | null)?.customerMessageId;
    const checked = checkOne(input, opts, now);
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
      results[index] = rejected(customerMessageId, {
        code: 'DUPLICATE_CUSTOMER_MESSAGE_ID',
        message: `customerMessageId "${customerMessageId}" is already used by messages[${earlier}] of this request`,
        details: [
          {
            path: `${prefix}.customerMessageId`,
            code: 'DUPLICATE_CUSTOMER_MESSAGE_ID',
            message: 'must be unique per message',
          },
        ],
      });
      return;
    }
    seen.set(customerMessageId, index);
    prepared.push({
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
    });
  });
  return { results, prepared };
}

/**
 * The statement parts that store prepared messages, as common table expressions to put after
 * `with`: `msg` inserts the messages (a customerMessageId that already exists is skipped, ON
 * CONFLICT DO NOTHING, so concurrent requests cannot store it twice) and returns the ids it
 * inserted; `msg_events` and `msg_outbox` give each of those its first timeline event and its
 * outbox row (the outbox row commits with its message: nothing accepted is ever left unsent).
 * The rows travel as one JSON parameter, so the text is the same whatever their number:
 * no bind-parameter limit, and no query building per row (call runtime: one statement with
 * its other writes).
 */
export function messageInserts(prepared: PreparedMessage[], now: Date): SQL {
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
  return sql`msg as (
      insert into messages (id, customer_message_id, type, "from", "to", payload, status, parts,
                            expires_at, call_id, role, created_at, updated_at)
      select v.id, v.customer_message_id, v.type, v."from", v."to", v.payload, v.status, v.parts,
             v.expires_at, v.call_id, v.role, v.created_at, v.updated_at
      from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
        as v(id uuid, customer_message_id text, type text, "from" text, "to" text, payload jsonb,
             status text, parts int, expires_at timestamptz, call_id uuid, role text,
             created_at timestamptz, updated_at timestamptz)
      on conflict (customer_message_id) do nothing
      returning id, parts),
    msg_events as (
      insert into message_events (message_id, status, source, detail, at, received_at)
      select id, 'queued', 'api',
             case when parts is not null then jsonb_build_object('parts', parts) end,
             ${at}::timestamptz, ${at}::timestamptz
      from msg),
    msg_outbox as (
      insert into outbox (message_id, available_at) select id, ${at}::timestamptz from msg)`;
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
): Promise<Set<string>> {
  if (prepared.length === 0) return new Set();
  const rows = await executePrepared<{ id: string }>(
    tx,
    sql`with ${messageInserts(prepared, now)} select id from msg`,
  );
  return new Set(rows.map((r) => r.id));
}

/**
 * Validates, stores and answers a batch of messages. Throws `AppError('VALIDATION_ERROR')`
 * when not one message could be accepted (the contract's 400).
 */
export async function submitMessages(
  deps: SubmitDeps,
  inputs: unknown[],
  opts: SubmitOptions = {},
): Promise<{ results: SubmitResult[]; accepted: number }> {
  const now = deps.clock.now();
  const { results, prepared } = prepareMessages(inputs, opts, now);
  const inserted =
    prepared.length === 0
      ? new Set<string>()
      : await deps.db.transaction((tx) => storeMessages(tx, prepared, now));
  for (const p of prepared) {
    const { id, customerMessageId, parts } = p.row;
    results[p.index] = inserted.has(id!)
      ? { id, customerMessageId, status: 'queued', ...(parts != null && { parts }) }
      : rejected(customerMessageId, {
          code: 'DUPLICATE_CUSTOMER_MESSAGE_ID',
          message: `customerMessageId "${customerMessageId}" was already submitted`,
          details: [
            {
              path: `messages[${p.index}].customerMessageId`,
              code: 'DUPLICATE_CUSTOMER_MESSAGE_ID',
              message: 'must be unique per message',
            },
          ],
        });
  }
  const final = results as SubmitResult[];
  if (inserted.size === 0) {
    throw new AppError(
      'VALIDATION_ERROR',
      inputs.length === 1
        ? `the message was rejected: ${final[0]?.error?.message ?? 'invalid'}`
        : `none of the ${inputs.length} messages was accepted`,
      final.flatMap((r) => r.error?.details ?? []),
    );
  }
  return { results: final, accepted: inserted.size };
}
