/**
 * A CSV upload is read whole to a temporary file before its transaction opens
 * (src/campaigns/spool.ts): while a client stalls mid-upload the database serves every other
 * request (PGlite's one connection is free; on Postgres no session of the server sits idle in
 * a transaction), a client that leaves mid-upload stores nothing, a body refused mid-way
 * (over its limit) is answered as before and opens no transaction, a full disk is a 503, so is
 * a temporary directory the server cannot write (logged, its path not told), and no file is
 * left behind in any case. The spool goes under TMPDIR, which this file points at a
 * directory of its own, so a test can watch the upload's file grow (the sync point that the
 * server is consuming the body) and see it gone.
 */
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { type ClientRequest, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it, onTestFinished, vi } from 'vitest';
import { createFlowRegistry } from '../../src/calls/registry.ts';
import { createCampaignFromCsv } from '../../src/campaigns/create.ts';
import { SPOOL_DIR_PREFIX, SPOOL_FILE_NAME } from '../../src/campaigns/spool.ts';
import { systemClock } from '../../src/clock.ts';
import { type Db, rowsOf } from '../../src/db/client.ts';
import { AppError } from '../../src/errors.ts';
import { createLogger } from '../../src/logger.ts';
import { buildTestApp, type Json, readJson, uniq } from '../support/app.ts';
import { createTestDatabase, describeEachEngine, type TestDatabase } from '../support/db.ts';
import { captureLog } from '../support/log-capture.ts';
import { eventually, startTestServer, type TestServer } from '../support/server.ts';
import { onlyIf } from '../support/skip.ts';

// a full disk on demand: while `disk.full`, every file stream opened for writing is
// /dev/full, which refuses each write with ENOSPC as a full filesystem does; while
// `disk.refuses` is a code, every such stream fails to open with it (a read-only filesystem)
const disk = vi.hoisted(() => ({ full: false, refuses: null as string | null }));
vi.mock('node:fs', async (importOriginal) => {
  const fs = await importOriginal<typeof import('node:fs')>();
  const { Writable } = await import('node:stream');
  const createWriteStream = ((path, options) => {
    const code = disk.refuses;
    if (code !== null) {
      return new Writable({
        construct(done) {
          done(Object.assign(new Error(`${code}: refused, open '${path}'`), { code }));
        },
      });
    }
    return disk.full ? fs.createWriteStream('/dev/full') : fs.createWriteStream(path, options);
  }) as typeof fs.createWriteStream;
  return { ...fs, createWriteStream };
});

const QUERY = 'flow=appointment-reminder&from=Clinic&startAt=2099-01-01T00:00:00Z';
const HEADER = 'to,name,date\n';

/** `count` rows of distinct numbers, from the `first`th. */
function csvRows(first: number, count: number): string {
  let out = '';
  for (let i = first; i < first + count; i++) {
    out += `+38050${String(1_000_000 + i).padStart(7, '0')},Name ${i},Monday\n`;
  }
  return out;
}

let spoolRoot = '';
const savedTmpdir = process.env.TMPDIR;

beforeAll(() => {
  spoolRoot = mkdtempSync(join(tmpdir(), 'sb-spool-test-'));
  // os.tmpdir() reads TMPDIR at each call: the server's spool files land here
  process.env.TMPDIR = spoolRoot;
});
afterAll(() => {
  if (savedTmpdir === undefined) delete process.env.TMPDIR;
  else process.env.TMPDIR = savedTmpdir;
  rmSync(spoolRoot, { recursive: true, force: true });
});

/** The spool directories there are now. */
const spoolDirs = () => readdirSync(spoolRoot).filter((n) => n.startsWith(SPOOL_DIR_PREFIX));

/** The bytes in the spool files now. */
function spooledBytes(): number {
  let bytes = 0;
  for (const dir of spoolDirs()) {
    try {
      bytes += statSync(join(spoolRoot, dir, SPOOL_FILE_NAME)).size;
    } catch {
      // made, its file not yet (or removed meanwhile)
    }
  }
  return bytes;
}

