/**
 * Delivery callbacks in, many to one transaction (group commit). Under load, a request waits
 * for the transaction that stores it, as before (store, then acknowledge), but the callbacks
 * that arrived meanwhile share that transaction and its set-based statements: two round
 * trips for the batch (BEGIN travels with the first statement, COMMIT with the last:
 * pipelinedTransaction) instead of eight round trips and a commit each.
 * What is stored is what `ingestDelivery` stores, row for row; an idle server still commits
 * each callback at once (a batch of one).
 *
 * Locks are taken in one order everywhere (messages by id, then inbox keys sorted, then
 * calls by id), so concurrent batches, here or in another instance, and single callbacks
 * (`ingestDelivery`) wait for each other but never deadlock.
 * A batch that fails for any reason but an unreachable database is retried one callback per
 * transaction, so one poisonous body cannot take its neighbours down with it.
 *
 * @example
 * const batcher = createDeliveryBatcher(ingestDeps);
 * const result = await batcher.ingest({ contentType: 'application/json', body }); // after commit
 */
import { sql } from 'drizzle-orm';
import { executePrepared, pipelinedTransaction, type Tx } from '../db/client.ts';
import { isUniqueViolation } from '../db/errors.ts';
import { groupCommit } from '../db/group-commit.ts';
import { erasedFilter, forgetDropped } from '../privacy/erased.ts';
import { type DeliveryEvent, parseDeliveryBody } from './delivery-parse.ts';
import { dedupKey, type RawCallback, storable } from './inbox.ts';
import { type IngestDeps, type IngestResult, ingestDelivery, toNewEvent } from './ingest.ts';
import type { MessageStatus } from './status.ts';
import { needsStatusCheck, queueStatusChecks } from './status-checks.ts';
import { eventDetail, fallbackCountSql, type NewEvent, statusAfter } from './timeline.ts';

export interface DeliveryBatcher {
  /** resolves once the callback is committed (or rejects: nothing of it was stored) */
  ingest(raw: RawCallback): Promise<IngestResult>;
}

export interface BatchOptions {
  /** most callbacks in one transaction */
  maxBatch?: number;
  /** transactions in flight at once */
  concurrency?: number;
}

export function createDeliveryBatcher(deps: IngestDeps, opts: BatchOptions = {}): DeliveryBatcher {
  const ingest = groupCommit<RawCallback, IngestResult>({
    batch: (raws) => ingestDeliveries(deps, raws),
    single: (raw) => ingestDelivery(deps, raw),
    maxBatch: opts.maxBatch ?? 200,
    // one transaction at a time: the callbacks that arrive meanwhile make the next batch
    // larger, and each batch costs the same round trips whatever its size (measured:
    // about a fifth less CPU per callback than with two in flight, and no slower)
    concurrency: opts.concurrency ?? 1,
  });
  return { ingest };
}

interface Item {
  raw: RawCallback;
  key: string;
  events: DeliveryEvent[];
  problems: string[];
  inboxId?: number;
  matched: number;
  pending: number;
  /** events about erased messages: acknowledged, not kept (privacy/erased.ts) */
  dropped: DeliveryEvent[];
}

interface LockedMessage {
  id: string;
  cmid: string;
  pmid: string | null;
  status: string;
  fallbacks: number;
  type: string;
  callId: string | null;
  role: string | null;
}

/**
 * Stores, parses, matches and records many delivery callbacks in one transaction; one result
 * per callback, in order. A body repeated within the batch, or stored before, is a duplicate.
 */
export async function ingestDeliveries(
  deps: IngestDeps,
  raws: RawCallback[],
): Promise<IngestResult[]> {
  const now = deps.clock.now();
  const parsed: Parsed[] = raws.map((raw) => {
    const { events, problems } = storable(
      parseDeliveryBody(raw.contentType, raw.body, deps.statusMap),
    );
    return { raw, key: dedupKey('delivery', raw.body), events, problems };
  });
  try {
    return await storeBatch(deps, parsed, now);
  } catch (err) {
    // a key the first statement did not find was stored meanwhile by a transaction that had
    // not committed then, so the batch counted that callback's events as new: its inbox
    // insert failed on the key, the batch was undone, and once more finds the duplicate
    if (!isUniqueViolation(err, 'inbox_dedup_idx')) throw err;
    return storeBatch(deps, parsed, now);
  }
}

