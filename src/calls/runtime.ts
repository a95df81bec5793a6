/**
 * Advancing a call: one event (a key from a webhook, a status of the call's message, a timer)
 * through the call's machine, xstate's pure `transition`, and the effects it returns run here,
 * inside the caller's transaction, under the call's row lock (rules 3 and 5): the snapshot,
 * the path, the outcome, follow-up messages with deterministic customerMessageIds, timers and
 * statistics commit together or not at all.
 *
 * The machines run in memory; what they write is collected in a `CallWrites` and written by
 * its `flush` in one set-based statement, before the transaction commits. A batch of
 * webhooks (events.ts) shares one `CallWrites`, so its statement, not each webhook, pays the
 * round trips.
 */
import { and, asc, eq, type SQL, sql } from 'drizzle-orm';
import type { Clock } from '../clock.ts';
import { executePrepared, type Tx } from '../db/client.ts';
import {
  type CallRow,
  type callEvents,
  calls,
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
import { messageInserts, type PreparedMessage, prepareMessages } from '../messages/submit.ts';
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

/** A calls row as `to_json` writes it (snake_case, timestamps as ISO text). */
export interface CallRowJson {
  id: string;
  flow_id: string;
  flow_version: string;
  to: string;
  from: string;
  lang: string;
  vars: unknown;
  state: string;
  outcome: string | null;
  snapshot: unknown;
  message_id: string;
  ended_at: string | null;
  created_at: string;
  updated_at: string;
  /** the provider's id of the call's message, when the statement joined it */
  provider_message_id?: string | null;
}

/**
 * Calls read (and locked) by raw SQL as JSON, with their pinned flows and their held
 * webhooks (`readHeld`): the statement that locks them is the caller's (events.ts locks
 * with the inbox insert, in one round trip). Rows in lock order.
 */
export async function lockedCalls(
  tx: Tx,
  rows: CallRowJson[],
  held: HeldWebhook[],
): Promise<Map<string, LockedCall>> {
  const out = new Map<string, LockedCall>();
  for (const j of rows) {
    const row: CallRow = {
      id: j.id,
      flowId: j.flow_id,
      flowVersion: j.flow_version,
      to: j.to,
      from: j.from,
      lang: j.lang,
      vars: j.vars,
      state: j.state,
      outcome: j.outcome,
      snapshot: j.snapshot,
      messageId: j.message_id,
      endedAt: j.ended_at === null ? null : new Date(j.ended_at),
      createdAt: new Date(j.created_at),
      updatedAt: new Date(j.updated_at),
    };
    const compiled = await compiledVersion(tx, row.flowId, row.flowVersion);
    const mine = held.filter((h) => h.callId === row.id);
    out.set(row.id, {
      row,
      compiled,
      providerMessageId: j.provider_message_id ?? null,
      held: mine,
    });
  }
  return out;
}

/**
 * The held webhooks of calls, in arrival order. It must run after the statement that locks
 * the calls, in the same transaction: only then does it see what the transaction that held
 * a lock before us committed. Sent right after that statement, without waiting for its
 * answer, it costs no round trip of its own (the driver pipelines the two; Postgres runs
 * them in order). Rows of calls that did not get locked are to be ignored.
 */
export async function readHeld(tx: Tx, callIds: string[]): Promise<HeldWebhook[]> {
  if (callIds.length === 0) return [];
  const [row] = await executePrepared<{ held: string | HeldJson[] }>(
    tx,
    sql`
      select coalesce(json_agg(json_build_object('id', h.id, 'callId', h.call_id,
        'inboxId', h.inbox_id, 'node', h.node, 'key', h.key, 'receivedAt', h.received_at)
        order by h.id), '[]') as held
      from held_webhooks h
      where h.call_id = any(string_to_array(${callIds.join(',')}, ',')::uuid[])`,
  );
  const held: HeldJson[] = typeof row!.held === 'string' ? JSON.parse(row!.held) : row!.held;
  return held.map((h) => ({
    id: Number(h.id),
    callId: h.callId,
    inboxId: Number(h.inboxId),
    node: h.node,
    key: h.key,
    receivedAt: new Date(h.receivedAt),
  }));
}

interface HeldJson {
  id: number | string;
  callId: string;
  inboxId: number | string;
  node: string;
  key: string;
  receivedAt: string;
}

type StatEntry = { metric: string; subject: string; key?: string };
type CallEventRow = typeof callEvents.$inferInsert;
/** counts to add, by flow, metric, subject and key */
type StatCounts = Map<
  string,
  { flowId: string; metric: string; subject: string; key: string; n: number }
>;

/** The counts as `flowStatsUpsert` reads them, in key order (so that concurrent upserts queue). */
function statRows(counts: StatCounts): string {
  return JSON.stringify(
    [...counts.entries()]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([, m], n) => ({
        n,
        flow_id: m.flowId,
        metric: m.metric,
        subject: m.subject,
        key: m.key,
        count: m.n,
      })),
  );
}

