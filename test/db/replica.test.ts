/**
 * DATABASE_READ_URL against a real streaming replica, made here: pg_basebackup of the local
 * Postgres (TEST_DATABASE_URL's) into a temporary directory, started on a free port as the
 * `postgres` user, stopped and removed afterwards. Needs root (to act as `postgres` and, when
 * missing, add a replication line to pg_hba.conf) and the server's binaries; skipped, saying
 * which is missing, where they are not.
 */
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock.ts';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { openReadReplica, parseLsn, type ReadReplica } from '../../src/db/replica.ts';
import {
  READ_FROM_HEADER,
  WRITTEN_LSN_COOKIE,
  WRITTEN_LSN_HEADER,
} from '../../src/http/read-routing.ts';
import { submitMessages } from '../../src/messages/submit.ts';
import { buildTestApp, json, phone, readJson, uniq } from '../support/app.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { databaseUrlWithName } from '../support/global-setup.ts';
import { eventually, startTestServer } from '../support/server.ts';
import { onlyIf } from '../support/skip.ts';

/** The local server's binaries (pg_basebackup, pg_ctl), the newest version first. */
function postgresBin(): string | undefined {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  return readdirSync(root)
    .sort((a, b) => Number(b) - Number(a))
    .map((v) => join(root, v, 'bin'))
    .find((bin) => existsSync(join(bin, 'pg_basebackup')) && existsSync(join(bin, 'pg_ctl')));
}

const ADMIN_URL = process.env.TEST_DATABASE_URL;
const BIN = postgresBin();
const LOCAL =
  ADMIN_URL !== undefined && /^(127\.0\.0\.1|localhost)$/.test(new URL(ADMIN_URL).hostname);
const whyNot =
  ADMIN_URL === undefined
    ? 'TEST_DATABASE_URL is not set, so there is no Postgres to replicate'
    : !LOCAL
      ? 'TEST_DATABASE_URL is not a Postgres on this machine (127.0.0.1), so pg_basebackup cannot copy it'
      : process.getuid?.() !== 0
        ? 'not root: making a replica runs pg_basebackup and pg_ctl as the postgres user'
        : BIN === undefined
          ? 'no pg_basebackup under /usr/lib/postgresql/*/bin (apt-get install -y postgresql)'
          : undefined;
const canReplicate = whyNot === undefined;

/** Settings a hot standby refuses to run with below the primary's. */
const HOT_STANDBY_LIMITS = [
  'max_connections',
  'max_worker_processes',
  'max_wal_senders',
  'max_prepared_transactions',
  'max_locks_per_transaction',
];

