/**
 * `call_recipients` (migration 0029, src/db/schema/call-recipients.ts): which calls went to a
 * phone number, in a table of its own instead of an index of `calls`, so that an update of a
 * call that is not HOT (its state moves) writes no entry at a random page of it.
 *
 * - Triggers keep it equal to the calls' `("to", id)` through every kind of statement, and a
 *   call's webhooks and statuses leave its row as it was (the same tuple version, read by
 *   `xmin`) while the call's own row moves.
 * - `GET /v1/calls?to=` reads it and answers as the plain filter over `calls` does, page by
 *   page, with every other filter beside.
 * - Migration 0029 copies the calls stored before it and drops the index.
 */
import { sql } from 'drizzle-orm';
import { beforeAll, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import { type CallFilter, listCalls } from '../../src/calls/read.ts';
import { type Db, idList, rowsOf } from '../../src/db/client.ts';
import { migrateDatabase } from '../../src/db/migrate.ts';
import { signNodeToken } from '../../src/flows/index.ts';
import { encodeCursor } from '../../src/messages/read.ts';
import { buildTestApp, json, phone, readJson } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';
import { describeMigration } from '../support/migrations.ts';

/** Rows of the calls' `("to", id)` the table lacks, and rows of the table no call has. */
async function mismatches(db: Db): Promise<unknown[]> {
  return rowsOf(
    await db.execute(sql`
      (select 'missing' as side, "to", id::text from calls
       except select 'missing', "to", call_id::text from call_recipients)
      union all
      (select 'extra', "to", call_id::text from call_recipients
       except select 'extra', "to", id::text from calls)`),
  );
}

/** A UUIDv7 of its own for row `n` of a test's hand-written inserts (n < 10^12). */
const fixedId = (n: number) => `019b0000-0000-7000-8000-${String(n).padStart(12, '0')}`;

/** Hand-written calls `from`..`to` (inclusive) to `number`, in one statement. */
const insertCalls = (db: Db, from: number, to: number, number: (i: string) => string) =>
  db.execute(sql`
    insert into calls (id, flow_id, flow_version, "to", "from", lang, vars, state, snapshot,
                       message_id)
    select (${fixedId(0).slice(0, -12)} || lpad(i::text, 12, '0'))::uuid, 'seeded', 'v1',
           ${sql.raw(number('i'))}, 'Clinic', 'en', '{}', 'ended', '{}', gen_random_uuid()
    from generate_series(${from}::int, ${to}::int) as i`);

const versions = async (db: Db, table: 'calls' | 'call_recipients', ids: string[]) =>
  rowsOf<{ id: string; xmin: string }>(
    await db.execute(
      table === 'calls'
        ? sql`select id::text, xmin::text from calls where id in ${idList(ids, 'uuid')} order by id`
        : sql`select call_id::text as id, xmin::text from call_recipients
              where call_id in ${idList(ids, 'uuid')} order by call_id`,
    ),
  );

describeEachEngine('call_recipients', (ctx) => {
  let app: App;
  let built: ReturnType<typeof buildTestApp>;
  const db = () => ctx.database().db;
  const start = async (to: string) => {
    const res = await app.request(
      '/v1/calls',
      json({
        flow: 'appointment-reminder',
        from: 'Clinic',
        to,
        vars: { name: 'Ann', date: 'Monday 10:00' },
      }),
    );
    expect(res.status).toBe(202);
    return (await readJson(res)) as { id: string; customerMessageId: string };
  };

  beforeAll(() => {
    built = buildTestApp(ctx.database());
    app = built.app;
  });

  it("holds one row per call, written once: a call's statuses and webhooks leave it as it was", async () => {
    const [a, b] = [phone(), phone()];
    const started = [await start(a), await start(a), await start(b)];
    const ids = started.map((c) => c.id);
    expect(await mismatches(db())).toEqual([]);
    const before = await versions(db(), 'call_recipients', ids);
    expect(before).toHaveLength(3);
    const callsBefore = await versions(db(), 'calls', ids);

    for (const c of started) {
      // the call's message accepted, then a key pressed on its first menu
      const status = await app.request(
        '/hooks/delivery',
        json({
          customerMessageId: c.customerMessageId,
          status: 'accepted',
          timestamp: new Date().toISOString(),
        }),
      );
      expect(await readJson(status)).toMatchObject({ matched: 1 });
      const key = await app.request(
        '/hooks/speechcall',
        json({
          from: 'Clinic',
          mid: 'm',
          action: {
            token: signNodeToken(
              { callId: c.id, node: 'main', key: '1' },
              built.calls.signingSecret,
            ),
          },
        }),
      );
      expect(key.status).toBe(200);
    }
    // every call's row has moved on (new versions), its number's row has not
    const callsAfter = await versions(db(), 'calls', ids);
    expect(callsAfter.map((c) => c.id)).toEqual(callsBefore.map((c) => c.id));
    callsAfter.forEach((c, i) => {
      expect(c.xmin).not.toBe(callsBefore[i]!.xmin);
    });
    expect(await versions(db(), 'call_recipients', ids)).toEqual(before);
    expect(await mismatches(db())).toEqual([]);
  });

  it('follows an insert, a change of number and a delete, whatever statement makes them', async () => {
    const [a, b, c] = [phone(), phone(), phone()];
    // two rows in one statement, as a seed or a restore would write them
    await insertCalls(db(), 1, 2, (i) => `case when ${i} = 1 then '${a}' else '${b}' end`);
    expect(await mismatches(db())).toEqual([]);
    await db().execute(sql`update calls set "to" = ${c} where id = ${fixedId(1)}`);
    expect(await mismatches(db())).toEqual([]);
    expect((await listCalls(db(), { to: c })).items.map((x) => x.id)).toEqual([fixedId(1)]);
    expect((await listCalls(db(), { to: a })).items).toEqual([]);
    await db().execute(sql`delete from calls where id in (${fixedId(1)}, ${fixedId(2)})`);
    expect(await mismatches(db())).toEqual([]);
    expect((await listCalls(db(), { to: b })).items).toEqual([]);
    expect((await listCalls(db(), { to: c })).items).toEqual([]);
  });

  it('lists by number as the plain filter over calls does: every page, beside every filter', async () => {
    const numbers = [phone(), phone(), phone()];
    const started: string[] = [];
    for (let i = 0; i < 18; i++) started.push((await start(numbers[i % 3]!)).id);
    // some moved on, some of another flow
    await db().execute(sql`
      update calls set state = 'ended', outcome = 'confirmed'
      where id in ${idList(
        started.filter((_, i) => i % 5 < 2),
        'uuid',
      )}`);
    await db().execute(sql`
      update calls set flow_id = 'other'
      where id in ${idList(
        started.filter((_, i) => i % 4 === 0),
        'uuid',
      )}`);
    const times = rowsOf<{ created_at: string | Date }>(
      await db().execute(
        sql`select created_at from calls where id in ${idList(started, 'uuid')} order by id`,
      ),
    ).map((r) => new Date(r.created_at));
    const middle = times[Math.floor(times.length / 2)]!;

    /** What the filter means, written plainly over calls. */
    const plain = async (f: CallFilter) =>
      rowsOf<{ id: string }>(
        await db().execute(sql`
          select id::text from calls
          where "to" = ${f.to!}
            and (${f.flow ?? null}::text is null or flow_id = ${f.flow ?? null})
            and (${f.state ?? null}::text is null or state = ${f.state ?? null})
            and (${f.outcome ?? null}::text is null or outcome = ${f.outcome ?? null})
            and (${f.since?.toISOString() ?? null}::timestamptz is null
                 or created_at >= ${f.since?.toISOString() ?? null})
          order by id desc`),
      ).map((r) => r.id);
    const paged = async (f: CallFilter) => {
      const out: string[] = [];
      let cursor: string | undefined;
      for (let page = 0; page < 100; page++) {
        const got = await listCalls(db(), { ...f, limit: 2, ...(cursor && { cursor }) });
        out.push(...got.items.map((c) => c.id));
        if (!got.nextCursor) return out;
        cursor = got.nextCursor;
      }
      throw new Error('more pages than calls');
    };

    let compared = 0;
    for (const to of numbers) {
      for (const flow of [undefined, 'appointment-reminder', 'other']) {
        for (const state of [undefined, 'queued', 'ended']) {
          for (const outcome of [undefined, 'confirmed']) {
            for (const span of [{}, { since: middle }]) {
              const f: CallFilter = { to, flow, state, outcome, ...span };
              const expected = await plain(f);
              expect(await paged(f), JSON.stringify(f)).toEqual(expected);
              compared += expected.length;
            }
          }
        }
      }
    }
    expect(compared).toBeGreaterThan(18);
    // a cursor from another number's call still bounds the walk by id: the newest of the
    // others' (ids made in one millisecond are in random order, so not the last one started)
    const last = started
      .filter((_, i) => i % 3 !== 0)
      .sort()
      .at(-1)!;
    const below = await listCalls(db(), { to: numbers[0]!, cursor: encodeCursor(last) });
    const expected = (await plain({ to: numbers[0]! })).filter((id) => id < last);
    expect(expected.length).toBeGreaterThan(0);
    expect(below.items.map((c) => c.id)).toEqual(expected);
    // and through the API, as the console and clients ask
    const res = await app.request(`/v1/calls?to=${encodeURIComponent(numbers[1]!)}&limit=100`);
    expect(res.status).toBe(200);
    const body = (await readJson(res)) as { items: { id: string }[] };
    expect(body.items.map((c) => c.id)).toEqual(await plain({ to: numbers[1]! }));
  });

  it('is what calls has instead of an index by phone number', async () => {
    const indexes = rowsOf<{ indexdef: string }>(
      await db().execute(sql`select indexdef from pg_indexes where tablename = 'calls'`),
    );
    expect(indexes.length).toBeGreaterThan(1);
    expect(indexes.filter((i) => /\("to"/.test(i.indexdef))).toEqual([]);
  });
});

describeMigration(29, 'over calls stored before it', (migrated) => {
  it('copies every call into the table, drops the index by phone number, and its triggers keep it', async () => {
    const database = migrated();
    const db = database.db;
    const [a, b] = [phone(), phone()];
    // stored by the code of then
    await insertCalls(db, 1, 30, (i) => `case when ${i} % 3 = 0 then '${b}' else '${a}' end`);
    await migrateDatabase(database);

    expect(await mismatches(db)).toEqual([]);
    const count = rowsOf<{ n: number | string }>(
      await db.execute(sql`select count(*) as n from call_recipients`),
    );
    expect(Number(count[0]!.n)).toBe(30);
    const byB = await listCalls(db, { to: b });
    expect(byB.items.map((c) => c.id)).toEqual([30, 27, 24, 21, 18, 15, 12, 9, 6, 3].map(fixedId));
    const gone = rowsOf(
      await db.execute(sql`select 1 from pg_indexes where indexname = 'calls_to_id_idx'`),
    );
    expect(gone).toEqual([]);
    // made and removed after it, by the new triggers
    await insertCalls(db, 31, 31, () => `'${b}'`);
    await db.execute(sql`delete from calls where id = ${fixedId(3)}`);
    expect(await mismatches(db)).toEqual([]);
    expect((await listCalls(db, { to: b })).items.map((c) => c.id)).toEqual(
      [31, 30, 27, 24, 21, 18, 15, 12, 9, 6].map(fixedId),
    );
  });
});