interface Upload {
  req: ClientRequest;
  answer: Promise<{ status: number; body: Json }>;
}

/**
 * A chunked CSV upload over a raw socket, left open: the test writes and ends it (or destroys
 * it: `answer` then rejects, and is awaited only by a test that ends the upload).
 */
function startUpload(base: string, query: string): Upload {
  const req = request(`${base}/v1/campaigns?${query}`, {
    method: 'POST',
    headers: { 'content-type': 'text/csv' },
  });
  const answer = new Promise<{ status: number; body: Json }>((resolve, reject) => {
    req.once('error', reject);
    req.once('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        text += chunk;
      });
      res.once('error', reject);
      res.once('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
    });
  });
  answer.catch(() => {});
  return { req, answer };
}

/** Waits until the server has written `bytes` of the upload to its spool file. */
async function untilSpooled(bytes: number): Promise<void> {
  await eventually(
    async () => spooledBytes() >= bytes,
    10_000,
    `the server to spool the first ${bytes} bytes`,
  );
}

describeEachEngine('a CSV upload spooled before its transaction', (ctx) => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startTestServer(ctx.database());
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
  });

  const campaignNamed = async (name: string) => {
    const res = await fetch(`${server.url}/v1/campaigns?limit=200`);
    expect(res.status).toBe(200);
    return (await readJson(res)).items.find((c: { name: string | null }) => c.name === name);
  };

  it('serves other requests while an upload is stalled, then stores all of it', async () => {
    const name = uniq('slow');
    const upload = startUpload(server.url, `${QUERY}&name=${name}`);
    onTestFinished(() => {
      upload.req.destroy(); // a failed test leaves no upload open for the next one
    });
    const first = HEADER + csvRows(0, 500);
    upload.req.write(first);
    // the server has the first part and is consuming it; the rest has not been sent
    await untilSpooled(Buffer.byteLength(first));

    // a request that needs the database completes meanwhile (on PGlite the one connection
    // would be held by the upload's transaction; the deadline only turns a hang into a failure)
    const list = await fetch(`${server.url}/v1/campaigns`, { signal: AbortSignal.timeout(10_000) });
    expect(list.status).toBe(200);
    expect((await readJson(list)).items.map((c: { name: string }) => c.name)).not.toContain(name);
    if (ctx.engine === 'postgres') {
      const db = ctx.database().db;
      // a transaction begun before the upload was seen stalled, and idle now: the upload's
      const [{ at }] = rowsOf<{ at: string }>(
        await db.execute(sql`select clock_timestamp()::text as at`),
      ) as [{ at: string }];
      const held = rowsOf<{ pid: number; query: string }>(
        await db.execute(sql`select pid, query from pg_stat_activity
          where datname = current_database() and application_name = 'switchboard'
            and state = 'idle in transaction' and xact_start < ${at}::timestamptz`),
      );
      expect(held).toEqual([]);
    }
    expect(spoolDirs()).toHaveLength(1);

    upload.req.end(csvRows(500, 1000));
    const { status, body } = await upload.answer;
    expect(status).toBe(201);
    expect(body).toMatchObject({ name, accepted: 1500, duplicates: 0, rejectedCount: 0 });
    expect(body.recipients).toBe(1500);
    expect(body.progress.byState).toEqual({ pending: 1500 });
    // removed before the answer
    expect(spoolDirs()).toEqual([]);
  });

  it('stores nothing and leaves no file when the client leaves mid-upload', async () => {
    const name = uniq('gone');
    const upload = startUpload(server.url, `${QUERY}&name=${name}`);
    onTestFinished(() => {
      upload.req.destroy();
    });
    const first = HEADER + csvRows(0, 300);
    upload.req.write(first);
    await untilSpooled(Buffer.byteLength(first));
    upload.req.destroy();
    // the spool removed: the server is done with the upload
    await eventually(async () => spoolDirs().length === 0, 10_000, 'the spool removed');
    expect(await campaignNamed(name)).toBeUndefined();
  });
});

