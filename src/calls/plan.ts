/**
 * A CallPlan: what the events of one transaction decided, as data (decide.ts fills it, no
 * database involved; write-plan.ts renders it to SQL). Events of several calls, and several
 * events of one call, accumulate in one plan; a later event of a call starts from the row
 * and held webhooks the plan left it with, not from the ones read with the lock.
 */
import type { CallRow, callEvents } from '../db/schema/index.ts';
import type { PreparedMessage } from '../messages/submit.ts';
import type { HeldWebhook, LockedCall } from './call-rows.ts';
import { countStats, type StatCounts, type StatEntry } from './stats.ts';

export type CallEventRow = typeof callEvents.$inferInsert;

/** A follow-up message and its call event (whose detail the writer completes). */
export interface PlannedFollowUp {
  prepared: PreparedMessage;
  event: CallEventRow & { detail: Record<string, unknown> };
}

/**
 * A flow's `notify:` action: the `flow.notify` event for the named endpoint and the call event
 * that records it (the writer turns it into a `notify-skipped` problem when no enabled
 * endpoint has that name).
 */
export interface PlannedNotify {
  callId: string;
  endpoint: string;
  data: Record<string, unknown>;
  at: Date;
  event: CallEventRow & { detail: Record<string, unknown> };
}

/** A flow's `opt-out` action: the callee's number for the opt-out list (src/opt-outs/). */
export interface PlannedOptOut {
  phone: string;
  detail: { callId: string; node: string | null };
  at: Date;
}

/** A call's timers: all dropped first (`dropAll`), then each named one set or dropped (null). */
export interface PlannedTimers {
  dropAll: boolean;
  set: Map<string, Date | null>;
}

export interface CallPlan {
  /** when the writes happen: the time of the plan's latest event */
  now: Date;
  /** call events, in the order they happened (follow-ups' events among them) */
  readonly events: CallEventRow[];
  readonly followUps: PlannedFollowUp[];
  /** `flow.notify` events to record, in the order they happened */
  readonly notifies: PlannedNotify[];
  /** numbers to put on the opt-out list (an `opt-out` action) */
  readonly optOuts: PlannedOptOut[];
  /** held webhooks to store, and stored ones (by id) to delete */
  readonly heldAdded: HeldWebhook[];
  readonly heldReleased: number[];
  /** timers by call id */
  readonly timers: Map<string, PlannedTimers>;
  /** the calls' new rows, by id */
  readonly rows: Map<string, CallRow>;
  readonly stats: StatCounts;
  /** each touched call's held webhooks as the plan leaves them, by call id */
  readonly held: Map<string, HeldWebhook[]>;
}

export function createCallPlan(now: Date): CallPlan {
  return {
    now,
    events: [],
    followUps: [],
    notifies: [],
    optOuts: [],
    heldAdded: [],
    heldReleased: [],
    timers: new Map(),
    rows: new Map(),
    stats: new Map(),
    held: new Map(),
  };
}

/** The call's row as the plan leaves it (the locked one until an event moved it). */
export function rowOf(plan: CallPlan, call: LockedCall): CallRow {
  return plan.rows.get(call.row.id) ?? call.row;
}

/** The call's held webhooks in arrival order, as the plan leaves them. */
export function heldOf(plan: CallPlan, call: LockedCall & { held: HeldWebhook[] }): HeldWebhook[] {
  let held = plan.held.get(call.row.id);
  if (!held) {
    held = [...call.held];
    plan.held.set(call.row.id, held);
  }
  return held;
}

export function addEvent(plan: CallPlan, event: CallEventRow): void {
  plan.events.push(event);
}

export function addFollowUp(plan: CallPlan, followUp: PlannedFollowUp): void {
  plan.events.push(followUp.event);
  plan.followUps.push(followUp);
}

export function addNotify(plan: CallPlan, notify: PlannedNotify): void {
  plan.events.push(notify.event);
  plan.notifies.push(notify);
}

/** Counts under the call's flow, pinned version and language. */
export function addStats(
  plan: CallPlan,
  call: Pick<CallRow, 'flowId' | 'flowVersion' | 'lang'>,
  entries: StatEntry[],
): void {
  countStats(
    plan.stats,
    { flowId: call.flowId, version: call.flowVersion, lang: call.lang },
    entries,
  );
}

function timersOf(plan: CallPlan, callId: string): PlannedTimers {
  let t = plan.timers.get(callId);
  if (!t) {
    t = { dropAll: false, set: new Map() };
    plan.timers.set(callId, t);
  }
  return t;
}

/** Sets a timer (`fireAt`), or drops it (null). */
export function setTimer(plan: CallPlan, callId: string, timer: string, fireAt: Date | null) {
  timersOf(plan, callId).set.set(timer, fireAt);
}

export function dropTimers(plan: CallPlan, callId: string): void {
  const t = timersOf(plan, callId);
  t.dropAll = true;
  t.set.clear();
}

/** Holds a webhook: stored by the writer, and in the call's held list from now on. */
export function holdWebhook(plan: CallPlan, held: HeldWebhook[], h: HeldWebhook): void {
  held.push(h);
  plan.heldAdded.push(h);
}

/** Releases a held webhook: deleted when stored before, else never stored. */
export function releaseWebhook(plan: CallPlan, held: HeldWebhook[], h: HeldWebhook): void {
  held.splice(held.indexOf(h), 1);
  if (h.id !== undefined) plan.heldReleased.push(h.id);
  else plan.heldAdded.splice(plan.heldAdded.indexOf(h), 1);
}

export function saveRow(plan: CallPlan, row: CallRow): void {
  plan.rows.set(row.id, row);
}
