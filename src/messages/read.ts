/**
 * Reading messages back: one message with its timeline and what was sent (`sent.ts`), and
 * filtered pages of messages. A message an erasure removed is not found, and the answer says
 * it was erased, and when.
 *
 * @example
 * const view = await getMessage(db, 'order-42-sms'); // by id, customerMessageId or messageId
 */
import {
  and,
  asc,
  desc,
  eq,
  getTableColumns,
  lt,
  type Placeholder,
  type SQL,
  sql,
} from 'drizzle-orm';
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
  const rows = await db
    .select()
    .from(messages)
    .where(refMatch(ref, isUuid(ref)))
    .limit(3);
  return byPrecedence(rows, ref, (r) => r);
}

/**
 * The rows a ref may name: by id (when it is one), customerMessageId or messageId, the two
 * through their keys' tables (src/db/schema/message-keys.ts), as one array of ids so that
 * messages is read by its key.
 */
function refMatch(ref: string | Placeholder, withId: boolean) {
  return sql`${messages.id} = any(array(
    ${withId ? sql`select ${ref}::uuid union all` : sql``}
    select message_id from message_customer_ids where customer_message_id = ${ref}
    union all
    (select message_id from message_provider_ids where provider_message_id = ${ref}
     order by message_id desc limit 1)))`;
}

type RefKeys = Pick<MessageRow, 'id' | 'customerMessageId' | 'providerMessageId'>;

/**
 * Of the rows a ref matched, the one it names: an exact id wins, then a customerMessageId,
 * then the provider's id.
 */
function byPrecedence<T>(
  rows: readonly T[],
  ref: string,
  keys: (row: T) => RefKeys,
): T | undefined {
  return (
    rows.find((r) => keys(r).id === ref) ??
    rows.find((r) => keys(r).customerMessageId === ref) ??
    rows.find((r) => keys(r).providerMessageId === ref)
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
    .where(refMatch(ref, how.withId))
    .limit(3)
    .prepare(how.withId ? 'get_message_by_id_or_ref' : 'get_message_by_ref');
}

/** The statement that finds the id a ref names, for the read from its day partition. */
function idsByRef(db: Db, withId: boolean) {
  return db
    .select({
      id: messages.id,
      customerMessageId: messages.customerMessageId,
      providerMessageId: messages.providerMessageId,
    })
    .from(messages)
    .where(refMatch(sql.placeholder('ref'), withId))
    .limit(3)
    .prepare(withId ? 'message_id_by_id_or_ref' : 'message_id_by_ref');
}

type PreparedRead = ReturnType<typeof messageWithTimeline>;
type ReadRow = Awaited<ReturnType<PreparedRead['execute']>>[number];
// built once per database (and day partition): the statement's SQL is made once, and Postgres
// plans it once per connection, rather than both on every read
const preparedReads = new WeakMap<
  Db,
  {
    byIdOrRef: PreparedRead;
    byRef: PreparedRead;
    idByIdOrRef: ReturnType<typeof idsByRef>;
    idByRef: ReturnType<typeof idsByRef>;
    inPartition: Map<string, PreparedRead>;
  }
>();

/** Days kept in `inPartition` before it starts again (retention keeps ~31 by default). */
const MAX_PARTITION_READS = 400;

function readsOf(db: Db) {
  let reads = preparedReads.get(db);
  if (!reads) {
    reads = {
      byIdOrRef: messageWithTimeline(db, { withId: true }),
      byRef: messageWithTimeline(db, { withId: false }),
      idByIdOrRef: idsByRef(db, true),
      idByRef: idsByRef(db, false),
      inPartition: new Map(),
    };
    preparedReads.set(db, reads);
  }
  return reads;
}

/**
 * The message whose id is `id` with its timeline, read from the timeline's own day partition;
 * undefined when that partition is not known or has gone meanwhile, or no message has that id
 * (readFromDay then finds the id the ref names, and reads through the parent if it must).
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
 * The message `ref` names with its timeline, by the plain read: one statement by every ref,
 * the timeline through the parent table (every day partition planned and opened).
 */
async function readThroughParent(db: Db, ref: string): Promise<ReadRow | undefined> {
  const reads = readsOf(db);
  const rows = await (isUuid(ref) ? reads.byIdOrRef : reads.byRef).execute({ ref });
  return byPrecedence(rows, ref, (r) => r.message);
}

/**
 * The message `ref` names with its timeline, from its timeline's day partition: by an id at
 * once; by a customerMessageId or messageId, its id first (one indexed lookup): through the
 * parent, Postgres opens every day's partition (38 days: 0.5-0.7 ms a read, against 0.22 ms
 * for both statements; docs/performance.md). By the plain read when the day is not listed or
 * has gone.
 */
async function readFromDay(db: Db, ref: string): Promise<ReadRow | undefined> {
  const reads = readsOf(db);
  if (isUuid(ref)) {
    const row = await byIdInPartition(db, reads, ref);
    if (row) return row;
  }
  const ids = await (isUuid(ref) ? reads.idByIdOrRef : reads.idByRef).execute({ ref });
  const id = byPrecedence(ids, ref, (r) => r)?.id;
  if (id === undefined) return undefined;
  return (
    (id !== ref ? await byIdInPartition(db, reads, id) : undefined) ??
    (await readThroughParent(db, id))
  );
}

/**
 * One message with its timeline; `AppError('NOT_FOUND')` when no ref matches. Its row and
 * timeline come from one statement, so one snapshot: the status always agrees with the
 * timeline shown beside it. `throughParent`: the plain read, which the tests hold the day
 * partition's read to.
 */
export async function getMessage(
  db: Db,
  ref: string,
  opts: { throughParent?: boolean } = {},
): Promise<MessageView> {
  const found = await (opts.throughParent ? readThroughParent : readFromDay)(db, ref);
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
 * By phone number or type, the page walks `message_recipients` (its key and its type index
 * end in the message id, so the cursor and a time span bound that walk) and reads each
 * message by id.
 */
export async function listMessages(db: Queryable, filter: MessageFilter): Promise<MessageList> {
  const limit = filter.limit ?? 50;
  const byKey = Boolean(filter.to || filter.type);
  const id = byKey ? messageRecipients.messageId : messages.id;
  const where: SQL[] = [];
  if (filter.to) where.push(eq(messageRecipients.to, filter.to));
  if (filter.status) where.push(eq(messages.status, filter.status));
  if (filter.type) where.push(eq(messageRecipients.type, filter.type));
  if (filter.callId) where.push(eq(messages.callId, filter.callId));
  where.push(...createdWithin({ id, createdAt: messages.createdAt }, filter.since, filter.until));
  if (filter.cursor) where.push(lt(id, decodeCursor(filter.cursor)));
  const all = db.select(getTableColumns(messages)).from(messages).$dynamic();
  const rows = await (byKey
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
