/**
 * Migration 0012 (flow history) over data written before it, on PGlite and on Postgres: a
 * database migrated up to 0011 gets counters and a pinned version as the code of then wrote
 * them; after 0012 the counters keep version '' and language '', the version has no source,
 * and counters per version and language go into rows of their own.
 */
import { sql } from 'drizzle-orm';
import { expect, it } from 'vitest';
import { flowStatsOf } from '../../src/calls/read.ts';
import { bumpStats } from '../../src/calls/stats.ts';
import { rowsOf } from '../../src/db/client.ts';
import { migrateDatabase } from '../../src/db/migrate.ts';
import { describeMigration } from '../support/migrations.ts';

describeMigration(12, 'over earlier data', (migrated) => {
  it('keeps earlier counters under version and language "" and earlier versions without source', async () => {
    const database = migrated();
    const db = database.db;
    // as the code before 0012 wrote them (its upsert's key: flow, metric, subject, key)
    await db.execute(sql`insert into flow_versions (flow_id, version, compiled)
        values ('survey', '00000000000000aa', '{}'::jsonb)`);
    await db.execute(sql`insert into flow_stats (flow_id, metric, subject, key, count)
        values ('survey', 'started', '', '', 5), ('survey', 'visit', 'main', '', 4)
        on conflict (flow_id, metric, subject, key) do update set count = flow_stats.count + excluded.count`);

    await migrateDatabase(database);

    const rows = rowsOf<{
      version: string;
      lang: string;
      metric: string;
      count: string | number;
    }>(
      await db.execute(
        sql`select version, lang, metric, count from flow_stats where flow_id = 'survey' order by metric`,
      ),
    );
    expect(rows.map((r) => ({ ...r, count: Number(r.count) }))).toEqual([
      { version: '', lang: '', metric: 'started', count: 5 },
      { version: '', lang: '', metric: 'visit', count: 4 },
    ]);
    const versions = rowsOf<{ source: string | null }>(
      await db.execute(sql`select source from flow_versions where flow_id = 'survey'`),
    );
    expect(versions).toEqual([{ source: null }]);

    // counting goes on per version and language, beside the earlier counts
    await db.transaction(async (tx) => {
      await bumpStats(tx, [
        {
          scope: { flowId: 'survey', version: '00000000000000bb', lang: 'uk' },
          entries: [{ metric: 'started', subject: '' }],
        },
        {
          scope: { flowId: 'survey', version: '', lang: '' },
          entries: [{ metric: 'started', subject: '' }],
        },
      ]);
    });
    expect((await flowStatsOf(db, 'survey')).started).toBe(7);
    expect((await flowStatsOf(db, 'survey', { version: '' })).started).toBe(6);
    expect(
      (await flowStatsOf(db, 'survey', { version: '00000000000000bb', lang: 'uk' })).started,
    ).toBe(1);
  });
});
