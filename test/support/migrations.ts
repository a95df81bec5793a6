/**
 * For tests of one migration over data written before it: the committed migrations up to a
 * given one, in a folder of their own, and an empty database of either engine to apply them to.
 *
 * @example
 * describeMigration(17, 'over earlier events', (database) => {
 *   it('moves them', async () => {
 *     // database() has 0000 to 0016: write rows as the code of then did, then migrateDatabase
 *   });
 * });
 */
import { randomBytes } from 'node:crypto';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { migrate as migratePglite } from 'drizzle-orm/pglite/migrator';
import { migrate as migratePostgres } from 'drizzle-orm/postgres-js/migrator';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, inject } from 'vitest';
import { type Database, openDatabase } from '../../src/db/client.ts';
import { MIGRATIONS_DIR } from '../../src/db/migrate.ts';
import { availableEngines, type Engine } from './db.ts';
import { databaseUrlWithName } from './global-setup.ts';

/** The committed migrations before number `idx` (those numbered below it), in a new folder. */
export function migrationsBefore(idx: number): string {
  const dir = mkdtempSync(join(tmpdir(), 'sb-mig-'));
  cpSync(MIGRATIONS_DIR, dir, { recursive: true });
  const path = join(dir, 'meta', '_journal.json');
  const journal = JSON.parse(readFileSync(path, 'utf8')) as { entries: { idx: number }[] };
  journal.entries = journal.entries.filter((e) => e.idx < idx);
  writeFileSync(path, JSON.stringify(journal));
  return dir;
}

/** Applies the migrations in `folder` as drizzle's migrator does at start. */
export async function migrateWith(database: Database, folder: string): Promise<void> {
  const config = { migrationsFolder: folder };
  if (database.kind === 'pglite') await migratePglite(database.db as never, config);
  else await migratePostgres(database.db as never, config);
}

/** A new empty database: an in-memory PGlite, or a database of its own on the test server. */
export async function emptyDatabase(
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

/**
 * A suite per engine (`migration 0017 over earlier events [postgres]`) on a new database that
 * has the migrations before number `idx` applied, dropped afterwards with its folder of
 * migrations. Its tests write rows as the code of then did, then run `migrateDatabase`.
 */
export function describeMigration(
  idx: number,
  title: string,
  body: (database: () => Database) => void,
): void {
  for (const engine of availableEngines()) {
    describe(`migration ${String(idx).padStart(4, '0')} ${title} [${engine}]`, () => {
      let test: Awaited<ReturnType<typeof emptyDatabase>> | undefined;
      let before: string | undefined;
      beforeAll(async () => {
        before = migrationsBefore(idx);
        test = await emptyDatabase(engine);
        await migrateWith(test.database, before);
      });
      afterAll(async () => {
        await test?.drop();
        if (before) rmSync(before, { recursive: true, force: true });
      });
      body(() => {
        if (!test) throw new Error('database not ready (used outside a test?)');
        return test.database;
      });
    });
  }
}