type Parsed = Pick<Item, 'raw' | 'key' | 'events' | 'problems'>;

async function storeBatch(deps: IngestDeps, parsed: Parsed[], now: Date): Promise<IngestResult[]> {
  // written out, not `{ ...p, matched: 0, ... }`: see eventFrom in delivery-parse.ts
  const items: Item[] = parsed.map((p) => ({
    raw: p.raw,
    key: p.key,
    events: p.events,
    problems: p.problems,
    matched: 0,
    pending: 0,
    dropped: [],
  }));
  // BEGIN goes with the first statement, and COMMIT with the write when nothing follows it
  return pipelinedTransaction(deps.db, async (tx, last) => {
    // 1. the messages the events are about, locked in id order, which keys are stored
    // already, and an inbox id for each key
    const firsts = new Map<string, Item>();
    for (const item of items) if (!firsts.has(item.key)) firsts.set(item.key, item);
    const keys = [...firsts.keys()];
    const { existing, ids, byMessage } = await lockAndCheck(
      tx,
      keys,
      items.flatMap((i) => i.events),
    );
    for (const [n, key] of keys.entries())
      if (!existing.has(key)) firsts.get(key)!.inboxId = ids[n];
    const fresh = items.filter((i) => i.inboxId !== undefined);
    if (fresh.length === 0) return items.map(answer);
    const events = fresh.flatMap((i) => i.events);
    const byCmid = new Map(byMessage.map((m) => [m.cmid, m]));
    const byPmid = new Map(byMessage.flatMap((m) => (m.pmid ? [[m.pmid, m] as const] : [])));
    const matching = (e: DeliveryEvent) =>
      (e.customerMessageId && byCmid.get(e.customerMessageId)) ||
      e.providerMessageIds.map((p) => byPmid.get(p)).find((v) => v !== undefined);
    const isErased = await erasedFilter(
      tx,
      events.filter((e) => !matching(e)),
    );

    // 3. what each message's timeline gets, and where its status moves
    const perMessage = new Map<string, NewEvent[]>();
    const pendingRows: unknown[] = [];
    for (const item of fresh) {
      for (const e of item.events) {
        const m = matching(e);
        if (!m && isErased(e)) {
          item.dropped.push(e);
          continue;
        }
        if (!m) {
          item.pending++;
          pendingRows.push({
            inbox_id: item.inboxId,
            customer_message_id: e.customerMessageId ?? null,
            provider_message_id: e.providerMessageIds[0] ?? null,
            status: e.status,
            detail: e,
            at: (e.at ?? now).toISOString(),
          });
          continue;
        }
        item.matched++;
        const list = perMessage.get(m.id) ?? [];
        list.push(toNewEvent(e, item.inboxId!, now, 'callback'));
        perMessage.set(m.id, list);
      }
    }
    const eventRows: unknown[] = [];
    const updates: unknown[] = [];
    const recorded: { m: LockedMessage; after: MessageStatus; events: NewEvent[] }[] = [];
    for (const m of byMessage) {
      const list = perMessage.get(m.id);
      if (!list) continue;
      // in event-time order, as recordEvents applies them
      const sorted = [...list].sort((a, b) => a.at.getTime() - b.at.getTime());
      let after = m.status as MessageStatus;
      let deliveredVia: string | undefined;
      for (const e of sorted) {
        const next = statusAfter(after, e, m.fallbacks);
        if ((e.status === 'delivered' || e.status === 'read') && e.channel)
          deliveredVia = e.channel;
        after = next;
      }
      for (const e of list) {
        eventRows.push({
          message_id: m.id,
          status: e.status,
          source: e.source,
          at: e.at.toISOString(),
          detail: eventDetail(e),
        });
      }
      updates.push({
        id: m.id,
        status: after !== m.status ? after : null,
        delivered_via: deliveredVia ?? null,
      });
      recorded.push({ m, after, events: list });
    }
    // the raw bodies with their outcome, in key order (the lock order)
    const bodies = fresh
      .map((i) => ({
        id: i.inboxId,
        key: i.key,
        content_type: i.raw.contentType == null ? null : storable(i.raw.contentType),
        body: storable(i.raw.body),
        pending: i.pending,
        outcome: outcomeOf(i),
      }))
      .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));

    // 4. every write of the batch in one statement; each inbox row is written once, with its
    // outcome (an insert, then an update of the same row, was a second row version and a
    // second entry in each of its indexes). A key that another transaction stored after the
    // first statement looked fails the insert on the inbox's unique key (ingestDeliveries)
    const at = now.toISOString();
    const write = sql`
      with ins as (
        insert into inbox (id, kind, dedup_key, content_type, body, received_at, outcome, pending)
        select v.id, 'delivery', v.key, v.content_type, v.body, ${at}::timestamptz, v.outcome,
               v.pending
        from jsonb_to_recordset(${JSON.stringify(bodies)}::jsonb)
          as v(id bigint, key text, content_type text, body text, outcome jsonb, pending int)),
      ev as (
        insert into message_events (message_id, status, source, detail, at, received_at)
        select v.message_id, v.status, v.source, v.detail, v.at, ${at}::timestamptz
        from jsonb_to_recordset(${JSON.stringify(eventRows)}::jsonb)
          as v(message_id uuid, status text, source text, detail jsonb, at timestamptz)),
      mu as (
        update messages as m set
          status = coalesce(v.status, m.status),
          delivered_via = coalesce(v.delivered_via, m.delivered_via),
          updated_at = ${at}::timestamptz
        from jsonb_to_recordset(${JSON.stringify(updates)}::jsonb)
          as v(id uuid, status text, delivered_via text)
        where m.id = v.id),
      pe as (
        insert into pending_events
          (inbox_id, customer_message_id, provider_message_id, status, detail, at, received_at)
        select v.inbox_id, v.customer_message_id, v.provider_message_id, v.status, v.detail, v.at,
               ${at}::timestamptz
        from jsonb_to_recordset(${JSON.stringify(pendingRows)}::jsonb)
          as v(inbox_id bigint, customer_message_id text, provider_message_id text, status text,
               detail jsonb, at timestamptz))
      select 1`;
    // 5. what else must happen with a status move (calls), in the same transaction: only a
    // message of a call can need it (OnRecorded)
    const hooked = deps.onRecorded ? recorded.filter((r) => r.m.callId !== null) : [];
    const forgets = fresh.filter((i) => i.dropped.length > 0);
    // messages with fallbacks that a channel-less status ended: their record is read once more
    const checks = recorded.filter(
      (r) => r.after !== r.m.status && needsStatusCheck(r.after, r.m.fallbacks, r.events, r.m.type),
    );
    if (hooked.length === 0 && forgets.length === 0 && checks.length === 0) {
      await last(write);
      return items.map(answer);
    }
    await executePrepared(tx, write);
    await queueStatusChecks(
      tx,
      checks.map((r) => r.m.id),
      now,
    );

    // raw bodies of dropped events: deleted when nothing else was in them, else cut out
    for (const item of forgets) {
      await forgetDropped(tx, {
        inboxId: item.inboxId!,
        body: storable(item.raw.body),
        events: item.events.length,
        dropped: item.dropped,
      });
    }

    // the calls' hooks in call id order: the order in which speech webhooks lock calls
    // (src/calls), so that a batch of each never waits for the other in a circle
    if (deps.onRecorded) {
      const callOf = (r: (typeof recorded)[number]) => r.m.callId ?? '';
      // plain code-unit order: for lowercase UUIDs that is Postgres's uuid order
      const byCall = hooked.sort((a, b) =>
        callOf(a) < callOf(b) ? -1 : callOf(a) > callOf(b) ? 1 : 0,
      );
      for (const { m, after, events } of byCall) {
        await deps.onRecorded(
          tx,
          {
            messageId: m.id,
            before: m.status as MessageStatus,
            after,
            callId: m.callId,
            role: m.role,
            fallbacks: m.fallbacks,
            type: m.type,
          },
          events,
        );
      }
    }
    return items.map(answer);
  });
}

