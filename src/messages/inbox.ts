/**
 * The inbox: every callback body, kept raw and as received, in the same transaction as what
 * it changes. An exact duplicate (same kind, same bytes) conflicts on the dedup key.
 */
import { createHash } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { rowsOf, type Tx } from '../db/client.ts';
import { UNSTORABLE_CHAR } from '../db/errors.ts';

export interface RawCallback {
  contentType: string | undefined;
  body: string;
}

/**
 * The inbox's dedup key: the kind and the exact bytes of the body, a SHA-256 in hex (inbox_keys
 * holds its bytes: `decode(key, 'hex')`).
 */
export function dedupKey(kind: string, body: string): string {
  return createHash('sha256').update(kind).update('\n').update(body).digest('hex');
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
): Promise<number | undefined> {
  const at = now.toISOString();
  const key = dedupKey(kind, raw.body);
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
