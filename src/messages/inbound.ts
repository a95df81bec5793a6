/**
 * Incoming Viber messages: `POST /hooks/viber` stores the body and each message becomes a row
 * of `GET /v1/inbound`. A reply that is an opt-out word (OPT_OUT_WORDS) also puts its sender
 * on the opt-out list, in the same transaction (src/opt-outs/).
 */
import { and, desc, eq, gte, lt, type SQL } from 'drizzle-orm';
import { parsePhoneNumberFromString } from 'libphonenumber-js';
import type { Db } from '../db/client.ts';
import { inboundMessages, inbox } from '../db/schema/index.ts';
import { recordEvents } from '../events/record.ts';
import { subscriptionsOf } from '../events/subscriptions.ts';
import type { EventData } from '../events/types.ts';
import { uuidv7 } from '../ids.ts';
import { addOptOut } from '../opt-outs/store.ts';
import { DEFAULT_OPT_OUT_WORDS, isOptOutReply } from '../opt-outs/words.ts';
import { isOverlongId, isPhoneShape, OVERLONG_ID } from '../provider/message.ts';
import { parseEventTime } from './delivery-parse.ts';
import { FUTURE_MARGIN_MS, timeRejected } from './event-time.ts';
import { keysTimedSince, type RawCallback, storable, storeRaw } from './inbox.ts';
import type { IngestDeps, IngestResult } from './ingest.ts';
import { decodeCursor, encodeCursor } from './read.ts';

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
 * POST /hooks/viber: store the body; an incoming message becomes a row of /v1/inbound (and an
 * `inbound.viber` event, in the same transaction, when an endpoint wants it). The
 * provider's shape (`{idUuid, alphaName, phoneNumber, text, dt}`) and the condensed one
 * (`{messageId, from, to, text, timestamp}`) are both read; a message whose provider id was
 * stored before (a retry, even with another body) is not stored twice. A message that says
 * it was sent more than 5 minutes after it arrived is listed at the time it arrived, and the
 * callback's outcome says so; its own time stays in its data.
 */
export async function ingestViber(
  deps: IngestDeps & { optOutWords?: readonly string[] },
  raw: RawCallback,
): Promise<IngestResult> {
  const optOutWords = deps.optOutWords ?? DEFAULT_OPT_OUT_WORDS;
  const now = deps.clock.now();
  const timedSince = await keysTimedSince(deps.db);
  return deps.db.transaction(async (tx) => {
    const inboxId = await storeRaw(tx, 'viber', raw, now, timedSince);
    if (inboxId === undefined)
      return { duplicate: true, events: 0, matched: 0, pending: 0, problems: [] };
    let value: unknown;
    const problems: string[] = [];
    try {
      value = /urlencoded/i.test(raw.contentType ?? '')
        ? Object.fromEntries(new URLSearchParams(raw.body))
        : JSON.parse(raw.body);
      // recursive: a body nested deeper than the stack is kept raw, as one that is no JSON
      value = storable(value);
    } catch (err) {
      if (err instanceof RangeError) problems.push('body: nested too deeply to read');
      value = undefined;
    }
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
      const sender = senderE164(from);
      const text = field(item, ['text'], ['message', 'text'], ['body'], ['message']);
      const to = field(item, ['alphaName'], ['to'], ['receiver']);
      const pmid = field(item, ['idUuid'], ['messageId'], ['message_token'], ['id']);
      // an id is a string or a number; anything else (an object, any JSON is a valid
      // callback) is no id, not "[object Object]" nor a TypeError
      const providerMessageId =
        typeof pmid === 'string' || typeof pmid === 'number' ? String(pmid) : null;
      const overlong = isOverlongId(sender) ? 'sender' : isOverlongId(providerMessageId) && 'id';
      if (overlong) {
        problems.push(`message ${i}: its ${overlong} is ${OVERLONG_ID}`);
        continue;
      }
      // a time too far ahead is not believed (event-time.ts): the row gets the time received
      let at =
        parseEventTime(field(item, ['dt'], ['timestamp'], ['time'], ['at'], ['date'])) ?? now;
      if (timeRejected(at, now) !== undefined) {
        problems.push(
          `message ${i}: its time ${at.toISOString()} is more than ${FUTURE_MARGIN_MS / 60_000} minutes after it was received; recorded at the time it was received`,
        );
        at = now;
      }
      rows.push({
        id: uuidv7(now.getTime()),
        inboxId,
        channel: 'viber',
        from: sender,
        to: typeof to === 'string' ? to : null,
        text: typeof text === 'string' ? text : null,
        providerMessageId,
        data: item,
        at,
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
    const ids = new Set(stored.map((r) => r.id));
    if (stored.length > 0 && subscriptionsOf(deps.db).wants('inbound.viber')) {
      await recordEvents(tx, rows.filter((r) => ids.has(r.id)).map(viberEvent));
    }
    // "STOP" as the whole reply, from a number (a retry of a stored message is not asked again)
    for (const r of rows) {
      if (!ids.has(r.id) || r.text === null || !isPhoneShape(r.from)) continue;
      if (!isOptOutReply(r.text, optOutWords)) continue;
      const detail = { inboundId: r.id, providerMessageId: r.providerMessageId };
      await addOptOut(tx, r.from, 'inbound', detail, now);
    }
    const outcome = { events: rows.length, matched: stored.length, pending: 0, problems };
    // received_at too: the inbox is in day partitions by it, so this looks in one of them
    await tx
      .update(inbox)
      .set({ outcome })
      .where(and(eq(inbox.id, inboxId), eq(inbox.receivedAt, now)));
    // every message of the body was stored before, under its provider id: a retry
    return { duplicate: rows.length > 0 && stored.length === 0, inboxId, ...outcome };
  });
}

/** A stored message's `inbound.viber` event (src/events/types.ts): the row GET /v1/inbound lists. */
function viberEvent(r: typeof inboundMessages.$inferInsert & { id: string; receivedAt: Date }) {
  const data: EventData<'inbound.viber'> = {
    id: r.id,
    channel: 'viber',
    from: r.from,
    to: r.to ?? null,
    text: r.text ?? null,
    providerMessageId: r.providerMessageId ?? null,
    at: r.at.toISOString(),
    receivedAt: r.receivedAt.toISOString(),
  };
  return { type: 'inbound.viber', subject: `inbound:${r.from}`, data, at: r.receivedAt };
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
