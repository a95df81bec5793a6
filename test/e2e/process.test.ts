import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { phone, readJson, uniq } from '../support/app.ts';
import { availableEngines, createTestDatabase, type TestDatabase } from '../support/db.ts';
import { startServerProcess } from '../support/process.ts';
import { NO_POSTGRES, onlyIf } from '../support/skip.ts';

async function roundTrip(url: string, cmid: string) {
  const res = await fetch(`${url}/v1/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      messages: [
        { from: 'Acme', to: phone(), type: 'sms', text: 'hello', customerMessageId: cmid },
      ],
    }),
  });
  expect(res.status).toBe(202);
}

describe('the real process', () => {
  const dirs: string[] = [];
  const dbs: TestDatabase[] = [];
  afterAll(async () => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
    for (const d of dbs) await d.drop();
  });

  it('starts on an embedded database, keeps data across a restart, and stops cleanly on SIGTERM', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'switchboard-e2e-'));
    dirs.push(dataDir);
    const first = await startServerProcess({ DATA_DIR: dataDir });
    expect(first.output()).toContain('Try:');
    expect((await fetch(`${first.url}/readyz`)).status).toBe(200);
    const cmid = uniq('e2e');
    await roundTrip(first.url, cmid);
    const stopped = await first.stop('SIGTERM');
    expect(stopped.code).toBe(0);
    expect(stopped.ms).toBeLessThan(10_000);

    const second = await startServerProcess({ DATA_DIR: dataDir });
    const res = await fetch(`${second.url}/v1/messages/${cmid}`);
    expect(res.status).toBe(200);
    // the built-in sandbox took it meanwhile: where it got to depends on timing, not on storage
    expect(['queued', 'accepted', 'sent', 'delivered']).toContain((await readJson(res)).status);
    expect((await second.stop('SIGINT')).code).toBe(0);
  });

  it.runIf(availableEngines().includes('postgres'))(
    onlyIf(
      availableEngines().includes('postgres'),
      'runs on real Postgres with DATABASE_URL, applying the same migrations',
      NO_POSTGRES,
    ),
    async () => {
      const db = await createTestDatabase('postgres');
      dbs.push(db);
      // a fresh, empty database: the server must migrate it itself
      await db.database.db.execute(
        'drop schema public cascade; create schema public; drop schema if exists drizzle cascade',
      );
      // DATABASE_URL, and through PgBouncer when TEST_PGBOUNCER is set (test/support/db.ts)
      const server = await startServerProcess({ ...db.env! });
      const cmid = uniq('e2e-pg');
      await roundTrip(server.url, cmid);
      const got = await fetch(`${server.url}/v1/messages/${cmid}`);
      expect((await readJson(got)).customerMessageId).toBe(cmid);
      expect((await server.stop()).code).toBe(0);
    },
  );

  it('refuses to start with a bad variable, naming it', async () => {
    await expect(startServerProcess({ PORT: 'eighty' })).rejects.toThrow(/PORT/);
  });
});
