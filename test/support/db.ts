/**
 * Each test file gets its own migrated database, on every engine available: PGlite always,
 * real Postgres too when TEST_DATABASE_URL is set (the same suite runs on both, as drizzle's
 * own integration tests do).
 *
 * @example
 * describeEachEngine('messages', (ctx) => {
 *   it('stores', async () => { await ctx.database().db.select()... });
 * });
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { PGlite } from '@electric-sql/pglite';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, inject } from 'vitest';
import { type Database, type Db, type OpenOptions, openDatabase } from '../../src/db/client.ts';
import { auditLog } from '../../src/db/schema/index.ts';
import { databaseUrlWithName } from './global-setup.ts';

export type Engine = 'pglite' | 'postgres';

export function availableEngines(): Engine[] {
  return inject('postgresTemplate') ? ['pglite', 'postgres'] : ['pglite'];
}

export interface TestDatabase {
  database: Database;
  /** the Postgres URL of this database (postgres engine only), direct: for child processes */
  url?: string;
  /**
   * How `database` was opened (postgres engine only): through PgBouncer when TEST_PGBOUNCER
   * is set. For a second handle on the same database, as a second instance would have.
   */
  open?: OpenOptions;
  /** the DATABASE_* variables a server process needs for it, through PgBouncer likewise */
  env?: Record<string, string>;
  drop(): Promise<void>;
}

/**
 * How to open the database at `url`: directly, or through the PgBouncer on `pgbouncerPort`
 * (transaction mode: statements unprepared, session work on the direct URL).
 */
export function connectionTo(
  url: string,
  pgbouncerPort: number | null,
): { open: OpenOptions; env: Record<string, string> } {
  if (pgbouncerPort === null) return { open: { url }, env: { DATABASE_URL: url } };
  const pooled = new URL(url);
  pooled.hostname = '127.0.0.1';
  pooled.port = String(pgbouncerPort);
  return {
    open: { url: pooled.toString(), directUrl: url, prepare: false },
    env: {
      DATABASE_URL: pooled.toString(),
      DATABASE_DIRECT_URL: url,
      DATABASE_PREPARE: 'false',
    },
  };
}

/**
 * A fresh, migrated database of its own; on Postgres through PgBouncer when TEST_PGBOUNCER is
 * set (global-setup.ts) or `opts.pgbouncerPort` names one.
 */
export async function createTestDatabase(
  engine: Engine,
  opts: { pgbouncerPort?: number } = {},
): Promise<TestDatabase> {
  if (engine === 'pglite') {
    const dump = readFileSync(inject('pgliteDump'));
    const pglite = new PGlite({ loadDataDir: new Blob([new Uint8Array(dump)]) });
    const database = await openDatabase({ pglite });
    return { database, drop: () => database.close() };
  }
  const tpl = inject('postgresTemplate');
  if (!tpl) throw new Error('TEST_DATABASE_URL is not set');
  const name = `sb_t_${randomBytes(6).toString('hex')}`;
  const admin = postgres(tpl.adminUrl, { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`create database "${name}" template "${tpl.template}"`);
  } finally {
    await admin.end();
  }
  const url = databaseUrlWithName(tpl.adminUrl, name);
  const { open, env } = connectionTo(url, opts.pgbouncerPort ?? inject('pgbouncerPort'));
  const database = await openDatabase({ ...open, maxConnections: 5 });
  return {
    database,
    url,
    open,
    env,
    async drop() {
      await database.close();
      const a = postgres(tpl.adminUrl, { max: 1, onnotice: () => {} });
      await a.unsafe(`drop database if exists "${name}" with (force)`);
      await a.end();
    },
  };
}

export interface EngineContext {
  engine: Engine;
  database(): Database;
  url(): string | undefined;
}

/** Runs `body` once per available engine, each with a database of its own for the block. */
export function describeEachEngine(name: string, body: (ctx: EngineContext) => void): void {
  for (const engine of availableEngines()) {
    describe(`${name} [${engine}]`, () => {
      let test: TestDatabase | undefined;
      beforeAll(async () => {
        test = await createTestDatabase(engine);
      });
      afterAll(async () => {
        await test?.drop();
      });
      body({
        engine,
        database: () => {
          if (!test) throw new Error('database not ready (used outside a test?)');
          return test.database;
        },
        url: () => test?.url,
      });
    });
  }
}

/** An audit row written at `at`, as the API writes them (src/http/audit.ts); its id. */
export async function insertAuditRow(db: Db, at: Date): Promise<number> {
  const [row] = await db
    .insert(auditLog)
    .values({
      at,
      token: 'API_TOKEN',
      method: 'POST',
      route: '/v1/messages',
      status: 202,
      requestId: `r-${randomUUID()}`,
      changes: {},
    })
    .returning({ id: auditLog.id });
  return row!.id;
}
