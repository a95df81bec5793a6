/** `switchboard migrate`: applies the committed migrations to DATABASE_URL (or the embedded db). */
import { loadConfig } from '../config.ts';
import { openDatabase } from '../db/client.ts';
import { migrateDatabase } from '../db/migrate.ts';
import type { CliIo } from './io.ts';

export async function runMigrate(io: CliIo): Promise<number> {
  const config = loadConfig(io.env);
  const database = await openDatabase({ url: config.databaseUrl, dataDir: config.dataDir });
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
