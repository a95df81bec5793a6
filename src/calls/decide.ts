/**
 * Deciding what an event does to a locked call, as xstate's `transition` does for the
 * machine: the call (its row, compiled flow and held webhooks, all read with its lock), the
 * event (a key, a status of its message, a timer, its start) and `now` in; plan entries out.
 * Nothing here awaits or touches the database; write-plan.ts writes what was decided.
 */

import type { CallRow } from '../db/schema/index.ts';
import {
  type FlowEffect,
  type FlowEvent,
  type FlowSnapshot,
  keyEventDisposition,
  persistFlowSnapshot,
  restoreFlowSnapshot,
  stepFlow,
} from '../flows/index.ts';
import type { KeyCall, LockedCall } from './call-rows.ts';
import type { CallState, RuntimeDeps } from './deps.ts';
import { type CallStatus, planEffects } from './effects.ts';
import {
  addEvent,
  addStats,
  type CallPlan,
  dropTimers,
  heldOf,
  holdWebhook,
  releaseWebhook,
  rowOf,
  saveRow,
} from './plan.ts';

export type DecideDeps = Pick<RuntimeDeps, 'maxSmsParts'> & {
  flows: Pick<RuntimeDeps['flows'], 'machineFor'>;
};

export type KeyResult = 'applied' | 'held' | 'duplicate' | 'stale';

interface Applied extends CallStatus {
  snapshot: FlowSnapshot;
}

const FAILURES = new Set(['rejected', 'failed', 'expired']);

function snapshotOf(deps: DecideDeps, call: LockedCall, row: CallRow): FlowSnapshot {
  return restoreFlowSnapshot(deps.flows.machineFor(call.compiled), row.snapshot as never);
}

const statusOf = (row: CallRow): CallStatus => ({
  state: row.state as CallState,
  outcome: row.outcome,
});

/** One event through the machine and its effects; `handled: false` plans nothing. */
function transition(
  deps: DecideDeps,
  plan: CallPlan,
  call: LockedCall,
  snapshot: FlowSnapshot,
  event: FlowEvent,
  current: CallStatus,
  now: Date,
): (Applied & { handled: true }) | { handled: false } {
  const step = stepFlow(deps.flows.machineFor(call.compiled), snapshot, event);
  if (!step.handled) return { handled: false };
  const after = planEffects(plan, deps, call.row, step.effects, current, now);
  return { handled: true, snapshot: step.snapshot, ...after };
}

/** The call's new row (a later event of the same plan starts from it). */
function save(plan: CallPlan, row: CallRow, applied: Applied, now: Date): void {
  const ended = applied.state === 'ended' || applied.state === 'failed';
  saveRow(plan, {
    ...row,
    snapshot: persistFlowSnapshot(applied.snapshot),
    state: applied.state,
    outcome: applied.outcome,
    updatedAt: now,
    endedAt: row.endedAt ?? (ended ? now : null),
  });
}

/**
 * Applies the webhooks held for this call whose node the machine has now reached, in
 * arrival order, until none applies. Returns the state after them.
 */
function drainHeld(
  deps: DecideDeps,
  plan: CallPlan,
  call: KeyCall,
  applied: Applied,
  now: Date,
): Applied {
  const held = heldOf(plan, call);
  let current = applied;
  for (;;) {
    let progressed = false;
    for (const h of [...held]) {
      const disposition = keyEventDisposition(call.compiled, current.snapshot, { node: h.node });
      if (disposition === 'hold') continue;
      releaseWebhook(plan, held, h);
      if (disposition !== 'apply') {
        addEvent(plan, {
          callId: call.row.id,
          kind: 'ignored',
          node: h.node,
          key: h.key,
          detail: { reason: disposition, inboxId: h.inboxId },
          at: now,
        });
        continue;
      }
      const event: FlowEvent = { type: 'KEY', node: h.node, key: h.key };
      const next = transition(deps, plan, call, current.snapshot, event, current, now);
      if (next.handled) {
        current = next;
        progressed = true;
        break; // the machine moved: look at the held list again from the start
      }
    }
    if (!progressed) return current;
  }
}

