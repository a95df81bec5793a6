/**
 * Writes a CallPlan in one statement: one round trip, whatever the plan holds. Its parts,
 * CTEs of one `with`, each present only when the plan needs it (Postgres starts up every
 * part of a statement, empty or not), so the text is one of a few, each prepared once per
 * connection; rows travel as JSON parameters, so no text depends on a plan's size:
 *
 * - `msg`: the follow-up messages with their first events and outbox rows (messageInserts);
 *   a customerMessageId stored before is skipped, which is what makes follow-ups once-only,
 *   and so is a number on the opt-out list (the event says `optedOut`).
 * - `held_out`: held webhooks applied or ignored now, deleted by id.
 * - `held_in`: webhooks held now, stored.
 * - `events`: the call events in the order they happened; a follow-up's event gets the
 *   message's id, or `optedOut: true` or `duplicate: true`, from what `msg` returned in the
 *   same statement.
 * - `timers_set`, `timers_all`, `timers_drop`: timers set (the fire time replaced when the
 *   call has one of that name), all of a call's dropped, some dropped by name.
 * - `saved`: the calls' new snapshots, states, outcomes and times.
 * - `opt_in`: the callees of `opt-out` actions, onto the opt-out list.
 * - `ev_*` (src/events/record.ts, with `subs` and only when an endpoint wants them): the
 *   plan's `call.key`, `call.outcome`, `call.ended` and follow-ups' `message.status` events.
 * - `stats`: the flows' counters, last and in key order (rows every call of a flow updates:
 *   taken as late as possible, concurrent transactions queue for them).
 *
 * A plan with `notify:` actions then records their events, one statement each (notify.ts).
 *
 * Rows of big tables are found by `= any(array(...))`, an index lookup: the planner counts a
 * JSON parameter's rows as 100 and would rather scan a table of a few thousand rows whole.
 */
import { type SQL, sql } from 'drizzle-orm';
import { executePrepared, type Tx } from '../db/client.ts';
import { callPlanEvents } from '../events/sources.ts';
import type { Subscriptions } from '../events/subscriptions.ts';
import { messageInserts } from '../messages/submit.ts';
import { writeNotifies } from './notify.ts';
import type { CallEventRow, CallPlan } from './plan.ts';
import { flowStatsUpsert } from './stats.ts';

/** Writes the plan (before its transaction commits); returns how many follow-ups it queued. */
export async function writePlan(tx: Tx, plan: CallPlan, subs?: Subscriptions): Promise<number> {
  const parts: SQL[] = [];
  withholdOptingOut(plan);
  const followUps = plan.followUps.length > 0;
  if (followUps)
    parts.push(
      messageInserts(
        plan.followUps.map((f) => f.prepared),
        plan.now,
        subs?.wants('message.status'),
        true,
      ),
    );
  if (plan.heldReleased.length > 0)
    parts.push(sql`held_out as (
      delete from held_webhooks
      where id = any(array(select jsonb_array_elements_text(${JSON.stringify(plan.heldReleased)}::jsonb)::bigint)))`);
  if (plan.heldAdded.length > 0) parts.push(heldInserts(plan));
  if (plan.events.length > 0) parts.push(eventInserts(plan, followUps));
  parts.push(...timerWrites(plan));
  if (plan.rows.size > 0) parts.push(rowUpdates(plan));
  if (plan.optOuts.length > 0) parts.push(optOutInserts(plan));
  // what the plan reports to endpoints, only when one wants it (after saved_rows: it reads it)
  const events = subs && callPlanEvents(plan, subs, { saved: plan.rows.size > 0, msg: followUps });
  if (events) parts.push(events);
  if (plan.stats.size > 0) parts.push(sql`stats as (${flowStatsUpsert(plan.stats)})`);
  if (parts.length === 0) return 0;
  const rows = await executePrepared<{ id: string }>(
    tx,
    sql`with ${sql.join(parts, sql`, `)} ${followUps ? sql`select id from msg` : sql`select null as id where false`}`,
  );
  // after the step's own events, so an endpoint's deliveries of this call stay in step order
  if (plan.notifies.length > 0) await writeNotifies(tx, plan);
  return rows.length;
}

/**
 * Follow-ups to a number this plan puts on the opt-out list are not sent: taken out of the
 * plan, their events marked `optedOut`. (A number already on the list is skipped by `msg`
 * itself, which a sibling part's insert could not show it.)
 */
function withholdOptingOut(plan: CallPlan): void {
  if (plan.optOuts.length === 0 || plan.followUps.length === 0) return;
  const optingOut = new Set(plan.optOuts.map((o) => o.phone));
  const kept = plan.followUps.filter((f) => {
    if (!optingOut.has(f.prepared.row.to)) return true;
    f.event.detail.optedOut = true;
    return false;
  });
  plan.followUps.splice(0, plan.followUps.length, ...kept);
}

