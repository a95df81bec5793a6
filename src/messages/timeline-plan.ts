/**
 * Deciding what a batch of events does to timelines, with nothing written: given the locked
 * messages and the new events for each, the `message_events` rows, each message's status move,
 * the status checks to queue, and what the call hooks get. Pure (xstate's `transition` is the
 * model: decide, return the effects as data); timeline-write.ts renders a plan to SQL.
 *
 * @example
 * const plan = planTimeline(locked, new Map([[id, [{ status: 'delivered', source: 'callback', at }]]]));
 * plan.moves[0]; // { id, before: 'sent', after: 'delivered' }
 */
import type { MessageStatus } from './status.ts';
import { needsStatusCheck } from './status-checks.ts';
import { eventDetail, type NewEvent, type RecordResult, statusAfter } from './timeline.ts';

/** A message as locked for its timeline (message-lock.ts reads it). */
export interface LockedMessage {
  id: string;
  cmid: string;
  pmid: string | null;
  status: MessageStatus;
  /** channels left to try after the first (`fallbackCountSql`) */
  fallbacks: number;
  type: string;
  callId: string | null;
  role: string | null;
  /** when the message was stored (ISO 8601 as the lock's JSON has it): event-time.ts judges by it */
  createdAt: string | Date;
}

/** One `message_events` row, as the writer sends it (JSON). */
export interface EventRow {
  messageId: string;
  status: string;
  source: NewEvent['source'];
  /** ISO time */
  at: string;
  detail: Record<string, unknown>;
}

/** Where a message's status goes; `after` may equal `before` (events that move nothing). */
export interface StatusMove {
  id: string;
  before: MessageStatus;
  after: MessageStatus;
  /** the channel of the last delivered or read event naming one, in event time */
  deliveredVia?: string;
}

/** What the call hooks (OnRecorded) get for one message. */
export interface Recorded {
  result: RecordResult;
  events: NewEvent[];
}

export interface TimelinePlan {
  /** every new event, grouped by message in id order, each message's in arrival order */
  events: EventRow[];
  /** one per message with new events, in message-id order */
  moves: StatusMove[];
  /** messages whose move leaves channels the timeline does not know (status-checks.ts) */
  checks: string[];
  /**
   * one per message with new events: messages of calls first, in call-id order (the order
   * in which speech webhooks lock calls, so the two never wait for each other in a circle),
   * then the others in message-id order
   */
  recorded: Recorded[];
}

/** The plan for `incoming` events (by message id) on `locked` messages (in id order). */
export function planTimeline(
  locked: readonly LockedMessage[],
  incoming: ReadonlyMap<string, NewEvent[]>,
): TimelinePlan {
  const plan: TimelinePlan = { events: [], moves: [], checks: [], recorded: [] };
  for (const m of locked) {
    const list = incoming.get(m.id);
    if (!list || list.length === 0) continue;
    // in event-time order, so the result does not depend on arrival order
    const sorted = list.length === 1 ? list : [...list].sort((a, b) => +a.at - +b.at);
    let after = m.status;
    let deliveredVia: string | undefined;
    for (const e of sorted) {
      after = statusAfter(after, e, m.fallbacks);
      if ((e.status === 'delivered' || e.status === 'read') && e.channel) deliveredVia = e.channel;
    }
    for (const e of list) {
      plan.events.push({
        messageId: m.id,
        status: e.status,
        source: e.source,
        at: e.at.toISOString(),
        detail: eventDetail(e),
      });
    }
    const move: StatusMove = { id: m.id, before: m.status, after };
    if (deliveredVia !== undefined) move.deliveredVia = deliveredVia;
    plan.moves.push(move);
    if (after !== m.status && needsStatusCheck(after, m.fallbacks, list, m.type)) {
      plan.checks.push(m.id);
    }
    plan.recorded.push({
      result: {
        messageId: m.id,
        before: m.status,
        after,
        callId: m.callId,
        role: m.role,
        fallbacks: m.fallbacks,
        type: m.type,
      },
      events: list,
    });
  }
  plan.recorded.sort(byCall);
  return plan;
}

/** Call-id order (plain code units: for lowercase UUIDs, Postgres's uuid order), calls first. */
function byCall(a: Recorded, b: Recorded): number {
  const x = a.result.callId;
  const y = b.result.callId;
  if (x === y) return 0;
  if (x === null) return 1;
  if (y === null) return -1;
  return x < y ? -1 : 1;
}

/** The recorded messages that belong to a call: the only ones the call runtime's hook needs. */
export function ofCalls(recorded: readonly Recorded[]): Recorded[] {
  return recorded.filter((r) => r.result.callId !== null);
}
