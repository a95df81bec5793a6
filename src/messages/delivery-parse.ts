/**
 * Reading status callbacks and status records. The provider's own shape (status.md: `{messageId,
 * deliverystatus, timestamp, cost}`, a record with `extendedStatuses` per channel) and the
 * condensed interface's (`customerMessageId`, `status`, `fallbackIndex`, ...) are both read, and
 * real gateways vary by account and version, so the reading is tolerant by design:
 * - JSON or form bodies; one event, an array of them, or an array under a usual key;
 * - ids and statuses under their usual spellings (`customerMessageId`, `customer_message_id`,
 *   `cmid`, `messageId`, `msg_id`, `status`, `state`, `dlr_status`, ...), compared without
 *   case, dashes or underscores, also one level down (`{"message": {...}}`);
 * - vendor words mapped onto the canonical statuses by one table (src/provider/statuses.ts)
 *   users extend in config; a word not in the table is kept verbatim;
 * - `extendedStatuses` (`{viber: "delivered", sms: "not_used"}`) become per-channel events that
 *   go on the timeline and never move the message's own status, which is the record's.
 *
 * @example
 * parseDeliveryBody('application/x-www-form-urlencoded', 'cmid=o-1&stat=DELIVRD', DEFAULT_STATUS_MAP)
 * // { events: [{ customerMessageId: 'o-1', status: 'delivered', rawStatus: 'DELIVRD', ... }], problems: [] }
 */

import { isStorableInstant } from '../instants.ts';
import { isOverlongId, OVERLONG_ID } from '../provider/message.ts';
import {
  DEFAULT_STATUS_MAP,
  normaliseWord,
  STATUS_KEYS,
  type StatusMap,
} from '../provider/statuses.ts';

export type { StatusMap } from '../provider/statuses.ts';
export { DEFAULT_STATUS_MAP, normaliseWord, statusMapWith } from '../provider/statuses.ts';

export interface DeliveryEvent {
  customerMessageId?: string;
  /** the provider's ids this event may be known by: its own messageId, then a parent's */
  providerMessageIds: string[];
  /** canonical when the table knows the word, otherwise the word as sent */
  status: string;
  rawStatus: string;
  at?: Date;
  channel?: string;
  fallbackIndex?: number;
  /**
   * the status of one channel of a message with fallbacks, from a record's
   * `extendedStatuses`: kept on the timeline, never moving the message's own status
   */
  perChannel?: true;
  error?: unknown;
}

export interface ParsedDelivery {
  events: DeliveryEvent[];
  /** why parts of the body could not be read (the body is kept regardless) */
  problems: string[];
}

const CMID_KEYS = [
  'customermessageid',
  'cmid',
  'clientmessageid',
  'clientmsgid',
  'clientref',
  'customerref',
  'externalid',
  'externalmessageid',
  'reference',
];
const PMID_KEYS = ['messageid', 'msgid', 'mid', 'providermessageid', 'smsid', 'id'];
const PARENT_KEYS = ['parentmessageid', 'originalmessageid'];
const TIME_KEYS = [
  'timestamp',
  'eventtime',
  'statustime',
  'at',
  'time',
  'date',
  'donedate',
  'deliveredat',
  'updatedat',
  'ts',
];
const LIST_KEYS = ['events', 'messages', 'results', 'data', 'items', 'statuses', 'callbacks'];

type Obj = Record<string, unknown>;

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * An object's fields by normalised name (a later spelling of the same name wins), and its
 * object-valued fields, read once per object: an event is looked up for nine fields.
 */
interface Fields {
  byName: Map<string, unknown>;
  objects: Obj[];
  nested?: Fields[];
}

function fieldsOf(o: Obj): Fields {
  const byName = new Map<string, unknown>();
  const objects: Obj[] = [];
  for (const [k, v] of Object.entries(o)) {
    byName.set(normaliseWord(k), v);
    if (isObj(v)) objects.push(v);
  }
  return { byName, objects };
}

