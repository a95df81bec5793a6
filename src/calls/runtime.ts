/**
 * Advancing a call: one event (a key from a webhook, a status of the call's message, a timer)
 * through the call's machine, xstate's pure `transition`, and the effects it returns run here,
 * inside the caller's transaction, under the call's row lock (rules 3 and 5): the snapshot,
 * the path, the outcome, follow-up messages with deterministic customerMessageIds, timers and
 * statistics commit together or not at all.
 *
 * The machines run in memory; what they write is collected in a `CallWrites` and written by
 * its `flush` in a few set-based statements, before the transaction commits. A batch of
 * webhooks (events.ts) shares one `CallWrites`, so its statements, not each webhook, pay the
 * round trips.
 */
import { and, asc, eq, inArray, sql } from 'drizzle-orm';
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
  messages,
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
import { type PreparedMessage, prepareMessages, storeMessages } from '../messages/submit.ts';
import type { FlowRegistry } from './registry.ts';

export interface RuntimeDeps {
  clock: Clock;
  flows: FlowRegistry;
  maxSmsParts?: number;
  /** told after a commit that queued follow-ups (wakes this instance's dispatcher) */
  onQueued?: () => void;
}

/** A webhook held until its call reaches its node (`id` once it is stored). */
export interface HeldWebhook {
  id?: number;
  callId: string;
  inboxId: number;
  node: string;
  key: string;
  receivedAt: Date;
}

/** A call under its row lock, with its pinned flow. */
export interface LockedCall {
  row: CallRow;
  compiled: CompiledFlow;
  /** the provider's id of the call's message, when it was read with the lock */
  providerMessageId?: string | null;
  /** the call's held webhooks in arrival order, when they were read (else drainHeld reads) */
  held?: HeldWebhook[];
}

export const CALL_STATES = ['queued', 'accepted', 'in-progress', 'ended', 'failed'] as const;
export type CallState = (typeof CALL_STATES)[number];

const FAILURES = new Set(['rejected', 'failed', 'expired']);

/**
 * Compiled versions by `flowId@version`. A version is the hash of its compiled form, so an
 * entry can never go stale (whichever database it was read from); bounded, oldest out first.
 */
const compiledVersions = new Map<string, CompiledFlow>();
const COMPILED_CACHE = 200;

async function compiledVersion(tx: Tx, flowId: string, version: string): Promise<CompiledFlow> {
  const key = `${flowId}@${version}`;
  const hit = compiledVersions.get(key);
  if (hit) return hit;
  const [row] = await tx
    .select({ compiled: flowVersions.compiled })
    .from(flowVersions)
    .where(and(eq(flowVersions.flowId, flowId), eq(flowVersions.version, version)));
  if (!row) throw new Error(`flow version ${key} is missing`);
  const compiled = row.compiled as CompiledFlow;
  if (compiledVersions.size >= COMPILED_CACHE)
    compiledVersions.delete(compiledVersions.keys().next().value!);
  compiledVersions.set(key, compiled);
  return compiled;
}

/** Locks the call row (FOR UPDATE) and loads its pinned flow version. */
export async function lockCall(tx: Tx, callId: string): Promise<LockedCall | undefined> {
  const [row] = await tx.select().from(calls).where(eq(calls.id, callId)).for('update');
  if (!row) return undefined;
  return { row, compiled: await compiledVersion(tx, row.flowId, row.flowVersion) };
}

/**
 * Locks many calls at once, in id order (the lock order of every path that locks several),
 * with the provider's id of each call's message and its held webhooks. The held webhooks are
 * read by a statement of their own, after the locks: only then does it see what the
 * transaction that held a lock before us committed.
 */
