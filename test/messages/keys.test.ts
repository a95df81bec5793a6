/**
 * `message_customer_ids` and `message_provider_ids` (migration 0030,
 * src/db/schema/message-keys.ts): which message a customerMessageId names and which messages a
 * provider id names, in tables of their own instead of indexes of `messages`, so that a status
 * move (which cannot be HOT) writes no entry at a random page of them when the ids are random
 * (the provider answers GUIDs; clients often send UUIDs).
 *
 * - Triggers and the dispatch's own statement keep them equal to the messages' ids through
 *   every kind of statement, and callbacks leave their rows as they were (the same tuple
 *   versions, read by `xmin`) while the messages move.
 * - The customerMessageId's key keeps it to one message, as the unique constraint did: a
 *   repeated submit answers the stored message, a hand-written insert of a taken id fails.
 * - Callbacks and reads by ref find messages through them, a provider id shared by two
 *   messages naming the newer, as before.
 * - The dispatch's update is the one statement in src that gives a message its provider id
 *   (the triggers move an id that changes otherwise, not one set for the first time).
 * - Migration 0030 copies the ids of the messages stored before it and drops the constraint
 *   and the index; migration 0031 makes the customerMessageId's key carry the message's id, so
 *   a lookup reads the key alone.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { beforeAll, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import { type Db, idList, rowsOf } from '../../src/db/client.ts';
import { isUniqueViolation } from '../../src/db/errors.ts';
import { migrateDatabase } from '../../src/db/migrate.ts';
import { findMessage } from '../../src/messages/read.ts';
import { buildTestApp, json, phone, readJson, uniq } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';
import { recordAccepted } from '../support/dispatched.ts';
import { describeMigration } from '../support/migrations.ts';

/**
 * Rows of the messages' `(customer_message_id, id)` and `(provider_message_id, id)` the keys'
 * tables lack, and rows of those tables no message has.
 */
async function mismatches(db: Db): Promise<unknown[]> {
  return rowsOf(
    await db.execute(sql`
      (select 'missing customer' as side, customer_message_id as key, id::text from messages
       except select 'missing customer', customer_message_id, message_id::text
       from message_customer_ids)
      union all
      (select 'extra customer', customer_message_id, message_id::text from message_customer_ids
       except select 'extra customer', customer_message_id, id::text from messages)
      union all
      (select 'missing provider', provider_message_id, id::text from messages
       where provider_message_id is not null
       except select 'missing provider', provider_message_id, message_id::text
       from message_provider_ids)
      union all
      (select 'extra provider', provider_message_id, message_id::text from message_provider_ids
       except select 'extra provider', provider_message_id, id::text from messages)`),
  );
}

/** A UUIDv7 of its own for row `n` of a test's hand-written inserts (n < 10^12). */
const fixedId = (n: number) => `019b0000-0000-7000-8100-${String(n).padStart(12, '0')}`;

/** The key rows' tuple versions for these messages, both tables. */
const versions = async (db: Db, ids: string[]) =>
  rowsOf<{ t: string; message_id: string; xmin: string }>(
    await db.execute(sql`
      select 'c' as t, message_id::text, xmin::text from message_customer_ids
      where message_id in ${idList(ids, 'uuid')}
      union all
      select 'p', message_id::text, xmin::text from message_provider_ids
      where message_id in ${idList(ids, 'uuid')}
      order by 1, 2`),
  );

/** A hand-written message, as a seed or a restore would write it. */
const insertMessage = (db: Db, id: string, cmid: string, pmid: string | null) =>
  db.execute(sql`
    insert into messages (id, customer_message_id, provider_message_id, type, "from", "to",
                          payload, status)
    values (${id}, ${cmid}, ${pmid}, 'sms', 'Acme', ${phone()}, '{}', 'accepted')`);

/** The error a statement failed with (none: the test fails). */
async function failure(run: () => Promise<unknown>): Promise<unknown> {
  try {
    await run();
  } catch (err) {
    return err;
  }
  throw new Error('the statement did not fail');
}

