/**
 * The events a write derives from its own statement, as `eventsFrom` sources (record.ts), so
 * that they travel in the statement that makes the change, with no round trip of their own:
 *
 * - `messageStatusSource`: `message.status` for each new timeline step, from the rows the
 *   statement inserts into message_events (their RETURNING), with the message's
 *   customerMessageId and call;
 * - `queuedSource`: `message.status` `queued` for the messages `msg` (messageInserts in
 *   src/messages/submit.ts) inserted in the same statement;
 * - `callPlanSource`: a CallPlan's `call.key` and `call.outcome` (from its call events) and
 *   `call.ended` for each call the plan ends (its saved row has an end, the row before the
 *   statement had none), with the path and follow-ups read in SQL.
 *
 * Each is added only when subscriptions.ts says some endpoint wants its type.
 */
import { type SQL, sql } from 'drizzle-orm';
import type { CallPlan } from '../calls/plan.ts';
import { valueArray } from '../db/client.ts';
import { eventsFrom, isoSql, type NewOutgoingEvent, uuidv7Sql } from './record.ts';
import type { Subscriptions } from './subscriptions.ts';

/**
 * `message.status` rows from `rows`, a select with the columns message_id, customer_message_id,
 * call_id, status, source, detail, at (the step's own time) and received_at (when recorded).
 */
export function messageStatusSource(rows: SQL, seqBase = 0): SQL {
  return sql`select ${uuidv7Sql(sql`r.received_at`)} as id,
      ${seqBase}::bigint + row_number() over (order by r.message_id, r.at) as seq,
      'message.status'::text as type, 'message:' || r.message_id as subject,
      jsonb_build_object('messageId', r.message_id, 'customerMessageId', r.customer_message_id,
        'status', r.status, 'at', ${isoSql(sql`r.at`)}, 'source', r.source)
        || case when r.call_id is null then '{}'::jsonb
                else jsonb_build_object('callId', r.call_id) end
        || case when r.detail is null or r.detail = '{}'::jsonb then '{}'::jsonb
                else jsonb_build_object('detail', r.detail) end as data,
      r.received_at as at, null::text as endpoint
    from (${rows}) r`;
}

/** What `ev` (timeline-write.ts) returns when its steps become events. */
export const TIMELINE_RETURNING = sql`returning message_id, status, source, detail, at, received_at`;

/** `message.status` for the steps `ev` inserted (it returns TIMELINE_RETURNING). */
export function timelineSource(): SQL {
  return messageStatusSource(sql`select ev.message_id, m.customer_message_id, m.call_id,
      ev.status, ev.source, ev.detail, ev.at, ev.received_at
    from ev join messages m on m.id = ev.message_id`);
}

/** What `msg` (messageInserts) returns besides id and parts when it records events. */
export const QUEUED_RETURNING = sql`, customer_message_id, call_id`;

/** `message.status` `queued` for the messages `msg` inserted, at `at` (ISO). */
export function queuedSource(at: string, seqBase = 0): SQL {
  return messageStatusSource(
    sql`select msg.id as message_id, msg.customer_message_id, msg.call_id, 'queued' as status,
        'api' as source,
        case when msg.parts is not null then jsonb_build_object('parts', msg.parts) end as detail,
        ${at}::timestamptz as at, ${at}::timestamptz as received_at
      from msg`,
    seqBase,
  );
}

/** A path step as GET /v1/calls/{id} shows it, from a `key` call event's columns. */
function pathStepSql(e: string): SQL {
  const c = sql.raw(e);
  return sql`jsonb_build_object('node', ${c}.node, 'menu', ${c}.menu,
      'attempt', coalesce(${c}.attempt, 1), 'key', ${c}.key, 'at', ${isoSql(sql`${c}.at`)})
    || case when ${c}.detail ? 'input' then jsonb_build_object('input', ${c}.detail->'input')
            else '{}'::jsonb end`;
}

/** The types a CallPlan can report. */
export interface CallPlanWants {
  key: boolean;
  outcome: boolean;
  ended: boolean;
  /** the follow-ups' `queued` steps (`msg` returns QUEUED_RETURNING) */
  queued: boolean;
}

/**
 * The events of a CallPlan, as one `eventsFrom` source, or undefined when it has none to
 * report. `saved`: the statement has `saved_rows` (the plan saves rows); `msg`: it inserts
 * follow-ups.
 */
export function callPlanSource(
  plan: CallPlan,
  wants: CallPlanWants,
  has: { saved: boolean; msg: boolean },
): SQL | undefined {
  const parts: SQL[] = [];
  const listed: NewOutgoingEvent[] = [];
  for (const e of plan.events) {
    const row = plan.rows.get(e.callId);
    const flow = row?.flowId ?? null;
    const at = e.at instanceof Date ? e.at : new Date(e.at as unknown as string);
    if (e.kind === 'key' && wants.key) {
      const input = (e.detail as { input?: unknown } | null | undefined)?.input;
      listed.push({
        type: 'call.key',
        subject: `call:${e.callId}`,
        data: {
          callId: e.callId,
          flow,
          node: e.node,
          menu: e.menu,
          attempt: e.attempt ?? 1,
          key: e.key,
          // the key pressed is the input, unless the step is `wrong` (then the detail says)
          ...(typeof input === 'string' ? { input } : e.key !== 'wrong' && { input: e.key }),
          at: at.toISOString(),
        },
        at,
      });
    } else if (e.kind === 'outcome' && wants.outcome) {
      const outcome = (e.detail as { outcome?: unknown } | null | undefined)?.outcome;
      listed.push({
        type: 'call.outcome',
        subject: `call:${e.callId}`,
        data: { callId: e.callId, flow, outcome, at: at.toISOString() },
        at,
      });
    }
  }
  if (listed.length > 0) parts.push(listedSource(listed));
  if (wants.queued && has.msg) parts.push(queuedSource(plan.now.toISOString(), 100_000));
  if (wants.ended && has.saved && [...plan.rows.values()].some((r) => r.endedAt !== null)) {
    parts.push(endedSource(plan, has.msg));
  }
  if (parts.length === 0) return undefined;
  return parts.length === 1 ? parts[0] : sql.join(parts, sql` union all `);
}