/** What the inbox row keeps of a callback (the same as `ingestDelivery`'s). */
function outcomeOf(item: Item): Omit<IngestResult, 'duplicate' | 'inboxId'> {
  // assigned, not spread: see eventFrom in delivery-parse.ts
  const outcome: Omit<IngestResult, 'duplicate' | 'inboxId'> = {
    events: item.events.length,
    matched: item.matched,
    pending: item.pending,
    problems: item.problems,
  };
  if (item.dropped.length > 0) outcome.dropped = item.dropped.length;
  return outcome;
}

function answer(item: Item): IngestResult {
  if (item.inboxId === undefined) {
    return { duplicate: true, events: 0, matched: 0, pending: 0, problems: [] };
  }
  return Object.assign({ duplicate: false, inboxId: item.inboxId }, outcomeOf(item));
}

/**
 * One round trip: the messages `events` are about (by customerMessageId or the provider's
 * ids) locked in id order, which of `keys` the inbox holds already, and an inbox id for each
 * key (from the inbox's own sequence; a duplicate's is never used). Everything travels as
 * JSON parameters, so the statement's text is the same whatever the batch's size, and it is
 * prepared: unprepared, Postgres parsed and planned it on every batch (about a sixth of its
 * CPU per callback), and postgres.js spent a round trip of its own describing it first.
 *
 * Prepared, Postgres soon keeps one generic plan for it, made for the table sizes of that
 * moment and kept until the tables are analyzed again. So every lookup is one index probe
 * per key (a lateral subquery with a limit, which the planner cannot turn into a join): the
 * plain `dedup_key = any(...)` it replaced was planned as a sequential scan while the inbox
 * was nearly empty, and on a server that never analyzed (autovacuum off) it stayed one:
 * 15-25 ms a batch once the inbox held a few thousand rows. Of messages sharing a provider
 * id only the newest is taken, the one the batch would match.
 */
