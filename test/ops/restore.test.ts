/**
 * Backups, restored: the runbook's own commands (docs/operations.md, the `ops-test` blocks)
 * on both engines. A server writes a message and its timeline; the backup is taken; a second
 * message is written after it; the restore goes into a fresh database (Postgres: pg_dump and
 * pg_restore, when TEST_DATABASE_URL is set) or directory (embedded: stop, tar, untar); a
 * server started on it has the first message with its whole timeline and not the second.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { phone, readJson, uniq } from '../support/app.ts';
import { availableEngines, createTestDatabase, type TestDatabase } from '../support/db.ts';
import { databaseUrlWithName } from '../support/global-setup.ts';
import { type ServerProcess, startServerProcess } from '../support/process.ts';
import { eventually } from '../support/server.ts';
import { NO_POSTGRES, noTool, onlyIf } from '../support/skip.ts';
import { requireTool, runBlock } from './support.ts';

interface TimelineEvent {
  status: string;
  at: string;
  source: string;
}

async function send(url: string, cmid: string): Promise<void> {
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

/** The message's timeline once it is delivered (the built-in sandbox delivers in ~1 s). */
async function deliveredTimeline(url: string, cmid: string): Promise<TimelineEvent[]> {
  return eventually(
    async () => {
      const m = await readJson(await fetch(`${url}/v1/messages/${cmid}`));
      return m.status === 'delivered' ? (m.timeline as TimelineEvent[]) : undefined;
    },
    20_000,
    `${cmid} delivered`,
  );
}

async function timelineOf(url: string, cmid: string): Promise<TimelineEvent[] | number> {
  const res = await fetch(`${url}/v1/messages/${cmid}`);
  return res.status === 200 ? (await readJson(res)).timeline : res.status;
}

const PG_DUMP = availableEngines().includes('postgres')
  ? requireTool('pg_dump', 'postgresql-client', 'postgres restore')
  : undefined;

describe('backup and restore, as the runbook says', () => {
  const dirs: string[] = [];
  const servers: ServerProcess[] = [];
  const dbs: TestDatabase[] = [];
  const extraDbs: string[] = [];
  const tmp = () => {
    const d = mkdtempSync(join(tmpdir(), 'switchboard-backup-'));
    dirs.push(d);
    return d;
  };
  const start = async (env: Record<string, string>) => {
    const s = await startServerProcess(env);
    servers.push(s);
    return s;
  };
  afterAll(async () => {
    for (const s of servers) await s.stop();
    for (const d of dbs) await d.drop();
    const tpl = inject('postgresTemplate');
    if (tpl && extraDbs.length > 0) {
      const admin = postgres(tpl.adminUrl, { max: 1, onnotice: () => {} });
      for (const name of extraDbs)
        await admin.unsafe(`drop database if exists "${name}" with (force)`);
      await admin.end();
    }
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  }, 60_000);

  it('embedded: stop, copy DATA_DIR, restore it, and the timeline is back', async () => {
    const work = tmp();
    const DATA_DIR = join(work, 'data');
    const BACKUP = join(work, 'switchboard-data.tar.gz');
    const kept = uniq('before-backup');
    const later = uniq('after-backup');

    const first = await start({ DATA_DIR });
    await send(first.url, kept);
    const timeline = await deliveredTimeline(first.url, kept);
    expect((await first.stop()).code).toBe(0);
    runBlock('backup-embedded', { DATA_DIR, BACKUP });

    const second = await start({ DATA_DIR });
    await send(second.url, later);
    await deliveredTimeline(second.url, later);
    expect((await second.stop()).code).toBe(0);

    runBlock('restore-embedded', { DATA_DIR, BACKUP });
    const restored = await start({ DATA_DIR });
    expect(await timelineOf(restored.url, kept)).toEqual(timeline);
    expect(await timelineOf(restored.url, later)).toBe(404);
    expect((await restored.stop()).code).toBe(0);
  }, 180_000);

  it.runIf(PG_DUMP)(
    onlyIf(
      PG_DUMP !== undefined,
      'Postgres: pg_dump while running, pg_restore into a fresh database, and the timeline is back',
      availableEngines().includes('postgres')
        ? noTool('pg_dump', 'postgresql-client')
        : NO_POSTGRES,
    ),
    async () => {
      const work = tmp();
      const BACKUP = join(work, 'switchboard.dump');
      const db = await createTestDatabase('postgres');
      dbs.push(db);
      const kept = uniq('before-backup');
      const later = uniq('after-backup');

      const live = await start({ DATABASE_URL: db.url! });
      await send(live.url, kept);
      const timeline = await deliveredTimeline(live.url, kept);
      runBlock('backup-postgres', { DATABASE_URL: db.url!, BACKUP });
      await send(live.url, later);
      await deliveredTimeline(live.url, later);
      expect((await live.stop()).code).toBe(0);

      // the runbook's "an empty database": created the way createdb does, from template1
      const tpl = inject('postgresTemplate')!;
      const name = `sb_restored_${Date.now().toString(36)}`;
      const admin = postgres(tpl.adminUrl, { max: 1, onnotice: () => {} });
      await admin.unsafe(`create database "${name}"`);
      await admin.end();
      extraDbs.push(name);
      const restoredUrl = databaseUrlWithName(tpl.adminUrl, name);

      runBlock('restore-postgres', { DATABASE_URL: restoredUrl, BACKUP });
      const restored = await start({ DATABASE_URL: restoredUrl });
      expect(await timelineOf(restored.url, kept)).toEqual(timeline);
      expect(await timelineOf(restored.url, later)).toBe(404);
      expect((await restored.stop()).code).toBe(0);
    },
    180_000,
  );
});
