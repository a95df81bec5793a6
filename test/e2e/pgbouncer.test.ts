/**
 * Switchboard behind a real PgBouncer (Debian's 1.18: transaction pooling, no prepared
 * statements) as docs/scaling.md, "Behind PgBouncer", configures it: DATABASE_URL through
 * PgBouncer with DATABASE_PREPARE=false, DATABASE_DIRECT_URL to Postgres itself. Two
 * instances start on an empty database (migrating through the direct URL), messages and a
 * call go through end to end, one dispatcher leads on a direct connection, and LISTEN hears
 * what the pool's transactions NOTIFY. Then why the direct URL is needed: a session lock taken
 * through PgBouncer outlives its session. (The rest of the e2e suite runs through PgBouncer
 * too with TEST_PGBOUNCER=1: test/support/db.ts.)
 */
import { sql } from 'drizzle-orm';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  type Database,
  executePrepared,
  openDatabase,
  pipelinedTransaction,
} from '../../src/db/client.ts';
import type { RunningServer } from '../../src/server.ts';
import { phone, readJson, uniq } from '../support/app.ts';
import { availableEngines, createTestDatabase, type TestDatabase } from '../support/db.ts';
import { findPgBouncer, type PgBouncer, startPgBouncer } from '../support/pgbouncer.ts';
import { eventually, startTestServer } from '../support/server.ts';
import { NO_POSTGRES, noTool, onlyIf } from '../support/skip.ts';

const onPostgres = availableEngines().includes('postgres');
const hasBouncer = findPgBouncer() !== undefined;
const runs = onPostgres && hasBouncer;
const why = onPostgres ? noTool('pgbouncer', 'pgbouncer') : NO_POSTGRES;

// the session-level advisory locks of src/db/migrate.ts and src/workers.ts
const MIGRATION_LOCK = 0x5b_0001;
const LEADER_LOCK = 0x5b_0002;