describeEachEngine('message keys', (ctx) => {
  let app: App;
  const db = () => ctx.database().db;
  const sms = (customerMessageId: string = crypto.randomUUID()) => ({
    from: 'Acme',
    to: phone(),
    type: 'sms',
    text: 'Your order has shipped',
    customerMessageId,
  });
  const submit = async (list: Record<string, unknown>[]) => {
    const res = await app.request('/v1/messages', json({ messages: list }));
    expect(res.status).toBe(202);
    return ((await readJson(res)).messages as { id: string }[]).map((m) => m.id);
  };
  const callback = async (body: Record<string, unknown>) =>
    readJson(
      await app.request(
        '/hooks/delivery',
        json({ ...body, eventId: uniq('ev'), timestamp: new Date().toISOString() }),
      ),
    );

  beforeAll(() => {
    app = buildTestApp(ctx.database()).app;
  });

  it('holds each id of each message, written once: dispatch writes the provider id, callbacks leave them as they were', async () => {
    const list = [sms(), sms(), sms()];
    const ids = await submit(list);
    expect(await mismatches(db())).toEqual([]);
    // the provider answers a GUID for each
    const pmids = ids.map(() => crypto.randomUUID());
    await recordAccepted(
      db(),
      ids.map((id, i) => ({ id, providerMessageId: pmids[i]! })),
      new Date(),
    );
    expect(await mismatches(db())).toEqual([]);
    const before = await versions(db(), ids);
    expect(before).toHaveLength(6);

    for (const [i, m] of list.entries()) {
      // by the provider's id, then by the customer's, as each callback names it
      expect(await callback({ messageId: pmids[i], status: 'sent' })).toMatchObject({
        matched: 1,
      });
      expect(
        await callback({ customerMessageId: m.customerMessageId, status: 'delivered' }),
      ).toMatchObject({ matched: 1 });
    }
    const moved = rowsOf<{ status: string }>(
      await db().execute(sql`select status from messages where id in ${idList(ids, 'uuid')}`),
    );
    expect(moved.map((m) => m.status)).toEqual(['delivered', 'delivered', 'delivered']);
    expect(await versions(db(), ids)).toEqual(before);
    expect(await mismatches(db())).toEqual([]);
    for (const [i, id] of ids.entries()) {
      expect((await findMessage(db(), pmids[i]!))?.id).toBe(id);
      expect((await findMessage(db(), list[i]!.customerMessageId))?.id).toBe(id);
      expect((await findMessage(db(), id))?.id).toBe(id);
    }
  });

  it('follows an insert, a change of either id and a delete, whatever statement makes them', async () => {
    const [a, b] = [fixedId(1), fixedId(2)];
    const [cmidA, cmidB, pmidA] = [uniq('raw'), uniq('raw'), crypto.randomUUID()];
    await insertMessage(db(), a, cmidA, pmidA);
    await insertMessage(db(), b, cmidB, null);
    expect(await mismatches(db())).toEqual([]);
    expect((await findMessage(db(), pmidA))?.id).toBe(a);

    const [cmidA2, pmidA2] = [uniq('raw'), crypto.randomUUID()];
    await db().execute(sql`
      update messages set customer_message_id = ${cmidA2}, provider_message_id = ${pmidA2}
      where id = ${a}`);
    expect(await mismatches(db())).toEqual([]);
    expect((await findMessage(db(), cmidA2))?.id).toBe(a);
    expect((await findMessage(db(), pmidA2))?.id).toBe(a);
    expect(await findMessage(db(), cmidA)).toBeUndefined();
    expect(await findMessage(db(), pmidA)).toBeUndefined();

    await db().execute(sql`update messages set provider_message_id = null where id = ${a}`);
    expect(await mismatches(db())).toEqual([]);
    expect(await findMessage(db(), pmidA2)).toBeUndefined();

    await db().execute(sql`delete from messages where id in (${a}, ${b})`);
    expect(await mismatches(db())).toEqual([]);
    expect(await findMessage(db(), cmidB)).toBeUndefined();
  });

  it('keeps a customerMessageId to one message, as the unique constraint did', async () => {
    const m = sms();
    const [id] = await submit([m]);
    // the same again answers the stored message
    expect(await submit([m])).toEqual([id]);
    // two at once (on Postgres, two connections): one stored, both answered with it
    const twice = sms();
    const [first, second] = await Promise.all([submit([twice]), submit([twice])]);
    expect(first).toEqual(second);
    const stored = rowsOf<{ n: number | string }>(
      await db().execute(sql`
        select count(*) as n from messages
        where customer_message_id in (${m.customerMessageId}, ${twice.customerMessageId})`),
    );
    expect(Number(stored[0]!.n)).toBe(2);

    // a hand-written insert of a taken id fails, as it did on the constraint
    const taken = await failure(() => insertMessage(db(), fixedId(3), m.customerMessageId, null));
    expect(isUniqueViolation(taken, 'message_customer_ids_pkey')).toBe(true);
    // and so do two rows of one statement with one id
    const cmid = uniq('raw');
    const both = await failure(() =>
      db().execute(sql`
        insert into messages (id, customer_message_id, type, "from", "to", payload, status)
        values (${fixedId(4)}, ${cmid}, 'sms', 'Acme', ${phone()}, '{}', 'queued'),
               (${fixedId(5)}, ${cmid}, 'sms', 'Acme', ${phone()}, '{}', 'queued')`),
    );
    expect(isUniqueViolation(both, 'message_customer_ids_pkey')).toBe(true);
    const left = rowsOf(
      await db().execute(sql`select 1 from messages where id in (${fixedId(4)}, ${fixedId(5)})`),
    );
    expect(left).toEqual([]);
    expect(await mismatches(db())).toEqual([]);
  });

  it('names the newer of two messages sharing a provider id, in callbacks and reads', async () => {
    const pmid = crypto.randomUUID();
    const [older, newer] = await submit([sms(), sms()]);
    const [low, high] = [older!, newer!].sort();
    await recordAccepted(
      db(),
      [
        { id: low!, providerMessageId: pmid },
        { id: high!, providerMessageId: pmid },
      ],
      new Date(),
    );
    expect(await mismatches(db())).toEqual([]);
    expect((await findMessage(db(), pmid))?.id).toBe(high);
    expect(await callback({ messageId: pmid, status: 'delivered' })).toMatchObject({ matched: 1 });
    const statuses = rowsOf<{ id: string; status: string }>(
      await db().execute(sql`
        select id::text, status from messages where id in (${low}, ${high}) order by id`),
    );
    expect(statuses).toEqual([
      { id: low, status: 'accepted' },
      { id: high, status: 'delivered' },
    ]);
  });

  it("reads a customerMessageId's message id from the key alone, as a provider id's", async () => {
    const [id] = await submit([sms('covered-1')]);
    await db().execute(sql`vacuum analyze message_customer_ids`);
    await db().execute(sql`vacuum analyze message_provider_ids`);
    const plan = async (query: ReturnType<typeof sql>) => {
      const text = await db().transaction(async (tx) => {
        // the plan a large table gets: a small one may be read whole instead
        await tx.execute(sql`set local enable_seqscan = off`);
        await tx.execute(sql`set local enable_bitmapscan = off`);
        const rows = rowsOf<Record<string, string>>(await tx.execute(sql`explain ${query}`));
        return rows.map((r) => Object.values(r)[0]).join('\n');
      });
      return text;
    };
    expect(
      await plan(
        sql`select message_id from message_customer_ids where customer_message_id = 'covered-1'`,
      ),
    ).toMatch(/Index Only Scan using message_customer_ids_pkey/);
    expect(
      await plan(
        sql`select message_id from message_provider_ids where provider_message_id = 'guid-x'
            order by message_id desc limit 1`,
      ),
    ).toMatch(
      /Index Only Scan Backward using message_provider_ids_provider_message_id_message_id_pk/,
    );
    expect((await findMessage(db(), 'covered-1'))?.id).toBe(id);
  });

  it('is what messages has instead of an index by either id', async () => {
    const indexes = rowsOf<{ indexdef: string }>(
      await db().execute(sql`select indexdef from pg_indexes where tablename = 'messages'`),
    );
    expect(indexes.length).toBeGreaterThan(1);
    for (const { indexdef } of indexes) {
      expect(indexdef).not.toMatch(/customer_message_id|provider_message_id/);
    }
  });
});

