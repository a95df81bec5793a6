/**
 * A campaign's counts (`campaign_counts`, kept by triggers on its recipients: migration 0022;
 * src/campaigns/counts.ts) against the GROUP BY over its recipients that they replace, on
 * PGlite and on Postgres:
 *
 * - after random statements of every kind (inserts, updates of state, outcome and attempts,
 *   updates that count nothing, deletes; several rows a statement, several campaigns), folded
 *   or not in between, the sums are the GROUP BY's, group for group;
 * - a campaign's progress reads its counts, not its recipients, and a few rows once folded;
 * - recipients stored before the migration are counted by it.
 */
import { sql } from 'drizzle-orm';
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { COMPACT_AFTER_ROWS, compactCounts } from '../../src/campaigns/counts.ts';
import { progressOf } from '../../src/campaigns/read.ts';
import { type Db, idList, rowsOf, type Tx } from '../../src/db/client.ts';
import { migrateDatabase } from '../../src/db/migrate.ts';
import { buildTestApp, phone } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';
import { describeMigration } from '../support/migrations.ts';
import { ONE_CONNECTION, onlyIf } from '../support/skip.ts';

const STATES = ['pending', 'waiting', 'calling', 'retry', 'done', 'skipped', 'cancelled'];
const OUTCOMES = [null, 'confirmed', 'declined'];

interface Group {
  campaign_id: string;
  state: string;
  outcome: string | null;
  n: number;
  attempts: number;
}

const order = (rows: Group[]) =>
  rows
    .map((r) => ({ ...r, n: Number(r.n), attempts: Number(r.attempts) }))
    .sort((a, b) =>
      `${a.campaign_id} ${a.state} ${a.outcome}`.localeCompare(
        `${b.campaign_id} ${b.state} ${b.outcome}`,
      ),
    );

/** The counts' sums per group, groups that sum to no recipient left out. */
async function counted(db: Db, ids: string[]): Promise<Group[]> {
  return order(
    rowsOf<Group>(
      await db.execute(sql`
        select campaign_id, state, outcome, sum(n)::int as n, sum(attempts)::int as attempts
        from campaign_counts where campaign_id in ${idList(ids, 'uuid')}
        group by campaign_id, state, outcome having sum(n) <> 0`),
    ),
  );
}

/** What the counts replace: the GROUP BY over the recipients. */
async function grouped(db: Db, ids: string[]): Promise<Group[]> {
  return order(
    rowsOf<Group>(
      await db.execute(sql`
        select campaign_id, state, outcome, count(*)::int as n, sum(attempts)::int as attempts
        from campaign_recipients where campaign_id in ${idList(ids, 'uuid')}
        group by campaign_id, state, outcome`),
    ),
  );
}

async function newCampaign(db: Db): Promise<string> {
  const [row] = rowsOf<{ id: string }>(
    await db.execute(sql`
      insert into campaigns (id, flow_id, "from", state, start_at, per_minute, retry, paced_at)
      values (gen_random_uuid(), 'appointment-reminder', 'Clinic', 'running', now(), 60,
              '{}'::jsonb, now())
      returning id`),
  );
  return row!.id;
}

/** One statement on the recipients, as the scheduler, retention or erasure would send. */
const statement = fc.oneof(
  fc.record({
    kind: fc.constant('insert' as const),
    campaign: fc.nat(1),
    rows: fc.array(
      fc.record({
        state: fc.constantFrom(...STATES),
        outcome: fc.constantFrom(...OUTCOMES),
        attempts: fc.nat(3),
      }),
      { minLength: 1, maxLength: 8 },
    ),
  }),
  fc.record({
    kind: fc.constant('update' as const),
    // a share of the rows, by line: several rows in one statement
    modulo: fc.integer({ min: 1, max: 4 }),
    rest: fc.nat(3),
    state: fc.option(fc.constantFrom(...STATES), { nil: undefined }),
    outcome: fc.option(fc.constantFrom(...OUTCOMES), { nil: undefined }),
    attempts: fc.option(fc.integer({ min: -1, max: 2 }), { nil: undefined }),
  }),
  fc.record({
    kind: fc.constant('delete' as const),
    modulo: fc.integer({ min: 2, max: 5 }),
    rest: fc.nat(4),
  }),
  fc.constant({ kind: 'fold' as const }),
);
type Statement = typeof statement extends fc.Arbitrary<infer T> ? T : never;

