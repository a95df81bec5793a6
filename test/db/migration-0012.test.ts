/**
 * Migration 0012 (flow history) over data written before it, on PGlite and on Postgres: a
 * database migrated up to 0011 gets counters and a pinned version as the code of then wrote
 * them; after 0012 the counters keep version '' and language '', the version has no source,
 * and counters per version and language go into rows of their own.
 */
import { randomBytes } from 'node:crypto';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { sql } from 'drizzle-orm';
import { migrate as migratePglite } from 'drizzle-orm/pglite/migrator';
import { migrate as migratePostgres } from 'drizzle-orm/postgres-js/migrator';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { flowStatsOf } from '../../src/calls/read.ts';
import { bumpStats } from '../../src/calls/stats.ts';
import { type Database, openDatabase, rowsOf } from '../../src/db/client.ts';
import { MIGRATIONS_DIR, migrateDatabase } from '../../src/db/migrate.ts';
import { availableEngines, type Engine } from '../support/db.ts';
import { databaseUrlWithName } from '../support/global-setup.ts';

/** The committed migrations up to 0011 only, in a folder of their own. */
function migrationsBefore0012(): string {
  const dir = mkdtempSync(join(tmpdir(), 'sb-mig-'));
  cpSync(MIGRATIONS_DIR, dir, { recursive: true });
  const path = join(dir, 'meta', '_journal.json');
  const journal = JSON.parse(readFileSync(path, 'utf8')) as { entries: { idx: number }[] };
  journal.entries = journal.entries.filter((e) => e.idx < 12);
  writeFileSync(path, JSON.stringify(journal));
  return dir;
}

async function emptyDatabase(
  engine: Engine,
): Promise<{ database: Database; drop(): Promise<void> }> {
  if (engine === 'pglite') {
    const database = await openDatabase({ pglite: new PGlite() });
    return { database, drop: () => database.close() };
  }
  const { adminUrl } = inject('postgresTemplate')!;
  const name = `sb_m_${randomBytes(6).toString('hex')}`;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database "${name}"`);
  await admin.end();
  const database = await openDatabase({
    url: databaseUrlWithName(adminUrl, name),
    maxConnections: 2,
  });
  return {
    database,
    async drop() {
      await database.close();
      const a = postgres(adminUrl, { max: 1, onnotice: () => {} });
      await a.unsafe(`drop database if exists "${name}" with (force)`);
      await a.end();
    },
  };
}

for (const engine of availableEngines()) {
  describe(`migration 0012 over earlier data [${engine}]`, () => {
    let test: { database: Database; drop(): Promise<void> };
    let before: string;
    beforeAll(async () => {
      before = migrationsBefore0012();
      test = await emptyDatabase(engine);
    });
    afterAll(async () => {
      await test?.drop();
      rmSync(before, { recursive: true, force: true });
    });

    it('keeps earlier counters under version and language "" and earlier versions without source', async () => {
      const { database } = test;
      const config = { migrationsFolder: before };
      if (database.kind === 'pglite') await migratePglite(database.db as never, config);
      else await migratePostgres(database.db as never, config);
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
}
