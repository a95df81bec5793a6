/**
 * Deciding what delivery callbacks do, with nothing written: given the parsed callbacks, which
 * of their dedup keys the inbox holds, the inbox ids, the locked messages and which events are
 * about erased messages, the inbox rows with their outcomes, the timeline plan, the events that
 * wait in `pending_events`, and one answer per callback. The same for pending events that
 * found their message (`planAttach`). Pure; delivery-write.ts renders a plan to SQL.
 *
 * A callback some of whose events are about erased messages (privacy/erased.ts) is stored with
 * those messages' ids cut out of its body, and not at all when they were all it had.
 */
import { keptBody } from '../privacy/erased.ts';
import type { DeliveryEvent } from './delivery-parse.ts';
import { timeRejected } from './event-time.ts';
import { type RawCallback, storable } from './inbox.ts';
import type { IngestResult } from './ingest.ts';
import { matcher } from './message-lock.ts';
import type { NewEvent } from './timeline.ts';
import {
  type LockedMessage,
  ofCalls,
  planTimeline,
  type Recorded,
  type TimelinePlan,
} from './timeline-plan.ts';

/** A callback as received and read. */
export interface ParsedCallback {
  raw: RawCallback;
  /** its inbox dedup key (inbox.ts `dedupKey`) */
  key: string;
  events: DeliveryEvent[];
  problems: string[];
}

/** An `inbox` row, written once with its outcome (JSON, as delivery-write.ts sends it). */
export interface InboxRow {
  id: number;
  key: string;
  content_type: string | null;
  body: string;
  outcome: CallbackOutcome;
  pending: number;
}

/** A `pending_events` row: an event whose message is not known yet. */
export interface PendingRow {
  inbox_id: number;
  customer_message_id: string | null;
  provider_message_id: string | null;
  status: string;
  detail: DeliveryEvent;
  /** ISO time */
  at: string;
}

export type CallbackOutcome = Omit<IngestResult, 'duplicate' | 'inboxId'>;

export interface DeliveryPlan {
  /** in key order (the lock order) */
  inbox: InboxRow[];
  timeline: TimelinePlan;
  pending: PendingRow[];
  /** what the call hooks get: the messages of calls alone, in call-id order */
  hooked: Recorded[];
  /** one per callback, in order */
  results: IngestResult[];
}

const duplicate = (): IngestResult => ({
  duplicate: true,
  events: 0,
  matched: 0,
  pending: 0,
  problems: [],
});

/**
 * A parsed callback event (or status record) as a timeline event, pointing back at its inbox
 * row when it came in one. It happened when it says, unless event-time.ts does not believe
 * that (before `createdAt`, the message's creation, or too far after `receivedAt`): then at
 * `receivedAt`, with the claim in `detail.claimedAt` and the reason in `detail.timeRejected`.
 */
export function toNewEvent(
  e: DeliveryEvent,
  inboxId: number | undefined,
  receivedAt: Date,
  source: NewEvent['source'],
  createdAt: LockedMessage['createdAt'],
): NewEvent {
  // assigned, not spread: see eventFrom in delivery-parse.ts
  const detail: Record<string, unknown> = inboxId === undefined ? {} : { inboxId };
  if (e.rawStatus !== e.status) detail.providerStatus = e.rawStatus;
  if (e.providerMessageIds[0]) detail.messageId = e.providerMessageIds[0];
  if (e.error != null) detail.error = e.error;
  let at = receivedAt;
  if (e.at !== undefined) {
    const rejected = timeRejected(e.at, receivedAt, createdAt);
    if (rejected === undefined) at = e.at;
    else {
      detail.claimedAt = e.at.toISOString();
      detail.timeRejected = rejected;
    }
  }
  const event: NewEvent = { status: e.status, source, at, detail };
  if (e.channel !== undefined) event.channel = e.channel;
  if (e.fallbackIndex !== undefined) event.fallbackIndex = e.fallbackIndex;
  if (e.perChannel) event.perChannel = true;
  return event;
}

/**
 * The inbox id of each callback that is new (`ids[n]` is `keys[n]`'s), undefined for a
 * duplicate: a key the inbox holds, or a body already earlier in the batch.
 */
export function inboxIdsOf(
  callbacks: readonly ParsedCallback[],
  keys: readonly string[],
  existing: ReadonlySet<string>,
  ids: readonly number[],
): (number | undefined)[] {
  const idOf = new Map<string, number>();
  for (const [n, key] of keys.entries()) if (!existing.has(key)) idOf.set(key, ids[n]!);
  return callbacks.map((c) => {
    const id = idOf.get(c.key);
    if (id !== undefined) idOf.delete(c.key);
    return id;
  });
}