/** Adds to the flows' aggregate counters: a statement, or a CTE named `stats`. */
const flowStatsUpsert = (rows: string) => sql`
  insert into flow_stats (flow_id, metric, subject, key, count)
  select v.flow_id, v.metric, v.subject, v.key, v.count
  from jsonb_to_recordset(${rows}::jsonb)
    as v(n int, flow_id text, metric text, subject text, key text, count bigint)
  order by v.n
  on conflict (flow_id, metric, subject, key) do update set count = flow_stats.count + excluded.count`;

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
  if (counts.size > 0) await tx.execute(flowStatsUpsert(statRows(counts)));
}

/**
 * What the transitions of one transaction write, collected in memory and written by `flush`
 * (which the transaction must call before it commits): follow-up messages with their events
 * and outbox rows, call events in the order they happened, held webhooks, timers, the calls'
 * new snapshots, and the statistics (their rows are the ones every call of a flow updates:
 * written at the end of the transaction, in key order, so concurrent ones queue for them).
 */
export class CallWrites {
  /** how many follow-ups the flush queued (known after it) */
  queued = 0;
  private readonly events: CallEventRow[] = [];
  private readonly followUps: {
    prepared: PreparedMessage;
    event: CallEventRow & { detail: Record<string, unknown> };
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
    this.followUps.push({ prepared, event });
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

  /**
   * Writes everything in one statement: one round trip whatever the batch holds. Its rows
   * travel as JSON parameters, and it has only the parts the batch needs (Postgres starts up
   * every part of a statement, empty or not), so its text is one of a few: each is prepared
   * once per connection. The follow-up events get `messageId`, or `duplicate: true` when
   * their customerMessageId was stored before, from what the messages insert returned, in
   * the same statement. Rows of big tables are found by `= any(array(...))`, an index
   * lookup: the planner counts a JSON parameter's rows as 100 and would rather scan a table
   * of a few thousand rows whole (and hash it).
   */
  async flush(tx: Tx): Promise<number> {
    const parts: SQL[] = [];
    const followUps = this.followUps.length > 0;
    if (followUps)
      parts.push(
        messageInserts(
          this.followUps.map((f) => f.prepared),
          this.now,
        ),
      );
    if (this.heldDeletes.length > 0)
      parts.push(sql`held_out as (
        delete from held_webhooks
        where id = any(array(select jsonb_array_elements_text(${JSON.stringify(this.heldDeletes)}::jsonb)::bigint)))`);
    if (this.heldInserts.length > 0) {
      const held = this.heldInserts.map((h) => ({
        call_id: h.callId,
        inbox_id: h.inboxId,
        node: h.node,
        key: h.key,
        received_at: h.receivedAt,
      }));
      parts.push(sql`held_in as (
        insert into held_webhooks (call_id, inbox_id, node, key, received_at)
        select v.call_id, v.inbox_id, v.node, v.key, v.received_at
        from jsonb_to_recordset(${JSON.stringify(held)}::jsonb)
          as v(call_id uuid, inbox_id bigint, node text, key text, received_at timestamptz))`);
    }
    if (this.events.length > 0) parts.push(this.eventInserts(followUps));
    parts.push(...this.timerWrites());
    if (this.saved.size > 0) {
      const saved = [...this.saved.values()].map((r) => ({
        id: r.id,
        snapshot: r.snapshot,
        state: r.state,
        outcome: r.outcome,
        updated_at: r.updatedAt,
        ended_at: r.endedAt,
      }));
      parts.push(sql`saved_rows as materialized (
        select * from jsonb_to_recordset(${JSON.stringify(saved)}::jsonb)
          as v(id uuid, snapshot jsonb, state text, outcome text, updated_at timestamptz,
               ended_at timestamptz)),
      saved as (
        update calls as c set snapshot = v.snapshot, state = v.state, outcome = v.outcome,
          updated_at = v.updated_at, ended_at = v.ended_at
        from saved_rows as v
        where c.id = any(array(select id from saved_rows)) and c.id = v.id)`);
    }
    if (this.stats.size > 0) parts.push(sql`stats as (${flowStatsUpsert(statRows(this.stats))})`);
    if (parts.length === 0) return this.queued;
    const rows = await executePrepared<{ id: string }>(
      tx,
      sql`with ${sql.join(parts, sql`, `)} ${followUps ? sql`select id from msg` : sql`select null as id where false`}`,
    );
    const inserted = new Set(rows.map((r) => r.id));
    for (const f of this.followUps) {
      const id = f.prepared.row.id!;
      if (inserted.has(id)) f.event.detail.messageId = id;
      else f.event.detail.duplicate = true;
    }
    this.queued += inserted.size;
    return this.queued;
  }

  /** The call events, in the order they happened; with the follow-ups' outcome (`msg`). */
  private eventInserts(followUps: boolean): SQL {
    const followUpOf = new Map<CallEventRow, string>(
      this.followUps.map((f) => [f.event, f.prepared.row.id!]),
    );
    const rows = JSON.stringify(
      this.events.map((e, n) => ({
        n,
        call_id: e.callId,
        kind: e.kind,
        node: e.node ?? null,
        menu: e.menu ?? null,
        attempt: e.attempt ?? null,
        key: e.key ?? null,
        detail: e.detail ?? null,
        at: e.at,
        follow_up: followUpOf.get(e) ?? null,
      })),
    );
    const columns = sql`v(n int, call_id uuid, kind text, node text, menu text, attempt int,
      key text, detail jsonb, at timestamptz, follow_up uuid)`;
    if (!followUps)
      return sql`events as (
        insert into call_events (call_id, kind, node, menu, attempt, key, detail, at)
        select v.call_id, v.kind, v.node, v.menu, v.attempt, v.key, v.detail, v.at
        from jsonb_to_recordset(${rows}::jsonb) as ${columns}
        order by v.n)`;
    return sql`events as (
      insert into call_events (call_id, kind, node, menu, attempt, key, detail, at)
      select v.call_id, v.kind, v.node, v.menu, v.attempt, v.key,
             case when v.follow_up is null then v.detail
                  when m.id is not null then v.detail || jsonb_build_object('messageId', m.id)
                  else v.detail || '{"duplicate": true}'::jsonb end,
             v.at
      from jsonb_to_recordset(${rows}::jsonb) as ${columns}
      left join msg m on m.id = v.follow_up
      order by v.n)`;
  }

  /**
   * The timer writes: calls whose timers all go (but those set again: one statement cannot
   * both delete a row and update it), timers dropped one by one, timers set (the fire time
   * replaced when the call has one of that name).
   */
  private timerWrites(): SQL[] {
    const all: string[] = [];
    const drops: { call_id: string; timer: string }[] = [];
    const sets: { call_id: string; timer: string; fire_at: Date }[] = [];
    for (const [callId, t] of this.timers) {
      if (t.all) all.push(callId);
      for (const [timer, fireAt] of t.set) {
        if (fireAt) sets.push({ call_id: callId, timer, fire_at: fireAt });
        else if (!t.all) drops.push({ call_id: callId, timer });
      }
    }
    const parts: SQL[] = [];
    if (sets.length > 0)
      parts.push(sql`timer_sets as materialized (
        select * from jsonb_to_recordset(${JSON.stringify(sets)}::jsonb)
          as v(call_id uuid, timer text, fire_at timestamptz)),
      timers_set as (
        insert into call_timers (call_id, timer, fire_at)
        select call_id, timer, fire_at from timer_sets
        on conflict (call_id, timer) do update set fire_at = excluded.fire_at)`);
    if (all.length > 0)
      parts.push(sql`timers_all as (
        delete from call_timers as t
        where t.call_id = any(array(select jsonb_array_elements_text(${JSON.stringify(all)}::jsonb)::uuid))
        ${sets.length > 0 ? sql`and not exists (select 1 from timer_sets s where s.call_id = t.call_id and s.timer = t.timer)` : sql``})`);
    if (drops.length > 0)
      parts.push(sql`timer_drops as materialized (
        select * from jsonb_to_recordset(${JSON.stringify(drops)}::jsonb)
          as v(call_id uuid, timer text)),
      timers_drop as (
        delete from call_timers as t
        using timer_drops as v
        where t.call_id = any(array(select call_id from timer_drops))
          and t.call_id = v.call_id and t.timer = v.timer)`);
    return parts;
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
