/**
 * The rows that point at a raw callback body in `inbox`: the delivery events it carried that
 * still wait for their message, the incoming messages it carried, and the key webhooks held
 * for a later node. No foreign key holds them to the body (the inbox is in day partitions:
 * src/db/schema/inbox.ts), so what deletes bodies deletes these with them, in its transaction:
 * retention (a dropped day, or the default partition's rows), erasure, and a speech webhook
 * refused after its body was stored. Events of a call's timeline (`call_events`) name the body
 * in their detail only, and go with their call's day.
 *
 * @example
 * await deleteInboxRefs(tx, (id) => sql`${id} in (select id from gone)`);
 * await deleteBodies(tx, (id) => sql`${id} in ${idList(ids, 'bigint')}`);
 */
import { type SQL, sql } from 'drizzle-orm';
import { type Queryable, valueArray } from './client.ts';

/** The tables with an `inbox_id`, in the one order every deleter takes them. */
export const INBOX_REFS = ['pending_events', 'inbound_messages', 'held_webhooks'] as const;

/** Deletes the rows of every `INBOX_REFS` table whose inbox id `which` selects. */
export async function deleteInboxRefs(tx: Queryable, which: (id: SQL) => SQL): Promise<void> {
  for (const table of INBOX_REFS) {
    await tx.execute(
      sql`delete from ${sql.identifier(table)} t where ${which(sql.raw('t.inbox_id'))}`,
    );
  }
}

/**
 * Deletes the bodies whose id `which` selects, one by one, with what points at them and their
 * dedup keys (erasure; a speech webhook refused after its body was stored). Retention does not
 * come here: its keys go by their own age. `receivedAt`, when the caller knows when the bodies
 * came: their days alone are searched and planned (by id alone, every day kept is).
 */
export async function deleteBodies(
  tx: Queryable,
  which: (id: SQL) => SQL,
  receivedAt?: readonly Date[],
): Promise<void> {
  await deleteInboxRefs(tx, which);
  const days = receivedAt
    ? sql` and received_at = any(${valueArray(
        receivedAt.map((d) => d.toISOString()),
        'timestamptz',
      )})`
    : sql``;
  await tx.execute(sql`
    with gone as (delete from inbox where ${which(sql.raw('id'))}${days} returning dedup_key)
    delete from inbox_keys where dedup_key in (select decode(dedup_key, 'hex') from gone)`);
}
