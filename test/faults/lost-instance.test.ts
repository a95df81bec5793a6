/**
 * An instance lost without closing its connections (its machine gone, the network cut) in the
 * middle of a transaction: on a direct Postgres the pool's sessions start with
 * LOST_CLIENT_SETTINGS, so Postgres ends that transaction once it has been idle that long and
 * the locks it held are free for the other instances, instead of when TCP gives up on the
 * connection (two hours by default). Here the lost instance is a transaction that stops
 * talking (its code waits on a promise that is resolved only at the end), the other instance
 * a plain session that waits for the same lock in Postgres, bounded by `lock_timeout`.
 * Behind a pooler, which refuses startup settings, the pool opens without them.
 */
import { sql } from 'drizzle-orm';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { type Database, LOST_CLIENT_SETTINGS, openDatabase } from '../../src/db/client.ts';
import { availableEngines, createTestDatabase, type TestDatabase } from '../support/db.ts';
import { findPgBouncer, startPgBouncer } from '../support/pgbouncer.ts';
import { NO_POSTGRES, noTool, onlyIf } from '../support/skip.ts';

const onPostgres = availableEngines().includes('postgres');
const hasBouncer = findPgBouncer() !== undefined;

describe('a transaction whose instance was lost', () => {
  let db: TestDatabase | undefined;
  let other: postgres.Sql | undefined;
  const opened: Database[] = [];
  beforeAll(async () => {
    if (!onPostgres) return;
    // its URL is Postgres itself, whatever TEST_PGBOUNCER says; the pools here open on it
    db = await createTestDatabase('postgres');
    other = postgres(db.url!, { max: 1, onnotice: () => {} });
  });
  afterAll(async () => {
    await Promise.all(opened.map((d) => d.close()));
    await other?.end({ timeout: 1 });
    await db?.drop();
  });

  async function open(opts: Parameters<typeof openDatabase>[0]): Promise<Database> {
    const database = await openDatabase({ maxConnections: 1, ...opts });
    opened.push(database);
    return database;
  }

  async function show(database: Database, setting: string): Promise<string> {
    const rows = (await database.db.execute(sql.raw(`show ${setting}`))) as unknown as Record<
      string,
      string
    >[];
    return rows[0]![setting]!;
  }

  /**
   * In `lost`, a transaction takes advisory lock `key`, then goes silent; the other session
   * asks for the lock, waiting up to `waitMs`. Answers whether it got it, and how the silent
   * transaction ended once it spoke again.
   */
  async function lockAfterLoss(lost: Database, key: number, waitMs: number) {
    let locked!: () => void;
    const holding = new Promise<void>((r) => {
      locked = r;
    });
    let speak!: () => void;
    const silence = new Promise<void>((r) => {
      speak = r;
    });
    const transaction = lost.db
      .transaction(async (tx) => {
        await tx.execute(sql`select pg_advisory_xact_lock(${key})`);
        locked();
        await silence; // the instance is gone: nothing more reaches Postgres
        await tx.execute(sql`select 1`);
      })
      // Postgres ended the session (FATAL 25P03, then the connection closed)
      .then(
        () => 'committed',
        () => 'failed',
      );
    await holding;
    const got = await other!
      .begin(async (t) => {
        await t.unsafe(`set local lock_timeout = ${waitMs}`);
        await t`select pg_advisory_xact_lock(${key})`;
        return true;
      })
      .catch((err: { code?: string }) => {
        if (err.code === '55P03') return false; // lock_not_available: still held
        throw err;
      });
    speak();
    return { got, lost: await transaction };
  }

  it.runIf(onPostgres)(
    onlyIf(onPostgres, "starts the pool's sessions with LOST_CLIENT_SETTINGS", NO_POSTGRES),
    async () => {
      const database = await open({ url: db!.url! });
      // pg_settings gives each in the unit it is set in (ms, s)
      const rows = (await database.db.execute(
        sql`select name, setting from pg_settings where name in (${sql.join(
          Object.keys(LOST_CLIENT_SETTINGS).map((k) => sql`${k}`),
          sql`, `,
        )})`,
      )) as unknown as { name: string; setting: string }[];
      expect(Object.fromEntries(rows.map((r) => [r.name, Number(r.setting)]))).toEqual(
        LOST_CLIENT_SETTINGS,
      );
    },
  );

  it.runIf(onPostgres)(
    onlyIf(
      onPostgres,
      'frees its locks once it has been idle the set time, and keeps them without the setting',
      NO_POSTGRES,
    ),
    async () => {
      // the setting at 300 ms: the other session, waiting up to 20 s, gets the lock
      const bounded = await open({
        url: db!.url!,
        lostClientSettings: { idle_in_transaction_session_timeout: 300 },
      });
      expect(await lockAfterLoss(bounded, 0x5b_0f51, 20_000)).toEqual({
        got: true,
        lost: 'failed',
      });
      // without it, 2 s of waiting are not enough: the lost transaction still holds the lock
      const unbounded = await open({ url: db!.url!, lostClientSettings: {} });
      expect(await lockAfterLoss(unbounded, 0x5b_0f52, 2_000)).toEqual({
        got: false,
        lost: 'committed',
      });
    },
  );

  it.runIf(onPostgres)(
    onlyIf(
      onPostgres,
      'opens without the settings where the server refuses one by name',
      NO_POSTGRES,
    ),
    async () => {
      // Postgres refuses a setting it does not know, naming it (as an older server or another
      // pooler might refuse one of LOST_CLIENT_SETTINGS): the pool opens again without them
      const database = await open({
        url: db!.url!,
        lostClientSettings: { switchboard_no_such_setting: 1 },
      });
      expect(await show(database, 'application_name')).toBe('switchboard');
    },
  );

  it.runIf(onPostgres && hasBouncer)(
    onlyIf(
      onPostgres && hasBouncer,
      'opens without the settings behind a pooler, which refuses them, configured as Postgres or as a pooler',
      onPostgres ? noTool('pgbouncer', 'pgbouncer') : NO_POSTGRES,
    ),
    async () => {
      const bouncer = await startPgBouncer(inject('postgresTemplate')!.adminUrl);
      try {
        const pooled = bouncer.via(db!.url!);
        // as if Postgres itself (prepared statements, no direct URL): the probe is refused and
        // the pool opens again without the settings
        const asPostgres = await open({ url: pooled });
        expect(await show(asPostgres, 'idle_in_transaction_session_timeout')).toBe('0');
        // configured as a pooler: nothing is sent to refuse
        const asPooler = await open({ url: pooled, prepare: false, directUrl: db!.url! });
        expect(await show(asPooler, 'idle_in_transaction_session_timeout')).toBe('0');
        await Promise.all([asPostgres.close(), asPooler.close()]);
      } finally {
        await bouncer.stop();
      }
    },
  );
});
