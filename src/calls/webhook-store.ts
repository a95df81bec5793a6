/** Speech webhooks stored raw (deduplicated) and their calls locked, in one round trip. */
import { sql } from 'drizzle-orm';
import { executePrepared, type Tx } from '../db/client.ts';
import { storable } from '../messages/inbox.ts';
import type { CallRowJson } from './call-rows.ts';
import type { Verified } from './webhook-verify.ts';

export interface StoredAndLocked {
  inserted: { id: number | string; key: string }[];
  calls: CallRowJson[];
}

/**
 * The raw bodies inserted (a key stored before is skipped), and the calls of those inserted
 * locked, in id order (the lock order of every path that locks several), with the provider's
 * id of each call's message. Rows travel as one JSON parameter, so the text is the same
 * whatever the batch's size. The locks follow the insert (the calls to lock are read from
 * what it returned): a batch never holds a call while it waits for another batch's copy of
 * a body.
 */
export async function storeAndLock(
  tx: Tx,
  firsts: Map<string, Verified>,
  now: Date,
): Promise<StoredAndLocked> {
  const bodies = [...firsts.keys()].sort().map((key) => {
    const { raw, callId } = firsts.get(key)!;
    return {
      key,
      content_type: raw.contentType == null ? null : storable(raw.contentType),
      body: storable(raw.body),
      call_id: callId,
    };
  });
  const [row] = await executePrepared<{ result: string | StoredAndLocked }>(
    tx,
    sql`
      with v as materialized (
        select * from jsonb_to_recordset(${JSON.stringify(bodies)}::jsonb)
          as v(key text, content_type text, body text, call_id uuid)),
      k as (
        insert into inbox_keys (dedup_key, received_at)
        select decode(v.key, 'hex'), ${now.toISOString()}::timestamptz from v
        order by v.key
        on conflict (dedup_key) do nothing
        returning encode(dedup_key, 'hex') as key),
      ins as (
        insert into inbox (kind, dedup_key, content_type, body, received_at)
        select 'speechcall', v.key, v.content_type, v.body, ${now.toISOString()}::timestamptz
        from v join k on k.key = v.key
        returning id, dedup_key),
      locked as (
        select c.*, m.provider_message_id
        from calls c left join messages m on m.id = c.message_id
        -- any(array(...)): an index lookup, not a scan of the whole table (see write-plan.ts)
        where c.id = any(array(select v.call_id from ins join v on v.key = ins.dedup_key))
        order by c.id
        for update of c)
      select json_build_object(
        'inserted', coalesce((select json_agg(json_build_object('id', id, 'key', dedup_key)) from ins), '[]'),
        'calls', coalesce((select json_agg(l order by l.id) from locked l), '[]')) as result`,
  );
  return typeof row!.result === 'string' ? JSON.parse(row!.result) : row!.result;
}
