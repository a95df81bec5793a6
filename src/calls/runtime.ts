/**
 * Advancing a call: one event (a key from a webhook, a status of the call's message, a timer)
 * through the call's machine, xstate's pure `transition`, and the effects it returns run here,
 * inside the caller's transaction, under the call's row lock (rules 3 and 5): the snapshot,
 * the path, the outcome, follow-up messages with deterministic customerMessageIds, timers and
 * statistics commit together or not at all.
 */
import { and, asc, eq, sql } from 'drizzle-orm';
import type { Clock } from '../clock.ts';
import type { Tx } from '../db/client.ts';
import {
  type CallRow,
  callEvents,
  calls,
  callTimers,
  flowStats,
  flowVersions,
  heldWebhooks,
} from '../db/schema/index.ts';
import {
  type CompiledFlow,
  type FlowEffect,
  type FlowEvent,
  type FlowSnapshot,
  keyEventDisposition,
  persistFlowSnapshot,
  restoreFlowSnapshot,
  stepFlow,
} from '../flows/index.ts';
import { prepareMessages, storeMessages } from '../messages/submit.ts';
import type { FlowRegistry } from './registry.ts';

export interface RuntimeDeps {
  clock: Clock;
  flows: FlowRegistry;
  maxSmsParts?: number;
  /** told after a commit that queued follow-ups (wakes this instance's dispatcher) */
  onQueued?: () => void;
}

/** A call under its row lock, with its pinned flow. */
export interface LockedCall {
  row: CallRow;
  compiled: CompiledFlow;
}

export const CALL_STATES = ['queued', 'accepted', 'in-progress', 'ended', 'failed'] as const;
export type CallState = (typeof CALL_STATES)[number];

const FAILURES = new Set(['rejected', 'failed', 'expired']);

/** Locks the call row (FOR UPDATE) and loads its pinned flow version. */
export async function lockCall(tx: Tx, callId: string): Promise<LockedCall | undefined> {
  const [row] = await tx.select().from(calls).where(eq(calls.id, callId)).for('update');
  if (!row) return undefined;
  const [version] = await tx
    .select({ compiled: flowVersions.compiled })
    .from(flowVersions)
    .where(and(eq(flowVersions.flowId, row.flowId), eq(flowVersions.version, row.flowVersion)));
  if (!version) throw new Error(`flow version ${row.flowId}@${row.flowVersion} is missing`);
  return { row, compiled: version.compiled as CompiledFlow };
}

/** Adds to the flow's aggregate counters (kept apart from personal data, see flowStats). */
export async function bumpStats(
  tx: Tx,
  flowId: string,
  entries: { metric: string; subject: string; key?: string }[],
): Promise<void> {
  if (entries.length === 0) return;
  const merged = new Map<string, { metric: string; subject: string; key: string; n: number }>();
  for (const e of entries) {
    const k = `${e.metric}\u0000${e.subject}\u0000${e.key ?? ''}`;
    const hit = merged.get(k);
    if (hit) hit.n++;
    else merged.set(k, { metric: e.metric, subject: e.subject, key: e.key ?? '', n: 1 });
  }
  await tx
    .insert(flowStats)
    .values([...merged.values()].map((m) => ({ flowId, ...m, count: m.n })))
    .onConflictDoUpdate({
      target: [flowStats.flowId, flowStats.metric, flowStats.subject, flowStats.key],
      set: { count: sql`${flowStats.count} + excluded.count` },
    });
}

interface Applied {
  snapshot: FlowSnapshot;
  state: CallState;
  outcome: string | null;
  queued: number;
}

