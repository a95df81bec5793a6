/**
 * Reading messages back: one message with its timeline and what was sent (`sent.ts`), and
 * filtered pages of messages. A message an erasure removed is not found, and the answer says
 * it was erased, and when.
 *
 * @example
 * const view = await getMessage(db, 'order-42-sms'); // by id, customerMessageId or messageId
 */
import { and, asc, desc, eq, getTableColumns, lt, or, type SQL, sql } from 'drizzle-orm';
import type { Db, Queryable } from '../db/client.ts';
import { createdWithin } from '../db/created-within.ts';
import { isUndefinedTable } from '../db/errors.ts';
import { forgetPartitions, partitionOf } from '../db/partition-map.ts';
import { type MessageRow, messageEvents, messageRecipients, messages } from '../db/schema/index.ts';
import { AppError } from '../errors.ts';
import { isUuid } from '../ids.ts';
import { type ErasedKind, erasedAt } from '../privacy/erased.ts';
import { removedOf, sentOf } from './sent.ts';
import type { MessageStatus } from './status.ts';
import type {
  FlashcallAnswer,
  MessageList,
  MessageSummary,
  MessageView,
  TimelineEvent,
} from './views.ts';

export function toSummary(row: MessageRow): MessageSummary {
  return {
    id: row.id,
    customerMessageId: row.customerMessageId,
    providerMessageId: row.providerMessageId,
    messagelistId: row.messagelistId,
    type: row.type,
    from: row.from,
    to: row.to,
    status: row.status as MessageStatus,
    parts: row.parts,
    callId: row.callId,
    deliveredVia: row.deliveredVia,
    error: row.error ?? null,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}

/** Finds a message by Switchboard id, customerMessageId or the provider's messageId. */
export async function findMessage(db: Queryable, ref: string): Promise<MessageRow | undefined> {
  const match = or(
    ...(isUuid(ref) ? [eq(messages.id, ref)] : []),
    eq(messages.customerMessageId, ref),
    eq(messages.providerMessageId, ref),
  );
  const rows = await db.select().from(messages).where(match).limit(3);
  // an exact id wins, then a customerMessageId, then the provider's id
  return (
    rows.find((r) => r.id === ref) ??
    rows.find((r) => r.customerMessageId === ref) ??
    rows.find((r) => r.providerMessageId === ref)
  );
}

export async function timelineOf(db: Queryable, messageId: string): Promise<TimelineEvent[]> {
  const events = await db
    .select()
    .from(messageEvents)
    .where(eq(messageEvents.messageId, messageId))
    .orderBy(asc(messageEvents.at), asc(messageEvents.id));
  return events.map((e) =>
    timelineEvent({
      status: e.status,
      at: e.at,
      receivedAt: e.receivedAt,
      source: e.source as TimelineEvent['source'],
      detail: e.detail,
    }),
  );
}

/**
 * A stored event as the API shows it; an event whose claimed time was not believed
 * (event-time.ts) shows that time and why beside `at`, the time it was received.
 */
function timelineEvent(e: {
  status: string;
  at: string | Date;
  receivedAt: string | Date;
  source: TimelineEvent['source'];
  detail: unknown;
}): TimelineEvent {
  const event: TimelineEvent = {
    status: e.status,
    at: new Date(e.at).toISOString(),
    receivedAt: new Date(e.receivedAt).toISOString(),
    source: e.source,
  };
  if (e.detail == null) return event;
  event.detail = e.detail;
  const d = e.detail as Record<string, unknown>;
  if (
    typeof d.claimedAt === 'string' &&
    (d.timeRejected === 'before-created' || d.timeRejected === 'future')
  ) {
    event.claimedAt = d.claimedAt;
    event.timeRejected = d.timeRejected;
  }
  return event;
}

interface TimelineJson {
  status: string;
  at: string;
  receivedAt: string;
  source: TimelineEvent['source'];
  detail: unknown;
}

/**
 * The statement of a read: the message by `ref` with its timeline. `partition`: by id alone,
 * the timeline read from that day partition of message_events (db/partition-map.ts);
 * otherwise by id (`withId`), customerMessageId or messageId, the timeline through the parent.
 */
function messageWithTimeline(db: Db, how: { withId: boolean } | { partition: string }) {
  const ref = sql.placeholder('ref');
  const events = 'partition' in how ? sql.identifier(how.partition) : messageEvents;
  const query = db
    .select({
      message: messages,
      timeline: sql<TimelineJson[] | string>`(
        select coalesce(json_agg(json_build_object(
          'status', e.status, 'at', e.at, 'receivedAt', e.received_at,
          'source', e.source, 'detail', e.detail) order by e.at, e.id), '[]'::json)
        from ${events} e where e.message_id = "messages"."id")`,
    })
    .from(messages);
  if ('partition' in how) {
    return query.where(eq(messages.id, ref)).limit(1).prepare(`get_message_in_${how.partition}`);
  }
  return query
    .where(
      or(
        ...(how.withId ? [eq(messages.id, ref)] : []),
        eq(messages.customerMessageId, ref),
        eq(messages.providerMessageId, ref),
      ),
    )
    .limit(3)
    .prepare(how.withId ? 'get_message_by_id_or_ref' : 'get_message_by_ref');
}

type PreparedRead = ReturnType<typeof messageWithTimeline>;
type ReadRow = Awaited<ReturnType<PreparedRead['execute']>>[number];
// built once per database (and day partition): the statement's SQL is made once, and Postgres
// plans it once per connection, rather than both on every read
const preparedReads = new WeakMap<
  Db,
  { byIdOrRef: PreparedRead; byRef: PreparedRead; inPartition: Map<string, PreparedRead> }
>();

/** Days kept in `inPartition` before it starts again (retention keeps ~31 by default). */
const MAX_PARTITION_READS = 400;

function readsOf(db: Db) {
  let reads = preparedReads.get(db);
  if (!reads) {
    reads = {
      byIdOrRef: messageWithTimeline(db, { withId: true }),
      byRef: messageWithTimeline(db, { withId: false }),
      inPartition: new Map(),
    };
    preparedReads.set(db, reads);
  }
  return reads;
}

/**
 * The message whose id is `id` with its timeline, read from the timeline's own day partition;
 * undefined when that partition is not known or has gone meanwhile, or no message has that id
 * (the caller then reads by every ref, through the parent).
 */
async function byIdInPartition(
  db: Db,
  reads: ReturnType<typeof readsOf>,
  id: string,
): Promise<ReadRow | undefined> {
  const partition = await partitionOf(db, 'message_events', id);
  if (!partition) return undefined;
  let read = reads.inPartition.get(partition);
  if (!read) {
    if (reads.inPartition.size >= MAX_PARTITION_READS) reads.inPartition.clear();
    read = messageWithTimeline(db, { partition });
    reads.inPartition.set(partition, read);
  }
  try {
    const [row] = await read.execute({ ref: id });
    return row;
  } catch (err) {
    if (!isUndefinedTable(err)) throw err;
    // dropped since it was listed (retention): list again, and read through the parent
    forgetPartitions(db);
    reads.inPartition.delete(partition);
    return undefined;
  }
}

/**
 * One message with its timeline; `AppError('NOT_FOUND')` when no ref matches. One statement,
 * so one snapshot: the status always agrees with the timeline shown beside it, and the read
 * costs one round trip (not a transaction of four). By an id, the timeline comes from its day
 * partition (byIdInPartition); when that finds nothing, by every ref as for any other.
 */
export async function getMessage(db: Db, ref: string): Promise<MessageView> {
  const reads = readsOf(db);
  let found = isUuid(ref) ? await byIdInPartition(db, reads, ref) : undefined;
  if (!found) {
    const rows = await (isUuid(ref) ? reads.byIdOrRef : reads.byRef).execute({ ref });
    // an exact id wins, then a customerMessageId, then the provider's id
    found =
      rows.find((r) => r.message.id === ref) ??
      rows.find((r) => r.message.customerMessageId === ref) ??
      rows.find((r) => r.message.providerMessageId === ref);
  }
  if (!found) {
    // only on a miss, so the fast path never pays for it
    const erased = await erasedAt(db, isUuid(ref) ? ['messageId', ...REFS] : REFS, ref);
    if (erased) {
      // 404 still: the message is gone; the detail says why
      throw new AppError(
        'NOT_FOUND',
        `message "${ref}" was erased at ${erased.toISOString()} (DELETE /v1/subjects/{phone})`,
        [{ path: 'ref', code: 'ERASED', message: `erased at ${erased.toISOString()}` }],
      );
    }
    throw new AppError('NOT_FOUND', `no message with id, customerMessageId or messageId "${ref}"`);
  }
  const events: TimelineJson[] =
    typeof found.timeline === 'string' ? JSON.parse(found.timeline) : found.timeline;
  const view: MessageView = {
    ...toSummary(found.message),
    timeline: events.map(timelineEvent),
    sent: sentOf(found.message.payload, found.message.type),
  };
  const removed = removedOf(found.message.payload, found.message.contentRemovedAt);
  if (removed) view.contentRemoved = removed;
  if (found.message.type === 'flashcall') {
    const answer = flashcallAnswer(events);
    if (answer) view.flashcall = answer;
  }
  return view;
}

/** What a message may be looked up by, besides its own id. */
const REFS: ErasedKind[] = ['customerMessageId', 'providerMessageId'];

/** A flash call's answer, as the dispatcher kept it on the `accepted` event of its timeline. */
function flashcallAnswer(events: TimelineJson[]): FlashcallAnswer | undefined {
  for (const e of events) {
    if (e.source !== 'dispatch' || typeof e.detail !== 'object' || e.detail === null) continue;
    const d = e.detail as Record<string, unknown>;
    const answer: FlashcallAnswer = {};
    if (typeof d.callerId === 'string') answer.callerId = d.callerId;
    if (typeof d.pattern === 'string') answer.pattern = d.pattern;
    if (typeof d.ttl === 'number') answer.ttl = d.ttl;
    if (typeof d.text === 'string') answer.code = d.text;
    if (Object.keys(answer).length > 0) return answer;
  }
  return undefined;
}

export interface MessageFilter {
  to?: string | undefined;
  status?: MessageStatus | undefined;
  type?: string | undefined;
  callId?: string | undefined;
  since?: Date | undefined;
  until?: Date | undefined;
  limit?: number | undefined;
  cursor?: string | undefined;
}

export function encodeCursor(id: string): string {
  return Buffer.from(id, 'utf8').toString('base64url');
}

export function decodeCursor(cursor: string): string {
  const id = Buffer.from(cursor, 'base64url').toString('utf8');
  if (!isUuid(id)) {
    throw new AppError('VALIDATION_ERROR', 'cursor is not one this API returned', [
      { path: 'cursor', code: 'INVALID_CURSOR', message: 'pass nextCursor from a previous page' },
    ]);
  }
  return id;
}

/**
 * Newest first. Ids are UUIDv7, so "id below the cursor" is a keyset page: a message
 * inserted while a client pages gets a newer id and cannot shift or repeat later pages.
 * By phone number, the page walks `message_recipients` (its key ends in the message id, so
 * the cursor and a time span bound that walk) and reads each message by id.
 */
export async function listMessages(db: Queryable, filter: MessageFilter): Promise<MessageList> {
  const limit = filter.limit ?? 50;
  const id = filter.to ? messageRecipients.messageId : messages.id;
  const where: SQL[] = [];
  if (filter.to) where.push(eq(messageRecipients.to, filter.to));
  if (filter.status) where.push(eq(messages.status, filter.status));
  if (filter.type) where.push(eq(messages.type, filter.type));
  if (filter.callId) where.push(eq(messages.callId, filter.callId));
  where.push(...createdWithin({ id, createdAt: messages.createdAt }, filter.since, filter.until));
  if (filter.cursor) where.push(lt(id, decodeCursor(filter.cursor)));
  const all = db.select(getTableColumns(messages)).from(messages).$dynamic();
  const rows = await (filter.to
    ? all.innerJoin(messageRecipients, eq(messageRecipients.messageId, messages.id))
    : all
  )
    .where(and(...where))
    .orderBy(desc(id))
    .limit(limit + 1);
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  return {
    items: page.map(toSummary),
    nextCursor: rows.length > limit && last ? encodeCursor(last.id) : null,
  };
}