/**
 * The CTEs recording a CallPlan's events for `writePlan`, or undefined when no endpoint wants
 * any type it could report (four Set lookups, nothing allocated).
 */
export function callPlanEvents(
  plan: CallPlan,
  subs: Subscriptions,
  has: { saved: boolean; msg: boolean },
): SQL | undefined {
  const key = subs.wants('call.key');
  const outcome = subs.wants('call.outcome');
  const ended = subs.wants('call.ended');
  const queued = has.msg && subs.wants('message.status');
  if (!key && !outcome && !ended && !queued) return undefined;
  const source = callPlanSource(plan, { key, outcome, ended, queued }, has);
  return source && eventsFrom(source);
}

/** Events listed in TypeScript as a source (ids drawn in SQL from their times). */
function listedSource(events: NewOutgoingEvent[]): SQL {
  const rows = events.map((e, seq) => ({
    seq,
    type: e.type,
    subject: e.subject,
    data: e.data,
    at: e.at.toISOString(),
  }));
  return sql`select ${uuidv7Sql(sql`v.at`)} as id, v.seq, v.type, v.subject, v.data, v.at,
      null::text as endpoint
    from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
      as v(seq bigint, type text, subject text, data jsonb, at timestamptz)`;
}

/**
 * `call.ended` for the calls whose saved row ends now: `saved_rows` has an end and the row as
 * it was before the statement (which a statement's other parts still see) has none. The path
 * is the call's `key` events stored before, then the plan's; the follow-ups are the call's
 * stored ones and those the plan queues (`msg` rows are not visible to the same statement,
 * so they are taken from the plan, unless stored already or to an opted-out number).
 */
function endedSource(plan: CallPlan, msg: boolean): SQL {
  // the plan's calls as one array parameter: the stored key events are read from those calls'
  // days alone (a correlation with v.id only would plan every day kept: docs/scaling.md)
  const calls = valueArray([...plan.rows.keys()], 'uuid');
  const keys = JSON.stringify(
    plan.events
      .filter((e) => e.kind === 'key')
      .map((e, seq) => ({
        call_id: e.callId,
        seq,
        node: e.node,
        menu: e.menu,
        attempt: e.attempt ?? 1,
        key: e.key,
        detail: e.detail ?? null,
        at: e.at,
      })),
  );
  const followUps = JSON.stringify(
    msg
      ? plan.followUps.map((f) => ({
          call_id: f.prepared.row.callId,
          id: f.prepared.row.id,
          cmid: f.prepared.row.customerMessageId,
          type: f.prepared.row.type,
          to: f.prepared.row.to,
        }))
      : [],
  );
  return sql`select ${uuidv7Sql(sql`v.ended_at`)} as id,
      200000 + row_number() over (order by v.id) as seq,
      'call.ended'::text as type, 'call:' || v.id as subject,
      jsonb_build_object('callId', v.id, 'flow', c.flow_id, 'flowVersion', c.flow_version,
        'to', c."to", 'state', v.state, 'outcome', v.outcome,
        'path', (select coalesce(jsonb_agg(p.step order by p.ord, p.at, p.n), '[]'::jsonb) from (
            select 0 as ord, ce.at, ce.id as n, ${pathStepSql('ce')} as step
            from call_events ce
            where ce.call_id = any(${calls}) and ce.call_id = v.id and ce.kind = 'key'
            union all
            select 1, k.at, k.seq, ${pathStepSql('k')}
            from jsonb_to_recordset(${keys}::jsonb)
              as k(call_id uuid, seq bigint, node text, menu text, attempt int, key text,
                   detail jsonb, at timestamptz)
            where k.call_id = v.id) p),
        'followUps', (select coalesce(jsonb_agg(jsonb_build_object('id', f.id,
            'customerMessageId', f.cmid, 'type', f.type, 'status', f.status)
            order by f.cmid), '[]'::jsonb) from (
            select m.id, m.customer_message_id as cmid, m.type, m.status from messages m
            where m.call_id = v.id and m.role = 'follow-up'
            union all
            select u.id, u.cmid, u.type, 'queued' from jsonb_to_recordset(${followUps}::jsonb)
              as u(call_id uuid, id uuid, cmid text, type text, "to" text)
            where u.call_id = v.id
              and not exists (select 1 from message_customer_ids k
                              where k.customer_message_id = u.cmid)
              and not exists (select 1 from opt_outs o where o.phone = u."to")) f),
        'at', ${isoSql(sql`v.ended_at`)}) as data,
      v.ended_at as at, null::text as endpoint
    from saved_rows v join calls c on c.id = v.id
    where v.ended_at is not null and c.ended_at is null`;
}