/** Runs a transition's effects inside the transaction. */
async function runEffects(
  tx: Tx,
  deps: RuntimeDeps,
  call: LockedCall,
  effects: FlowEffect[],
  now: Date,
  current: { state: CallState; outcome: string | null },
): Promise<{ state: CallState; outcome: string | null; queued: number }> {
  const { row } = call;
  let { state, outcome } = current;
  let queued = 0;
  const events: (typeof callEvents.$inferInsert)[] = [];
  const stats: { metric: string; subject: string; key?: string }[] = [];
  for (const effect of effects) {
    switch (effect.type) {
      case 'step':
        events.push({
          callId: row.id,
          kind: 'key',
          node: effect.node,
          menu: effect.menu,
          attempt: effect.attempt + 1,
          key: effect.key,
          at: now,
        });
        stats.push({ metric: 'visit', subject: effect.node });
        stats.push({ metric: 'key', subject: effect.node, key: effect.key });
        if (state === 'queued' || state === 'accepted') state = 'in-progress';
        break;
      case 'outcome':
        outcome = effect.name;
        events.push({ callId: row.id, kind: 'outcome', detail: { outcome: effect.name }, at: now });
        stats.push({ metric: 'outcome', subject: effect.name });
        break;
      case 'send': {
        // deterministic: the same effect of the same call always has the same id, so a
        // replayed event can never queue (or the provider accept) a second copy
        const customerMessageId = `${row.id}:${effect.id}`;
        const { results, prepared } = prepareMessages(
          [{ ...effect.message, customerMessageId }],
          {
            callId: row.id,
            role: 'follow-up',
            ...(deps.maxSmsParts !== undefined && { maxSmsParts: deps.maxSmsParts }),
          },
          now,
        );
        const rejected = results[0];
        if (rejected) {
          events.push({
            callId: row.id,
            kind: 'follow-up-rejected',
            detail: { id: effect.id, customerMessageId, error: rejected.error },
            at: now,
          });
          break;
        }
        const inserted = await storeMessages(tx, prepared, now);
        const messageId = prepared[0]!.row.id!;
        events.push({
          callId: row.id,
          kind: 'follow-up',
          detail: {
            id: effect.id,
            customerMessageId,
            type: effect.message.type,
            ...(inserted.has(messageId) ? { messageId } : { duplicate: true }),
          },
          at: now,
        });
        queued += inserted.size;
        break;
      }
      case 'providerWebhook':
        events.push({ callId: row.id, kind: 'webhook', detail: { url: effect.url }, at: now });
        break;
      case 'hangup':
        events.push({ callId: row.id, kind: 'hangup', node: effect.node, at: now });
        stats.push({ metric: 'hangup', subject: effect.node });
        if (state !== 'failed') state = 'ended';
        break;
      case 'startTimer':
        await tx
          .insert(callTimers)
          .values({
            callId: row.id,
            timer: effect.timer,
            fireAt: new Date(now.getTime() + effect.afterMs),
          })
          .onConflictDoUpdate({
            target: [callTimers.callId, callTimers.timer],
            set: { fireAt: new Date(now.getTime() + effect.afterMs) },
          });
        events.push({
          callId: row.id,
          kind: 'timer-started',
          detail: { timer: effect.timer, afterMs: effect.afterMs },
          at: now,
        });
        break;
      case 'cancelTimer':
        await tx
          .delete(callTimers)
          .where(and(eq(callTimers.callId, row.id), eq(callTimers.timer, effect.timer)));
        events.push({
          callId: row.id,
          kind: 'timer-cancelled',
          detail: { timer: effect.timer },
          at: now,
        });
        break;
    }
  }
  if (events.length > 0) await tx.insert(callEvents).values(events);
  await bumpStats(tx, row.flowId, stats);
  return { state, outcome, queued };
}

/**
 * One event through the machine and its effects; `handled: false` when the machine ignores
 * it (nothing is written then).
 */
export async function transitionCall(
  tx: Tx,
  deps: RuntimeDeps,
  call: LockedCall,
  snapshot: FlowSnapshot,
  event: FlowEvent,
  current: { state: CallState; outcome: string | null },
): Promise<(Applied & { handled: true }) | { handled: false }> {
  const now = deps.clock.now();
  const machine = deps.flows.machineFor(call.compiled);
  const step = stepFlow(machine, snapshot, event);
  if (!step.handled) return { handled: false };
  const after = await runEffects(tx, deps, call, step.effects, now, current);
  return { handled: true, snapshot: step.snapshot, ...after };
}

async function saveCall(tx: Tx, call: LockedCall, applied: Applied, now: Date): Promise<void> {
  const ended = applied.state === 'ended' || applied.state === 'failed';
  await tx
    .update(calls)
    .set({
      snapshot: persistFlowSnapshot(applied.snapshot),
      state: applied.state,
      outcome: applied.outcome,
      updatedAt: now,
      ...(ended && !call.row.endedAt && { endedAt: now }),
    })
    .where(eq(calls.id, call.row.id));
}

/**
 * Applies the webhooks held for this call whose node the machine has now reached, in
 * arrival order, until none applies. Returns the state after them.
 */
async function drainHeld(
  tx: Tx,
  deps: RuntimeDeps,
  call: LockedCall,
  applied: Applied,
): Promise<Applied> {
  let current = applied;
  for (;;) {
    const held = await tx
      .select()
      .from(heldWebhooks)
      .where(eq(heldWebhooks.callId, call.row.id))
      .orderBy(asc(heldWebhooks.id));
    let progressed = false;
    for (const h of held) {
      const disposition = keyEventDisposition(call.compiled, current.snapshot, { node: h.node });
      if (disposition === 'hold') continue;
      await tx.delete(heldWebhooks).where(eq(heldWebhooks.id, h.id));
      if (disposition !== 'apply') {
        await tx.insert(callEvents).values({
          callId: call.row.id,
          kind: 'ignored',
          node: h.node,
          key: h.key,
          detail: { reason: disposition, inboxId: h.inboxId },
          at: deps.clock.now(),
        });
        continue;
      }
      const next = await transitionCall(
        tx,
        deps,
        call,
        current.snapshot,
        { type: 'KEY', node: h.node, key: h.key },
        current,
      );
      if (next.handled) {
        current = { ...next, queued: current.queued + next.queued };
        progressed = true;
        break; // the machine moved: look at the held list again from the start
      }
    }
    if (!progressed) return current;
  }
}

