/**
 * Applying an event to a locked call: decide (decide.ts) at the clock's time, then write
 * (write-plan.ts), unless the event shares its transaction's plan (then the transaction
 * writes it once, after its last event).
 */
import type { Db, Tx } from '../db/client.ts';
import { subscriptionsOf } from '../events/subscriptions.ts';
import type { FlowEffect } from '../flows/index.ts';
import type { KeyCall, LockedCall } from './call-rows.ts';
import { decideKey, decideStart, decideStatus, decideTimer, type KeyResult } from './decide.ts';
import type { RuntimeDeps } from './deps.ts';
import { type CallPlan, createCallPlan } from './plan.ts';
import { writePlan } from './write-plan.ts';

/** A key webhook into the transaction's plan (the webhook batch writes it). */
export function applyKey(
  deps: RuntimeDeps,
  plan: CallPlan,
  call: KeyCall,
  key: { node: string; key: string; inboxId: number },
): KeyResult {
  return decideKey(deps, plan, call, key, deps.clock.now());
}

/** A status of the call's own message; written at once unless given the transaction's plan. */
export async function applyStatus(
  tx: Tx,
  deps: RuntimeDeps & { db: Db },
  call: LockedCall,
  status: string,
  shared?: CallPlan,
): Promise<{ queued: number }> {
  const now = deps.clock.now();
  const plan = shared ?? createCallPlan(now);
  decideStatus(deps, plan, call, status, now);
  return { queued: shared ? 0 : await writePlan(tx, plan, subscriptionsOf(deps.db)) };
}

/** A durable timer came due; written at once unless given the transaction's plan. */
export async function applyTimer(
  tx: Tx,
  deps: RuntimeDeps & { db: Db },
  call: LockedCall,
  timer: string,
  shared?: CallPlan,
): Promise<{ queued: number; handled: boolean }> {
  const now = deps.clock.now();
  const plan = shared ?? createCallPlan(now);
  const handled = decideTimer(deps, plan, call, timer, now);
  return { queued: shared ? 0 : await writePlan(tx, plan, subscriptionsOf(deps.db)), handled };
}

/** The first effects of a new call other than its timers; written at once. */
export async function runStartEffects(
  tx: Tx,
  deps: RuntimeDeps & { db: Db },
  row: { id: string; flowId: string; flowVersion: string; lang: string },
  effects: FlowEffect[],
): Promise<void> {
  const now = deps.clock.now();
  const plan = createCallPlan(now);
  decideStart(deps, plan, row, effects, now);
  await writePlan(tx, plan, subscriptionsOf(deps.db));
}
