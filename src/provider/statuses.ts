/**
 * The provider's status vocabulary: the words its status records and callbacks use, mapped
 * onto Switchboard's canonical statuses (docs/provider.md, "Statuses"), and the field names a
 * status may come under. One table, read by the status poller, the delivery callbacks and the
 * client; users extend it with DELIVERY_STATUS_MAP.
 *
 * @example
 * DEFAULT_STATUS_MAP[normaliseWord('permanentError')] // 'failed'
 */

export type StatusMap = Readonly<Record<string, string>>;

/** Vendor vocabulary -> canonical status. Keys are normalised (see `normaliseWord`). */
export const DEFAULT_STATUS_MAP: StatusMap = {
  // the provider's own words (status.md, "Delivery Status Values")
  scheduled: 'accepted',
  processing: 'sent',
  delivered: 'delivered',
  undeliverable: 'failed',
  permanenterror: 'failed',
  // the condensed interface's words, and the usual spellings of other gateways
  queued: 'accepted',
  accepted: 'accepted',
  acceptd: 'accepted',
  submitted: 'accepted',
  pending: 'accepted',
  buffered: 'sent',
  sent: 'sent',
  sending: 'sent',
  enroute: 'sent',
  intransit: 'sent',
  dispatched: 'sent',
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

export function normaliseWord(word: string): string {
  return word.toLowerCase().replace(/[^a-z0-9]/g, '');
}

/** The field names a status comes under, normalised: `deliverystatus` is the provider's. */
export const STATUS_KEYS = [
  'deliverystatus',
  'status',
  'state',
  'messagestatus',
  'dlrstatus',
  'stat',
  'event',
  'statusname',
];

/** The default table extended (or overridden) by the user's entries. */
export function statusMapWith(extra: Record<string, string>): StatusMap {
  const out: Record<string, string> = { ...DEFAULT_STATUS_MAP };
  for (const [k, v] of Object.entries(extra)) out[normaliseWord(k)] = v;
  return out;
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The status word of a status record, lower-cased: under any of `STATUS_KEYS` (names compared
 * without case, dashes or underscores), on the record or one level down (`message`,
 * `messages[0]`, `data`).
 *
 * @example
 * statusWordOf({ messageId: 'abc', deliverystatus: 'Delivered' }) // 'delivered'
 */
export function statusWordOf(record: unknown): string | undefined {
  if (!isRecord(record)) return undefined;
  const byName = new Map<string, unknown>();
  for (const [k, v] of Object.entries(record)) byName.set(normaliseWord(k), v);
  for (const key of STATUS_KEYS) {
    const v = byName.get(key);
    if (typeof v === 'string' && v !== '') return v.toLowerCase();
  }
  for (const key of ['message', 'messages', 'data']) {
    const v = byName.get(key);
    const inner = Array.isArray(v) ? v[0] : v;
    const found = inner !== record ? statusWordOf(inner) : undefined;
    if (found) return found;
  }
  return undefined;
}