// how far down nested objects a field is looked for: deeper than any vendor's envelope, and a
// body nested 100 000 deep (any JSON is a valid callback) ends here rather than the stack
const PICK_DEPTH = 8;

/** Looks `keys` up (normalised names), then in nested objects, depth first, PICK_DEPTH down. */
function pick(f: Fields, keys: string[], depth = 0): unknown {
  for (const k of keys) {
    const v = f.byName.get(k);
    if (v !== undefined && v !== null && v !== '') return v;
  }
  if (f.objects.length === 0 || depth >= PICK_DEPTH) return undefined;
  f.nested ??= f.objects.map(fieldsOf);
  for (const n of f.nested) {
    const v = pick(n, keys, depth + 1);
    if (v !== undefined) return v;
  }
  return undefined;
}

function asId(v: unknown): string | undefined {
  if (typeof v === 'string' && v.trim() !== '') return v.trim();
  if (typeof v === 'number' && Number.isFinite(v)) return String(v);
  return undefined;
}

// a delivery event happens between the epoch and the end of the year 9999 (beyond, Postgres
// cannot read the time back, src/instants.ts); a time outside is ignored like an unreadable one
const plausible = (d: Date) => {
  const t = d.getTime();
  return t >= 0 && isStorableInstant(t) ? d : undefined;
};

/** ISO 8601, or epoch seconds / milliseconds; anything else is ignored. */
export function parseEventTime(v: unknown): Date | undefined {
  if (typeof v === 'number' || (typeof v === 'string' && /^\d{9,13}(\.\d+)?$/.test(v.trim()))) {
    const n = Number(v);
    const ms = n < 1e12 ? n * 1000 : n;
    return plausible(new Date(ms));
  }
  if (typeof v === 'string' && /^\d{4}-\d{2}-\d{2}/.test(v.trim())) {
    return plausible(new Date(v.trim()));
  }
  return undefined;
}

function eventFrom(f: Fields, map: StatusMap, messageId?: string): DeliveryEvent | string {
  const rawStatus = pick(f, STATUS_KEYS);
  if (typeof rawStatus !== 'string' && typeof rawStatus !== 'number') {
    return 'no status field (looked for deliverystatus, status, state, dlr_status, stat, event)';
  }
  const customerMessageId = asId(pick(f, CMID_KEYS));
  const providerMessageIds = [
    asId(pick(f, PMID_KEYS)) ?? messageId,
    asId(pick(f, PARENT_KEYS)),
  ].filter((v): v is string => v !== undefined);
  if (!customerMessageId && providerMessageIds.length === 0) {
    return 'no message id (looked for customerMessageId, cmid, messageId, msg_id, mid, id)';
  }
  if (isOverlongId(customerMessageId) || providerMessageIds.some(isOverlongId)) {
    return `a message id ${OVERLONG_ID}`;
  }
  const word = String(rawStatus);
  const at = parseEventTime(pick(f, TIME_KEYS));
  const channel = pick(f, ['channel', 'type', 'messagetype']);
  const fallbackIndex = pick(f, ['fallbackindex']);
  const error = pick(f, ['error', 'errorcode', 'err', 'reason']);
  // the optional fields assigned one by one, not spread in: properties that follow a spread
  // make V8 build new hidden classes for every object, which it keeps in the old generation
  // (at 2000 callbacks/s, a full collection a second, measured)
  const event: DeliveryEvent = {
    providerMessageIds,
    status: map[normaliseWord(word)] ?? word,
    rawStatus: word,
  };
  if (customerMessageId) event.customerMessageId = customerMessageId;
  if (at) event.at = at;
  if (typeof channel === 'string') event.channel = channel;
  if (typeof fallbackIndex === 'number') event.fallbackIndex = fallbackIndex;
  else if (typeof fallbackIndex === 'string' && /^\d+$/.test(fallbackIndex))
    event.fallbackIndex = Number(fallbackIndex);
  if (error !== undefined) event.error = error;
  return event;
}