let line = 0;
async function apply(db: Db, ids: string[], s: Statement): Promise<void> {
  // whatever their number of rows: folds as often as the statements come
  if (s.kind === 'fold') return compactCounts(db, ids, 0);
  if (s.kind === 'insert') {
    const rows = s.rows.map((r) => ({ ...r, line: ++line }));
    await db.execute(sql`
      insert into campaign_recipients (campaign_id, line, phone, vars, state, outcome, attempts)
      select ${ids[s.campaign]!}::uuid, v.line, '+38050' || lpad(v.line::text, 7, '0'),
             '{}'::jsonb, v.state, v.outcome, v.attempts
      from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
        as v(line int, state text, outcome text, attempts int)`);
    return;
  }
  const which = sql`campaign_id in ${idList(ids, 'uuid')}
    and line % ${s.modulo}::int = ${s.rest % s.modulo}::int`;
  if (s.kind === 'delete') {
    await db.execute(sql`delete from campaign_recipients where ${which}`);
    return;
  }
  // an update of none of the counted columns moves nothing (next_at, as the windows do)
  await db.execute(sql`
    update campaign_recipients set
      state = coalesce(${s.state ?? null}::text, state),
      outcome = case when ${s.outcome !== undefined} then ${s.outcome ?? null}::text else outcome end,
      attempts = greatest(attempts + coalesce(${s.attempts ?? null}::int, 0), 0),
      next_at = now()
    where ${which}`);
}

describeEachEngine('campaign counts', (ctx) => {
  const db = (): Db => ctx.database().db;

  it('sum to the GROUP BY over the recipients after any statements, folded or not', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(statement, { minLength: 1, maxLength: 25 }), async (steps) => {
        const ids = [await newCampaign(db()), await newCampaign(db())];
        for (const step of steps) {
          await apply(db(), ids, step);
          expect(await counted(db(), ids)).toEqual(await grouped(db(), ids));
        }
      }),
      { numRuns: 40 },
    );
  });

  it.runIf(ctx.engine === 'postgres')(
    onlyIf(
      ctx.engine === 'postgres',
      'sum to the GROUP BY with statements in transactions at once and a fold beside them',
      ONE_CONNECTION,
    ),
    async () => {
      const ids = [await newCampaign(db()), await newCampaign(db())];
      const steps = fc.sample(statement, { numRuns: 60, seed: 27 });
      // each statement in a transaction of its own on the pool, all at once, and one folder
      // beside them, as the leader's scheduler runs beside the lanes
      const folds = async () => {
        for (let i = 0; i < 10; i++) await compactCounts(db(), ids, 0);
      };
      // arbitrary statements over the same rows may deadlock (the code's own take their locks
      // in one order): the loser is rolled back, its counts with it, and runs again
      const run = async (step: Statement): Promise<void> => {
        try {
          await db().transaction((tx) => apply(tx as unknown as Db, ids, step));
        } catch (err) {
          if (!isDeadlock(err)) throw err;
          await run(step);
        }
      };
      await Promise.all([...steps.map(run), folds()]);
      await compactCounts(db(), ids, 0);
      expect(await counted(db(), ids)).toEqual(await grouped(db(), ids));
    },
  );

  it('show a progress read from the counts alone, a few rows once folded', async () => {
    const id = await newCampaign(db());
    // 100 statements of 50 recipients, as an upload stores them
    for (let k = 0; k < 100; k++) {
      await db().execute(sql`
        insert into campaign_recipients (campaign_id, line, phone, vars, state, outcome, attempts)
        select ${id}::uuid, i, '+38067' || lpad(i::text, 7, '0'), '{}'::jsonb,
               case when i % 4 = 0 then 'pending' else 'done' end,
               case when i % 4 = 1 then 'confirmed' end, 1
        from generate_series(${k * 50 + 1}::int, ${k * 50 + 50}::int) i`);
    }
    const read = async () => {
      let progress: Awaited<ReturnType<typeof progressOf>> | undefined;
      const rows = { recipients: 0, counts: 0 };
      await db().transaction(async (tx) => {
        const before = await tupleReads(tx);
        progress = await progressOf(tx, [id]);
        const after = await tupleReads(tx);
        rows.recipients = after.campaign_recipients - before.campaign_recipients;
        rows.counts = after.campaign_counts - before.campaign_counts;
      });
      return { progress: progress!, rows };
    };
    const unfolded = await read();
    expect(unfolded.progress.byState.get(id)).toEqual({ pending: 1250, done: 3750 });
    expect(unfolded.progress.byOutcome.get(id)).toEqual({ confirmed: 1250, '(none)': 2500 });
    expect(unfolded.progress.attempts.get(id)).toBe(5000);
    expect(unfolded.rows.recipients).toBe(0);
    expect(unfolded.rows.counts).toBeGreaterThan(COMPACT_AFTER_ROWS);

    await compactCounts(db(), [id]);
    const folded = await read();
    expect(folded.progress).toEqual(unfolded.progress);
    expect(folded.rows.recipients).toBe(0);
    // one row per group: pending, done with an outcome, done without
    expect(folded.rows.counts).toBe(3);
  });

  it("stay few through the erasures of a finished campaign's numbers", async () => {
    const { app } = buildTestApp(ctx.database());
    const id = await newCampaign(db());
    const phones = Array.from({ length: 80 }, () => phone());
    await db().execute(sql`
      insert into campaign_recipients (campaign_id, line, phone, vars, state, attempts)
      select ${id}::uuid, t.line, t.phone, '{}'::jsonb, 'done', 1
      from jsonb_array_elements_text(${JSON.stringify(phones)}::jsonb)
        with ordinality as t(phone, line)`);
    await db().execute(
      sql`update campaigns set state = 'done', finished_at = now() where id = ${id}`,
    );
    await compactCounts(db(), [id], 0);
    // no scheduler folds a finished campaign: each erasure appends its -1, and folds them
    // once they pile up past COMPACT_AFTER_ROWS
    for (const p of phones.slice(0, COMPACT_AFTER_ROWS + 6)) {
      const res = await app.request(`/v1/subjects/${encodeURIComponent(p)}`, { method: 'DELETE' });
      expect(res.status).toBe(200);
    }
    const [rows] = rowsOf<{ n: number | string }>(
      await db().execute(sql`select count(*) as n from campaign_counts where campaign_id = ${id}`),
    );
    expect(Number(rows!.n)).toBeLessThanOrEqual(COMPACT_AFTER_ROWS);
    expect(await counted(db(), [id])).toEqual(await grouped(db(), [id]));
    expect(await grouped(db(), [id])).toEqual([
      { campaign_id: id, state: 'done', outcome: null, n: 10, attempts: 10 },
    ]);
  });
});

