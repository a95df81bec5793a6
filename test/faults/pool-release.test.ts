/**
 * A pool connection that dies while reserved (Postgres restarted or failed over, its backend
 * killed) is given back to the pool as closed, so that the pool connects it again when a
 * query needs it; and what was queued on the reservation fails instead of waiting for ever.
 * postgres.js 3.4.9 put such a connection back among the open ones, where every query the pool
 * gave it failed (or never settled) until the process restarted, left queries queued behind
 * a statement being described unsettled, and dropped a reserve() that was waiting for a
 * connection when one closed (upstream porsager/postgres#1199, #1195). The
 * fix is in scripts/patch-postgres-js.mjs; every delivery batch runs on a reserved connection
 * (src/db/client.ts `pipelinedTransaction`).
 *
 * Each case kills only the backend of a connection it opened itself.
 */
import { sql as q } from 'drizzle-orm';
import postgres from 'postgres';
import { afterAll, describe, expect, it } from 'vitest';
import { openDatabase, pipelinedTransaction } from '../../src/db/client.ts';
import { withTimeout } from '../../src/db/errors.ts';
import { availableEngines } from '../support/db.ts';
import { NO_POSTGRES, onlyIf } from '../support/skip.ts';

const onPostgres = availableEngines().includes('postgres');
const url = process.env.TEST_DATABASE_URL ?? '';
/** a bound on answers that must come at once: a hang fails the case with its name */
const SETTLES_MS = 5000;

describe('a reserved connection that dies', () => {
  const ends: (() => Promise<unknown>)[] = [];
  afterAll(async () => {
    await Promise.all(ends.map((end) => end()));
  });
  const admin = onPostgres ? postgres(url, { max: 1, onnotice: () => {} }) : undefined;
  if (admin) ends.push(() => admin.end());

  /**
   * A pool of one connection, and `lose(pid)`: kills that backend and waits until the pool
   * has seen it close.
   */
  function pool(prepare: boolean) {
    let closed: () => void = () => {};
    const sql = postgres(url, {
      max: 1,
      prepare,
      onnotice: () => {},
      onclose: () => closed(),
    });
    ends.push(() => sql.end({ timeout: 1 }));
    const lose = async (pid: number) => {
      const seen = new Promise<void>((resolve) => (closed = resolve));
      await kill(pid);
      await seen;
    };
    return { sql, lose };
  }

  const backendPid = async (on: postgres.Sql) => {
    const [row] = await on<{ pid: number }[]>`select pg_backend_pid() as pid`;
    return row!.pid;
  };
  const kill = async (pid: number) => {
    await admin!`select pg_terminate_backend(${pid})`;
  };

  it.runIf(onPostgres)(
    onlyIf(onPostgres, 'goes back to the pool closed: the next queries connect again', NO_POSTGRES),
    async () => {
      const { sql, lose } = pool(true);
      const conn = await sql.reserve();
      const pid = await backendPid(conn);
      await lose(pid);
      await expect(withTimeout(conn`select 1`, SETTLES_MS, 'the dead reservation')).rejects.toThrow(
        /CONNECTION_CLOSED|write CONNECTION/,
      );
      conn.release();
      for (let i = 0; i < 3; i++) {
        const [row] = await withTimeout(sql`select ${i}::int as n`, SETTLES_MS, `query ${i}`);
        expect(row!.n).toBe(i);
      }
      expect(await backendPid(sql)).not.toBe(pid);
    },
  );

  it.runIf(onPostgres)(
    onlyIf(onPostgres, 'fails what was queued behind a statement being described', NO_POSTGRES),
    async () => {
      // unprepared with parameters (DATABASE_PREPARE=false): the statement is described
      // first, and the reservation queues what comes after it until then
      const { sql, lose } = pool(false);
      const conn = await sql.reserve();
      const pid = await backendPid(conn);
      const slow = conn`select pg_sleep(${30})`.execute();
      const behind = conn`select 1`.execute();
      slow.catch(() => {});
      behind.catch(() => {});
      await lose(pid);
      await expect(withTimeout(slow, SETTLES_MS, 'the running statement')).rejects.toThrow(
        /terminat|CONNECTION_CLOSED|ECONNRESET/,
      );
      await expect(withTimeout(behind, SETTLES_MS, 'the queued statement')).rejects.toThrow(
        /CONNECTION_CLOSED/,
      );
      conn.release();
      const [row] = await withTimeout(sql`select 2 as n`, SETTLES_MS, 'the next query');
      expect(row!.n).toBe(2);
    },
  );

  it.runIf(onPostgres)(
    onlyIf(onPostgres, 'gives a waiting reserve() the connection made again for it', NO_POSTGRES),
    async () => {
      const { sql, lose } = pool(true);
      const first = await sql.reserve();
      const pid = await backendPid(first);
      // the pool's one connection is taken: this one waits in the pool's queue
      const second = sql.reserve();
      await lose(pid);
      const next = await withTimeout(second, SETTLES_MS, 'the waiting reserve()');
      expect(await backendPid(next)).not.toBe(pid);
      first.release();
      next.release();
      const [row] = await withTimeout(sql`select 3 as n`, SETTLES_MS, 'the next query');
      expect(row!.n).toBe(3);
    },
  );

  it.runIf(onPostgres)(
    onlyIf(
      onPostgres,
      'a delivery batch that loses its connection leaves the pool whole',
      NO_POSTGRES,
    ),
    async () => {
      const database = await openDatabase({ url, maxConnections: 1 });
      ends.push(() => database.close());
      await expect(
        pipelinedTransaction(database.db, async (tx, last) => {
          const [row] = (await tx.execute(q`select pg_backend_pid() as pid`)) as unknown as {
            pid: number;
          }[];
          await kill(row!.pid);
          return last(q`select 1`);
        }),
      ).rejects.toThrow();
      for (let i = 0; i < 3; i++) {
        const rows = (await withTimeout(
          database.db.execute(q`select ${i}::int as n`),
          SETTLES_MS,
          `query ${i} after the batch`,
        )) as unknown as { n: number }[];
        expect(rows[0]!.n).toBe(i);
      }
    },
  );
});
