/**
 * The inbox: every callback body, kept raw and as received, in the same transaction as what
 * it changes. An exact duplicate (same kind, same bytes) conflicts on the dedup key.
 */
import { hash as digestOf } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { type Db, rowsOf, type Tx } from '../db/client.ts';
import { UNSTORABLE_CHAR } from '../db/errors.ts';

export interface RawCallback {
  contentType: string | undefined;
  body: string;
}

/** The `settings` key of when inbox keys begin with the body's time (migration 0023). */
export const KEYS_TIMED_SINCE = 'inbox_keys.timed_since';

// the first date and time written in the body, as in JSON or a form (`T`, a space, `+`, or
// `%20` between them; `:` or `%3A` between the fields); a zone or fraction after it is not read
const BODY_TIME =
  /(\d{4})-(\d{2})-(\d{2})(?:[Tt ]|\+|%20)(\d{2})(?::|%3[Aa])(\d{2})(?::|%3[Aa])(\d{2})/;

/**
 * The first date and time written in a body, in seconds since 1970 as if it were UTC
 * (whatever zone follows it: it only orders the keys); undefined when there is none, or it
 * is before 1970 or past 2106-02-07T06:28:15 (four bytes of seconds).
 *
 * @example
 * bodySeconds('{"timestamp":"2025-01-23T10:30:00Z"}'); // 1737628200
 */
export function bodySeconds(body: string): number | undefined {
  const m = BODY_TIME.exec(body);
  if (!m) return undefined;
  const year = Number(m[1]);
  if (year < 1970) return undefined;
  const s =
    Date.UTC(year, Number(m[2]) - 1, Number(m[3]), Number(m[4]), Number(m[5]), Number(m[6])) / 1000;
  return s < 2 ** 32 ? s : undefined;
}

/**
 * The inbox's dedup key of a body: 32 bytes, in hex (inbox_keys holds its bytes:
 * `decode(key, 'hex')`), from the kind and the exact bytes of the body.
 *
 * - A body with a date and time at or after `timedSince` (seconds; the database's
 *   `keysTimedSince`): those seconds in four bytes (big-endian), then the first 28 bytes of the
 *   SHA-256 of kind and body. Keys then lie in the index in the order of their callbacks'
 *   times: a new key and the probe for a retry go to the index's recent end, which stays in
 *   memory, instead of a random page of an index larger than memory (docs/scaling.md).
 * - Any other body: the SHA-256 alone, as every key was before migration 0023. A retry is the
 *   same bytes, so it gets the same key either way.
 */
export function dedupKey(
  kind: string,
  body: string,
  /** `keysTimedSince` of the database: keys of bodies timed before it are plain */
  timedSince: number,
): string {
  // one-shot: the same bytes as createHash().update(kind).update('\n').update(body), for less CPU
  const hash = digestOf('sha256', `${kind}\n${body}`, 'buffer');
  const seconds = bodySeconds(body);
  if (seconds === undefined || seconds < timedSince) return hash.toString('hex');
  const key = Buffer.allocUnsafe(32);
  key.writeUInt32BE(seconds, 0);
  hash.copy(key, 4, 0, 28);
  return key.toString('hex');
}

const timedSinceOf = new WeakMap<Db, Promise<number>>();

/**
 * From when (seconds) the database's inbox keys begin with the body's time: `settings`'
 * `inbox_keys.timed_since`, written once by migration 0023 (a day after it ran, so that
 * bodies of callbacks stored before with plain keys, whatever zone their times are written
 * in, and those an instance not yet upgraded stores meanwhile, keep those keys; 1970 when it
 * found no key). Read once per database handle; a failed read is tried again at the next call.
 */
export function keysTimedSince(db: Db): Promise<number> {
  let since = timedSinceOf.get(db);
  if (!since) {
    since = readTimedSince(db);
    timedSinceOf.set(db, since);
    since.catch(() => timedSinceOf.delete(db));
  }
  return since;
}

async function readTimedSince(db: Db): Promise<number> {
  const [row] = rowsOf<{ value: string }>(
    await db.execute(sql`select value from settings where key = ${KEYS_TIMED_SINCE}`),
  );
  // no row: a database before migration 0023, whose keys are all plain
  return row ? Date.parse(row.value) / 1000 : Number.POSITIVE_INFINITY;
}

// U+0000, and UTF-16 surrogates without their pair
const UNSTORABLE = new RegExp(UNSTORABLE_CHAR.source, 'g');

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

/**
 * Stores the raw body; undefined when the very same body was stored before. Its key first, in
 * `inbox_keys` (unique across the inbox's days): a duplicate stops there, and no body is
 * written.
 */
export async function storeRaw(
  tx: Tx,
  kind: 'delivery' | 'viber' | 'speechcall',
  raw: RawCallback,
  now: Date,
  /** `keysTimedSince` of the database */
  timedSince: number,
): Promise<number | undefined> {
  const at = now.toISOString();
  const key = dedupKey(kind, raw.body, timedSince);
  const [row] = rowsOf<{ id: number | string }>(
    await tx.execute(sql`
      with k as (
        insert into inbox_keys (dedup_key, received_at)
        values (decode(${key}, 'hex'), ${at}::timestamptz)
        on conflict (dedup_key) do nothing
        returning 1)
      insert into inbox (kind, dedup_key, content_type, body, received_at)
      select ${kind}, ${key},
        ${raw.contentType == null ? null : storable(raw.contentType)}, ${storable(raw.body)},
        ${at}::timestamptz
      from k
      returning id`),
  );
  return row === undefined ? undefined : Number(row.id);
}