export async function lockCalls(tx: Tx, callIds: string[]): Promise<Map<string, LockedCall>> {
  const out = new Map<string, LockedCall>();
  if (callIds.length === 0) return out;
  const rows = await tx
    .select({ row: calls, providerMessageId: messages.providerMessageId })
    .from(calls)
    .leftJoin(messages, eq(messages.id, calls.messageId))
    .where(inArray(calls.id, [...new Set(callIds)]))
    .orderBy(asc(calls.id))
    .for('update', { of: calls });
  for (const { row, providerMessageId } of rows) {
    const compiled = await compiledVersion(tx, row.flowId, row.flowVersion);
    out.set(row.id, { row, compiled, providerMessageId, held: [] });
  }
  if (out.size === 0) return out;
  const held = await tx
    .select()
    .from(heldWebhooks)
    .where(inArray(heldWebhooks.callId, [...out.keys()]))
    .orderBy(asc(heldWebhooks.id));
  for (const h of held) out.get(h.callId)!.held!.push(h);
  return out;
}

type StatEntry = { metric: string; subject: string; key?: string };
type CallEventRow = typeof callEvents.$inferInsert;
/** counts to add, by flow, metric, subject and key */
type StatCounts = Map<
  string,
  { flowId: string; metric: string; subject: string; key: string; n: number }
>;

/** Adds to the flows' aggregate counters, in key order (so that concurrent upserts queue). */
async function upsertStats(tx: Tx, counts: StatCounts): Promise<void> {
  if (counts.size === 0) return;
  const rows = [...counts.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([, m]) => ({
      flowId: m.flowId,
      metric: m.metric,
      subject: m.subject,
      key: m.key,
      count: m.n,
    }));
  await tx
    .insert(flowStats)
    .values(rows)
    .onConflictDoUpdate({
      target: [flowStats.flowId, flowStats.metric, flowStats.subject, flowStats.key],
      set: { count: sql`${flowStats.count} + excluded.count` },
    });
}

function countStats(into: StatCounts, flowId: string, entries: StatEntry[]): void {
  for (const e of entries) {
    const key = e.key ?? '';
    const k = `${flowId}\u0000${e.metric}\u0000${e.subject}\u0000${key}`;
    const hit = into.get(k);
    if (hit) hit.n++;
    else into.set(k, { flowId, metric: e.metric, subject: e.subject, key, n: 1 });
  }
}

/** Adds to the flow's aggregate counters (kept apart from personal data, see flowStats). */
export async function bumpStats(tx: Tx, flowId: string, entries: StatEntry[]): Promise<void> {
  const counts: StatCounts = new Map();
  countStats(counts, flowId, entries);
  await upsertStats(tx, counts);
}

/**
 * What the transitions of one transaction write, collected in memory and written by `flush`
 * (which the transaction must call before it commits): follow-up messages with their events
 * and outbox rows, call events in the order they happened, held webhooks, timers, the calls'
 * new snapshots, and the statistics (last: their rows are the ones every call of a flow
 * updates, so they are held locked for the shortest time).
 */
export class CallWrites {
  /** how many follow-ups the flush queued (known after it) */
  queued = 0;
  private readonly events: CallEventRow[] = [];
  private readonly followUps: {
    prepared: PreparedMessage;
    detail: Record<string, unknown>;
  }[] = [];
  private readonly stats: StatCounts = new Map();
  /** per call: every timer dropped first (`all`), then each named one set or dropped (null) */
  private readonly timers = new Map<string, { all: boolean; set: Map<string, Date | null> }>();
  private readonly heldInserts: HeldWebhook[] = [];
  private readonly heldDeletes: number[] = [];
  private readonly saved = new Map<string, LockedCall['row']>();

  /**
   * when the writes happen: each apply sets it after its call's lock is held, so the events
   * of one call are in lock order (the timeline, and the path, read them in `at` order)
   */
  constructor(public now: Date) {}

  event(e: CallEventRow): CallEventRow {
    this.events.push(e);
    return e;
  }

  followUp(prepared: PreparedMessage, event: CallEventRow & { detail: Record<string, unknown> }) {
    this.events.push(event);
    this.followUps.push({ prepared, detail: event.detail });
  }

  count(flowId: string, entries: StatEntry[]): void {
    countStats(this.stats, flowId, entries);
  }

  private timersOf(callId: string) {
    let t = this.timers.get(callId);
    if (!t) {
      t = { all: false, set: new Map() };
      this.timers.set(callId, t);
    }
    return t;
  }

  setTimer(callId: string, timer: string, fireAt: Date | null): void {
    this.timersOf(callId).set.set(timer, fireAt);
  }

