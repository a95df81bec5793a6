/**
 * Timelines: events are appended (never changed), and the message's current status moves
 * only up a rank (status.ts). What an event is, and the rule for one event; deciding a batch
 * is timeline-plan.ts, writing it timeline-write.ts, both under the messages' row locks, so
 * concurrent callbacks for one message serialize instead of racing.
 */
import { eq, type SQL, sql } from 'drizzle-orm';
import type { Queryable, Tx } from '../db/client.ts';
import { messages } from '../db/schema/index.ts';
import { type MessageStatus, nextStatus } from './status.ts';

export type EventSource = 'api' | 'dispatch' | 'provider' | 'callback' | 'poll' | 'call' | 'expiry';

export interface NewEvent {
  /** canonical status, or the vendor's word kept verbatim */
  status: string;
  source: EventSource;
  /** the event's own time */
  at: Date;
  detail?: Record<string, unknown>;
  /** the channel (message type) this event is about, when fallbacks are in play */
  channel?: string;
  /**
   * which fallback the event is about (0-based); undefined for the primary. A failure that
   * leaves fallbacks to try does not end the message.
   */
  fallbackIndex?: number;
  /** one channel's status from a record's extendedStatuses: on the timeline, status unmoved */
  perChannel?: true;
}

export interface RecordResult {
  messageId: string;
  before: MessageStatus;
  after: MessageStatus;
  /** the call the message belongs to, and its role there */
  callId: string | null;
  role: string | null;
  /** how many channels the message has to try after its first (`fallbackCountSql`) */
  fallbacks: number;
  /** the message's type */
  type: string;
}

/**
 * Something else that must happen in the same transaction when a message's status moves:
 * the call runtime's, so only a message of a call (`callId` set) can need it; the delivery
 * batch calls it for those alone, the poller and the attacher for every message they record.
 */
export type OnRecorded = (tx: Tx, result: RecordResult, events: NewEvent[]) => Promise<void>;

/**
 * The channels of a cascade message after its first (cascade/index.md, "How It Works":
 * Telegram bot, Viber bot, Viber business, RCS, SMS): the provider reports each channel it
 * tries, and one that fails leaves the next to try.
 */
export const CASCADE_CHANNELS_AFTER_FIRST = 4;

/**
 * How many channels a stored message has to try after its first, in SQL over its jsonb payload
 * and type columns: its fallbacks (one as the docs' `fallback` object, more as a `fallbacks`
 * list), or a cascade's chain. The planner reads it with the lock (message-lock.ts).
 */
export function fallbackCountSql(payload: SQL, type: SQL): SQL {
  return sql`(case when ${type} = 'cascade' then ${sql.raw(String(CASCADE_CHANNELS_AFTER_FIRST))}
    when jsonb_typeof(${payload}->'fallbacks') = 'array'
    then jsonb_array_length(${payload}->'fallbacks')
    when jsonb_typeof(${payload}->'fallback') = 'object' then 1 else 0 end)`;
}

const FAILURE = new Set(['failed', 'expired', 'rejected']);

/**
 * What `message_events.detail` keeps of an event: its detail, and its channel and fallback
 * when it has them. Assigned, not spread (see eventFrom in delivery-parse.ts).
 */
export function eventDetail(e: NewEvent): Record<string, unknown> {
  const detail: Record<string, unknown> = Object.assign({}, e.detail);
  if (e.channel !== undefined) detail.channel = e.channel;
  if (e.fallbackIndex !== undefined) detail.fallbackIndex = e.fallbackIndex;
  if (e.perChannel) detail.perChannel = true;
  return detail;
}

/**
 * The status an event moves the message to. An event about one channel (it names a channel
 * or a fallback) that fails while fallbacks are left to try is not the end: the message stays
 * where it is until the last one settles. An event that names no channel is about the
 * message as a whole (the provider's own status record and webhook: its status counts every
 * channel). A per-channel status from a record's extendedStatuses never moves it.
 */
export function statusAfter(
  current: MessageStatus,
  event: Pick<NewEvent, 'status' | 'fallbackIndex' | 'source' | 'channel' | 'perChannel'>,
  fallbackCount: number,
): MessageStatus {
  if (event.perChannel) return current;
  const aboutOneChannel = event.channel !== undefined || event.fallbackIndex !== undefined;
  if (
    FAILURE.has(event.status) &&
    event.source !== 'dispatch' &&
    aboutOneChannel &&
    fallbackCount > 0
  ) {
    const index = event.fallbackIndex ?? -1;
    if (index < fallbackCount - 1) return current;
  }
  return nextStatus(current, event.status);
}

/** Current status of a message (for tests and the call runtime). */
export async function statusOf(db: Queryable, messageId: string): Promise<string | undefined> {
  const [row] = await db
    .select({ status: messages.status })
    .from(messages)
    .where(eq(messages.id, messageId));
  return row?.status;
}