describe('a CSV upload that fails while it spools [pglite]', () => {
  let test: TestDatabase;
  let app: ReturnType<typeof buildTestApp>;
  let transactions = 0;
  let db: Db;

  beforeAll(async () => {
    test = await createTestDatabase('pglite');
    app = buildTestApp(test.database);
    // the database as createCampaignFromCsv sees it, counting the transactions it opens
    db = new Proxy(test.database.db, {
      get(target, key) {
        if (key === 'transaction') transactions++;
        const value = Reflect.get(target, key, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
  }, 60_000);
  afterAll(async () => {
    disk.full = false;
    disk.refuses = null;
    await test?.drop();
  });

  const deps = () => ({ db, clock: systemClock, flows: createFlowRegistry('./flows') });
  const settings = { flow: 'appointment-reminder', from: 'Clinic' };
  const campaignCount = async () =>
    rowsOf<{ n: number }>(
      await test.database.db.execute(sql`select count(*)::int as n from campaigns`),
    )[0]!.n;

  it('answers a body over its limit as before, opening no transaction', async () => {
    const tooLarge = new AppError('PAYLOAD_TOO_LARGE', 'the request body is larger than 1024 MiB');
    async function* overLimit() {
      yield new TextEncoder().encode(HEADER + csvRows(0, 100));
      throw tooLarge; // as the route's countedBody does past CAMPAIGN_CSV_BODY
    }
    const before = transactions;
    await expect(createCampaignFromCsv(deps(), settings, overLimit())).rejects.toBe(tooLarge);
    expect(transactions).toBe(before);
    expect(await campaignCount()).toBe(0);
    expect(spoolDirs()).toEqual([]);
  });

  it('answers a full disk with 503 UNAVAILABLE, opening no transaction', async () => {
    const before = transactions;
    disk.full = true;
    try {
      async function* small() {
        yield new TextEncoder().encode(HEADER + csvRows(0, 10));
      }
      const direct = createCampaignFromCsv(deps(), settings, small());
      await expect(direct).rejects.toMatchObject({ code: 'UNAVAILABLE' });
      const res = await app.app.request(`/v1/campaigns?${QUERY}`, {
        method: 'POST',
        headers: { 'content-type': 'text/csv' },
        body: HEADER + csvRows(0, 10),
      });
      expect(res.status).toBe(503);
      expect((await readJson(res)).error).toEqual({
        code: 'UNAVAILABLE',
        message:
          'the server has no room to hold the upload (its temporary directory is full); retry shortly',
        details: [],
      });
    } finally {
      disk.full = false;
    }
    expect(transactions).toBe(before);
    expect(await campaignCount()).toBe(0);
    expect(spoolDirs()).toEqual([]);
  });

  /** A CSV upload through the app, its log kept: the answer's status, error, and the log. */
  const uploadLogged = async () => {
    const log = captureLog();
    const logged = buildTestApp(test.database, { logger: createLogger('warn', log.stream) });
    const res = await logged.app.request(`/v1/campaigns?${QUERY}`, {
      method: 'POST',
      headers: { 'content-type': 'text/csv' },
      body: HEADER + csvRows(0, 10),
    });
    return { status: res.status, error: (await readJson(res)).error, log: log.text() };
  };
  const UNWRITABLE = {
    code: 'UNAVAILABLE',
    message:
      'the server cannot hold the upload (its temporary directory cannot be written); retry later',
    details: [],
  };
  // root writes in a directory whatever its mode: the read-only case runs as another user only
  const asRoot = process.getuid?.() === 0;

  /** TMPDIR pointed at what `make` makes under a directory of the test's, for `use`. */
  async function withTmpdir<T>(make: (base: string) => string, use: () => Promise<T>) {
    const base = mkdtempSync(join(spoolRoot, 'unwritable-'));
    const saved = process.env.TMPDIR;
    process.env.TMPDIR = make(base);
    try {
      return await use();
    } finally {
      process.env.TMPDIR = saved;
      rmSync(base, { recursive: true, force: true });
    }
  }

  for (const { what, runs, errno, make } of [
    {
      what: 'under a regular file',
      runs: true,
      errno: 'ENOTDIR',
      make: (base: string) => {
        writeFileSync(join(base, 'file'), '');
        return join(base, 'file', 'tmp');
      },
    },
    { what: 'missing', runs: true, errno: 'ENOENT', make: (base: string) => join(base, 'gone') },
    {
      what: 'read-only',
      runs: !asRoot,
      errno: 'EACCES',
      make: (base: string) => {
        const dir = join(base, 'read-only');
        mkdirSync(dir, { mode: 0o500 });
        return dir;
      },
    },
  ]) {
    it.runIf(runs)(
      onlyIf(
        runs,
        `answers a temporary directory ${what} (${errno}) with 503 UNAVAILABLE, logged, opening no transaction`,
        'running as root, whom a read-only directory does not stop',
      ),
      async () => {
        const before = transactions;
        const { status, error, log } = await withTmpdir(make, async () => {
          async function* small() {
            yield new TextEncoder().encode(HEADER + csvRows(0, 10));
          }
          const direct = createCampaignFromCsv(deps(), settings, small());
          await expect(direct).rejects.toMatchObject({ code: 'UNAVAILABLE' });
          return uploadLogged();
        });
        expect(status).toBe(503);
        // the client is told what, not where
        expect(error).toEqual(UNWRITABLE);
        expect(JSON.stringify(error)).not.toContain(spoolRoot);
        // the operator is told where, and why
        expect(log).toContain('the temporary directory cannot hold it');
        expect(log).toContain(errno);
        expect(log).toContain(spoolRoot);
        expect(transactions).toBe(before);
        expect(await campaignCount()).toBe(0);
      },
    );
  }

  it('answers a spool file it may not write (EROFS, EPERM) with 503 UNAVAILABLE', async () => {
    for (const code of ['EROFS', 'EPERM']) {
      disk.refuses = code;
      try {
        const { status, error, log } = await uploadLogged();
        expect(status).toBe(503);
        expect(error).toEqual(UNWRITABLE);
        expect(log).toContain(code);
      } finally {
        disk.refuses = null;
      }
      expect(spoolDirs()).toEqual([]);
    }
    expect(await campaignCount()).toBe(0);
  });
});

describeEachEngine('a CSV upload the client stops sending', (ctx) => {
  it('is 400 INCOMPLETE_BODY, and the database is not taken for down', async () => {
    const { app } = buildTestApp(ctx.database());
    // what Node's request stream fails with when the client goes mid-body
    const reset = Object.assign(new Error('aborted'), { code: 'ECONNRESET' });
    let sent = false;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent) return controller.error(reset);
        sent = true;
        controller.enqueue(new TextEncoder().encode(HEADER + csvRows(0, 10)));
      },
    });
    const res = await app.request(`/v1/campaigns?${QUERY}&name=${uniq('cut')}`, {
      method: 'POST',
      headers: { 'content-type': 'text/csv' },
      body,
      duplex: 'half',
    } as RequestInit);
    expect(res.status).toBe(400);
    expect((await readJson(res)).error).toEqual({
      code: 'INCOMPLETE_BODY',
      message:
        'the request body did not arrive whole: the client closed the request before its end (aborted)',
      details: [],
    });
    // a reset read as an outage would have tripped the breaker for every request
    expect(ctx.database().availability.up).toBe(true);
    expect(spoolDirs()).toEqual([]);
  });
});