  dropTimers(callId: string): void {
    const t = this.timersOf(callId);
    t.all = true;
    t.set.clear();
  }

  hold(h: HeldWebhook): void {
    this.heldInserts.push(h);
  }

  release(h: HeldWebhook): void {
    if (h.id !== undefined) this.heldDeletes.push(h.id);
    else this.heldInserts.splice(this.heldInserts.indexOf(h), 1);
  }

  save(call: LockedCall): void {
    this.saved.set(call.row.id, call.row);
  }

  async flush(tx: Tx): Promise<number> {
    const now = this.now;
    if (this.followUps.length > 0) {
      const inserted = await storeMessages(
        tx,
        this.followUps.map((f) => f.prepared),
        now,
      );
      for (const f of this.followUps) {
        const id = f.prepared.row.id!;
        if (inserted.has(id)) f.detail.messageId = id;
        else f.detail.duplicate = true;
      }
      this.queued += inserted.size;
    }
    if (this.heldDeletes.length > 0)
      await tx.delete(heldWebhooks).where(inArray(heldWebhooks.id, this.heldDeletes));
    if (this.heldInserts.length > 0)
      await tx.insert(heldWebhooks).values(this.heldInserts.map(({ id: _, ...h }) => h));
    if (this.events.length > 0) await tx.insert(callEvents).values(this.events);
    await this.flushTimers(tx);
    if (this.saved.size > 0) {
      const rows = [...this.saved.values()].map((r) => ({
        id: r.id,
        snapshot: r.snapshot,
        state: r.state,
        outcome: r.outcome,
        updated_at: r.updatedAt.toISOString(),
        ended_at: r.endedAt?.toISOString() ?? null,
      }));
      await tx.execute(sql`
        update calls as c set snapshot = v.snapshot, state = v.state, outcome = v.outcome,
          updated_at = v.updated_at, ended_at = v.ended_at
        from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
          as v(id uuid, snapshot jsonb, state text, outcome text, updated_at timestamptz,
               ended_at timestamptz)
        where c.id = v.id`);
    }
    await upsertStats(tx, this.stats);
    return this.queued;
  }

  private async flushTimers(tx: Tx): Promise<void> {
    const all: string[] = [];
    const drop: { call_id: string; timer: string }[] = [];
    const set: (typeof callTimers.$inferInsert)[] = [];
    for (const [callId, t] of this.timers) {
      if (t.all) all.push(callId);
      for (const [timer, fireAt] of t.set) {
        if (fireAt) set.push({ callId, timer, fireAt });
        else if (!t.all) drop.push({ call_id: callId, timer });
      }
    }
    if (all.length > 0) await tx.delete(callTimers).where(inArray(callTimers.callId, all));
    if (drop.length > 0)
      await tx.execute(sql`
        delete from call_timers as t
        using jsonb_to_recordset(${JSON.stringify(drop)}::jsonb) as v(call_id uuid, timer text)
        where t.call_id = v.call_id and t.timer = v.timer`);
    if (set.length > 0)
      await tx
        .insert(callTimers)
        .values(set)
        .onConflictDoUpdate({
          target: [callTimers.callId, callTimers.timer],
          set: { fireAt: sql`excluded.fire_at` },
        });
  }
}

interface Applied {
  snapshot: FlowSnapshot;
  state: CallState;
  outcome: string | null;
}