/** Runs `cmd` as the postgres user (its output when it succeeds, its stderr in the error). */
function asPostgres(cmd: string): string {
  return execFileSync('su', ['postgres', '-c', cmd], { encoding: 'utf8', stdio: 'pipe' });
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

/** Lets `postgres` replicate over 127.0.0.1 when pg_hba.conf does not yet (then reloads). */
async function allowReplication(admin: postgres.Sql): Promise<void> {
  const [row] = await admin<{ hba_file: string }[]>`show hba_file`;
  const file = row!.hba_file;
  const text = readFileSync(file, 'utf8');
  if (/^\s*host\s+replication\s+(postgres|all)\s+127\.0\.0\.1\/32\s+trust\b/m.test(text)) return;
  writeFileSync(
    file,
    `${text.replace(/\n?$/, '\n')}# added by switchboard's test/db/replica.test.ts\nhost replication postgres 127.0.0.1/32 trust\n`,
  );
  await admin`select pg_reload_conf()`;
}

describe.runIf(canReplicate)(
  onlyIf(canReplicate, 'reads from a streaming replica', whyNot ?? ''),
  () => {
    let dir: string;
    let port: number;
    let test: TestDatabase;
    let replicaUrl: string;
    /** a superuser session on the replica: pauses and resumes its replay */
    let standby: postgres.Sql;
    let replica: ReadReplica;
    let stopped = false;

    const pgCtl = (action: string) => {
      try {
        return asPostgres(`${BIN}/pg_ctl -D ${dir} -w -t 60 -m fast -l ${dir}/log ${action}`);
      } catch (err) {
        // the server's own words: the directory goes in the teardown
        const log = existsSync(join(dir, 'log')) ? readFileSync(join(dir, 'log'), 'utf8') : '';
        throw new Error(`pg_ctl ${action} failed:\n${log.slice(-2000)}`, { cause: err });
      }
    };

    beforeAll(async () => {
      const admin = postgres(ADMIN_URL!, { max: 1, onnotice: () => {} });
      // a hot standby needs at least the primary's values of these
      const limits: string[] = [];
      try {
        await allowReplication(admin);
        for (const name of HOT_STANDBY_LIMITS) {
          const [row] = await admin.unsafe<{ setting: string }[]>(
            'select setting from pg_settings where name = $1',
            [name],
          );
          if (row) limits.push(`${name} = ${row.setting}`);
        }
      } finally {
        await admin.end();
      }
      dir = mkdtempSync('/tmp/switchboard-replica-');
      execFileSync('chown', ['postgres:postgres', dir]);
      execFileSync('chmod', ['700', dir]);
      port = await freePort();
      const primaryPort = new URL(ADMIN_URL!).port || '5432';
      asPostgres(
        `${BIN}/pg_basebackup -h 127.0.0.1 -p ${primaryPort} -U postgres -D ${dir} -R -X stream -c fast`,
      );
      // Debian keeps the configuration outside the data directory: the copy gets its own
      writeFileSync(
        join(dir, 'postgresql.conf'),
        [
          `listen_addresses = '127.0.0.1'`,
          'hot_standby = on',
          'shared_buffers = 32MB',
          ...limits,
          '',
        ].join('\n'),
      );
      writeFileSync(
        join(dir, 'pg_hba.conf'),
        'local all all trust\nhost all all 127.0.0.1/32 trust\n',
      );
      writeFileSync(join(dir, 'pg_ident.conf'), '');
      execFileSync('chown', ['-R', 'postgres:postgres', dir]);
      pgCtl(`-o "-p ${port} -k /tmp" start`);

      // a database of its own, made after the copy: the replica gets it by streaming
      test = await createTestDatabase('postgres');
      const name = new URL(test.url!).pathname.slice(1);
      const replicaBase = new URL(ADMIN_URL!);
      replicaBase.port = String(port);
      replicaUrl = databaseUrlWithName(replicaBase.toString(), name);
      standby = postgres(replicaUrl, { max: 1, onnotice: () => {}, connect_timeout: 2 });
      try {
        await eventually(
          async () => (await standby`select count(*)::int as n from messages`)[0]?.n === 0,
          60_000,
          'the test database on the replica',
        );
      } catch (err) {
        const log = readFileSync(join(dir, 'log'), 'utf8');
        throw new Error(`${String(err)}\nthe replica's log:\n${log.slice(-2000)}`);
      }
      replica = await openReadReplica({
        url: replicaUrl,
        primary: test.database,
        maxLagMs: 60_000,
      });
    }, 180_000);

    afterAll(async () => {
      await replica?.close();
      await standby?.end({ timeout: 1 }).catch(() => {});
      if (dir && !stopped) {
        try {
          pgCtl('stop');
        } catch {}
      }
      if (dir) rmSync(dir, { recursive: true, force: true });
      await test?.drop();
    }, 120_000);

    /** A message written straight on the primary: no request, so no position remembered. */
    async function writeOnPrimary(): Promise<string> {
      const ref = uniq('direct');
      const { created } = await submitMessages({ db: test.database.db, clock: systemClock }, [
        { from: 'Acme', to: phone(), type: 'sms', text: 'hello', customerMessageId: ref },
      ]);
      expect(created).toHaveLength(1);
      return ref;
    }

    const pause = () => standby`select pg_wal_replay_pause()`;
    const resume = () => standby`select pg_wal_replay_resume()`;
    const onReplica = async (ref: string) =>
      (await standby`select 1 from messages where customer_message_id = ${ref}`).length > 0;

    it('sends a read to the replica, which answers what the primary wrote once it has replayed it', async () => {
      const { app } = buildTestApp(test.database, { replica });
      // replay held: the replica cannot have the row, so a 404 there proves where the read went
      await pause();
      try {
        const ref = await writeOnPrimary();
        const held = await app.request(`/v1/messages/${ref}`);
        expect(held.status).toBe(404);
        expect(held.headers.get(READ_FROM_HEADER)).toBe('replica');
        expect(await onReplica(ref)).toBe(false);
        await resume();
        const seen = await eventually(
          async () => {
            const res = await app.request(`/v1/messages/${ref}`);
            return res.status === 200 ? res : undefined;
          },
          20_000,
          'the replica to replay the write',
        );
        expect(seen.headers.get(READ_FROM_HEADER)).toBe('replica');
        expect((await readJson(seen)).customerMessageId).toBe(ref);
      } finally {
        await resume();
      }
    });

    it('sends the lists of campaigns and audit entries to the replica too', async () => {
      const { app } = buildTestApp(test.database, { replica });
      for (const path of ['/v1/campaigns', '/v1/audit']) {
        const res = await app.request(path);
        expect(res.status, path).toBe(200);
        expect(res.headers.get(READ_FROM_HEADER), path).toBe('replica');
      }
    });

    it('reads a client its own write at once: from the primary until the replica has it', async () => {
      const { app } = buildTestApp(test.database, { replica });
      // another instance, behind the same balancer: it knows the write only from the header
      const { app: other } = buildTestApp(test.database, { replica });
      await pause();
      try {
        const ref = uniq('own');
        const posted = await app.request(
          '/v1/messages',
          json({
            messages: [
              { from: 'Acme', to: phone(), type: 'sms', text: 'hi', customerMessageId: ref },
            ],
          }),
        );
        expect(posted.status).toBe(202);
        const lsn = posted.headers.get(WRITTEN_LSN_HEADER);
        expect(parseLsn(lsn)).toBeDefined();

        // the same caller on the same instance: remembered
        const own = await app.request(`/v1/messages/${ref}`);
        expect(own.status).toBe(200);
        expect(own.headers.get(READ_FROM_HEADER)).toBe('primary');

        // the other instance: the replica (which has not replayed it) without the header...
        const blind = await other.request(`/v1/messages/${ref}`);
        expect(blind.status).toBe(404);
        expect(blind.headers.get(READ_FROM_HEADER)).toBe('replica');
        // ...the primary with it
        const told = await other.request(`/v1/messages/${ref}`, {
          headers: { [WRITTEN_LSN_HEADER]: lsn! },
        });
        expect(told.status).toBe(200);
        expect(told.headers.get(READ_FROM_HEADER)).toBe('primary');

        // once replayed, the same read goes to the replica again
        await resume();
        const later = await eventually(
          async () => {
            const res = await other.request(`/v1/messages/${ref}`, {
              headers: { [WRITTEN_LSN_HEADER]: lsn! },
            });
            return res.headers.get(READ_FROM_HEADER) === 'replica' ? res : undefined;
          },
          20_000,
          'the replica to replay past the written position',
        );
        expect(later.status).toBe(200);
      } finally {
        await resume();
      }
    });

    it("gives the console's writes a cookie its next page reads by", async () => {
      const { app } = buildTestApp(test.database, { replica });
      await pause();
      try {
        // a changing console request (signing out needs nothing else): the cookie comes back
        const out = await app.request('/ui/logout', {
          method: 'POST',
          headers: { origin: 'http://localhost' },
        });
        expect(out.status).toBeLessThan(400);
        const cookie = out.headers.get('set-cookie') ?? '';
        const m = new RegExp(`${WRITTEN_LSN_COOKIE}=([^;,]+)`, 'i').exec(cookie);
        expect(m?.[1] && parseLsn(decodeURIComponent(m[1]))).toBeDefined();
        const ref = await writeOnPrimary();
        // a cookie at the primary's current position: the page reads the primary
        const position = await replica.primaryLsn();
        const page = await app.request(`/ui/messages/${ref}`, {
          headers: { cookie: `${WRITTEN_LSN_COOKIE}=${position}` },
        });
        expect(page.status).toBe(200);
        expect(page.headers.get(READ_FROM_HEADER)).toBe('primary');
        expect(await page.text()).toContain(ref);
      } finally {
        await resume();
      }
    });

    it('reads the primary while the replica lags past DATABASE_READ_MAX_LAG_MS', async () => {
      const strict = await openReadReplica({
        url: replicaUrl,
        primary: test.database,
        maxLagMs: 300,
      });
      try {
        const { app } = buildTestApp(test.database, { replica: strict });
        await pause();
        try {
          const ref = await writeOnPrimary();
          // no position to wait for: only the lag sends this read to the primary, once it grows
          const res = await eventually(
            async () => {
              const r = await app.request(`/v1/messages/${ref}`);
              return r.status === 200 ? r : undefined;
            },
            20_000,
            'the read to fall back to the primary',
          );
          expect(res.headers.get(READ_FROM_HEADER)).toBe('primary');
          expect(await onReplica(ref)).toBe(false);
          expect((await strict.state()).lagMs).toBeGreaterThan(300);
        } finally {
          await resume();
        }
      } finally {
        await strict.close();
      }
    });

    it('never sends a write to the replica', async () => {
      // a replica handle of its own: its pool opens a connection only when something uses it
      const fresh = await openReadReplica({
        url: replicaUrl,
        primary: test.database,
        maxLagMs: 60_000,
      });
      const readers = async () =>
        (
          await standby<{ n: number }[]>`
            select count(*)::int as n from pg_stat_activity
            where application_name = 'switchboard-reads' and datname = current_database()`
        )[0]!.n;
      try {
        const before = await readers();
        const { app } = buildTestApp(test.database, { replica: fresh });
        const ref = uniq('write');
        const posted = await app.request(
          '/v1/messages',
          json({
            messages: [
              { from: 'Acme', to: phone(), type: 'sms', text: 'x', customerMessageId: ref },
            ],
          }),
        );
        expect(posted.status).toBe(202);
        const call = await app.request(
          '/v1/calls',
          json({
            flow: 'appointment-reminder',
            to: phone(),
            from: 'Clinic',
            vars: { name: 'Ann', date: 'Mon' },
          }),
        );
        expect(call.status).toBe(202);
        // and outside any request: straight to the primary, which takes the write
        await fresh.db.execute(
          sql`update messages set updated_at = now() where customer_message_id = ${ref}`,
        );
        expect(await readers()).toBe(before);
        // the control: one read opens the replica's pool
        // (from the primary until the replica has replayed those writes: this caller made them)
        const read = await eventually(
          async () => {
            const res = await app.request('/v1/calls?limit=1');
            return res.headers.get(READ_FROM_HEADER) === 'replica' ? res : undefined;
          },
          20_000,
          'a read from the replica',
        );
        expect(read.status).toBe(200);
        expect(await readers()).toBeGreaterThan(before);
      } finally {
        await fresh.close();
      }
    });

    it('is what the server reads through with DATABASE_READ_URL set', async () => {
      const server = await startTestServer(test.database, {
        env: { DATABASE_URL: test.url!, DATABASE_READ_URL: replicaUrl },
      });
      try {
        const res = await eventually(
          async () => {
            const r = await fetch(`${server.url}/v1/messages?limit=1`);
            return r.headers.get(READ_FROM_HEADER) === 'replica' ? r : undefined;
          },
          20_000,
          'a read from the replica',
        );
        expect(res.status).toBe(200);
      } finally {
        await server.stop();
      }
    });

    it('answers reads from the primary when the replica is stopped', async () => {
      // the call is made through another app: this one remembers no write of its own
      const { app: writer } = buildTestApp(test.database, { replica });
      const started = await writer.request(
        '/v1/calls',
        json({
          flow: 'appointment-reminder',
          to: phone(),
          from: 'Clinic',
          vars: { name: 'Ann', date: 'Mon' },
        }),
      );
      expect(started.status).toBe(202);
      const { id } = await readJson(started);
      const { app } = buildTestApp(test.database, { replica });
      const ref = await writeOnPrimary();
      await eventually(
        async () =>
          (await onReplica(ref)) &&
          (await standby`select 1 from calls where id = ${id}`).length > 0,
        20_000,
        'the replica to replay the writes',
      );
      const paths = [
        `/v1/messages/${ref}`,
        '/v1/messages?limit=5',
        `/v1/calls/${id}`, // a read-only transaction
        '/v1/calls',
        `/ui/messages/${ref}`,
        `/ui/calls/${id}`,
      ];
      for (const path of paths) {
        const res = await app.request(path);
        expect(res.status, path).toBe(200);
        expect(res.headers.get(READ_FROM_HEADER), path).toBe('replica');
      }
      // a 404 is the replica's answer, not a failure to take to the primary
      const missing = await app.request(`/v1/calls/${randomUUID()}`);
      expect(missing.status).toBe(404);
      expect(missing.headers.get(READ_FROM_HEADER)).toBe('replica');

      await standby.end({ timeout: 1 });
      pgCtl('stop');
      stopped = true;
      for (const path of paths) {
        const res = await app.request(path);
        expect(res.status, path).toBe(200);
        expect(res.headers.get(READ_FROM_HEADER), path).toBe('primary');
      }
      expect((await replica.state()).up).toBe(false);
    });
  },
);

describe('DATABASE_READ_URL settings', () => {
  it('needs DATABASE_URL', () => {
    expect(() => loadConfig({ DATABASE_READ_URL: 'postgres://replica/db' })).toThrow(ConfigError);
    const config = loadConfig({
      DATABASE_URL: 'postgres://primary/db',
      DATABASE_READ_URL: 'postgres://replica/db',
      DATABASE_READ_MAX_LAG_MS: '500',
    });
    expect(config.databaseReadUrl).toBe('postgres://replica/db');
    expect(config.databaseReadMaxLagMs).toBe(500);
    expect(loadConfig({}).databaseReadUrl).toBeUndefined();
  });

  it('orders WAL positions as Postgres does', () => {
    expect(parseLsn('0/16B3748')! < parseLsn('1/0')!).toBe(true);
    expect(parseLsn('A/FF')! > parseLsn('9/FFFFFFFF')!).toBe(true);
    expect(parseLsn('0/16b3748')).toBe(parseLsn('0/16B3748'));
    expect(parseLsn('nonsense')).toBeUndefined();
    expect(parseLsn(undefined)).toBeUndefined();
  });
});