/**
 * A verified key webhook for (call, node, key): applied when the call is at that node (and
 * then any held webhooks that now apply), held when the node is still ahead, ignored when
 * the node was already left or can no longer be reached.
 */
export function decideKey(
  deps: DecideDeps,
  plan: CallPlan,
  call: KeyCall,
  key: { node: string; key: string; inboxId: number },
  now: Date,
): KeyResult {
  plan.now = now;
  const row = rowOf(plan, call);
  const snapshot = snapshotOf(deps, call, row);
  const disposition = keyEventDisposition(call.compiled, snapshot, { node: key.node });
  if (disposition === 'hold') {
    holdWebhook(plan, heldOf(plan, call), { callId: row.id, ...key, receivedAt: now });
    addEvent(plan, {
      callId: row.id,
      kind: 'held',
      node: key.node,
      key: key.key,
      detail: { inboxId: key.inboxId },
      at: now,
    });
    return 'held';
  }
  if (disposition !== 'apply') {
    addEvent(plan, {
      callId: row.id,
      kind: 'ignored',
      node: key.node,
      key: key.key,
      detail: { reason: disposition, inboxId: key.inboxId },
      at: now,
    });
    return disposition;
  }
  const event: FlowEvent = { type: 'KEY', ...key };
  const first = transition(deps, plan, call, snapshot, event, statusOf(row), now);
  if (!first.handled) return 'stale';
  save(plan, row, drainHeld(deps, plan, call, first, now), now);
  return 'applied';
}

/** A status of the call's own message (accepted, sent, delivered, failed, expired, ...). */
export function decideStatus(
  deps: DecideDeps,
  plan: CallPlan,
  call: LockedCall,
  status: string,
  now: Date,
): void {
  plan.now = now;
  const row = rowOf(plan, call);
  const snapshot = snapshotOf(deps, call, row);
  let state = row.state as CallState;
  if (status === 'accepted' && state === 'queued') state = 'accepted';
  if (FAILURES.has(status) && state !== 'ended') state = 'failed';
  addEvent(plan, { callId: row.id, kind: 'status', detail: { status }, at: now });
  if (FAILURES.has(status)) addStats(plan, row, [{ metric: 'failure', subject: status }]);
  const current = { state, outcome: row.outcome };
  const event: FlowEvent = { type: 'STATUS', status };
  const step = transition(deps, plan, call, snapshot, event, current, now);
  const applied: Applied = step.handled ? step : { snapshot, ...current };
  // a failed or ended call needs no timers any more
  if (applied.state === 'failed' || applied.state === 'ended') dropTimers(plan, row.id);
  save(plan, row, applied, now);
}

/** A durable timer came due; false when the machine no longer runs it (nothing moves). */
export function decideTimer(
  deps: DecideDeps,
  plan: CallPlan,
  call: LockedCall,
  timer: string,
  now: Date,
): boolean {
  plan.now = now;
  const row = rowOf(plan, call);
  const snapshot = snapshotOf(deps, call, row);
  addEvent(plan, { callId: row.id, kind: 'timer-fired', detail: { timer }, at: now });
  const event: FlowEvent = { type: 'TIMER', timer };
  const step = transition(deps, plan, call, snapshot, event, statusOf(row), now);
  if (step.handled) save(plan, row, step, now);
  return step.handled;
}

/** The first effects of a new call (those of its first snapshot, stored with its row). */
export function decideStart(
  deps: DecideDeps,
  plan: CallPlan,
  row: Pick<CallRow, 'id' | 'flowId' | 'flowVersion' | 'lang'>,
  effects: FlowEffect[],
  now: Date,
): void {
  plan.now = now;
  planEffects(plan, deps, row, effects, { state: 'queued', outcome: null }, now);
}