/** Runs a transition's effects (into `writes`). */
function runEffects(
  writes: CallWrites,
  deps: RuntimeDeps,
  call: LockedCall,
  effects: FlowEffect[],
  current: { state: CallState; outcome: string | null },
): { state: CallState; outcome: string | null } {
  const { row } = call;
  const now = writes.now;
  let { state, outcome } = current;
  const stats: StatEntry[] = [];
  for (const effect of effects) {
    switch (effect.type) {
      case 'step':
        writes.event({
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
        writes.event({
          callId: row.id,
          kind: 'outcome',
          detail: { outcome: effect.name },
          at: now,
        });
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
          writes.event({
            callId: row.id,
            kind: 'follow-up-rejected',
            detail: { id: effect.id, customerMessageId, error: rejected.error },
            at: now,
          });
          break;
        }
        // the detail gets `messageId`, or `duplicate: true`, once the flush has inserted it
        writes.followUp(prepared[0]!, {
          callId: row.id,
          kind: 'follow-up',
          detail: { id: effect.id, customerMessageId, type: effect.message.type },
          at: now,
        });
        break;
      }
      case 'providerWebhook':
        writes.event({ callId: row.id, kind: 'webhook', detail: { url: effect.url }, at: now });
        break;
      case 'hangup':
        writes.event({ callId: row.id, kind: 'hangup', node: effect.node, at: now });
        stats.push({ metric: 'hangup', subject: effect.node });
        if (state !== 'failed') state = 'ended';
        break;
      case 'startTimer':
        writes.setTimer(row.id, effect.timer, new Date(now.getTime() + effect.afterMs));
        writes.event({
          callId: row.id,
          kind: 'timer-started',
          detail: { timer: effect.timer, afterMs: effect.afterMs },
          at: now,
        });
        break;
      case 'cancelTimer':
        writes.setTimer(row.id, effect.timer, null);
        writes.event({
          callId: row.id,
          kind: 'timer-cancelled',
          detail: { timer: effect.timer },
          at: now,
        });
        break;
    }
  }
  writes.count(row.flowId, stats);
  return { state, outcome };
}

/**
 * One event through the machine and its effects; `handled: false` when the machine ignores
 * it (nothing is written then).
 */
function transitionCall(
  writes: CallWrites,
  deps: RuntimeDeps,
  call: LockedCall,
  snapshot: FlowSnapshot,
  event: FlowEvent,
  current: { state: CallState; outcome: string | null },
): (Applied & { handled: true }) | { handled: false } {
  const machine = deps.flows.machineFor(call.compiled);
  const step = stepFlow(machine, snapshot, event);
  if (!step.handled) return { handled: false };
  const after = runEffects(writes, deps, call, step.effects, current);
  return { handled: true, snapshot: step.snapshot, ...after };
}

/** The call's new state, in memory (a later event of the same batch starts from it). */
function saveCall(writes: CallWrites, call: LockedCall, applied: Applied): void {
  const ended = applied.state === 'ended' || applied.state === 'failed';
  call.row = {
    ...call.row,
    snapshot: persistFlowSnapshot(applied.snapshot),
    state: applied.state,
    outcome: applied.outcome,
    updatedAt: writes.now,
    endedAt: call.row.endedAt ?? (ended ? writes.now : null),
  };
  writes.save(call);
}

async function heldOf(tx: Tx, call: LockedCall): Promise<HeldWebhook[]> {
  call.held ??= await tx
    .select()
    .from(heldWebhooks)
    .where(eq(heldWebhooks.callId, call.row.id))
    .orderBy(asc(heldWebhooks.id));
  return call.held;
}

/**
 * Applies the webhooks held for this call whose node the machine has now reached, in
 * arrival order, until none applies. Returns the state after them.
 */
