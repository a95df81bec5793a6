/**
 * The dispatcher's claim: one statement that locks the due outbox rows of a round and reads
 * what they send. It sends:
 * - one `with ... for update skip locked` select, prepared (its text is the same for every
 *   batch size): rounds in flight at once take different rows, and the locks last until the
 *   round's transaction commits, so two dispatchers never send the same row.
 */
import { sql } from 'drizzle-orm';
import { executePrepared, type Tx } from '../db/client.ts';
import { tracingEnabled } from '../tracing.ts';

// tracing on: the distinct trace contexts of the rows the round sends, for its span's links
const TRACE_PARENTS = sql`(select json_agg(distinct c.trace_parent)
  from c join picked p on p.outbox_id = c.id where c.trace_parent is not null)`;

/** One claimed outbox row and what the round needs of its message. */
export interface Claimed {
  outbox_id: string;
  message_id: string;
  customer_message_id: string;
  /** its payload's `type` */
  type: string;
  /** the message's role ('call' for a call's own message) */
  role: string | null;
  attempts: number;
}

export interface Claim {
  /** in queue order */
  rows: Claimed[];
  /** their stored message objects as JSON text, joined with commas: sent as they are */
  payloads: string;
  /** how many rows the claim locked: more than it sends when the byte budget cut the list */
  locked: number;
  /** the trace contexts that queued the claimed rows (tracing on only; src/tracing.ts) */
  traceparents: string[];
}

/**
 * Most bytes of payload JSON in one messagelist (the provider takes up to 4 MB): 5000 SMS of
 * ~200 bytes fit (longer texts make shorter lists), a call's menu with its signed tokens is
 * 20-45 KB (an entry per key and menu), so a list of calls stops at about 30. Every round holds its payloads three times at once (as received
 * from Postgres, as the request body, in the socket's buffers), and they outlive the round in
 * V8's old space until a full collection: with 4 MB a round of calls left ~12 MB behind it, and
 * the bench's 6000 calls peaked at 247-292 MB of RSS; with 1 MB, 214-248 MB, for the same
 * messages/s (docs/performance.md, "(f) and the messagelist's bytes"). Counted on the text
 * that is sent, not on Postgres's stored size of the jsonb: that is compressed (a call's 44 KB
 * of menu is stored in ~12 KB), so a budget of stored size would let lists four times larger
 * through.
 */
export const MESSAGELIST_BYTES = 1024 * 1024;

/**
 * Claims up to `limit` due outbox rows (skipping rows another dispatcher holds). The payloads
 * come as one text: they go to the provider as they are, never parsed here.
 */
export async function claim(tx: Tx, limit: number, maxBytes: number, now: Date): Promise<Claim> {
  const traced = tracingEnabled();
  // rows locked first (SKIP LOCKED, so rounds in flight take different ones), then as many
  // of them as fit the byte budget, in queue order, measured by the size each outbox row
  // keeps of its payload (`payload_bytes`); the rest go back at commit, unsent. Only the
  // picked rows' messages are read: a payload read is a detoast of up to 45 KB for a call, and
  // reading every locked row's to measure it cost a backlog of calls ~0.2 ms a row, for 5000
  // rows to send 30 (docs/performance.md, "The dispatcher's claim reads what it sends").
  // The messages are looked up one by one through the primary key (the lateral `limit 1`
  // keeps the planner from a hash join): joined plainly, a full outbox that is a large share
  // of `messages` (a bulk send) made it hash all of `messages` every round, ~75 ms per
  // 1000 rows of a 200 000-row table.
  // One row comes back, not one per message: the payloads joined (the request body's
  // middle) and the rest as one JSON array. Decoding 5000 rows of 8 columns each was ~8 us
  // of this process's CPU per message, more than everything else it does for a send.
  const result = await executePrepared(
    tx,
    sql`
    with c as (
      select o.id, o.message_id, o.attempts, o.available_at, o.trace_parent, o.payload_bytes
      from outbox o
      where o.available_at <= ${now.toISOString()}::timestamptz
      order by o.available_at, o.id
      limit ${limit}
      for update skip locked),
    sized as (
      select c.id as outbox_id, c.message_id, c.attempts, c.payload_bytes as size,
        sum(c.payload_bytes) over (order by c.available_at, c.id) as running
      from c),
    picked as (
      select s.outbox_id, s.message_id, s.attempts, s.running, m.customer_message_id, m.body,
        m.type, m.role
      from sized s cross join lateral (
        select m.customer_message_id, m.payload::text as body, m.payload->>'type' as type,
          m.role from messages m
        where m.id = s.message_id limit 1) m
      where s.running - s.size < ${maxBytes})
    select (select count(*) from c) as locked,
      (select json_agg(json_build_array(outbox_id::text, message_id, customer_message_id,
         type, role, attempts) order by running) from picked)::text as rows,
      (select string_agg(body, ',' order by running) from picked) as payloads,
      ${traced ? TRACE_PARENTS : sql`null`}::text as trace_parents`,
  );
  const [row] = result as {
    locked: number | string;
    rows: string | null;
    payloads: string | null;
    trace_parents: string | null;
  }[];
  if (!row?.rows) {
    return { rows: [], payloads: '', locked: Number(row?.locked ?? 0), traceparents: [] };
  }
  // positional tuples: [outbox id, message id, customerMessageId, type, role, attempts]
  const tuples = JSON.parse(row.rows) as [string, string, string, string, string | null, number][];
  const rows: Claimed[] = new Array(tuples.length);
  for (let i = 0; i < tuples.length; i++) {
    const t = tuples[i]!;
    rows[i] = {
      outbox_id: t[0],
      message_id: t[1],
      customer_message_id: t[2],
      type: t[3],
      role: t[4],
      attempts: t[5],
    };
  }
  const traceparents = row.trace_parents ? (JSON.parse(row.trace_parents) as string[]) : [];
  return { rows, payloads: row.payloads ?? '', locked: Number(row.locked), traceparents };
}
