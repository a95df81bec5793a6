/**
 * Callbacks in: every body is committed (raw, in `inbox`) in the same transaction as what it
 * changes, before the handler answers 2xx. An exact duplicate (same kind, same bytes)
 * conflicts on the inbox's dedup key and changes nothing. Events for messages not known yet
 * wait in `pending_events` and are attached when the message appears (`attachPending`).
 */
import { createHash } from 'node:crypto';
import { and, desc, eq, gte, inArray, lt, or, type SQL, sql } from 'drizzle-orm';
import { parsePhoneNumberFromString } from 'libphonenumber-js';
import type { Clock } from '../clock.ts';
import { type Db, rowsOf, type Tx } from '../db/client.ts';
import { inboundMessages, inbox, messages, pendingEvents } from '../db/schema/index.ts';
import { uuidv7 } from '../ids.ts';
import { dropErasedEvents } from '../privacy/erased.ts';
import { isPhoneShape } from '../provider/message.ts';
import {
  type DeliveryEvent,
  parseDeliveryBody,
  parseEventTime,
  type StatusMap,
} from './delivery-parse.ts';
import { decodeCursor, encodeCursor } from './read.ts';
import { needsStatusCheck, queueStatusChecks } from './status-checks.ts';
import { type NewEvent, type RecordResult, recordEvents } from './timeline.ts';

export interface RawCallback {
  contentType: string | undefined;
  body: string;
}

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

/** The inbox's dedup key: the kind and the exact bytes of the body. */
export function dedupKey(kind: string, body: string): string {
  return createHash('sha256').update(kind).update('\n').update(body).digest('hex');
}

// U+0000, and UTF-16 surrogates without their pair
// biome-ignore lint/suspicious/noControlCharactersInRegex: U+0000 is exactly what it looks for
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * Postgres cannot store U+0000 in text or jsonb, nor a lone surrogate (`"\ud800"`, valid JSON)
 * in jsonb: a body or a parsed value carrying one would fail its insert (a 500, and the
 * callback never stored). Each is kept as U+FFFD instead. Only strings, arrays and plain
 * objects are rebuilt (dates and numbers pass through).
 *
 * @example
 * storable({ text: 'a\u0000b' }); // { text: 'a\uFFFDb' }
 */
export function storable<T>(value: T): T {
  if (typeof value === 'string') return value.replace(UNSTORABLE, '\uFFFD') as T;
  // arrays and objects are rebuilt only when something in them changes (nearly never: this
  // runs over every callback), so a clean value comes back as it is
  if (Array.isArray(value)) {
    let out: unknown[] | undefined;
    for (let i = 0; i < value.length; i++) {
      const v = storable(value[i]);
      if (v === value[i]) continue;
      out ??= value.slice();
      out[i] = v;
    }
    return (out ?? value) as T;
  }
  if (
    value !== null &&
    typeof value === 'object' &&
    Object.getPrototypeOf(value) === Object.prototype
  ) {
    const o = value as Record<string, unknown>;
    const keys = Object.keys(o);
    let entries: [string, unknown][] | undefined;
    for (let i = 0; i < keys.length; i++) {
      const k = keys[i]!;
      const sk = storable(k);
      const sv = storable(o[k]);
      if (!entries && (sk !== k || sv !== o[k]))
        entries = keys.slice(0, i).map((j) => [j, o[j]] as [string, unknown]);
      entries?.push([sk, sv]);
    }
    // fromEntries, not assignment: a "__proto__" key stays an own key, as JSON.parse made it
    return (entries ? Object.fromEntries(entries) : value) as T;
  }
  return value;
}

