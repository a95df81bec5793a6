/**
 * `message_recipients` (migration 0024, src/db/schema/message-recipients.ts): which messages
 * went to a phone number, in a table of its own instead of an index of `messages`, so that a
 * status move (which cannot be HOT) writes no entry at a random page of it.
 *
 * - Triggers keep it equal to the messages' `("to", id)` through every kind of statement, and
 *   a status move leaves its rows as they were (the same tuple versions, read by `xmin`).
 * - `GET /v1/messages?to=` reads it and answers as the plain filter over `messages` does, page
 *   by page, with every other filter beside.
 * - Migration 0024 copies the messages stored before it and drops the index.
 */
import { sql } from 'drizzle-orm';
import { beforeAll, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import { type Db, idList, rowsOf } from '../../src/db/client.ts';
import { migrateDatabase } from '../../src/db/migrate.ts';
import { encodeCursor, listMessages, type MessageFilter } from '../../src/messages/read.ts';
import { buildTestApp, json, phone, readJson, uniq } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';
import { describeMigration } from '../support/migrations.ts';

/**
 * Rows of the messages' `("to", id, type)` the table lacks, and rows of the table no message
 * has.
 */
async function mismatches(db: Db): Promise<unknown[]> {
  return rowsOf(
    await db.execute(sql`
      (select 'missing' as side, "to", id::text, type from messages
       except select 'missing', "to", message_id::text, type from message_recipients)
      union all
      (select 'extra', "to", message_id::text, type from message_recipients
       except select 'extra', "to", id::text, type from messages)`),
  );
}

/** A UUIDv7 of its own for row `n` of a test's hand-written inserts (n < 10^12). */
const fixedId = (n: number) => `019b0000-0000-7000-8000-${String(n).padStart(12, '0')}`;

const versions = async (db: Db, ids: string[]) =>
  rowsOf<{ message_id: string; xmin: string }>(
    await db.execute(sql`
      select message_id::text, xmin::text from message_recipients
      where message_id in ${idList(ids, 'uuid')} order by message_id`),
  );

describeEachEngine('message_recipients', (ctx) => {
  let app: App;
  const db = () => ctx.database().db;
  const submit = async (list: Record<string, unknown>[]) => {
    const res = await app.request('/v1/messages', json({ messages: list }));
    expect(res.status).toBe(202);
    return ((await readJson(res)).messages as { id: string }[]).map((m) => m.id);
  };
  const sms = (to: string, text = 'Your order has shipped') => ({
    from: 'Acme',
    to,
    type: 'sms',
    text,
    customerMessageId: uniq('rcp'),
  });

  beforeAll(() => {
    app = buildTestApp(ctx.database()).app;
  });

  it('holds one row per message, written once: status moves leave its rows as they were', async () => {
    const [a, b] = [phone(), phone()];
    const list = [sms(a), sms(a), sms(b)];
    const ids = await submit(list);
    expect(await mismatches(db())).toEqual([]);
    const before = await versions(db(), ids);
    expect(before).toHaveLength(3);

    for (const status of ['sent', 'delivered']) {
      for (const m of list) {
        const res = await app.request(
          '/hooks/delivery',
          json({
            customerMessageId: m.customerMessageId,
            status,
            timestamp: new Date().toISOString(),
          }),
        );
        expect(await readJson(res)).toMatchObject({ matched: 1 });
      }
    }
    const moved = rowsOf<{ status: string }>(
      await db().execute(sql`select status from messages where id in ${idList(ids, 'uuid')}`),
    );
    expect(moved.map((m) => m.status)).toEqual(['delivered', 'delivered', 'delivered']);
    expect(await versions(db(), ids)).toEqual(before);
    expect(await mismatches(db())).toEqual([]);
  });

  it('follows an insert, a change of number or type and a delete, whatever statement makes them', async () => {
    const [a, b, c] = [phone(), phone(), phone()];
    const prefix = uniq('raw');
    // two rows in one statement, as a seed or a restore would write them
    await db().execute(sql`
      insert into messages (id, customer_message_id, type, "from", "to", payload, status)
      values (${fixedId(1)}, ${`${prefix}-1`}, 'sms', 'Acme', ${a}, '{}', 'queued'),
             (${fixedId(2)}, ${`${prefix}-2`}, 'sms', 'Acme', ${b}, '{}', 'queued')
      on conflict (id) do nothing`);
    expect(await mismatches(db())).toEqual([]);
    await db().execute(sql`update messages set "to" = ${c} where id = ${fixedId(1)}`);
    expect(await mismatches(db())).toEqual([]);
    expect((await listMessages(db(), { to: c })).items.map((m) => m.id)).toEqual([fixedId(1)]);
    expect((await listMessages(db(), { to: a })).items).toEqual([]);
    await db().execute(sql`update messages set type = 'viber_service' where id = ${fixedId(2)}`);
    expect(await mismatches(db())).toEqual([]);
    expect(
      (await listMessages(db(), { to: b, type: 'viber_service' })).items.map((m) => m.id),
    ).toEqual([fixedId(2)]);
    expect((await listMessages(db(), { to: b, type: 'sms' })).items).toEqual([]);
    await db().execute(sql`delete from messages where id in (${fixedId(1)}, ${fixedId(2)})`);
    expect(await mismatches(db())).toEqual([]);
    expect((await listMessages(db(), { to: b })).items).toEqual([]);
  });

  it('lists by number and by type as the plain filter over messages does: every page, beside every filter', async () => {
    const numbers = [phone(), phone(), phone()];
    const list = Array.from({ length: 36 }, (_, i) => ({
      ...sms(numbers[i % 3]!, `order ${i}`),
      ...(i % 4 === 0 && { type: 'viber_service' }),
    }));
    const ids = await submit(list);
    // some moved on, as callbacks would
    await db().execute(sql`
      update messages set status = 'delivered'
      where id in ${idList(
        ids.filter((_, i) => i % 5 < 2),
        'uuid',
      )}`);
    const times = rowsOf<{ created_at: string | Date }>(
      await db().execute(
        sql`select created_at from messages where id in ${idList(ids, 'uuid')} order by id`,
      ),
    ).map((r) => new Date(r.created_at));
    const middle = times[Math.floor(times.length / 2)]!;

    /** What the filter means, written plainly over messages. */
    const plain = async (f: MessageFilter) =>
      rowsOf<{ id: string }>(
        await db().execute(sql`
          select id::text from messages
          where (${f.to ?? null}::text is null or "to" = ${f.to ?? null})
            and (${f.status ?? null}::text is null or status = ${f.status ?? null})
            and (${f.type ?? null}::text is null or type = ${f.type ?? null})
            and (${f.since?.toISOString() ?? null}::timestamptz is null
                 or created_at >= ${f.since?.toISOString() ?? null})
            and (${f.until?.toISOString() ?? null}::timestamptz is null
                 or created_at <= ${f.until?.toISOString() ?? null})
          order by id desc`),
      ).map((r) => r.id);
    // by type alone, every message of the table of that type (other cases' too): larger pages
    const paged = async (f: MessageFilter) => {
      const out: string[] = [];
      let cursor: string | undefined;
      for (let page = 0; page < 100; page++) {
        const limit = f.to ? 4 : 50;
        const got = await listMessages(db(), { ...f, limit, ...(cursor && { cursor }) });
        out.push(...got.items.map((m) => m.id));
        if (!got.nextCursor) return out;
        cursor = got.nextCursor;
      }
      throw new Error('more pages than messages');
    };

    let compared = 0;
    for (const to of [undefined, ...numbers]) {
      for (const status of [undefined, 'queued', 'delivered'] as const) {
        for (const type of [undefined, 'sms', 'viber_service']) {
          if (to === undefined && type === undefined) continue;
          for (const span of [{}, { since: middle }, { until: middle }]) {
            const f: MessageFilter = { to, status, type, ...span };
            const expected = await plain(f);
            expect(await paged(f), JSON.stringify(f)).toEqual(expected);
            compared += expected.length;
          }
        }
      }
    }
    expect(compared).toBeGreaterThan(36);
    // a cursor from another number's message still bounds the walk by id: the newest of the
    // others' (ids made in one millisecond are in random order, so not the last one sent; all
    // 12 of this number's above all 24 others' is a chance of 1 in 1.25e9)
    const last = ids
      .filter((_, i) => i % 3 !== 0)
      .sort()
      .at(-1)!;
    const below = await listMessages(db(), { to: numbers[0]!, cursor: encodeCursor(last) });
    const expected = (await plain({ to: numbers[0]! })).filter((id) => id < last);
    expect(expected.length).toBeGreaterThan(0);
    expect(below.items.map((m) => m.id)).toEqual(expected);
  });

  it('is what messages has instead of an index by phone number or by type', async () => {
    const indexes = rowsOf<{ indexdef: string }>(
      await db().execute(sql`select indexdef from pg_indexes where tablename = 'messages'`),
    );
    expect(indexes.length).toBeGreaterThan(1);
    expect(indexes.filter((i) => /\("to"|\(type\b/.test(i.indexdef))).toEqual([]);
  });
});

describeMigration(24, 'over messages stored before it', (migrated) => {
  it('copies every message into the table, and drops the index by phone number', async () => {
    const database = migrated();
    const db = database.db;
    const [a, b] = [phone(), phone()];
    // stored by the code of then
    await db.execute(sql`
      insert into messages (id, customer_message_id, type, "from", "to", payload, status)
      select (${fixedId(0).slice(0, -12)} || lpad(i::text, 12, '0'))::uuid, 'old-' || i, 'sms',
             'Acme', case when i % 3 = 0 then ${b} else ${a} end, '{}', 'delivered'
      from generate_series(1, 30) as i`);
    await migrateDatabase(database);

    expect(await mismatches(db)).toEqual([]);
    const count = rowsOf<{ n: number | string }>(
      await db.execute(sql`select count(*) as n from message_recipients`),
    );
    expect(Number(count[0]!.n)).toBe(30);
    const byB = await listMessages(db, { to: b });
    expect(byB.items).toHaveLength(10);
    expect(byB.items.map((m) => m.id)).toEqual([30, 27, 24, 21, 18, 15, 12, 9, 6, 3].map(fixedId));
    const gone = rowsOf(
      await db.execute(sql`select 1 from pg_indexes where indexname = 'messages_to_id_idx'`),
    );
    expect(gone).toEqual([]);
  });
});

describeMigration(26, 'over messages and their numbers stored before it', (migrated) => {
  it("copies every message's type into the table, and its triggers keep it from then on", async () => {
    const database = migrated();
    const db = database.db;
    const a = phone();
    // stored by the code of then: 0024's triggers wrote the numbers' rows
    await db.execute(sql`
      insert into messages (id, customer_message_id, type, "from", "to", payload, status)
      select (${fixedId(0).slice(0, -12)} || lpad(i::text, 12, '0'))::uuid, 'old-' || i,
             case when i % 5 = 0 then 'flashcall' else 'sms' end, 'Acme', ${a}, '{}', 'delivered'
      from generate_series(1, 30) as i`);
    await migrateDatabase(database);

    expect(await mismatches(db)).toEqual([]);
    const flash = await listMessages(db, { type: 'flashcall' });
    expect(flash.items.map((m) => m.id)).toEqual([30, 25, 20, 15, 10, 5].map(fixedId));
    expect((await listMessages(db, { to: a, type: 'sms', limit: 100 })).items).toHaveLength(24);
    const old = rowsOf(
      await db.execute(sql`select 1 from pg_tables where tablename = 'message_recipients_0024'`),
    );
    expect(old).toEqual([]);
    // made and removed after it, by the new triggers
    await db.execute(sql`
      insert into messages (id, customer_message_id, type, "from", "to", payload, status)
      values (${fixedId(31)}, 'new-31', 'flashcall', 'Acme', ${a}, '{}', 'queued')`);
    await db.execute(sql`delete from messages where id = ${fixedId(5)}`);
    expect(await mismatches(db)).toEqual([]);
    expect((await listMessages(db, { type: 'flashcall' })).items.map((m) => m.id)).toEqual(
      [31, 30, 25, 20, 15, 10].map(fixedId),
    );
  });
});