async function lockAndCheck(
  tx: Tx,
  keys: string[],
  events: DeliveryEvent[],
): Promise<{ existing: Set<string>; ids: number[]; byMessage: LockedMessage[] }> {
  const cmids = [
    ...new Set(events.flatMap((e) => (e.customerMessageId ? [e.customerMessageId] : []))),
  ];
  const pmids = [...new Set(events.flatMap((e) => e.providerMessageIds))];
  const [row] = await executePrepared<{ result: string | LockAndCheckJson }>(
    tx,
    sql`
      with found as (
        select m.id from jsonb_array_elements_text(${JSON.stringify(cmids)}::jsonb) k(v)
          cross join lateral (
            select id from messages where customer_message_id = k.v limit 1) m
        union
        select m.id from jsonb_array_elements_text(${JSON.stringify(pmids)}::jsonb) k(v)
          cross join lateral (
            select id from messages where provider_message_id = k.v
            order by id desc limit 1) m),
      locked as (
        select l.* from (select id from found order by id) f
          cross join lateral (
            select id, customer_message_id as cmid, provider_message_id as pmid, status,
                   ${fallbackCountSql(sql.raw('payload'), sql.raw('type'))} as fallbacks, type,
                   call_id as "callId", role
            from messages where messages.id = f.id
            for update) l)
      select json_build_object(
        'existing', coalesce((select json_agg(i.dedup_key)
          from jsonb_array_elements_text(${JSON.stringify(keys)}::jsonb) k(v)
          cross join lateral (select dedup_key from inbox where dedup_key = k.v limit 1) i), '[]'),
        'ids', (select json_agg(nextval('inbox_id_seq')) from generate_series(1, ${keys.length}::int)),
        'locked', coalesce((select json_agg(l order by l.id) from locked l), '[]')) as result`,
  );
  const result: LockAndCheckJson =
    typeof row!.result === 'string' ? JSON.parse(row!.result) : row!.result;
  return {
    existing: new Set(result.existing),
    ids: result.ids.map(Number),
    byMessage: result.locked,
  };
}

interface LockAndCheckJson {
  existing: string[];
  ids: (number | string)[];
  locked: LockedMessage[];
}