export type KeyResult = 'applied' | 'held' | 'duplicate' | 'stale';

/**
 * A verified key webhook for (call, node, key): applied when the call is at that node (and
 * then any held webhooks that now apply), held when the node is still ahead, ignored when
 * the node was already left or can no longer be reached.
 */
export async function applyKey(
  tx: Tx,
  deps: RuntimeDeps,
  call: LockedCall,
  key: { node: string; key: string; inboxId: number },
): Promise<{ result: KeyResult; queued: number }> {
  const machine = deps.flows.machineFor(call.compiled);
  const snapshot = restoreFlowSnapshot(machine, call.row.snapshot as never);
  const disposition = keyEventDisposition(call.compiled, snapshot, { node: key.node });
  const now = deps.clock.now();
  if (disposition === 'hold') {
    await tx.insert(heldWebhooks).values({ callId: call.row.id, ...key, receivedAt: now });
    await tx.insert(callEvents).values({
      callId: call.row.id,
      kind: 'held',
      node: key.node,
      key: key.key,
      detail: { inboxId: key.inboxId },
      at: now,
    });
    return { result: 'held', queued: 0 };
  }
  if (disposition !== 'apply') {
    await tx.insert(callEvents).values({
      callId: call.row.id,
      kind: 'ignored',
      node: key.node,
      key: key.key,
      detail: { reason: disposition, inboxId: key.inboxId },
      at: now,
    });
    return { result: disposition, queued: 0 };
  }
  const current = { state: call.row.state as CallState, outcome: call.row.outcome };
  const first = await transitionCall(tx, deps, call, snapshot, { type: 'KEY', ...key }, current);
  if (!first.handled) return { result: 'stale', queued: 0 };
  const final = await drainHeld(tx, deps, call, first);
  await saveCall(tx, call, final, now);
  return { result: 'applied', queued: final.queued };
}

/** A status of the call's own message (accepted, sent, delivered, failed, expired, ...). */
export async function applyStatus(
  tx: Tx,
  deps: RuntimeDeps,
  call: LockedCall,
  status: string,
): Promise<{ queued: number }> {
  const now = deps.clock.now();
  const machine = deps.flows.machineFor(call.compiled);
  const snapshot = restoreFlowSnapshot(machine, call.row.snapshot as never);
  let state = call.row.state as CallState;
  if (status === 'accepted' && state === 'queued') state = 'accepted';
  if (FAILURES.has(status) && state !== 'ended') state = 'failed';
  await tx
    .insert(callEvents)
    .values({ callId: call.row.id, kind: 'status', detail: { status }, at: now });
  if (FAILURES.has(status))
    await bumpStats(tx, call.row.flowId, [{ metric: 'failure', subject: status }]);
  const current = { state, outcome: call.row.outcome };
  const step = await transitionCall(tx, deps, call, snapshot, { type: 'STATUS', status }, current);
  const applied: Applied = step.handled ? step : { snapshot, ...current, queued: 0 };
  // a failed or ended call needs no timers any more
  if (applied.state === 'failed' || applied.state === 'ended') {
    await tx.delete(callTimers).where(eq(callTimers.callId, call.row.id));
  }
  await saveCall(tx, call, applied, now);
  return { queued: applied.queued };
}

/** A durable timer came due. */
export async function applyTimer(
  tx: Tx,
  deps: RuntimeDeps,
  call: LockedCall,
  timer: string,
): Promise<{ queued: number; handled: boolean }> {
  const now = deps.clock.now();
  const machine = deps.flows.machineFor(call.compiled);
  const snapshot = restoreFlowSnapshot(machine, call.row.snapshot as never);
  const current = { state: call.row.state as CallState, outcome: call.row.outcome };
  await tx
    .insert(callEvents)
    .values({ callId: call.row.id, kind: 'timer-fired', detail: { timer }, at: now });
  const step = await transitionCall(tx, deps, call, snapshot, { type: 'TIMER', timer }, current);
  if (!step.handled) return { queued: 0, handled: false };
  await saveCall(tx, call, step, now);
  return { queued: step.queued, handled: true };
}

/** Same effects runner for the first snapshot of a new call (its timers). */
export async function runStartEffects(
  tx: Tx,
  deps: RuntimeDeps,
  call: LockedCall,
  effects: FlowEffect[],
): Promise<void> {
  await runEffects(tx, deps, call, effects, deps.clock.now(), { state: 'queued', outcome: null });
}
