/**
 * The first statement of a batch of delivery callbacks (src/messages/delivery-write.ts
 * `lockAndCheck`) looks each dedup key up in inbox_keys with an index probe: a table of every
 * key kept for RETENTION_DAYS must never be scanned per batch. Counted by Postgres itself
 * (pg_stat_xact_user_tables, this transaction's scans of the table).
 */
import { sql } from 'drizzle-orm';
import { expect, it } from 'vitest';
import { rowsOf } from '../../src/db/client.ts';
import { lockAndCheck } from '../../src/messages/delivery-write.ts';
import { dedupKey } from '../../src/messages/inbox.ts';
import { describeEachEngine } from '../support/db.ts';

describeEachEngine('delivery callbacks: the dedup lookup', (ctx) => {
  it('probes the index of inbox_keys for each key, and never scans the table', async () => {
    const db = ctx.database().db;
    // enough keys that a scan and a hash join would look cheap to a planner that may choose it
    await db.execute(sql`
      insert into inbox_keys (dedup_key, received_at)
      select sha256(convert_to('seed ' || i, 'UTF8')), now()
      from generate_series(1, 20000) as i
      on conflict do nothing`);
    await db.execute(sql`analyze inbox_keys`);
    const stored = dedupKey('delivery', 'seed body', 0);
    await db.execute(
      sql`insert into inbox_keys (dedup_key, received_at) values (decode(${stored}, 'hex'), now())`,
    );
    const keys = [
      stored,
      ...Array.from({ length: 300 }, (_, i) => dedupKey('delivery', `b${i}`, 0)),
    ];
    const { existing, scans } = await db.transaction(async (tx) => {
      const checked = await lockAndCheck(tx, keys, []);
      const [row] = rowsOf<{ seq: number | string; idx: number | string }>(
        await tx.execute(sql`
          select seq_scan as seq, idx_scan as idx from pg_stat_xact_user_tables
          where relname = 'inbox_keys'`),
      );
      return { existing: checked.existing, scans: row };
    });
    expect([...existing]).toEqual([stored]);
    expect(Number(scans?.seq)).toBe(0);
    expect(Number(scans?.idx)).toBeGreaterThanOrEqual(1);
  });
});
