/**
 * Callbacks in: every body is committed (raw, in `inbox`) in the same transaction as what it
 * changes, before the handler answers 2xx. An exact duplicate (same kind, same bytes)
 * conflicts on the inbox's dedup key and changes nothing. Events for messages not known yet
 * wait in `pending_events` and are attached when the message appears (`attachPending`).
 */
import { eq, inArray, or, type SQL, sql } from 'drizzle-orm';
import type { Clock } from '../clock.ts';
import { type Db, rowsOf, type Tx } from '../db/client.ts';
import { inbox, messages, pendingEvents } from '../db/schema/index.ts';
import { dropErasedEvents } from '../privacy/erased.ts';
import { type DeliveryEvent, parseDeliveryBody, type StatusMap } from './delivery-parse.ts';
import { type RawCallback, storable, storeRaw } from './inbox.ts';
import { needsStatusCheck, queueStatusChecks } from './status-checks.ts';
import { type NewEvent, type RecordResult, recordEvents } from './timeline.ts';

/**
 * Something else that must happen in the same transaction when a message's status moves:
 * the call runtime's, so only a message of a call (`callId` set) can need it, and the
 * delivery batch calls it for those alone.
 */
export type OnRecorded = (tx: Tx, result: RecordResult, events: NewEvent[]) => Promise<void>;

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

/**
 * A parsed callback event (or status record) as a timeline event, pointing back at its inbox
 * row when it came in one.
 */
export function toNewEvent(
  e: DeliveryEvent,
  inboxId: number | undefined,
  now: Date,
  source: NewEvent['source'],
): NewEvent {
  // assigned, not spread: see eventFrom in delivery-parse.ts
  const detail: Record<string, unknown> = inboxId === undefined ? {} : { inboxId };
  if (e.rawStatus !== e.status) detail.providerStatus = e.rawStatus;
  if (e.providerMessageIds[0]) detail.messageId = e.providerMessageIds[0];
  if (e.error != null) detail.error = e.error;
  const event: NewEvent = { status: e.status, source, at: e.at ?? now, detail };
  if (e.channel !== undefined) event.channel = e.channel;
  if (e.fallbackIndex !== undefined) event.fallbackIndex = e.fallbackIndex;
  if (e.perChannel) event.perChannel = true;
  return event;
}

/**
 * Finds the messages the events are about (by customerMessageId, then by the provider's ids)
 * and locks them, in id order: before the callback's inbox row, as the batch path does.
 */
async function matchMessages(tx: Tx, events: DeliveryEvent[]): Promise<Map<DeliveryEvent, string>> {
  const cmids = [
    ...new Set(events.flatMap((e) => (e.customerMessageId ? [e.customerMessageId] : []))),
  ];
  const pmids = [...new Set(events.flatMap((e) => e.providerMessageIds))];
  const conditions: SQL[] = [];
  if (cmids.length > 0) conditions.push(inArray(messages.customerMessageId, cmids));
  if (pmids.length > 0) conditions.push(inArray(messages.providerMessageId, pmids));
  const rows =
    conditions.length === 0
      ? []
      : await tx
          .select({
            id: messages.id,
            cmid: messages.customerMessageId,
            pmid: messages.providerMessageId,
          })
          .from(messages)
          .where(or(...conditions))
          .orderBy(messages.id)
          .for('update');
  const byCmid = new Map(rows.map((r) => [r.cmid, r.id]));
  const byPmid = new Map(rows.flatMap((r) => (r.pmid ? [[r.pmid, r.id] as const] : [])));
  const out = new Map<DeliveryEvent, string>();
  for (const e of events) {
    const id =
      (e.customerMessageId && byCmid.get(e.customerMessageId)) ||
      e.providerMessageIds.map((p) => byPmid.get(p)).find((v) => v !== undefined);
    if (id) out.set(e, id);
  }
  return out;
}

/** Applies events grouped by message, in message-id order (no two transactions deadlock). */
async function applyGrouped(
  deps: IngestDeps,
  tx: Tx,
  groups: Map<string, NewEvent[]>,
  now: Date,
): Promise<void> {
  const checks: string[] = [];
  for (const id of [...groups.keys()].sort()) {
    const events = groups.get(id)!;
    const result = await recordEvents(tx, id, events, now);
    if (!result) continue;
    if (
      result.after !== result.before &&
      needsStatusCheck(result.after, result.fallbacks, events, result.type)
    )
      checks.push(id);
    if (deps.onRecorded) await deps.onRecorded(tx, result, events);
  }
  await queueStatusChecks(tx, checks, now);
}

