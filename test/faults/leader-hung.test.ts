/**
 * A dispatcher leader that hangs instead of dying (SIGSTOP: its connections stay open):
 * Postgres ends its idle session after LEADER_IDLE_TIMEOUT_MS, which frees the lock, and
 * another instance, waiting for the lock in Postgres, has it at once. Resumed, the old
 * leader does not believe it still leads. A live leader that makes no call meanwhile keeps
 * the lock: the lock's heartbeat keeps its session from idling out.
 */
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Database, LEADER_IDLE_TIMEOUT_MS, openDatabase } from '../../src/db/client.ts';
import { availableEngines, createTestDatabase, type TestDatabase } from '../support/db.ts';
import { NO_POSTGRES, onlyIf } from '../support/skip.ts';
import { type Proc, sleep, spawnProcess, waitUntil } from './helpers.ts';

const onPostgres = availableEngines().includes('postgres');

/** `url` with the sessions it opens named `name` in pg_stat_activity. */
function named(url: string, name: string): string {
  const u = new URL(url);
  u.searchParams.set('application_name', name);
  return u.toString();
}

describe('a hung dispatcher leader', () => {
  let db: TestDatabase | undefined;
  let admin: postgres.Sql | undefined;
  const procs: Proc[] = [];
  const opened: Database[] = [];
  beforeAll(async () => {
    if (!onPostgres) return;
    db = await createTestDatabase('postgres');
    admin = postgres(db.url!, { max: 1, onnotice: () => {} });
  });
  afterAll(async () => {
    for (const p of procs) p.child.kill('SIGCONT'); // a stopped process does not die of SIGKILL's wait
    await Promise.all(procs.map((p) => p.kill('SIGKILL')));
    await Promise.all(opened.map((d) => d.close()));
    await admin?.end({ timeout: 1 });
    await db?.drop();
  });

  /** The sessions holding advisory lock `key` now: their application names and pids. */
  async function holders(key: number): Promise<{ name: string; pid: number }[]> {
    return admin!<{ name: string; pid: number }[]>`
      select a.application_name as name, l.pid
      from pg_locks l join pg_stat_activity a on a.pid = l.pid
      where l.locktype = 'advisory' and l.granted and l.objid = ${key}
        and l.database = (select oid from pg_database where datname = current_database())
      order by l.pid`;
  }

  async function open(name: string): Promise<Database> {
    const database = await openDatabase({ url: named(db!.url!, name), maxConnections: 1 });
    opened.push(database);
    return database;
  }

  it.runIf(onPostgres)(
    onlyIf(
      onPostgres,
      'loses the lock to another instance within the idle timeout; resumed, it does not lead',
      NO_POSTGRES,
    ),
    async () => {
      const key = 0x5b_0ff4;
      const a = await spawnProcess({
        entry: 'test/faults/leader-child.ts',
        env: { DATABASE_URL: named(db!.url!, 'leader-a'), LEADER_KEY: String(key) },
        ready: /leader-child listening on (\d+)/,
      });
      procs.push(a);
      const aAcquires = async () => (await fetch(`${a.url}/acquire`)).text();
      expect(await aAcquires()).toBe('true');
      let bTold = false;
      const b = (await open('leader-b')).createLeaderLock(key, () => {
        bTold = true;
      });
      expect(await b.tryAcquire()).toBe(false); // B now waits for the lock in Postgres

      // the holders, sampled through the whole handover
      const samples: string[][] = [];
      let sampling = true;
      const sampler = (async () => {
        while (sampling) {
          samples.push((await holders(key)).map((h) => h.name));
          await sleep(25);
        }
      })();
      try {
        a.child.kill('SIGSTOP');
        // a hung A answers nothing, so only Postgres ending A's idle session frees the lock;
        // B, waiting for it, is told without trying again
        await waitUntil(
          () => bTold,
          'the waiting instance to get the lock from the stopped leader',
          LEADER_IDLE_TIMEOUT_MS + 3000,
          10,
        );
        expect(await b.tryAcquire()).toBe(true);
        a.child.kill('SIGCONT');
        // resumed, A answers from its session as Postgres has it now: not the leader
        expect(await aAcquires()).toBe('false');
        expect(await b.tryAcquire()).toBe(true);
        expect(await aAcquires()).toBe('false');
      } finally {
        sampling = false;
        await sampler;
      }
      // and one after the end: the sampler's sleep may have left the last steps unseen
      samples.push((await holders(key)).map((h) => h.name));
      // never two holders; A, then (perhaps nobody for a moment) B, and never A again
      expect(samples.filter((s) => s.length > 1)).toEqual([]);
      const order = samples
        .map((s) => s[0])
        .filter((n, i, all) => n !== undefined && n !== all[i - 1]);
      expect(order).toEqual(['leader-a', 'leader-b']);
      expect(samples.at(-1)).toEqual(['leader-b']);
    },
    60_000,
  );

  it.runIf(onPostgres)(
    onlyIf(
      onPostgres,
      'a live leader that makes no call keeps the lock past the idle timeout (heartbeat)',
      NO_POSTGRES,
    ),
    async () => {
      const key = 0x5b_0ff5;
      const lock = (await open('leader-c')).createLeaderLock(key);
      expect(await lock.tryAcquire()).toBe(true);
      const [first] = await holders(key);
      expect(first?.name).toBe('leader-c');
      // three idle timeouts without a tryAcquire: the same session holds it throughout
      const until = performance.now() + 3 * LEADER_IDLE_TIMEOUT_MS;
      while (performance.now() < until) {
        expect(await holders(key)).toEqual([first]);
        await sleep(100);
      }
      expect(await lock.tryAcquire()).toBe(true);
      expect(await holders(key)).toEqual([first]);
      await lock.release();
      expect(await holders(key)).toEqual([]);
    },
    30_000,
  );
});
