/**
 * Callbacks in: every body is committed (raw, in `inbox`) in the same transaction as what it
 * changes, before the handler answers 2xx. An exact duplicate (same kind, same bytes)
 * conflicts on the inbox's dedup key and changes nothing. Events for messages not known yet
 * wait in `pending_events` and are attached when the message appears (`attachPending`).
 * Delivery callbacks go through ingest-batch.ts, one or many at a time.
 */
import { sql } from 'drizzle-orm';
import type { Clock } from '../clock.ts';
import { type Db, rowsOf, valueArray } from '../db/client.ts';
import { subscriptionsOf } from '../events/subscriptions.ts';
import type { StatusMap } from './delivery-parse.ts';
import { type PendingEvent, planAttach } from './delivery-plan.ts';
import type { RawCallback } from './inbox.ts';
import { ingestDeliveries } from './ingest-batch.ts';
import { lockMessages } from './message-lock.ts';
import type { OnRecorded } from './timeline.ts';
import { writeTimeline } from './timeline-write.ts';

export type { OnRecorded } from './timeline.ts';

export interface IngestDeps {
  db: Db;
  clock: Clock;
  statusMap: StatusMap;
  onRecorded?: OnRecorded;
}

export interface IngestResult {
  duplicate: boolean;
  inboxId?: number;
  events: number;
  matched: number;
  pending: number;
  /** events about erased messages (DELETE /v1/subjects), acknowledged and not kept */
  dropped?: number;
  problems: string[];
}

/** POST /hooks/delivery for one callback: a batch of one (ingest-batch.ts). */
export async function ingestDelivery(deps: IngestDeps, raw: RawCallback): Promise<IngestResult> {
  const [result] = await ingestDeliveries(deps, [raw]);
  return result!;
}

interface PendingRead {
  id: number | string;
  inbox_id: number | string;
  detail: PendingEvent['detail'];
  received_at: string | Date;
}

/**
 * Attaches waiting events to messages that have appeared since, matched as callbacks are
 * (message-lock.ts). Safe to run from several instances at once (SKIP LOCKED). Returns how
 * many events were attached.
 *
 * Statements: the claim of pending rows that some message matches; the messages' lock
 * (`lockMessages`); one write (timeline-write.ts) that also deletes the attached rows (`pd`)
 * and lowers each inbox row's count of waiting events (`iu`); then the hooks.
 */
export async function attachPending(deps: IngestDeps, limit = 500): Promise<number> {
  const now = deps.clock.now();
  return deps.db.transaction(async (tx) => {
    const rows = rowsOf<PendingRead>(
      await tx.execute(sql`
        select p.id, p.inbox_id, p.detail, p.received_at
        from pending_events p
        where exists (select 1 from message_customer_ids k
                      where k.customer_message_id = p.customer_message_id)
           or exists (select 1 from message_provider_ids k
                      where k.provider_message_id = p.provider_message_id)
        order by p.id
        limit ${limit}
        for update of p skip locked`),
    );
    if (rows.length === 0) return 0;
    const pending = rows.map(
      (r): PendingEvent => ({
        id: Number(r.id),
        inboxId: Number(r.inbox_id),
        detail: r.detail,
        receivedAt: new Date(r.received_at),
      }),
    );
    const locked = await lockMessages(tx, { events: pending.map((p) => p.detail) });
    const plan = planAttach(pending, locked);
    await writeTimeline(tx, plan.timeline, now, {
      onRecorded: deps.onRecorded,
      events: subscriptionsOf(deps.db).wants('message.status'),
      also: sql`pd as (
        delete from pending_events
        where id in (select k.v::bigint
          from jsonb_array_elements_text(${JSON.stringify(plan.attached)}::jsonb) k(v))),
      iu as (
        update inbox set pending = greatest(inbox.pending - v.n, 0)
        from jsonb_to_recordset(${JSON.stringify(plan.perInbox)}::jsonb)
          as v(id bigint, "receivedAt" timestamptz, n int)
        -- received_at too: the row's day partition, where by id alone every day is probed;
        -- and as one array, so that only those days are planned (docs/scaling.md)
        where inbox.id = v.id and inbox.received_at = v."receivedAt"
          and inbox.received_at = any(${valueArray(
            plan.perInbox.map((p) => p.receivedAt),
            'timestamptz',
          )}))`,
    });
    return plan.attached.length;
  });
}
