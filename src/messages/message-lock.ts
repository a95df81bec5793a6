/**
 * Which message an event is about, and the one reader that locks messages for the timeline.
 *
 * The matching rule, used by delivery callbacks and by the attachment of pending events: an
 * event's customerMessageId names its message; failing that, the first of its provider ids
 * (its own messageId, then a parent's) that names one, and of messages sharing a provider id
 * the newest. `lockedSql` finds the candidates in SQL, `matcher` picks one per event.
 *
 * Statements: one prepared select ... for update per call of `lockMessages`; `lockedSql` is
 * also a part of the delivery batch's first statement (delivery-write.ts).
 * Locks are taken in message-id order, the first of the one lock order (messages by id, then
 * inbox keys, then calls by id), so concurrent writers wait for each other but never deadlock.
 */
import { type SQL, sql } from 'drizzle-orm';
import { executePrepared, type Tx } from '../db/client.ts';
import { fallbackCountSql } from './timeline.ts';
import type { LockedMessage } from './timeline-plan.ts';

/** What an event is known by: the fields the matching rule reads. */
export interface EventKeys {
  customerMessageId?: string | undefined;
  providerMessageIds: readonly string[];
}

/** Messages to lock: by id, or the ones events are about. */
export type LockWhat = { ids: readonly string[] } | { events: readonly EventKeys[] };

/** A locked message's columns, as `LockedMessage` names them (expiry's claim selects them too). */
export const LOCKED_COLUMNS = sql`id, customer_message_id as cmid, provider_message_id as pmid,
  status, ${fallbackCountSql(sql.raw('payload'), sql.raw('type'))} as fallbacks, type,
  call_id as "callId", role, created_at as "createdAt"`;

/**
 * CTEs `found` (the candidates' ids) and `locked` (their rows, locked in id order). Ids travel
 * as JSON parameters, so the text is the same whatever the batch's size. Each lookup is one
 * index probe per key in the keys' tables (src/db/schema/message-keys.ts; a lateral
 * subquery): a prepared statement keeps a generic plan, and `= any(...)` was once planned as a
 * sequential scan for good (docs/performance.md).
 */
export function lockedSql(what: LockWhat): SQL {
  const found =
    'ids' in what
      ? sql`found as (
        select distinct k.v::uuid as id
        from jsonb_array_elements_text(${JSON.stringify(what.ids)}::jsonb) k(v))`
      : sql`found as (
        select m.id from jsonb_array_elements_text(${JSON.stringify(customerIds(what.events))}::jsonb) k(v)
          cross join lateral (
            select message_id as id from message_customer_ids where customer_message_id = k.v) m
        union
        select m.id from jsonb_array_elements_text(${JSON.stringify(providerIds(what.events))}::jsonb) k(v)
          cross join lateral (
            select message_id as id from message_provider_ids where provider_message_id = k.v
            order by message_id desc limit 1) m)`;
  return sql`${found},
      locked as (
        select l.* from (select id from found order by id) f
          cross join lateral (
            select ${LOCKED_COLUMNS} from messages where messages.id = f.id
            for update) l)`;
}

/** Locks the messages (`lockedSql`) and reads them, in id order; one round trip. */
export async function lockMessages(tx: Tx, what: LockWhat): Promise<LockedMessage[]> {
  const [row] = await executePrepared<{ locked: string | LockedMessage[] }>(
    tx,
    sql`with ${lockedSql(what)}
      select coalesce((select json_agg(l order by l.id) from locked l), '[]') as locked`,
  );
  return typeof row!.locked === 'string' ? JSON.parse(row!.locked) : row!.locked;
}

function customerIds(events: readonly EventKeys[]): string[] {
  const out = new Set<string>();
  for (const e of events) if (e.customerMessageId) out.add(e.customerMessageId);
  return [...out];
}

function providerIds(events: readonly EventKeys[]): string[] {
  const out = new Set<string>();
  for (const e of events) for (const p of e.providerMessageIds) out.add(p);
  return [...out];
}

/**
 * The matching rule over locked messages: the message an event is about, or undefined.
 *
 * @example
 * const about = matcher(locked);
 * about({ customerMessageId: 'o-1', providerMessageIds: [] })?.id;
 */
export function matcher(locked: readonly LockedMessage[]) {
  const byCmid = new Map<string, LockedMessage>();
  const byPmid = new Map<string, LockedMessage>();
  for (const m of locked) {
    byCmid.set(m.cmid, m);
    // in id order: of messages sharing a provider id the newest stays, the one SQL found
    if (m.pmid !== null) byPmid.set(m.pmid, m);
  }
  return (e: EventKeys): LockedMessage | undefined => {
    const m = e.customerMessageId === undefined ? undefined : byCmid.get(e.customerMessageId);
    if (m) return m;
    for (const p of e.providerMessageIds) {
      const found = byPmid.get(p);
      if (found) return found;
    }
    return undefined;
  };
}
