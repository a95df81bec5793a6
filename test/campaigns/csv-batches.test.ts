/**
 * A campaign of more recipients than a batch, CSV or JSON, is stored in several transactions
 * (src/campaigns/uploads.ts): its row first, `uploading`, then its recipients
 * `UPLOAD_ROWS_PER_TRANSACTION` a transaction, then `scheduled`; one of a batch or fewer, in
 * one. On each engine:
 *
 * - a file of several batches is stored whole, a number listed twice kept once wherever the
 *   batches split it; so is a JSON body, `uploading` between its batches;
 * - a JSON campaign of one batch or fewer takes one transaction;
 * - a request made while the upload is storing is answered before the upload ends (on PGlite,
 *   whose one connection an upload in one transaction held to its end), and sees it `uploading`;
 * - a failure after the first batches (the database's, the file's, the request ended) leaves
 *   neither the campaign nor any of its recipients or counts, CSV or JSON;
 * - the scheduler starts no `uploading` campaign, pause, resume and cancel refuse it, and a
 *   round deletes an upload left behind (a process that died) once it is stale, and one that
 *   comes back after the sweep took its campaign stores nothing and is answered 409 CONFLICT.
 *
 * The upload's database is the test database seen through a proxy that counts the upload's
 * transactions and runs the test's hook before each begins: between two of them, when the
 * upload holds nothing.
 */
import { pipeline, Transform } from 'node:stream';
import { sql } from 'drizzle-orm';
import { beforeAll, expect, it, vi } from 'vitest';
import { createFlowRegistry } from '../../src/calls/registry.ts';
import { createCampaign, createCampaignFromCsv } from '../../src/campaigns/create.ts';
import { runCampaigns, type SchedulerDeps } from '../../src/campaigns/scheduler.ts';
import { STALE_UPLOAD_MS, UPLOAD_ROWS_PER_TRANSACTION } from '../../src/campaigns/uploads.ts';
import { NO_HOLIDAYS } from '../../src/campaigns/windows.ts';
import type { Clock } from '../../src/clock.ts';
import { type Db, rowsOf } from '../../src/db/client.ts';
import { AppError, httpStatus } from '../../src/errors.ts';
import { createLogger } from '../../src/logger.ts';
import { buildTestApp, json, readJson, uniq } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';

// a file that fails to read on demand: while `reads.failAfter` is set, each file read stream
// errors once it has passed that many bytes (the spool writes the file whole first)
const reads = vi.hoisted(() => ({ failAfter: null as number | null }));
vi.mock('node:fs', async (importOriginal) => {
  const fs = await importOriginal<typeof import('node:fs')>();
  const createReadStream = ((path, options) => {
    const file = fs.createReadStream(path, options);
    const limit = reads.failAfter;
    if (limit === null) return file;
    let seen = 0;
    const failing = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        seen += chunk.length;
        done(seen > limit ? new Error('the disk failed mid-file') : null, chunk);
      },
    });
    pipeline(file, failing, () => {});
    return failing;
  }) as typeof fs.createReadStream;
  return { ...fs, createReadStream };
});

const ROWS = UPLOAD_ROWS_PER_TRANSACTION;
const SETTINGS = { flow: 'appointment-reminder', from: 'Clinic' };

/** The number of row `i`. */
const numberOf = (i: number) => `+38050${String(1_000_000 + i).padStart(7, '0')}`;

/** A CSV of `count` distinct numbers, with `extra` lines (`[after row, line]`) put in. */
function csvOf(count: number, extra: Array<[number, string]> = []): Uint8Array {
  let out = 'to,name,date\n';
  for (let i = 0; i < count; i++) {
    out += `${numberOf(i)},Name ${i},Monday\n`;
    for (const [after, line] of extra) if (after === i) out += `${line}\n`;
  }
  return new TextEncoder().encode(out);
}

async function* bodyOf(bytes: Uint8Array) {
  yield bytes;
}

/** `count` distinct numbers as a JSON campaign's recipients, with `extra` rows put in. */
function recipientsOf(count: number, extra: Array<[number, string]> = []) {
  const out: Array<{ to: string; vars: { name: string; date: string } }> = [];
  for (let i = 0; i < count; i++) {
    out.push({ to: numberOf(i), vars: { name: `Name ${i}`, date: 'Monday' } });
    for (const [after, to] of extra) {
      if (after === i) out.push({ to, vars: { name: 'Again', date: 'Tuesday' } });
    }
  }
  return out;
}

