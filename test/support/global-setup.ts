/**
 * Runs once per `vitest run`: builds one migrated database per engine, which every test file
 * then copies (openstatus ADR 0008: isolated databases, never shared seeded rows).
 * - PGlite: a migrated data dir dumped to a tarball; a test file loads it (well under a
 *   second) instead of creating a database from scratch (several seconds).
 * - Postgres (when TEST_DATABASE_URL is set): a migrated template database; a test file
 *   creates its own database from it with CREATE DATABASE ... TEMPLATE.
 * - PgBouncer (when TEST_PGBOUNCER is set too): one in transaction mode in front of that
 *   Postgres; every test database then opens through it, as DATABASE_URL with
 *   DATABASE_PREPARE=false, and DATABASE_DIRECT_URL to the server itself (support/db.ts).
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import type { TestProject } from 'vitest/node';
import { openDatabase } from '../../src/db/client.ts';
import { migrateDatabase } from '../../src/db/migrate.ts';
import { type PgBouncer, startPgBouncer } from './pgbouncer.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    pgliteDump: string;
    postgresTemplate: { adminUrl: string; template: string } | null;
    /** TEST_PGBOUNCER: the port of a PgBouncer in front of TEST_DATABASE_URL's server */
    pgbouncerPort: number | null;
  }
}

export function databaseUrlWithName(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

export default async function setup(project: TestProject) {
  const dir = mkdtempSync(join(tmpdir(), 'switchboard-test-'));
  const dumpPath = join(dir, 'pglite.tar');
  const embedded = await openDatabase({ dataDir: join(dir, 'template') });
  await migrateDatabase(embedded);
  const dump = await embedded.pglite!.dumpDataDir('none');
  writeFileSync(dumpPath, Buffer.from(await dump.arrayBuffer()));
  await embedded.close();
  project.provide('pgliteDump', dumpPath);

  const adminUrl = process.env.TEST_DATABASE_URL;
  let template: string | null = null;
  if (adminUrl) {
    template = `sb_tpl_${randomBytes(4).toString('hex')}`;
    const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
    await admin.unsafe(`create database "${template}"`);
    const db = await openDatabase({
      url: databaseUrlWithName(adminUrl, template),
      maxConnections: 1,
    });
    await migrateDatabase(db);
    await db.close();
    await admin.end();
    project.provide('postgresTemplate', { adminUrl, template });
  } else {
    project.provide('postgresTemplate', null);
  }
  let bouncer: PgBouncer | undefined;
  if (process.env.TEST_PGBOUNCER) {
    if (!adminUrl)
      throw new Error('TEST_PGBOUNCER needs TEST_DATABASE_URL (the Postgres behind it)');
    bouncer = await startPgBouncer(adminUrl);
  }
  project.provide('pgbouncerPort', bouncer?.port ?? null);

  return async () => {
    await bouncer?.stop();
    rmSync(dir, { recursive: true, force: true });
    if (adminUrl && template) {
      const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
      await admin.unsafe(`drop database if exists "${template}" with (force)`);
      await admin.end();
    }
  };
}