/** The events of new callbacks that match no locked message (to be checked for erasure). */
export function unmatchedOf(
  callbacks: readonly ParsedCallback[],
  inboxIds: readonly (number | undefined)[],
  locked: readonly LockedMessage[],
): DeliveryEvent[] {
  const about = matcher(locked);
  return callbacks.flatMap((c, i) =>
    inboxIds[i] === undefined ? [] : c.events.filter((e) => !about(e)),
  );
}

export interface DeliveryFacts {
  /** `inboxIdsOf` */
  inboxIds: readonly (number | undefined)[];
  /** the messages the events are about, locked, in id order */
  locked: readonly LockedMessage[];
  /** whether an event that matched no message is about an erased one */
  isErased: (e: DeliveryEvent) => boolean;
  now: Date;
}

/** The plan for a batch of callbacks. */
export function planDeliveries(
  callbacks: readonly ParsedCallback[],
  facts: DeliveryFacts,
): DeliveryPlan {
  const { inboxIds, locked, isErased, now } = facts;
  const about = matcher(locked);
  const perMessage = new Map<string, NewEvent[]>();
  const pending: PendingRow[] = [];
  const inbox: InboxRow[] = [];
  const results = callbacks.map((c, i): IngestResult => {
    const inboxId = inboxIds[i];
    if (inboxId === undefined) return duplicate();
    let matched = 0;
    let waiting = 0;
    let dropped: DeliveryEvent[] | undefined;
    for (const e of c.events) {
      const m = about(e);
      if (m) {
        matched++;
        const list = perMessage.get(m.id);
        const event = toNewEvent(e, inboxId, now, 'callback', m.createdAt);
        if (list) list.push(event);
        else perMessage.set(m.id, [event]);
      } else if (isErased(e)) {
        dropped ??= [];
        dropped.push(e);
      } else {
        waiting++;
        pending.push({
          inbox_id: inboxId,
          customer_message_id: e.customerMessageId ?? null,
          provider_message_id: e.providerMessageIds[0] ?? null,
          status: e.status,
          detail: e,
          at: (e.at ?? now).toISOString(),
        });
      }
    }
    // assigned, not spread: see eventFrom in delivery-parse.ts
    const outcome: CallbackOutcome = {
      events: c.events.length,
      matched,
      pending: waiting,
      problems: c.problems,
    };
    if (dropped) outcome.dropped = dropped.length;
    const body = storable(c.raw.body);
    const kept = dropped ? keptBody({ body, events: c.events.length, dropped }) : body;
    if (kept !== undefined) {
      inbox.push({
        id: inboxId,
        key: c.key,
        content_type: c.raw.contentType == null ? null : storable(c.raw.contentType),
        body: kept,
        outcome,
        pending: waiting,
      });
    }
    return Object.assign({ duplicate: false, inboxId }, outcome);
  });
  inbox.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  const timeline = planTimeline(locked, perMessage);
  return { inbox, timeline, pending, hooked: ofCalls(timeline.recorded), results };
}

/** An event that waited in `pending_events`, read back. */
export interface PendingEvent {
  id: number;
  inboxId: number;
  /** the event as stored (its claimed time, when it had one, as JSON text) */
  detail: Omit<DeliveryEvent, 'at'> & { at?: string | Date };
  /** when its callback was received */
  receivedAt: Date;
}

export interface AttachPlan {
  timeline: TimelinePlan;
  /** the pending rows whose events go on a timeline now */
  attached: number[];
  /**
   * how many of each inbox row's waiting events were attached, with the time the row was
   * received (its day partition's key; a pending event is written with its body's time)
   */
  perInbox: { id: number; receivedAt: string; n: number }[];
}

/**
 * The plan for pending events whose messages (`locked`) have appeared. Each event's claimed
 * time is judged now that its message is known (`toNewEvent`), against the time its callback
 * was received.
 */
export function planAttach(
  pending: readonly PendingEvent[],
  locked: readonly LockedMessage[],
): AttachPlan {
  const about = matcher(locked);
  const perMessage = new Map<string, NewEvent[]>();
  const attached: number[] = [];
  const perInbox = new Map<number, { id: number; receivedAt: string; n: number }>();
  for (const p of pending) {
    const m = about(p.detail);
    if (!m) continue;
    const claimed = p.detail.at === undefined ? undefined : new Date(p.detail.at);
    const event = toNewEvent(
      { ...p.detail, at: claimed },
      p.inboxId,
      p.receivedAt,
      'callback',
      m.createdAt,
    );
    const list = perMessage.get(m.id);
    if (list) list.push(event);
    else perMessage.set(m.id, [event]);
    attached.push(p.id);
    const row = perInbox.get(p.inboxId);
    if (row) row.n++;
    else perInbox.set(p.inboxId, { id: p.inboxId, receivedAt: p.receivedAt.toISOString(), n: 1 });
  }
  return {
    timeline: planTimeline(locked, perMessage),
    attached,
    perInbox: [...perInbox.values()],
  };
}
