/**
 * Writing a timeline plan (timeline-plan.ts), under the row locks message-lock.ts took.
 *
 * Statements: `timelineSql` is three CTEs of one set-based statement, whatever the number of
 * messages: `ev` appends the events, `mu` sets each message's status and deliveredVia as the
 * plan decided (the rows are locked, so `before` is still true), `sc` queues the status checks
 * (a message already queued keeps its time); with `events`, `ev` returns its rows and the
 * `message.status` events of the new steps are recorded in the same statement
 * (src/events/record.ts: the caller asks only when some endpoint wants them). The delivery
 * batch puts them into its one write (delivery-write.ts); `writeTimeline` sends them alone,
 * prepared. Rows travel as JSON
 * parameters, so the text is the same whatever the plan's size. The call hooks run after,
 * in the plan's order, in the same transaction.
 */
import { type SQL, sql } from 'drizzle-orm';
import { executePrepared, type Tx } from '../db/client.ts';
import { eventsFrom } from '../events/record.ts';
import { TIMELINE_RETURNING, timelineSource } from '../events/sources.ts';
import type { OnRecorded } from './timeline.ts';
import type { Recorded, TimelinePlan } from './timeline-plan.ts';

/**
 * The CTEs `ev`, `mu` and `sc` that write `plan`; `at` is the time received (ISO). With
 * `events`, also the `message.status` events of its steps (record.ts's CTEs).
 */
export function timelineSql(plan: TimelinePlan, at: string, events = false): SQL {
  return sql`ev as (
        insert into message_events (message_id, status, source, detail, at, received_at)
        select v."messageId", v.status, v.source, v.detail, v.at, ${at}::timestamptz
        from jsonb_to_recordset(${JSON.stringify(plan.events)}::jsonb)
          as v("messageId" uuid, status text, source text, detail jsonb, at timestamptz)
        ${events ? TIMELINE_RETURNING : sql``}),
      mu as (
        update messages as m set
          status = v.after,
          delivered_via = coalesce(v."deliveredVia", m.delivered_via),
          updated_at = ${at}::timestamptz
        from jsonb_to_recordset(${JSON.stringify(plan.moves)}::jsonb)
          as v(id uuid, after text, "deliveredVia" text)
        where m.id = v.id),
      sc as (
        insert into status_checks (message_id, due_at)
        select k.v::uuid, ${at}::timestamptz
        from jsonb_array_elements_text(${JSON.stringify(plan.checks)}::jsonb) k(v)
        on conflict (message_id) do nothing)${events ? sql`, ${eventsFrom(timelineSource())}` : sql``}`;
}

export interface WriteOptions {
  /** run for every recorded message, in the plan's order */
  onRecorded?: OnRecorded | undefined;
  /** more CTEs for the same statement (`name as (...)`), written with the plan */
  also?: SQL;
  /** record the steps' `message.status` events too (some endpoint wants them) */
  events?: boolean;
}

/** Writes `plan` in one statement, then runs the hooks. Nothing is sent for an empty plan. */
export async function writeTimeline(
  tx: Tx,
  plan: TimelinePlan,
  now: Date,
  opts: WriteOptions = {},
): Promise<void> {
  if (plan.moves.length === 0 && !opts.also) return;
  const timeline = timelineSql(plan, now.toISOString(), opts.events);
  const ctes = opts.also ? sql`${timeline}, ${opts.also}` : timeline;
  await executePrepared(tx, sql`with ${ctes} select 1`);
  await runHooks(tx, plan.recorded, opts.onRecorded);
}

/** Runs the hook for each recorded message, one after another, in the order given. */
export async function runHooks(
  tx: Tx,
  recorded: readonly Recorded[],
  onRecorded: OnRecorded | undefined,
): Promise<void> {
  if (!onRecorded) return;
  for (const { result, events } of recorded) await onRecorded(tx, result, events);
}
