/**
 * Accepting messages: every message of a request is validated on its own and answered in
 * request order; the accepted ones are stored with status `queued` and their first timeline
 * event, in one transaction, so a message is never half-stored.
 *
 * @example
 * const { results } = await submitMessages({ db, clock }, [{ from: 'Acme', to: '+380501234567', type: 'sms', text: 'Hi' }]);
 */
import type { Clock } from '../clock.ts';
import type { Db, Tx } from '../db/client.ts';
import { messageEvents, messages, type NewMessageRow, outbox } from '../db/schema/index.ts';
import { AppError, type ErrorCode, type ErrorDetail, formatPath } from '../errors.ts';
import { uuidv7 } from '../ids.ts';
import { validateMessage } from '../provider/message.ts';
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

/**
 * Validates each input (every rule of the seed, through the provider models) and assigns ids.
 * Returns the per-input results (rejections filled in) and the messages to store.
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
    const checked = validateMessage(input, {
      now,
      ...(opts.maxSmsParts !== undefined && { maxSmsParts: opts.maxSmsParts }),
    });
    if (!checked.ok) {
      results[index] = rejected(cmid, {
        ...checked.error,
        details: prefixDetails(prefix, checked.error.details),
      });
      return;
    }
    const id = uuidv7(now.getTime());
    const message = checked.message;
    const customerMessageId = message.customerMessageId ?? id;
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
        type: message.type,
        from: message.from,
        to: message.to,
        payload: { ...message, customerMessageId },
        status: 'queued',
        parts: checked.parts ?? null,
        callId: opts.callId ?? null,
        role: opts.role ?? null,
        createdAt: now,
        updatedAt: now,
      },
    });
  });
  return { results, prepared };
}

// 5000 rows x 15 columns would pass Postgres' 65 535 bind-parameter limit in one statement
const INSERT_CHUNK = 1000;

/**
 * Stores prepared messages inside `tx`: a customerMessageId that already exists is skipped
 * (ON CONFLICT DO NOTHING, so concurrent requests cannot store it twice) and reported back.
 * Returns the ids actually inserted.
 */
export async function storeMessages(tx: Tx, prepared: PreparedMessage[], now: Date) {
  const inserted = new Set<string>();
  for (let i = 0; i < prepared.length; i += INSERT_CHUNK) {
    const chunk = prepared.slice(i, i + INSERT_CHUNK);
    const rows = await tx
      .insert(messages)
      .values(chunk.map((p) => p.row))
      .onConflictDoNothing({ target: messages.customerMessageId })
      .returning({ id: messages.id });
    for (const r of rows) inserted.add(r.id);
    const events = chunk
      .filter((p) => inserted.has(p.row.id!))
      .map((p) => ({
        messageId: p.row.id!,
        status: 'queued',
        source: 'api',
        at: now,
        receivedAt: now,
        ...(p.row.parts !== null && { detail: { parts: p.row.parts } }),
      }));
    if (events.length > 0) {
      await tx.insert(messageEvents).values(events);
      // the outbox row commits with its message: nothing accepted is ever left unsent
      await tx
        .insert(outbox)
        .values(events.map((e) => ({ messageId: e.messageId, availableAt: now })));
    }
  }
  return inserted;
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
