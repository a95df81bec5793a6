/**
 * What reaches a call from outside: speech-call webhooks (POST /hooks/speechcall), statuses
 * of its message (from delivery callbacks, polls and the dispatcher), and durable timers.
 * Each is one transaction: the dedup row or event, the transition, its effects.
 */
import { and, asc, eq, inArray, lte, sql } from 'drizzle-orm';
import type { Db, Tx } from '../db/client.ts';
import { callTimers, inbox, messages } from '../db/schema/index.ts';
import { AppError } from '../errors.ts';
import { type TokenSecret, verifyNodeToken } from '../flows/index.ts';
import { type RawCallback, storeRaw } from '../messages/ingest.ts';
import type { RecordResult } from '../messages/timeline.ts';
import {
  applyKey,
  applyStatus,
  applyTimer,
  type KeyResult,
  lockCall,
  type RuntimeDeps,
} from './runtime.ts';

export interface EventDeps extends RuntimeDeps {
  db: Db;
  /** every secret a token may have been signed with (rotation: old calls keep working) */
  verifyingSecrets: TokenSecret[];
}

export interface WebhookResult {
  duplicate: boolean;
  result?: KeyResult | 'unknown-call';
  callId?: string;
  node?: string;
  key?: string;
}

function tokenOf(body: unknown): string | undefined {
  if (typeof body !== 'object' || body === null) return undefined;
  const b = body as { action?: { token?: unknown }; token?: unknown };
  const token = b.action?.token ?? b.token;
  return typeof token === 'string' ? token : undefined;
}

const digits = (v: string) => v.replace(/\D/g, '');

/**
 * Whether the webhook's own fields agree with the call its token names: the callee (`to`,
 * compared by digits) and, once the provider's id for the call is known, `mid`.
 */
function sameCall(body: unknown, callee: string, providerId: string | null): boolean {
  const b = body as { to?: unknown; mid?: unknown };
  if (typeof b.to === 'string' && b.to !== '' && digits(b.to) !== digits(callee)) return false;
  if (providerId && typeof b.mid === 'string' && b.mid !== '' && b.mid !== providerId) return false;
  return true;
}

async function providerIdOf(tx: Tx, messageId: string): Promise<string | null> {
  const [row] = await tx
    .select({ id: messages.providerMessageId })
    .from(messages)
    .where(eq(messages.id, messageId));
  return row?.id ?? null;
}

/**
 * POST /hooks/speechcall: `{from, to, mid, action: {token}}` (seed 2.9). A missing, forged or
 * altered token is refused (401) before anything is stored.
 */
export async function ingestSpeechWebhook(
  deps: EventDeps,
  raw: RawCallback,
): Promise<WebhookResult> {
  let body: unknown;
  try {
    body = JSON.parse(raw.body);
  } catch {
    throw new AppError('UNAUTHORIZED', 'no valid token: the body is not JSON');
  }
  const token = tokenOf(body);
  const verified = token ? verifyNodeToken(token, deps.verifyingSecrets) : null;
  if (!verified) throw new AppError('UNAUTHORIZED', 'missing, forged or altered webhook token');
  const { callId, node, key } = verified;
  let queued = 0;
  const result = await deps.db.transaction(async (tx): Promise<WebhookResult> => {
    const inboxId = await storeRaw(tx, 'speechcall', raw, deps.clock.now());
    if (inboxId === undefined) return { duplicate: true, callId, node, key };
    const call = await lockCall(tx, callId);
    // a signed token for a call that is gone (erased): acknowledged, and nothing of it kept
    if (!call) {
      await tx.delete(inbox).where(eq(inbox.id, inboxId));
      return { duplicate: false, result: 'unknown-call', callId, node, key };
    }
    if (!sameCall(body, call.row.to, await providerIdOf(tx, call.row.messageId))) {
      // a valid token replayed inside another call's webhook: refused, and (thrown inside
      // the transaction) nothing of it is stored
      throw new AppError('UNAUTHORIZED', 'the webhook token belongs to another call');
    }
    const applied = await applyKey(tx, deps, call, { node, key, inboxId });
    queued = applied.queued;
    return { duplicate: false, result: applied.result, callId, node, key };
  });
  if (queued > 0) deps.onQueued?.();
  return result;
}

/**
 * Feeds the statuses of calls' own messages to their machines. Runs inside the transaction
 * that recorded the status (delivery callback, poll): called with its RecordResult.
 */
export function callStatusHook(deps: EventDeps) {
  return async (tx: Tx, result: RecordResult): Promise<void> => {
    if (result.role !== 'call' || !result.callId || result.after === result.before) return;
    const call = await lockCall(tx, result.callId);
    if (!call) return;
    const { queued } = await applyStatus(tx, deps, call, result.after);
    if (queued > 0) queueMicrotask(() => deps.onQueued?.());
  };
}

/** The dispatcher's answers for call messages: `accepted`, or `rejected` (the call failed). */
export function callDispatchHook(deps: EventDeps) {
  return async (
    tx: Tx,
    outcomes: { id: string; status: 'accepted' | 'rejected' }[],
  ): Promise<void> => {
    if (outcomes.length === 0) return;
    const status = new Map(outcomes.map((o) => [o.id, o.status]));
    const owned = await tx
      .select({ id: messages.id, callId: messages.callId, current: messages.status })
      .from(messages)
      .where(and(inArray(messages.id, [...status.keys()]), eq(messages.role, 'call')));
    for (const m of owned.sort((a, b) => a.callId!.localeCompare(b.callId!))) {
      const call = await lockCall(tx, m.callId!);
      // the message's status may already be further on (a callback outran the answer)
      if (call) await applyStatus(tx, deps, call, status.get(m.id)!);
    }
  };
}

/** Fires due timers (any instance; SKIP LOCKED keeps two from firing one). Returns how many. */
export async function fireDueTimers(deps: EventDeps, limit = 100): Promise<number> {
  let queued = 0;
  const fired = await deps.db.transaction(async (tx) => {
    const due = await tx
      .select()
      .from(callTimers)
      .where(lte(callTimers.fireAt, deps.clock.now()))
      .orderBy(asc(callTimers.fireAt))
      .limit(limit)
      .for('update', { skipLocked: true });
    for (const t of due) {
      await tx.delete(callTimers).where(eq(callTimers.id, t.id));
      const call = await lockCall(tx, t.callId);
      if (!call) continue;
      const r = await applyTimer(tx, deps, call, t.timer);
      queued += r.queued;
    }
    return due.length;
  });
  if (queued > 0) deps.onQueued?.();
  return fired;
}

/** For tests and the worker's idle wait: when the next timer is due. */
export async function nextTimerAt(db: Db): Promise<Date | undefined> {
  const [row] = await db.select({ at: sql<Date>`min(${callTimers.fireAt})` }).from(callTimers);
  return row?.at ? new Date(row.at) : undefined;
}