it("gives a message its provider id in one statement of src: the dispatch's, which writes the id's key", () => {
  const root = join(import.meta.dirname, '../../src');
  const files = readdirSync(root, { recursive: true, encoding: 'utf8' }).filter((f) =>
    f.endsWith('.ts'),
  );
  const setters: string[] = [];
  for (const file of files) {
    const text = readFileSync(join(root, file), 'utf8');
    // a SET clause's assignment (a comparison names its table: `k.provider_message_id =`), or
    // drizzle's .set({ providerMessageId })
    for (const m of text.matchAll(
      /^\s*provider_message_id\s*=|\.set\(\{[^)]*providerMessageId/gm,
    )) {
      setters.push(`${file}: ${m[0].trim()}`);
    }
  }
  expect(setters).toEqual(['messages/dispatch-write.ts: provider_message_id =']);
  const write = readFileSync(join(root, 'messages/dispatch-write.ts'), 'utf8');
  expect(write).toMatch(/insert into message_provider_ids \(provider_message_id, message_id\)/);
});

describeMigration(30, 'over messages stored before it', (migrated) => {
  it('copies every id into the keys, drops the constraint and the index, and its triggers keep them', async () => {
    const database = migrated();
    const db = database.db;
    // stored by the code of then: ten messages, half of them dispatched, two sharing an id
    for (let i = 1; i <= 10; i++) {
      const pmid = i % 2 === 0 ? `guid-${i <= 4 ? 'shared' : i}` : null;
      await insertMessage(db, fixedId(i), `cm-${i}`, pmid);
    }
    await migrateDatabase(database);

    expect(await mismatches(db)).toEqual([]);
    const counts = rowsOf<{ c: number | string; p: number | string }>(
      await db.execute(sql`select (select count(*) from message_customer_ids) as c,
                                  (select count(*) from message_provider_ids) as p`),
    );
    expect(counts.map((r) => [Number(r.c), Number(r.p)])).toEqual([[10, 5]]);
    const left = rowsOf(
      await db.execute(sql`
        select conname as name from pg_constraint
        where conname = 'messages_customer_message_id_unique'
        union all
        select indexname from pg_indexes where indexname = 'messages_provider_message_id_idx'`),
    );
    expect(left).toEqual([]);
    expect((await findMessage(db, 'cm-7'))?.id).toBe(fixedId(7));
    expect((await findMessage(db, 'guid-shared'))?.id).toBe(fixedId(4));
    expect((await findMessage(db, 'guid-8'))?.id).toBe(fixedId(8));
    // made and removed after it, by the new triggers
    await insertMessage(db, fixedId(11), 'cm-11', 'guid-11');
    await db.execute(sql`delete from messages where id = ${fixedId(7)}`);
    expect(await mismatches(db)).toEqual([]);
    expect(await findMessage(db, 'cm-7')).toBeUndefined();
    expect((await findMessage(db, 'guid-11'))?.id).toBe(fixedId(11));
    const taken = await failure(() => insertMessage(db, fixedId(12), 'cm-1', null));
    expect(isUniqueViolation(taken, 'message_customer_ids_pkey')).toBe(true);
  });
});

describeMigration(31, 'over keys stored before it', (migrated) => {
  it("keeps every key and the key's name, and the key now carries the message's id", async () => {
    const database = migrated();
    const db = database.db;
    for (let i = 1; i <= 10; i++) await insertMessage(db, fixedId(i), `cm-${i}`, `guid-${i}`);
    await migrateDatabase(database);

    expect(await mismatches(db)).toEqual([]);
    const [def] = rowsOf<{ indexdef: string }>(
      await db.execute(sql`
        select indexdef from pg_indexes where indexname = 'message_customer_ids_pkey'`),
    );
    expect(def?.indexdef).toMatch(/UNIQUE INDEX .*\(customer_message_id\) INCLUDE \(message_id\)/);
    expect((await findMessage(db, 'cm-3'))?.id).toBe(fixedId(3));
    const taken = await failure(() => insertMessage(db, fixedId(11), 'cm-1', null));
    expect(isUniqueViolation(taken, 'message_customer_ids_pkey')).toBe(true);
    // a submit's claim still names the key as its arbiter
    const claimed = rowsOf(
      await db.execute(sql`
        insert into message_customer_ids (customer_message_id, message_id)
        values ('cm-2', ${fixedId(12)}) on conflict (customer_message_id) do nothing
        returning message_id`),
    );
    expect(claimed).toEqual([]);
  });
});

describeMigration(
  33,
  'in a new session, whatever plan the planner would rather make',
  (migrated) => {
    it("probes each inserted message's key through the key's index, never reading the whole table", async () => {
      const database = migrated();
      const db = database.db;
      // enough keys that a probe through the index is cheaper than reading the table
      await db.execute(sql`
        insert into messages (id, customer_message_id, type, "from", "to", payload, status)
        select ('019b0000-0000-7000-8300-' || lpad(i::text, 12, '0'))::uuid, 'seed-' || i,
               'sms', 'Acme', '+380500000000', '{}', 'sent'
        from generate_series(1, 20000) as i`);
      await migrateDatabase(database);
      await db.execute(sql`analyze message_customer_ids`);

      // the trigger's plan is made the first time it fires in a session and kept: here that is
      // with nested loops and merge joins priced out, so a statement that can be a hash join
      // over message_customer_ids becomes one (as 0030's NOT EXISTS did); the probe of 0033
      // can only be a loop of index lookups
      const scans = await database.db.transaction(async (tx) => {
        await tx.execute(sql`set local enable_nestloop = off`);
        await tx.execute(sql`set local enable_mergejoin = off`);
        // this session's counts not yet reported are in the view too: read before and after
        const read = async () => {
          const [row] = rowsOf<{ seq_scan: string | number; idx_scan: string | number }>(
            await tx.execute(sql`
              select seq_scan, idx_scan from pg_stat_xact_user_tables
              where relname = 'message_customer_ids'`),
          );
          return { seq: Number(row!.seq_scan), idx: Number(row!.idx_scan) };
        };
        const before = await read();
        for (let i = 1; i <= 3; i++) {
          await tx.execute(sql`
            insert into messages (id, customer_message_id, type, "from", "to", payload, status)
            values (${fixedId(1000 + i)}, ${`probe-${i}`}, 'sms', 'Acme', ${phone()}, '{}', 'queued')`);
        }
        const after = await read();
        return { seq: after.seq - before.seq, idx: after.idx - before.idx };
      });
      expect(scans.seq).toBe(0);
      expect(scans.idx).toBeGreaterThanOrEqual(3);
      expect(await mismatches(db)).toEqual([]);
    });
  },
);