async function post(url: string, body: unknown) {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

describe.runIf(runs)(onlyIf(runs, 'Switchboard behind PgBouncer in transaction mode', why), () => {
  let bouncer: PgBouncer;
  let db: TestDatabase;
  /** the test's own direct connection, to look at locks and sessions */
  let direct: postgres.Sql;
  let a: RunningServer;
  let b: RunningServer;

  beforeAll(async () => {
    bouncer = await startPgBouncer(inject('postgresTemplate')!.adminUrl);
    db = await createTestDatabase('postgres', { pgbouncerPort: bouncer.port });
    direct = postgres(db.url!, { max: 1, onnotice: () => {} });
    // an empty database: the first server migrates it, through DATABASE_DIRECT_URL
    await direct.unsafe(
      'drop schema public cascade; create schema public; drop schema if exists drizzle cascade',
    );
    expect(db.env).toMatchObject({ DATABASE_PREPARE: 'false', DATABASE_DIRECT_URL: db.url });
    expect(db.env!.DATABASE_URL).toContain(`:${bouncer.port}/`);
    const CALLBACK_TOKEN = 'pgbouncer-callback-token';
    // each server opens its database from its environment, as `npm start` does
    a = await startTestServer(undefined, { env: { ...db.env!, CALLBACK_TOKEN } });
    b = await startTestServer(undefined, {
      env: {
        ...db.env!,
        CALLBACK_TOKEN,
        PUBLIC_URL: a.url,
        PROVIDER_BASE_URL: `${a.url}/sandbox`,
      },
    });
  });
  afterAll(async () => {
    await b?.stop();
    await a?.stop();
    await direct?.end({ timeout: 1 });
    await db?.drop();
    await bouncer?.stop();
  });

  it('migrated the empty database through the direct URL, and let go of its lock', async () => {
    const [row] = await direct<
      { n: string }[]
    >`select count(*) as n from drizzle.__drizzle_migrations`;
    expect(Number(row!.n)).toBeGreaterThan(0);
    // the migrators' session lock ended with their session; taken through PgBouncer, it would
    // still be held by a server connection PgBouncer kept (see the last test)
    const held = await direct`
      select pid from pg_locks
      where database = (select oid from pg_database where datname = current_database())
        and locktype = 'advisory' and objid = ${MIGRATION_LOCK}`;
    expect(held).toHaveLength(0);
  });

  it('sends messages through both instances: dispatched once each to the sandbox and delivered', async () => {
    const cmids = Array.from({ length: 30 }, () => uniq('pgb'));
    for (const [i, server] of [a, b].entries()) {
      const res = await post(`${server.url}/v1/messages`, {
        messages: cmids
          .filter((_, j) => j % 2 === i)
          .map((customerMessageId) => ({
            from: 'Acme',
            to: phone(),
            type: 'sms',
            text: 'through the pooler',
            customerMessageId,
          })),
      });
      expect(res.status).toBe(202);
    }
    for (const cmid of cmids) {
      // delivered can come before sent: a callback the receiver did not take at once (a 5xx
      // on a loaded machine) is retried on its own schedule, so wait for the whole timeline
      const message = await eventually(
        async () => {
          const m = await readJson(await fetch(`${b.url}/v1/messages/${cmid}`));
          const statuses = m.timeline?.map((e: { status: string }) => e.status) ?? [];
          return m.status === 'delivered' && statuses.includes('sent') && m;
        },
        20_000,
        `${cmid} delivered, with sent in its timeline`,
      );
      expect(message.timeline.map((e: { status: string }) => e.status)).toEqual(
        expect.arrayContaining(['queued', 'accepted', 'sent', 'delivered']),
      );
      expect(a.sandbox!.messages.list({ customerMessageId: cmid })).toHaveLength(1);
    }
  });

  it('runs a call with its webhooks to its outcome and a delivered follow-up', async () => {
    const to = phone();
    expect((await post(`${a.url}/sandbox/_control/scripts`, { to, keys: ['2', '1'] })).status).toBe(
      201,
    );
    const res = await post(`${b.url}/v1/calls`, {
      flow: 'appointment-reminder',
      to,
      from: 'Clinic',
      vars: { name: 'Ann', date: 'Monday 10:00' },
    });
    expect(res.status).toBe(202);
    const { id } = await readJson(res);
    const call = await eventually(
      async () => {
        const c = await readJson(await fetch(`${a.url}/v1/calls/${id}`));
        return c.state === 'ended' && c;
      },
      20_000,
      `call ${id} ended`,
    );
    expect(call.path.map((p: { menu: string; key: string }) => `${p.menu}:${p.key}`)).toEqual([
      'main:2',
      'reschedule:1',
    ]);
    expect(call.outcome).toBe('reschedule-requested');

    const confirmTo = phone();
    await post(`${a.url}/sandbox/_control/scripts`, { to: confirmTo, keys: ['1'] });
    const confirm = await readJson(
      await post(`${a.url}/v1/calls`, {
        flow: 'appointment-reminder',
        to: confirmTo,
        from: 'Clinic',
        vars: { name: 'Bo', date: 'Friday' },
      }),
    );
    const confirmed = await eventually(
      async () => {
        const c = await readJson(await fetch(`${b.url}/v1/calls/${confirm.id}`));
        const followUp = c.messages.find((m: { role: string }) => m.role === 'follow-up');
        return c.state === 'ended' && followUp?.status === 'delivered' && c;
      },
      20_000,
      `call ${confirm.id} and its follow-up`,
    );
    expect(confirmed.outcome).toBe('confirmed');
    const followUp = confirmed.messages.find((m: { role: string }) => m.role === 'follow-up');
    const copies = a.sandbox!.messages.list({ customerMessageId: followUp.customerMessageId });
    expect(copies).toHaveLength(1);
    expect(copies[0]!.text).toMatch(/Thanks Bo, see you on Friday/);
  });

  it('holds the dispatcher lock once, and it and the LISTENs on direct connections', async () => {
    const pooled = await bouncer.serverPids();
    expect(pooled.length).toBeGreaterThan(0); // the pool's queries do go through PgBouncer
    const holders = await direct<{ pid: number }[]>`
      select pid from pg_locks
      where database = (select oid from pg_database where datname = current_database())
        and locktype = 'advisory' and granted and objid = ${LEADER_LOCK}`;
    expect(holders).toHaveLength(1);
    expect(pooled).not.toContain(holders[0]!.pid);
    // each instance listens on two channels (src/workers.ts): on its own connection
    const listeners = await direct<{ pid: number }[]>`
      select pid from pg_stat_activity
      where datname = current_database() and query ilike 'listen %'`;
    expect(listeners.length).toBeGreaterThanOrEqual(2);
    for (const l of listeners) expect(pooled).not.toContain(l.pid);
  });

  it('wakes a listener on a NOTIFY from a transaction of the pool', async () => {
    const channel = `sb_pgbouncer_${Date.now()}`;
    let heard = 0;
    const stop = await a.database.listen(channel, () => {
      heard++;
    });
    try {
      await b.database.db.transaction(async (tx) => {
        await tx.execute(sql`select pg_notify(${channel}, 'x')`);
      });
      await eventually(async () => heard > 0, 5000, `a NOTIFY on ${channel}`);
      expect(heard).toBe(1);
    } finally {
      await stop();
    }
  });

  it('hands leadership over when the leader releases its lock, through the direct URL', async () => {
    const key = 0x5b_0ff1;
    const first = await openDatabase({ ...db.open!, maxConnections: 2 });
    const second = await openDatabase({ ...db.open!, maxConnections: 2 });
    try {
      const one = first.createLeaderLock(key);
      // the second waits for the lock in Postgres once it found it taken, and is told when
      // that wait returns: a release reaches it asynchronously (the first's session ends,
      // then Postgres grants the waiting query)
      let tookOver!: () => void;
      const tookOverSignal = new Promise<void>((resolve) => {
        tookOver = resolve;
      });
      const two = second.createLeaderLock(key, () => tookOver());
      expect(await one.tryAcquire()).toBe(true);
      for (let i = 0; i < 20; i++) {
        // pool traffic in between moves PgBouncer's server connections around: the leader
        // stays the leader, the other never is
        await Promise.all([
          first.db.execute(sql`select pg_backend_pid()`),
          second.db.execute(sql`select pg_backend_pid()`),
        ]);
        expect(await one.tryAcquire()).toBe(true);
        expect(await two.tryAcquire()).toBe(false);
      }
      await one.release();
      await tookOverSignal;
      expect(await two.tryAcquire()).toBe(true);
      await two.release();
      await eventually(async () => {
        const [row] = await direct<{ n: string }[]>`
          select count(*) as n from pg_locks
          where database = (select oid from pg_database where datname = current_database())
            and locktype = 'advisory' and objid = ${key}`;
        return Number(row!.n) === 0;
      });
    } finally {
      await first.close();
      await second.close();
    }
  });

  it('without DATABASE_DIRECT_URL, a lock taken through PgBouncer outlives the session that took it', async () => {
    const key = 0x5b_0ff2;
    const pooledOnly = await openDatabase({
      url: db.open!.url!,
      prepare: false,
      maxConnections: 2,
    });
    try {
      const lock = pooledOnly.createLeaderLock(key);
      expect(await lock.tryAcquire()).toBe(true);
      await lock.release(); // its connection to PgBouncer ends; PgBouncer's to Postgres does not
      const [row] = await direct<{ pid: number }[]>`
        select pid from pg_locks
        where database = (select oid from pg_database where datname = current_database())
          and locktype = 'advisory' and granted and objid = ${key}`;
      // still held, by a server connection PgBouncer keeps for whoever comes next: no other
      // instance could become the leader
      expect(row).toBeDefined();
      expect(await bouncer.serverPids()).toContain(row!.pid);
      await direct`select pg_terminate_backend(${row!.pid})`;
    } finally {
      await pooledOnly.close();
    }
  });
});

describe.runIf(onPostgres)(onlyIf(onPostgres, 'DATABASE_PREPARE', NO_POSTGRES), () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase('postgres', {});
  });
  afterAll(async () => {
    await db?.drop();
  });

  /** The statements this transaction's connection holds prepared, after one executePrepared. */
  async function preparedAfterOne(database: Database): Promise<number> {
    return pipelinedTransaction(database.db, async (tx, last) => {
      await executePrepared(tx, sql`select ${1}::int as one`);
      const [row] = await last<{ n: string }>(
        sql`select count(*) as n from pg_prepared_statements`,
      );
      return Number(row!.n);
    });
  }

  it('by default, executePrepared and pipelinedTransaction prepare their statements', async () => {
    const database = await openDatabase({ url: db.url!, maxConnections: 1 });
    try {
      expect(await preparedAfterOne(database)).toBeGreaterThan(0);
    } finally {
      await database.close();
    }
  });

  it('false: they prepare nothing on the connection (what a pooler in transaction mode needs)', async () => {
    const database = await openDatabase({ url: db.url!, maxConnections: 1, prepare: false });
    try {
      expect(await preparedAfterOne(database)).toBe(0);
    } finally {
      await database.close();
    }
  });
});
