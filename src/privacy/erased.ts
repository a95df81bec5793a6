/**
 * What stays of an erased person: the hashes of their messages' and calls' ids (table
 * `erased_ids`), so that a callback arriving after the erasure is acknowledged and dropped
 * instead of being kept as "pending" and attached to nothing, or kept raw.
 *
 * @example
 * await recordErased(tx, 'customerMessageId', ['order-42-shipped']);
 * await erasedAmong(tx, 'customerMessageId', ['order-42-shipped', 'other']); // Set { 'order-42-shipped' }
 */
import { createHash } from 'node:crypto';
import { and, asc, eq, inArray, type SQL, sql } from 'drizzle-orm';
import type { Queryable } from '../db/client.ts';
import { erasedIds } from '../db/schema/index.ts';
import type { DeliveryEvent } from '../messages/delivery-parse.ts';
import { redactMentions } from './redact.ts';

export type ErasedKind = 'messageId' | 'customerMessageId' | 'providerMessageId' | 'callId';

/** Hex SHA-256 of an id: the same value as `hashSql` computes in Postgres. */
export function hashId(id: string): string {
  return createHash('sha256').update(id, 'utf8').digest('hex');
}

/** `hashId` in SQL, for set-based inserts. */
export function hashSql(column: SQL): SQL {
  return sql`encode(sha256(convert_to(${column}, 'UTF8')), 'hex')`;
}

const CHUNK = 1000;

/** Remembers `ids` as erased (idempotent). */
export async function recordErased(tx: Queryable, kind: ErasedKind, ids: readonly string[]) {
  const unique = [...new Set(ids)];
  for (let i = 0; i < unique.length; i += CHUNK) {
    await tx
      .insert(erasedIds)
      .values(unique.slice(i, i + CHUNK).map((id) => ({ kind, hash: hashId(id) })))
      .onConflictDoNothing();
  }
}

/** Those of `ids` that were erased. */
export async function erasedAmong(
  db: Queryable,
  kind: ErasedKind,
  ids: readonly string[],
): Promise<Set<string>> {
  const byHash = new Map([...new Set(ids)].map((id) => [hashId(id), id]));
  const found = new Set<string>();
  const hashes = [...byHash.keys()];
  for (let i = 0; i < hashes.length; i += CHUNK) {
    const rows = await db
      .select({ hash: erasedIds.hash })
      .from(erasedIds)
      .where(and(eq(erasedIds.kind, kind), inArray(erasedIds.hash, hashes.slice(i, i + CHUNK))));
    for (const r of rows) found.add(byHash.get(r.hash)!);
  }
  return found;
}

/**
 * When the earliest erasure of `id`, as any of `kinds`, happened; undefined when none did.
 *
 * @example
 * await erasedAt(db, ['customerMessageId', 'providerMessageId'], 'order-42'); // a Date
 */
export async function erasedAt(
  db: Queryable,
  kinds: readonly ErasedKind[],
  id: string,
): Promise<Date | undefined> {
  const [row] = await db
    .select({ at: erasedIds.erasedAt })
    .from(erasedIds)
    .where(and(inArray(erasedIds.kind, [...kinds]), eq(erasedIds.hash, hashId(id))))
    .orderBy(asc(erasedIds.erasedAt))
    .limit(1);
  return row?.at;
}

/**
 * Whether one id was erased (a speech-call webhook whose token names an erased call).
 *
 * @example
 * if (await isErased(tx, 'callId', token.callId)) return { dropped: true };
 */
export async function isErased(db: Queryable, kind: ErasedKind, id: string): Promise<boolean> {
  return (await erasedAmong(db, kind, [id])).size > 0;
}

/**
 * For delivery ingestion, many callbacks at once: a test telling which of `events` are about
 * erased messages (by customerMessageId or the provider's id). Pass the events that matched
 * no message (a message that exists again, with a reused customerMessageId, takes its
 * events as usual); at most two queries, none when there is nothing to look up.
 *
 * @example
 * const isErased = await erasedFilter(tx, unmatched);
 * const kept = unmatched.filter((e) => !isErased(e));
 */
export async function erasedFilter(
  tx: Queryable,
  events: readonly DeliveryEvent[],
): Promise<(e: DeliveryEvent) => boolean> {
  const none = () => false;
  if (events.length === 0) return none;
  const cmids = await erasedAmong(
    tx,
    'customerMessageId',
    events.flatMap((e) => (e.customerMessageId ? [e.customerMessageId] : [])),
  );
  const pmids = await erasedAmong(
    tx,
    'providerMessageId',
    events.flatMap((e) => e.providerMessageIds),
  );
  if (cmids.size + pmids.size === 0) return none;
  return (e) =>
    (e.customerMessageId !== undefined && cmids.has(e.customerMessageId)) ||
    e.providerMessageIds.some((p) => pmids.has(p));
}

/**
 * What stays of a callback's body some of whose events are dropped: nothing (undefined), when
 * they were all it had; otherwise the body, with the dropped messages' ids cut out.
 *
 * @example
 * keptBody({ body, events: 2, dropped: [erasedOne] }); // body with erasedOne's ids as "[erased]"
 */
export function keptBody(callback: {
  body: string;
  events: number;
  dropped: readonly DeliveryEvent[];
}): string | undefined {
  const { dropped } = callback;
  if (dropped.length === 0) return callback.body;
  if (dropped.length === callback.events) return undefined;
  const ids = dropped.flatMap((e) => [
    ...(e.customerMessageId ? [e.customerMessageId] : []),
    ...e.providerMessageIds,
  ]);
  return redactMentions(callback.body, { ids });
}