async function drainHeld(
  tx: Tx,
  writes: CallWrites,
  deps: RuntimeDeps,
  call: LockedCall,
  applied: Applied,
): Promise<Applied> {
  const held = await heldOf(tx, call);
  let current = applied;
  for (;;) {
    let progressed = false;
    for (const h of [...held]) {
      const disposition = keyEventDisposition(call.compiled, current.snapshot, { node: h.node });
      if (disposition === 'hold') continue;
      held.splice(held.indexOf(h), 1);
      writes.release(h);
      if (disposition !== 'apply') {
        writes.event({
          callId: call.row.id,
          kind: 'ignored',
          node: h.node,
          key: h.key,
          detail: { reason: disposition, inboxId: h.inboxId },
          at: writes.now,
        });
        continue;
      }
      const next = transitionCall(
        writes,
        deps,
        call,
        current.snapshot,
        { type: 'KEY', node: h.node, key: h.key },
        current,
      );
      if (next.handled) {
        current = next;
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
 * the node was already left or can no longer be reached. Its writes go to `writes`.
 */
export async function applyKey(
  tx: Tx,
  deps: RuntimeDeps,
  call: LockedCall,
  key: { node: string; key: string; inboxId: number },
  writes: CallWrites,
): Promise<KeyResult> {
  writes.now = deps.clock.now();
  const machine = deps.flows.machineFor(call.compiled);
  const snapshot = restoreFlowSnapshot(machine, call.row.snapshot as never);
  const disposition = keyEventDisposition(call.compiled, snapshot, { node: key.node });
  const now = writes.now;
  if (disposition === 'hold') {
    const h: HeldWebhook = { callId: call.row.id, ...key, receivedAt: now };
    (await heldOf(tx, call)).push(h);
    writes.hold(h);
    writes.event({
      callId: call.row.id,
      kind: 'held',
      node: key.node,
      key: key.key,
      detail: { inboxId: key.inboxId },
      at: now,
    });
    return 'held';
  }
  if (disposition !== 'apply') {
    writes.event({
      callId: call.row.id,
      kind: 'ignored',
      node: key.node,
      key: key.key,
      detail: { reason: disposition, inboxId: key.inboxId },
      at: now,
    });
    return disposition;
  }
  const current = { state: call.row.state as CallState, outcome: call.row.outcome };
  const first = transitionCall(writes, deps, call, snapshot, { type: 'KEY', ...key }, current);
  if (!first.handled) return 'stale';
  const final = await drainHeld(tx, writes, deps, call, first);
  saveCall(writes, call, final);
  return 'applied';
}

/**
 * A status of the call's own message (accepted, sent, delivered, failed, expired, ...).
 * Writes at once unless given the transaction's `writes` (then its flush does).
 */
export async function applyStatus(
  tx: Tx,
  deps: RuntimeDeps,
  call: LockedCall,
  status: string,
  shared?: CallWrites,
): Promise<{ queued: number }> {
  const writes = shared ?? new CallWrites(deps.clock.now());
  writes.now = deps.clock.now();
  const machine = deps.flows.machineFor(call.compiled);
  const snapshot = restoreFlowSnapshot(machine, call.row.snapshot as never);
  let state = call.row.state as CallState;
  if (status === 'accepted' && state === 'queued') state = 'accepted';
  if (FAILURES.has(status) && state !== 'ended') state = 'failed';
  writes.event({ callId: call.row.id, kind: 'status', detail: { status }, at: writes.now });
  if (FAILURES.has(status)) writes.count(call.row.flowId, [{ metric: 'failure', subject: status }]);
  const current = { state, outcome: call.row.outcome };
  const step = transitionCall(writes, deps, call, snapshot, { type: 'STATUS', status }, current);
  const applied: Applied = step.handled ? step : { snapshot, ...current };
  // a failed or ended call needs no timers any more
  if (applied.state === 'failed' || applied.state === 'ended') writes.dropTimers(call.row.id);
  saveCall(writes, call, applied);
  return { queued: shared ? 0 : await writes.flush(tx) };
}

/** A durable timer came due. Writes at once unless given the transaction's `writes`. */
export async function applyTimer(
  tx: Tx,
  deps: RuntimeDeps,
  call: LockedCall,
  timer: string,
  shared?: CallWrites,
): Promise<{ queued: number; handled: boolean }> {
  const writes = shared ?? new CallWrites(deps.clock.now());
  writes.now = deps.clock.now();
  const machine = deps.flows.machineFor(call.compiled);
  const snapshot = restoreFlowSnapshot(machine, call.row.snapshot as never);
  const current = { state: call.row.state as CallState, outcome: call.row.outcome };
  writes.event({ callId: call.row.id, kind: 'timer-fired', detail: { timer }, at: writes.now });
  const step = transitionCall(writes, deps, call, snapshot, { type: 'TIMER', timer }, current);
  if (step.handled) saveCall(writes, call, step);
  const queued = shared ? 0 : await writes.flush(tx);
  return { queued, handled: step.handled };
}

/** Same effects runner for the first snapshot of a new call (its timers); writes at once. */
export async function runStartEffects(
  tx: Tx,
  deps: RuntimeDeps,
  call: LockedCall,
  effects: FlowEffect[],
): Promise<void> {
  const writes = new CallWrites(deps.clock.now());
  runEffects(writes, deps, call, effects, { state: 'queued', outcome: null });
  await writes.flush(tx);
}