/** POST /hooks/delivery: store, parse, match, record; all or nothing. */
export async function ingestDelivery(deps: IngestDeps, raw: RawCallback): Promise<IngestResult> {
  const now = deps.clock.now();
  const parsed = storable(parseDeliveryBody(raw.contentType, raw.body, deps.statusMap));
  return deps.db.transaction(async (tx) => {
    const matches = await matchMessages(tx, parsed.events);
    const inboxId = await storeRaw(tx, 'delivery', raw, now);
    if (inboxId === undefined) {
      return { duplicate: true, events: 0, matched: 0, pending: 0, problems: [] };
    }
    const groups = new Map<string, NewEvent[]>();
    const unmatched: DeliveryEvent[] = [];
    for (const e of parsed.events) {
      const id = matches.get(e);
      if (!id) {
        unmatched.push(e);
        continue;
      }
      const list = groups.get(id) ?? [];
      list.push(toNewEvent(e, inboxId, now, 'callback'));
      groups.set(id, list);
    }
    await applyGrouped(deps, tx, groups, now);
    // events about erased messages are dropped, not kept to be attached (privacy/erased.ts)
    const { kept, dropped } = await dropErasedEvents(tx, {
      inboxId,
      body: storable(raw.body),
      events: parsed.events.length,
      unmatched,
    });
    if (kept.length > 0) {
      await tx.insert(pendingEvents).values(
        kept.map((e) => ({
          inboxId,
          customerMessageId: e.customerMessageId ?? null,
          providerMessageId: e.providerMessageIds[0] ?? null,
          status: e.status,
          detail: e,
          at: e.at ?? now,
          receivedAt: now,
        })),
      );
    }
    const outcome = {
      events: parsed.events.length,
      matched: parsed.events.length - unmatched.length,
      pending: kept.length,
      ...(dropped > 0 && { dropped }),
      problems: parsed.problems,
    };
    await tx.update(inbox).set({ outcome, pending: kept.length }).where(eq(inbox.id, inboxId));
    return { duplicate: false, inboxId, ...outcome };
  });
}

interface PendingRow {
  id: number;
  inbox_id: number;
  message_id: string;
  detail: DeliveryEvent & { at?: string };
  at: string | Date;
}

/**
 * Attaches waiting events to messages that have appeared since (by customerMessageId or
 * the provider's messageId). Safe to run from several instances at once (SKIP LOCKED).
 * Returns how many events were attached.
 */
export async function attachPending(deps: IngestDeps, limit = 500): Promise<number> {
  const now = deps.clock.now();
  return deps.db.transaction(async (tx) => {
    const rows = rowsOf<PendingRow>(
      await tx.execute(sql`
        select p.id, p.inbox_id, p.detail, p.at, m.id as message_id
        from pending_events p
        join messages m on m.customer_message_id = p.customer_message_id
                        or m.provider_message_id = p.provider_message_id
        order by p.id
        limit ${limit}
        for update of p skip locked`),
    );
    if (rows.length === 0) return 0;
    const groups = new Map<string, NewEvent[]>();
    for (const r of rows) {
      const event = toNewEvent({ ...r.detail, at: new Date(r.at) }, r.inbox_id, now, 'callback');
      const list = groups.get(r.message_id) ?? [];
      list.push(event);
      groups.set(r.message_id, list);
    }
    await applyGrouped(deps, tx, groups, now);
    const ids = rows.map((r) => r.id);
    await tx.delete(pendingEvents).where(inArray(pendingEvents.id, ids));
    const perInbox = new Map<number, number>();
    for (const r of rows) perInbox.set(r.inbox_id, (perInbox.get(r.inbox_id) ?? 0) + 1);
    for (const [id, n] of perInbox) {
      await tx
        .update(inbox)
        .set({ pending: sql`greatest(${inbox.pending} - ${n}, 0)` })
        .where(eq(inbox.id, id));
    }
    return rows.length;
  });
}