/** Stores the raw body; undefined when the very same body was stored before. */
export async function storeRaw(
  tx: Tx,
  kind: 'delivery' | 'viber' | 'speechcall',
  raw: RawCallback,
  now: Date,
): Promise<number | undefined> {
  const [row] = await tx
    .insert(inbox)
    .values({
      kind,
      dedupKey: dedupKey(kind, raw.body),
      contentType: raw.contentType == null ? null : storable(raw.contentType),
      body: storable(raw.body),
      receivedAt: now,
    })
    .onConflictDoNothing({ target: inbox.dedupKey })
    .returning({ id: inbox.id });
  return row?.id;
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

// ---------------------------------------------------------------------------------------
// Incoming Viber messages

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

function field(o: Obj, ...paths: string[][]): unknown {
  for (const path of paths) {
    let v: unknown = o;
    for (const k of path) v = isObj(v) ? v[k] : undefined;
    if (v !== undefined && v !== null && v !== '') return v;
  }
  return undefined;
}

/**
 * The sender's number in E.164: the provider writes it without the `+` (incoming-messages
 * page: `"phoneNumber": "380936670003"`). A value that is no phone number is kept as sent.
 */
export function senderE164(from: string | number): string {
  const raw = String(from).trim();
  const digits = raw.replace(/[\s().-]/g, '');
  const candidate = digits.startsWith('+')
    ? digits
    : digits.startsWith('00')
      ? `+${digits.slice(2)}`
      : `+${digits}`;
  if (isPhoneShape(candidate)) {
    const phone = parsePhoneNumberFromString(candidate);
    if (phone?.isPossible()) return phone.number;
    return candidate;
  }
  return raw;
}

/**
 * POST /hooks/viber: store the body; an incoming message becomes a row of /v1/inbound. The
 * provider's shape (`{idUuid, alphaName, phoneNumber, text, dt}`) and the condensed one
 * (`{messageId, from, to, text, timestamp}`) are both read; a message whose provider id was
 * stored before (a retry, even with another body) is not stored twice.
 */
export async function ingestViber(deps: IngestDeps, raw: RawCallback): Promise<IngestResult> {
  const now = deps.clock.now();
  return deps.db.transaction(async (tx) => {
    const inboxId = await storeRaw(tx, 'viber', raw, now);
    if (inboxId === undefined)
      return { duplicate: true, events: 0, matched: 0, pending: 0, problems: [] };
    let value: unknown;
    try {
      value = /urlencoded/i.test(raw.contentType ?? '')
        ? Object.fromEntries(new URLSearchParams(raw.body))
        : JSON.parse(raw.body);
    } catch {
      value = undefined;
    }
    value = storable(value);
    const problems: string[] = [];
    const items = Array.isArray(value) ? value : [value];
    const rows = [];
    for (const [i, item] of items.entries()) {
      if (!isObj(item)) {
        problems.push(`message ${i}: not a JSON object or form`);
        continue;
      }
      const from = field(
        item,
        ['phoneNumber'],
        ['from'],
        ['sender', 'phone'],
        ['sender', 'id'],
        ['phone'],
        ['sender'],
      );
      if (typeof from !== 'string' && typeof from !== 'number') {
        problems.push(
          `message ${i}: no sender (looked for phoneNumber, from, sender.phone, sender.id, phone)`,
        );
        continue;
      }
      const text = field(item, ['text'], ['message', 'text'], ['body'], ['message']);
      const to = field(item, ['alphaName'], ['to'], ['receiver']);
      const pmid = field(item, ['idUuid'], ['messageId'], ['message_token'], ['id']);
      rows.push({
        id: uuidv7(now.getTime()),
        inboxId,
        channel: 'viber',
        from: senderE164(from),
        to: typeof to === 'string' ? to : null,
        text: typeof text === 'string' ? text : null,
        providerMessageId: pmid === undefined ? null : String(pmid),
        data: item,
        at: parseEventTime(field(item, ['dt'], ['timestamp'], ['time'], ['at'], ['date'])) ?? now,
        receivedAt: now,
      });
    }
    // a provider id stored before (inbound_channel_pmid_idx) is the same message again
    const stored =
      rows.length === 0
        ? []
        : await tx
            .insert(inboundMessages)
            .values(rows)
            .onConflictDoNothing()
            .returning({ id: inboundMessages.id });
    const outcome = { events: rows.length, matched: stored.length, pending: 0, problems };
    await tx.update(inbox).set({ outcome }).where(eq(inbox.id, inboxId));
    // every message of the body was stored before, under its provider id: a retry
    return { duplicate: rows.length > 0 && stored.length === 0, inboxId, ...outcome };
  });
}

export interface InboundFilter {
  from?: string | undefined;
  since?: Date | undefined;
  limit?: number | undefined;
  cursor?: string | undefined;
}

/** GET /v1/inbound: newest first, keyset pages by id (UUIDv7). */
export async function listInbound(db: Db, filter: InboundFilter) {
  const limit = filter.limit ?? 50;
  const where: SQL[] = [];
  if (filter.from) where.push(eq(inboundMessages.from, filter.from));
  if (filter.since) where.push(gte(inboundMessages.at, filter.since));
  if (filter.cursor) where.push(lt(inboundMessages.id, decodeCursor(filter.cursor)));
  const rows = await db
    .select()
    .from(inboundMessages)
    .where(and(...where))
    .orderBy(desc(inboundMessages.id))
    .limit(limit + 1);
  const page = rows.slice(0, limit);
  return {
    items: page.map((r) => ({
      id: r.id,
      channel: r.channel,
      from: r.from,
      to: r.to,
      text: r.text,
      providerMessageId: r.providerMessageId,
      at: r.at.toISOString(),
      receivedAt: r.receivedAt.toISOString(),
    })),
    nextCursor: rows.length > limit && page.length > 0 ? encodeCursor(page.at(-1)!.id) : null,
  };
}
