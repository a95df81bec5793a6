/**
 * Statuses of calls' own messages fed to their machines, inside the transaction that
 * recorded them: a delivery callback's or a poll's (`callStatusHook`, the messages'
 * OnRecorded hook), and the dispatcher's answers (`callDispatchHook`).
 */
import { and, eq, inArray } from 'drizzle-orm';
import type { Tx } from '../db/client.ts';
import { messages } from '../db/schema/index.ts';
import { subscriptionsOf } from '../events/subscriptions.ts';
import type { RecordResult } from '../messages/timeline.ts';
import { applyStatus } from './apply.ts';
import { type LockedCall, lockCall } from './call-rows.ts';
import type { EventDeps } from './deps.ts';
import { createCallPlan } from './plan.ts';
import { writePlan } from './write-plan.ts';

/** Called with the RecordResult of each status recorded; writes at once. */
export function callStatusHook(deps: EventDeps) {
  return async (tx: Tx, result: RecordResult): Promise<void> => {
    if (result.role !== 'call' || !result.callId || result.after === result.before) return;
    const call = await lockCall(tx, result.callId);
    if (!call) return;
    const { queued } = await applyStatus(tx, deps, call, result.after);
    if (queued > 0) queueMicrotask(() => deps.onQueued?.());
  };
}

/**
 * lockCall, once per call in a transaction: a second event of the same call starts from the
 * row the plan left (the lock is held already, and its writes wait for the plan's).
 */
export function lockedOnce(tx: Tx) {
  const seen = new Map<string, LockedCall | undefined>();
  return async (callId: string): Promise<LockedCall | undefined> => {
    if (!seen.has(callId)) seen.set(callId, await lockCall(tx, callId));
    return seen.get(callId);
  };
}

/** The dispatcher's answers for call messages: `accepted`, or `rejected` (the call failed). */
export function callDispatchHook(deps: EventDeps) {
  return async (
    tx: Tx,
    all: { id: string; status: 'accepted' | 'rejected'; role: string | null }[],
  ): Promise<void> => {
    // a call's own messages only: the others of a batch cost no lookup at all
    const outcomes = all.filter((o) => o.role === 'call');
    if (outcomes.length === 0) return;
    const status = new Map(outcomes.map((o) => [o.id, o.status]));
    const plan = createCallPlan(deps.clock.now());
    const owned = await tx
      .select({ id: messages.id, callId: messages.callId, current: messages.status })
      .from(messages)
      .where(and(inArray(messages.id, [...status.keys()]), eq(messages.role, 'call')));
    const locked = lockedOnce(tx);
    for (const m of owned.sort((a, b) => a.callId!.localeCompare(b.callId!))) {
      const call = await locked(m.callId!);
      // the message's status may already be further on (a callback outran the answer)
      if (call) await applyStatus(tx, deps, call, status.get(m.id)!, plan);
    }
    await writePlan(tx, plan, subscriptionsOf(deps.db));
  };
}
