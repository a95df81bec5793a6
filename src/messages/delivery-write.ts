/**
 * The statements of a batch of delivery callbacks (delivery-plan.ts decides what they carry).
 *
 * - `lockAndCheck`, the first: the messages the events are about, locked in id order
 *   (message-lock.ts), which dedup keys the inbox holds already, and an inbox id per key.
 * - `writeDeliveries`, the second: every write of the batch in one statement; COMMIT travels
 *   with it (pipelinedTransaction's `last`) unless call hooks must run after it.
 * Between the two, only when some event matched no message, the erased-id lookups
 * (privacy/erased.ts). Both statements are prepared, their rows JSON parameters, so their text
 * is the same whatever the batch's size.
 */
import { sql } from 'drizzle-orm';
import { executePrepared, type RunLast, type Tx } from '../db/client.ts';
import type { DeliveryEvent } from './delivery-parse.ts';
import type { DeliveryPlan } from './delivery-plan.ts';
import { lockedSql } from './message-lock.ts';
import type { OnRecorded } from './timeline.ts';
import type { LockedMessage } from './timeline-plan.ts';
import { runHooks, timelineSql } from './timeline-write.ts';

export interface Checked {
  /** the keys the inbox holds already */
  existing: Set<string>;
  /** an inbox id for each key, in the keys' order (from the inbox's own sequence) */
  ids: number[];
  /** the messages the events are about, locked, in id order */
  locked: LockedMessage[];
}

interface CheckedJson {
  existing: string[];
  ids: (number | string)[];
  locked: LockedMessage[];
}

/**
 * One round trip: locks the messages `events` are about and reads them, tells which of `keys`
 * are stored, and draws an id for each key (a duplicate's is never used). Each key lookup is
 * one index probe (a lateral subquery with a limit, as in message-lock.ts: without the limit
 * the planner may flatten it into a hash join over a scan of the whole of inbox_keys).
 */
export async function lockAndCheck(
  tx: Tx,
  keys: readonly string[],
  events: readonly DeliveryEvent[],
): Promise<Checked> {
  const [row] = await executePrepared<{ result: string | CheckedJson }>(
    tx,
    sql`
      with ${lockedSql({ events })}
      select json_build_object(
        'existing', coalesce((select json_agg(k.v)
          from jsonb_array_elements_text(${JSON.stringify(keys)}::jsonb) k(v)
          cross join lateral (
            select 1 from inbox_keys where dedup_key = decode(k.v, 'hex') limit 1) i), '[]'),
        'ids', (select json_agg(nextval('inbox_id_seq')) from generate_series(1, ${keys.length}::int)),
        'locked', coalesce((select json_agg(l order by l.id) from locked l), '[]')) as result`,
  );
  const result: CheckedJson =
    typeof row!.result === 'string' ? JSON.parse(row!.result) : row!.result;
  return {
    existing: new Set(result.existing),
    ids: result.ids.map(Number),
    locked: result.locked,
  };
}

/**
 * Writes the plan in one statement: `ins` stores each new body once, with its outcome (an
 * insert and then an update of the same row was a second row version and index entry), `ik`
 * its dedup key, the timeline CTEs (timeline-write.ts), and `pe` the events that wait for
 * their message. A key another transaction stored after `lockAndCheck` looked fails `ik` on
 * inbox_keys' primary key (ingest-batch.ts tries once more). Then the call hooks, in call-id
 * order.
 */
export async function writeDeliveries(
  tx: Tx,
  last: RunLast,
  plan: DeliveryPlan,
  now: Date,
  onRecorded: OnRecorded | undefined,
  /** record the steps' `message.status` events too (timeline-write.ts) */
  events = false,
): Promise<void> {
  const at = now.toISOString();
  const write = sql`
      with ins as (
        insert into inbox (id, kind, dedup_key, content_type, body, received_at, outcome, pending)
        select v.id, 'delivery', v.key, v.content_type, v.body, ${at}::timestamptz, v.outcome,
               v.pending
        from jsonb_to_recordset(${JSON.stringify(plan.inbox)}::jsonb)
          as v(id bigint, key text, content_type text, body text, outcome jsonb, pending int)
        returning dedup_key),
      ik as (
        insert into inbox_keys (dedup_key, received_at)
        select decode(dedup_key, 'hex'), ${at}::timestamptz from ins),
      ${timelineSql(plan.timeline, at, events)},
      pe as (
        insert into pending_events
          (inbox_id, customer_message_id, provider_message_id, status, detail, at, received_at)
        select v.inbox_id, v.customer_message_id, v.provider_message_id, v.status, v.detail, v.at,
               ${at}::timestamptz
        from jsonb_to_recordset(${JSON.stringify(plan.pending)}::jsonb)
          as v(inbox_id bigint, customer_message_id text, provider_message_id text, status text,
               detail jsonb, at timestamptz))
      select 1`;
  // a message of no call needs no hook: with none to run, COMMIT goes with the write
  if (!onRecorded || plan.hooked.length === 0) {
    await last(write);
    return;
  }
  await executePrepared(tx, write);
  await runHooks(tx, plan.hooked, onRecorded);
}