/** How a test sends its campaign: a CSV body, or JSON recipients. */
const KINDS = ['csv', 'json'] as const;
type Kind = (typeof KINDS)[number];

/** A clock the test moves. */
function manualClock(start: string): Clock & { advance(ms: number): void } {
  let now = new Date(start);
  return {
    now: () => new Date(now),
    advance: (ms) => {
      now = new Date(now.getTime() + ms);
    },
  };
}

/**
 * `db` as an upload sees it: its transactions counted, `before(n)` awaited before the nth
 * begins, and `around(n)` asked whether the nth fails (`'before'`: it never begins, as after
 * the process died; `'after'`: its statements run, then it is rolled back).
 */
function watched(
  db: Db,
  hooks: {
    before?: (n: number) => Promise<void> | void;
    fails?: (n: number) => 'before' | 'after' | undefined;
  } = {},
) {
  let n = 0;
  const proxy = new Proxy(db, {
    get(target, key) {
      if (key === 'transaction') {
        return async (fn: Parameters<Db['transaction']>[0]) => {
          const nth = ++n;
          await hooks.before?.(nth);
          const fails = hooks.fails?.(nth);
          if (fails === 'before') throw new Error('the database is gone');
          return target.transaction(async (tx) => {
            const result = await fn(tx);
            if (fails === 'after') throw new Error('the database failed mid-upload');
            return result;
          });
        };
      }
      const value = Reflect.get(target, key, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return { db: proxy, transactions: () => n };
}

describeEachEngine('a campaign, CSV or JSON, stored a batch a transaction', (ctx) => {
  const clock = manualClock('2026-03-27T08:00:00Z'); // a Friday
  let app: ReturnType<typeof buildTestApp>;
  let scheduler: SchedulerDeps;
  const flows = createFlowRegistry('./flows');

  beforeAll(() => {
    app = buildTestApp(ctx.database(), { clock });
    scheduler = {
      ...app.calls,
      logger: createLogger('silent'),
      window: { from: '00:00', to: '23:59' },
      holidays: NO_HOLIDAYS,
      capPerDay: undefined,
    };
  });

  const db = () => ctx.database().db;
  const deps = (upload: ReturnType<typeof watched>) => ({ db: upload.db, clock, flows });
  /** A campaign of `count` distinct numbers, sent as `kind` says. */
  const create = (
    kind: Kind,
    upload: ReturnType<typeof watched>,
    settings: { name: string; window?: { from: string; to: string } },
    count: number,
    signal?: AbortSignal,
  ) =>
    kind === 'csv'
      ? createCampaignFromCsv(deps(upload), { ...SETTINGS, ...settings }, bodyOf(csvOf(count)), {
          signal,
        })
      : createCampaign(
          deps(upload),
          { ...SETTINGS, ...settings, recipients: recipientsOf(count) },
          { signal },
        );
  const count = async (query: ReturnType<typeof sql>) =>
    rowsOf<{ n: number }>(await db().execute(query))[0]!.n;
  const idOf = async (name: string) =>
    rowsOf<{ id: string }>(
      await db().execute(sql`select id from campaigns where name = ${name}`),
    )[0]?.id;
  /** What is left of a campaign: its row, its recipients, its counts' recipients. */
  const leftOf = async (id: string) => ({
    campaigns: await count(sql`select count(*)::int as n from campaigns where id = ${id}`),
    recipients: await count(
      sql`select count(*)::int as n from campaign_recipients where campaign_id = ${id}`,
    ),
    counted: await count(
      sql`select coalesce(sum(n), 0)::int as n from campaign_counts where campaign_id = ${id}`,
    ),
    countRows: await count(
      sql`select count(*)::int as n from campaign_counts where campaign_id = ${id}`,
    ),
  });
  const NOTHING = { campaigns: 0, recipients: 0, counted: 0, countRows: 0 };
  const view = async (id: string) => readJson(await app.app.request(`/v1/campaigns/${id}`));

  it('stores a file of several batches whole, a number listed twice kept once across them', async () => {
    const name = uniq('whole');
    // 2.5 batches of distinct numbers; then again: row 5 in the second batch, row 1.2 batches
    // in at the end, row 0 twice in the last; and a bad line
    const csv = csvOf(ROWS * 2.5, [
      [ROWS + 100, `${numberOf(5)},Again,Tuesday`],
      [ROWS * 2.5 - 1, `${numberOf(ROWS * 1.2)},Again,Tuesday`],
      [ROWS * 2.5 - 1, `${numberOf(0)},Again,Tuesday`],
      [ROWS * 2.5 - 1, `${numberOf(0)},Again,Tuesday`],
      [10, 'not a number,Bad,Monday'],
    ]);
    const upload = watched(db());
    const made = await createCampaignFromCsv(deps(upload), { ...SETTINGS, name }, bodyOf(csv));
    // the campaign's row, a transaction per full batch, and the last with the rest
    expect(upload.transactions()).toBe(1 + 2 + 1);
    expect(made).toMatchObject({ accepted: ROWS * 2.5, duplicates: 4, rejectedCount: 1 });
    const got = await view(made.id);
    expect(got).toMatchObject({ name, state: 'scheduled', recipients: ROWS * 2.5 });
    expect(got.progress.byState).toEqual({ pending: ROWS * 2.5 });
    expect(await leftOf(made.id)).toMatchObject({ recipients: ROWS * 2.5, counted: ROWS * 2.5 });
    // each number once, at its first line (line 1 is the header; row i is line i + 2, and one
    // more after each line put in before it: the bad one, the repeat of row 5)
    const lines = rowsOf<{ phone: string; line: number }>(
      await db().execute(sql`select phone, line from campaign_recipients
        where campaign_id = ${made.id} and phone in (${numberOf(0)}, ${numberOf(5)},
          ${numberOf(ROWS * 1.2)}) order by line`),
    );
    expect(lines).toEqual([
      { phone: numberOf(0), line: 2 },
      { phone: numberOf(5), line: 7 },
      { phone: numberOf(ROWS * 1.2), line: ROWS * 1.2 + 4 },
    ]);
  });

  it('stores a JSON campaign of several batches whole, uploading until the last, then 201', async () => {
    const name = uniq('json-whole');
    // 2.5 batches of distinct numbers; then row 5 again in the second batch, row 0 again in
    // the last, and a bad row
    const recipients = recipientsOf(ROWS * 2.5, [
      [10, 'not a number'],
      [ROWS + 100, numberOf(5)],
      [ROWS * 2.5 - 1, numberOf(0)],
    ]);
    let answered = false;
    const between: unknown[] = [];
    const upload = watched(db(), {
      before: async (n) => {
        // after the campaign's row, and after each full batch: as another request sees it
        if (n === 1) return;
        const id = (await idOf(name))!;
        const { state, recipients } = await view(id);
        between.push({ n, answered, state, recipients });
      },
    });
    // the app on the watched database: the request's upload is the one counted
    const watchedApp = buildTestApp({ ...ctx.database(), db: upload.db }, { clock });
    const res = await Promise.resolve(
      watchedApp.app.request('/v1/campaigns', json({ ...SETTINGS, name, recipients })),
    ).finally(() => {
      answered = true;
    });
    expect(res.status).toBe(201);
    const made = await readJson(res);
    // the campaign's row, a transaction per full batch, and the last with the rest
    expect(upload.transactions()).toBe(1 + 2 + 1);
    expect(between).toEqual([
      { n: 2, answered: false, state: 'uploading', recipients: 0 },
      { n: 3, answered: false, state: 'uploading', recipients: ROWS },
      // the second batch repeated a number of the first
      { n: 4, answered: false, state: 'uploading', recipients: ROWS * 2 - 1 },
    ]);
    expect(made).toMatchObject({
      name,
      state: 'scheduled',
      recipients: ROWS * 2.5,
      accepted: ROWS * 2.5,
      duplicates: 2,
      rejectedCount: 1,
      rejected: [{ row: 11, code: 'INVALID_RECIPIENT' }],
    });
    expect(await leftOf(made.id)).toMatchObject({ recipients: ROWS * 2.5, counted: ROWS * 2.5 });
    // each number once, at its first index
    const lines = rowsOf<{ phone: string; line: number }>(
      await db().execute(sql`select phone, line from campaign_recipients
        where campaign_id = ${made.id} and phone in (${numberOf(0)}, ${numberOf(5)})
        order by line`),
    );
    expect(lines).toEqual([
      { phone: numberOf(0), line: 0 },
      { phone: numberOf(5), line: 5 },
    ]);
  });

  it('stores a JSON campaign of one batch or fewer in one transaction', async () => {
    // a number listed twice, kept once; a batch exactly; one row more, an upload
    for (const [recipients, stored, transactions] of [
      [recipientsOf(1, [[0, numberOf(0)]]), 1, 1],
      [recipientsOf(ROWS), ROWS, 1],
      [recipientsOf(ROWS + 1), ROWS + 1, 1 + 1 + 1],
    ] as const) {
      const name = uniq('json-one');
      const upload = watched(db());
      const made = await createCampaign(deps(upload), { ...SETTINGS, name, recipients });
      expect(upload.transactions()).toBe(transactions);
      expect(made).toMatchObject({
        accepted: stored,
        duplicates: recipients.length - stored,
        rejectedCount: 0,
      });
      expect(await view(made.id)).toMatchObject({ name, state: 'scheduled', recipients: stored });
      expect(await leftOf(made.id)).toMatchObject({ recipients: stored, counted: stored });
    }
  });

  it('answers another request while it stores, which sees it uploading', async () => {
    const name = uniq('meanwhile');
    const events: string[] = [];
    let other: Promise<void> | undefined;
    let seen: { transactions: number; campaign: { state: string; recipients: number } };
    const upload = watched(db(), {
      before: (n) => {
        // the first batch is in: a request now, not waited for
        if (n !== 3) return;
        other = (async () => {
          const res = await app.app.request('/v1/campaigns?state=uploading&limit=200');
          const body = await readJson(res);
          seen = {
            transactions: upload.transactions(),
            campaign: body.items.find((c: { name: string }) => c.name === name),
          };
          events.push('request answered');
        })();
      },
    });
    const done = createCampaignFromCsv(
      deps(upload),
      { ...SETTINGS, name },
      bodyOf(csvOf(ROWS * 4.5)),
    ).then((made) => {
      events.push('upload stored');
      return made;
    });
    const made = await done;
    await other;
    expect(events).toEqual(['request answered', 'upload stored']);
    // answered while the upload was between its first batches (of 6 transactions), and seen
    // as it was then: uploading, with the batches in so far
    expect(upload.transactions()).toBe(6);
    expect(seen!.transactions).toBeLessThan(6);
    expect(seen!.campaign.state).toBe('uploading');
    expect([ROWS, ROWS * 2, ROWS * 3]).toContain(seen!.campaign.recipients);
    expect(await view(made.id)).toMatchObject({ state: 'scheduled', recipients: ROWS * 4.5 });
  });

  /**
   * An upload of 3.5 batches, CSV unless `kind` says, that fails as `fails` says (or its file
   * does, or its request's `signal` is aborted); the campaign's id and the recipients stored of
   * it when its fourth transaction was about to begin (the third batch's, or the first of its
   * undoing), which is when `beforeThirdBatch` runs.
   */
  const failing = (
    name: string,
    hooks: {
      fails?: (n: number) => 'before' | 'after' | undefined;
      beforeThirdBatch?: () => unknown;
    },
    signal?: AbortSignal,
    kind: Kind = 'csv',
  ) => {
    const before = { id: '', recipients: 0 };
    const upload = watched(db(), {
      before: async (n) => {
        if (n !== 4) return;
        before.id = (await idOf(name))!;
        before.recipients = (await leftOf(before.id)).recipients;
        await hooks.beforeThirdBatch?.();
      },
      ...(hooks.fails && { fails: hooks.fails }),
    });
    const made = create(kind, upload, { name }, ROWS * 3.5, signal);
    return { made, before };
  };

  it.each(KINDS)(
    'leaves nothing of an upload whose database fails after its first batches (%s)',
    async (kind) => {
      const { made, before } = failing(
        uniq('db-fails'),
        { fails: (n) => (n === 4 ? 'after' : undefined) },
        undefined,
        kind,
      );
      await expect(made).rejects.toThrow('the database failed mid-upload');
      expect(before.recipients).toBe(ROWS * 2); // two batches were in when the third failed
      expect(await leftOf(before.id)).toEqual(NOTHING);
    },
  );

  it('leaves nothing of an upload whose file fails to read after its first batches', async () => {
    const name = uniq('file-fails');
    // past the first two batches' lines (each under 40 bytes), short of the third's end
    reads.failAfter = ROWS * 2 * 40;
    try {
      const { made, before } = failing(name, {});
      await expect(made).rejects.toThrow('the disk failed mid-file');
      expect(before.recipients).toBe(ROWS * 2);
      expect(await leftOf(before.id)).toEqual(NOTHING);
    } finally {
      reads.failAfter = null;
    }
  });

  it.each(KINDS)(
    'leaves nothing of an upload whose request ends mid-way (the client gone, a shutdown) (%s)',
    async (kind) => {
      const stop = new AbortController();
      const { made, before } = failing(
        uniq('aborted'),
        { beforeThirdBatch: () => stop.abort() },
        stop.signal,
        kind,
      );
      await expect(made).rejects.toMatchObject({ code: 'UNAVAILABLE' });
      expect(before.recipients).toBe(ROWS * 2);
      expect(await leftOf(before.id)).toEqual(NOTHING);
    },
  );

  it('is never started, paused, resumed or cancelled while uploading; started once stored', async () => {
    const name = uniq('not-yet');
    const during: Record<string, unknown> = {};
    const upload = watched(db(), {
      before: async (n) => {
        if (n !== 3) return;
        const id = (await idOf(name))!;
        // due now, inside its window: a round would start a scheduled campaign
        await runCampaigns(scheduler);
        during.view = await view(id);
        during.attempts = await count(
          sql`select count(*)::int as n from campaign_attempts where campaign_id = ${id}`,
        );
        for (const action of ['pause', 'resume', 'cancel']) {
          const res = await app.app.request(`/v1/campaigns/${id}/${action}`, { method: 'POST' });
          during[action] = { status: res.status, error: (await readJson(res)).error };
        }
      },
    });
    const made = await create(
      'csv',
      upload,
      { name, window: { from: '00:00', to: '23:59' } },
      ROWS * 1.5,
    );
    expect(during.view).toMatchObject({ state: 'uploading', recipients: ROWS });
    expect((during.view as { progress: unknown }).progress).toMatchObject({
      byState: { pending: ROWS },
      attempts: 0,
    });
    expect(during.attempts).toBe(0);
    for (const action of ['pause', 'resume', 'cancel']) {
      expect(during[action]).toEqual({
        status: 409,
        error: {
          code: 'CONFLICT',
          message: `a campaign that is uploading cannot ${action}`,
          details: [{ path: 'id', code: 'INVALID_STATE', message: 'the campaign is uploading' }],
        },
      });
    }
    expect((await view(made.id)).state).toBe('scheduled');
    // stored, the same round starts it and its first call goes
    expect(await runCampaigns(scheduler)).toBe(true);
    const started = await view(made.id);
    expect(started.state).toBe('running');
    expect(started.progress.attempts).toBe(1);
  });

  it('deletes an upload left behind once it is stale, recipients and counts with it', async () => {
    const name = uniq('left');
    // the process dies as the third transaction would begin: nothing of the upload runs again
    const { made, before } = failing(name, { fails: (n) => (n >= 4 ? 'before' : undefined) });
    await expect(made).rejects.toThrow('the database is gone');
    const left = await leftOf(before.id);
    expect(left).toMatchObject({ campaigns: 1, recipients: ROWS * 2, counted: ROWS * 2 });
    expect((await view(before.id)).state).toBe('uploading');

    clock.advance(STALE_UPLOAD_MS - 1); // not yet stale
    await runCampaigns(scheduler);
    expect(await leftOf(before.id)).toEqual(left);
    clock.advance(2);
    expect(await runCampaigns(scheduler)).toBe(true);
    expect(await leftOf(before.id)).toEqual(NOTHING);
    expect((await app.app.request(`/v1/campaigns/${before.id}`)).status).toBe(404);
  });

  it.each(KINDS)(
    'stores nothing of an upload that goes on after the sweep took its campaign, and answers 409 (%s)',
    async (kind) => {
      const { made, before } = failing(
        uniq('resumed'),
        {
          // the upload stalls past the limit between two batches, and a round runs meanwhile
          beforeThirdBatch: () => {
            clock.advance(STALE_UPLOAD_MS + 1);
            return runCampaigns(scheduler);
          },
        },
        undefined,
        kind,
      );
      // the client is told to send it again, in the one envelope (not a 500)
      const err = await made.then(
        () => expect.unreachable('the upload was stored'),
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(AppError);
      expect(httpStatus((err as AppError).code)).toBe(409);
      expect(err).toMatchObject({
        code: 'CONFLICT',
        message:
          'the upload was abandoned and removed: it stalled between two of its batches for longer than an unfinished upload is kept, and its campaign was deleted with what was stored of it; send it again',
        details: [],
      });
      expect(before.recipients).toBe(ROWS * 2);
      expect(await leftOf(before.id)).toEqual(NOTHING);
    },
  );
});