/** `opt-out` actions: the callees on the opt-out list (the first entry of a number stays). */
function optOutInserts(plan: CallPlan): SQL {
  const rows = plan.optOuts.map((o) => ({ phone: o.phone, detail: o.detail, created_at: o.at }));
  return sql`opt_in as (
    insert into opt_outs (phone, source, detail, created_at)
    select v.phone, 'flow', v.detail, v.created_at
    from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
      as v(phone text, detail jsonb, created_at timestamptz)
    on conflict (phone) do nothing)`;
}

function heldInserts(plan: CallPlan): SQL {
  const held = plan.heldAdded.map((h) => ({
    call_id: h.callId,
    inbox_id: h.inboxId,
    node: h.node,
    key: h.key,
    received_at: h.receivedAt,
  }));
  return sql`held_in as (
    insert into held_webhooks (call_id, inbox_id, node, key, received_at)
    select v.call_id, v.inbox_id, v.node, v.key, v.received_at
    from jsonb_to_recordset(${JSON.stringify(held)}::jsonb)
      as v(call_id uuid, inbox_id bigint, node text, key text, received_at timestamptz))`;
}

/** The call events, in the order they happened; with the follow-ups' outcome (`msg`). */
function eventInserts(plan: CallPlan, followUps: boolean): SQL {
  const followUpOf = new Map<CallEventRow, { id: string; to: string }>(
    plan.followUps.map((f) => [f.event, { id: f.prepared.row.id!, to: f.prepared.row.to }]),
  );
  const rows = JSON.stringify(
    plan.events.map((e, seq) => ({
      seq,
      call_id: e.callId,
      kind: e.kind,
      node: e.node ?? null,
      menu: e.menu ?? null,
      attempt: e.attempt ?? null,
      key: e.key ?? null,
      detail: e.detail ?? null,
      at: e.at,
      follow_up: followUpOf.get(e)?.id ?? null,
      follow_up_to: followUpOf.get(e)?.to ?? null,
    })),
  );
  const columns = sql`v(seq int, call_id uuid, kind text, node text, menu text, attempt int,
    key text, detail jsonb, at timestamptz, follow_up uuid, follow_up_to text)`;
  if (!followUps)
    return sql`events as (
      insert into call_events (call_id, kind, node, menu, attempt, key, detail, at)
      select v.call_id, v.kind, v.node, v.menu, v.attempt, v.key, v.detail, v.at
      from jsonb_to_recordset(${rows}::jsonb) as ${columns}
      order by v.seq)`;
  return sql`events as (
    insert into call_events (call_id, kind, node, menu, attempt, key, detail, at)
    select v.call_id, v.kind, v.node, v.menu, v.attempt, v.key,
           case when v.follow_up is null then v.detail
                when m.id is not null then v.detail || jsonb_build_object('messageId', m.id)
                when exists (select 1 from opt_outs o where o.phone = v.follow_up_to)
                  then v.detail || '{"optedOut": true}'::jsonb
                else v.detail || '{"duplicate": true}'::jsonb end,
           v.at
    from jsonb_to_recordset(${rows}::jsonb) as ${columns}
    left join msg m on m.id = v.follow_up
    order by v.seq)`;
}

/**
 * Calls whose timers all go (but those set again: one statement cannot both delete a row and
 * update it), timers dropped one by one, timers set.
 */
function timerWrites(plan: CallPlan): SQL[] {
  const all: string[] = [];
  const drops: { call_id: string; timer: string }[] = [];
  const sets: { call_id: string; timer: string; fire_at: Date }[] = [];
  for (const [callId, t] of plan.timers) {
    if (t.dropAll) all.push(callId);
    for (const [timer, fireAt] of t.set) {
      if (fireAt) sets.push({ call_id: callId, timer, fire_at: fireAt });
      else if (!t.dropAll) drops.push({ call_id: callId, timer });
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

/** The calls' new rows: what an event moves (never the row's identity or its inputs). */
function rowUpdates(plan: CallPlan): SQL {
  const saved = [...plan.rows.values()].map((r) => ({
    id: r.id,
    snapshot: r.snapshot,
    state: r.state,
    outcome: r.outcome,
    updated_at: r.updatedAt,
    ended_at: r.endedAt,
  }));
  return sql`saved_rows as materialized (
    select * from jsonb_to_recordset(${JSON.stringify(saved)}::jsonb)
      as v(id uuid, snapshot jsonb, state text, outcome text, updated_at timestamptz,
           ended_at timestamptz)),
  saved as (
    update calls as c set snapshot = v.snapshot, state = v.state, outcome = v.outcome,
      updated_at = v.updated_at, ended_at = v.ended_at
    from saved_rows as v
    where c.id = any(array(select id from saved_rows)) and c.id = v.id)`;
}
