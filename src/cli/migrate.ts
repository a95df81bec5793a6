/**
 * `switchboard migrate`: applies the committed migrations to DATABASE_URL (or the embedded db),
 * through DATABASE_DIRECT_URL when set (a session-level lock holds off other migrators).
 * The embedded database is one process's at a time (db/data-dir-lock.ts): while a server holds
 * it, migrate refuses (that server applied the migrations when it started) and exits 1.
 */
import { loadConfig } from '../config.ts';
import { configuredDatabase, type Database, openDatabase } from '../db/client.ts';
import { DataDirLockedError, describeHolder } from '../db/data-dir-lock.ts';
import { migrateDatabase } from '../db/migrate.ts';
import type { CliIo } from './io.ts';

export async function runMigrate(io: CliIo): Promise<number> {
  const config = loadConfig(io.env);
  let database: Database;
  try {
    database = await openDatabase(configuredDatabase(config));
  } catch (err) {
    if (!(err instanceof DataDirLockedError) || err.holder === undefined) throw err;
    io.stderr.write(
      `switchboard migrate: the embedded database in ${config.dataDir} is open in ${describeHolder(err.holder)}; a server applies the migrations itself when it starts: stop it to run migrate\n`,
    );
    return 1;
  }
  try {
    await migrateDatabase(database);
    io.stdout.write(
      `migrations applied (${database.kind === 'postgres' ? 'Postgres' : `embedded, ${config.dataDir}`})\n`,
    );
    return 0;
  } finally {
    await database.close();
  }
}