function bodyToValue(contentType: string | undefined, body: string): unknown {
  const type = (contentType ?? '').split(';')[0]!.trim().toLowerCase();
  const trimmed = body.trim();
  if (type === 'application/x-www-form-urlencoded' || (!type && /^[\w.[\]-]+=/.test(trimmed))) {
    return Object.fromEntries(new URLSearchParams(trimmed));
  }
  return JSON.parse(trimmed);
}

/**
 * A message's channels and their words, from a record's `extendedStatuses` (status.md,
 * "Extended Response (with Fallback)"), or else from its `fallbacks: [{type, status}]` list
 * (entries naming a messageId of their own are fallback messages, read as events elsewhere).
 */
const NO_WORDS: ReadonlyArray<[string, string]> = Object.freeze([]);

function channelWords(f: Fields): ReadonlyArray<[string, string]> {
  const extended = f.byName.get('extendedstatuses');
  if (isObj(extended)) {
    return Object.entries(extended).flatMap(([channel, word]) =>
      typeof word === 'string' && word !== '' ? [[channel, word] as [string, string]] : [],
    );
  }
  const list = f.byName.get('fallbacks');
  // nearly every callback has neither: no array is made for it
  if (!Array.isArray(list)) return NO_WORDS;
  return list.flatMap((item) => {
    if (!isObj(item) || item.messageId !== undefined) return [];
    const { type, status } = item;
    return typeof type === 'string' && typeof status === 'string' && status !== ''
      ? [[type, status] as [string, string]]
      : [];
  });
}

/** Adds a record's per-channel events after its own (`perChannel`, see DeliveryEvent). */
function pushPerChannel(
  events: DeliveryEvent[],
  f: Fields,
  event: DeliveryEvent,
  map: StatusMap,
): void {
  const words = channelWords(f);
  for (let i = 0; i < words.length; i++) {
    const [channel, word] = words[i]!;
    const e: DeliveryEvent = {
      providerMessageIds: event.providerMessageIds,
      status: map[normaliseWord(word)] ?? word,
      rawStatus: word,
      channel,
      perChannel: true,
    };
    if (event.customerMessageId) e.customerMessageId = event.customerMessageId;
    if (event.at) e.at = event.at;
    events.push(e);
  }
}

function eventsOf(value: unknown, map: StatusMap, messageId?: string): ParsedDelivery {
  let items: unknown[];
  if (Array.isArray(value)) items = value;
  else if (isObj(value)) {
    const listKey = Object.keys(value).find(
      (k) => LIST_KEYS.includes(normaliseWord(k)) && Array.isArray(value[k]),
    );
    items = listKey ? (value[listKey] as unknown[]) : [value];
  } else items = [value];

  const events: DeliveryEvent[] = [];
  const problems: string[] = [];
  items.forEach((item, i) => {
    if (!isObj(item)) {
      problems.push(`event ${i}: not an object`);
      return;
    }
    const f = fieldsOf(item);
    const e = eventFrom(f, map, messageId);
    if (typeof e === 'string') {
      problems.push(`event ${i}: ${e}`);
      return;
    }
    events.push(e);
    pushPerChannel(events, f, e, map);
  });
  return { events, problems };
}

/** Parses one callback body into events; never throws (problems are reported instead). */
export function parseDeliveryBody(
  contentType: string | undefined,
  body: string,
  map: StatusMap = DEFAULT_STATUS_MAP,
): ParsedDelivery {
  let value: unknown;
  try {
    value = bodyToValue(contentType, body);
  } catch {
    return { events: [], problems: ['the body is neither JSON nor a form'] };
  }
  return eventsOf(value, map);
}

/**
 * Reads a status record (GET /bat/message/{messageId}, status.md) into events, as a callback
 * would be read: the record's own status, and one per channel of its `extendedStatuses`. A
 * record that names no id is about `messageId`, the one asked about.
 */
export function parseStatusRecord(
  record: unknown,
  messageId: string,
  map: StatusMap = DEFAULT_STATUS_MAP,
): ParsedDelivery {
  return eventsOf(record, map, messageId);
}