function isDeadlock(err: unknown): boolean {
  for (let e: unknown = err; e; e = (e as { cause?: unknown }).cause) {
    if ((e as { code?: unknown }).code === '40P01') return true;
  }
  return false;
}

/** Rows this transaction has read of the two tables so far (pg_stat_xact_user_tables). */
async function tupleReads(tx: Tx) {
  const rows = rowsOf<{ relname: string; n: string | number }>(
    await tx.execute(sql`
      select relname, coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) as n
      from pg_stat_xact_user_tables
      where relname in ('campaign_recipients', 'campaign_counts')`),
  );
  const of = (name: string) => Number(rows.find((r) => r.relname === name)?.n ?? 0);
  return { campaign_recipients: of('campaign_recipients'), campaign_counts: of('campaign_counts') };
}

describeMigration(22, 'over earlier recipients', (migrated) => {
  it('counts the recipients stored before it', async () => {
    const database = migrated();
    const db = database.db;
    const ids = [await newCampaign(db), await newCampaign(db)];
    await db.execute(sql`
        insert into campaign_recipients (campaign_id, line, phone, vars, state, outcome, attempts)
        select (array[${ids[0]!}::uuid, ${ids[1]!}::uuid])[1 + i % 2], i,
               '+38063' || lpad(i::text, 7, '0'), '{}'::jsonb,
               (array['pending', 'calling', 'done'])[1 + i % 3],
               case when i % 5 = 0 then 'confirmed' end, i % 3
        from generate_series(1, 300) i`);
    await migrateDatabase(database);
    const after = await counted(db, ids);
    expect(after).toEqual(await grouped(db, ids));
    expect(after.reduce((sum, g) => sum + g.n, 0)).toBe(300);
    // and the triggers count what comes after
    await db.execute(sql`update campaign_recipients set state = 'done' where state = 'calling'`);
    expect(await counted(db, ids)).toEqual(await grouped(db, ids));
  });
});
