/**
 * The timeline's index by message alone (migration 0025, src/db/schema/message-events.ts):
 * `message_events` is found by `message_id` through an index on that column only, instead of
 * `(message_id, at, id)`, so that Postgres's B-tree deduplication keeps one key for all of a
 * message's events.
 *
 * - The migration, over timelines stored before it, keeps every event, replaces the index on
 *   the parent and on every partition (those made before it, the default one), and a day
 *   partition made after it gets the new index from its parent.
 * - Timelines still come in their order (`at`, then `id` for events of the same time) though
 *   no index holds that order any more: by the read from the day partition and by the read
 *   through the parent.
 */
import { sql } from 'drizzle-orm';
import { expect, it } from 'vitest';
import { type Db, rowsOf } from '../../src/db/client.ts';
import { migrateDatabase } from '../../src/db/migrate.ts';
import { ensurePartitions } from '../../src/db/partitions.ts';
import { getMessage } from '../../src/messages/read.ts';
import { describeMigration } from '../support/migrations.ts';

const DAY = Date.parse('2026-11-20T00:00:00Z');

/** A UUIDv7 made at `ms`, row `n` of its millisecond: the day partition it falls in is `ms`'s. */
function idAt(ms: number, n: number): string {
  const hex = ms.toString(16).padStart(12, '0');
  return `${hex.slice(0, 8)}-${hex.slice(8)}-7000-8000-${String(n).padStart(12, '0')}`;
}

/** Every index of every leaf partition of message_events, and of the parent, with its columns. */
async function timelineIndexes(db: Db) {
  return rowsOf<{ tbl: string; idx: string; def: string }>(
    await db.execute(sql`
      select c.relname as tbl, i.relname as idx, pg_get_indexdef(x.indexrelid) as def
      from pg_partition_tree('message_events') t
      join pg_class c on c.oid = t.relid
      join pg_index x on x.indrelid = t.relid
      join pg_class i on i.oid = x.indexrelid
      where t.isleaf or t.level = 0
      order by 1, 2`),
  );
}

const leaves = async (db: Db) =>
  rowsOf<{ tbl: string }>(
    await db.execute(sql`
      select relid::regclass::text as tbl from pg_partition_tree('message_events') where isleaf`),
  ).map((r) => r.tbl);

/** The events' (status, at) in the order a read gives them. */
const order = (view: Awaited<ReturnType<typeof getMessage>>) =>
  view.timeline.map((e) => `${e.status}@${e.at.slice(11, 19)}`);

describeMigration(25, 'over timelines stored before it', (migrated) => {
  it('keeps every event, indexes every partition by message alone, and timelines keep their order', async () => {
    const database = migrated();
    const db = database.db;
    // a day partition made before the migration, as a running server makes them
    await ensurePartitions(db, new Date(DAY), 0);
    const ids = [idAt(DAY + 3_600_000, 1), idAt(DAY + 7_200_000, 2)];
    for (const [k, id] of ids.entries()) {
      await db.execute(sql`
        insert into messages (id, customer_message_id, type, "from", "to", payload, status)
        values (${id}::uuid, ${`tl-${k}`}, 'sms', 'Acme', '+380501234567', '{}', 'delivered')`);
      // written out of time order, as callbacks arrive; two events of the same second
      await db.execute(sql`
        insert into message_events (message_id, status, source, at)
        values (${id}::uuid, 'delivered', 'callback', '2026-11-20T10:00:05Z'),
               (${id}::uuid, 'queued', 'api', '2026-11-20T10:00:00Z'),
               (${id}::uuid, 'sent', 'callback', '2026-11-20T10:00:03Z'),
               (${id}::uuid, 'accepted', 'dispatch', '2026-11-20T10:00:03Z')`);
    }
    // one in the default partition: a message of a day no partition was made for
    const stray = idAt(DAY - 40 * 86_400_000, 3);
    await db.execute(sql`
      insert into messages (id, customer_message_id, type, "from", "to", payload, status)
      values (${stray}::uuid, 'tl-stray', 'sms', 'Acme', '+380501234567', '{}', 'sent')`);
    await db.execute(sql`
      insert into message_events (message_id, status, source, at)
      values (${stray}::uuid, 'sent', 'callback', '2026-10-11T10:00:01Z'),
             (${stray}::uuid, 'queued', 'api', '2026-10-11T10:00:00Z')`);
    const before = await timelineIndexes(db);
    expect(before.filter((r) => r.def.includes('(message_id, at, id)')).length).toBe(
      (await leaves(db)).length + 1,
    );

    await migrateDatabase(database);
    // and a day partition made after it
    await ensurePartitions(db, new Date(DAY + 86_400_000), 0);

    const count = rowsOf<{ n: number | string }>(
      await db.execute(sql`select count(*) as n from message_events`),
    );
    expect(Number(count[0]!.n)).toBe(10);
    const after = await timelineIndexes(db);
    expect(after.filter((r) => r.def.includes('(message_id, at, id)'))).toEqual([]);
    const byMessage = after.filter((r) => r.def.endsWith('USING btree (message_id)'));
    const tables = await leaves(db);
    expect(tables.length).toBeGreaterThanOrEqual(3); // the default, the day before and after
    expect(byMessage.map((r) => r.tbl).sort()).toEqual(['message_events', ...tables].sort());
    expect(byMessage.find((r) => r.tbl === 'message_events')?.idx).toBe(
      'message_events_message_idx',
    );

    for (const throughParent of [false, true]) {
      for (const id of ids) {
        expect(order(await getMessage(db, id, { throughParent }))).toEqual([
          'queued@10:00:00',
          // the same second: by id, the order they were stored in
          'sent@10:00:03',
          'accepted@10:00:03',
          'delivered@10:00:05',
        ]);
      }
      expect(order(await getMessage(db, 'tl-stray', { throughParent }))).toEqual([
        'queued@10:00:00',
        'sent@10:00:01',
      ]);
    }
  });
});
