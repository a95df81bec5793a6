/**
 * The timelines' day partitions (migration 0017, src/db/partitions.ts), on PGlite and on
 * Postgres: the server makes each day ahead, a day made late takes its rows back from the
 * default partition, a read by id touches one partition, retention drops whole days, and the
 * migration converts a populated database without losing or changing a row.
 */
import { rmSync } from 'node:fs';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Clock } from '../../src/clock.ts';
import { type Db, rowsOf } from '../../src/db/client.ts';
import { migrateDatabase } from '../../src/db/migrate.ts';
import { dropPartitionsBefore, ensurePartitions, listPartitions } from '../../src/db/partitions.ts';
import { uuidv7 } from '../../src/ids.ts';
import { runRetention } from '../../src/privacy/retention.ts';
import { availableEngines, describeEachEngine } from '../support/db.ts';
import { emptyDatabase, migrateWith, migrationsBefore } from '../support/migrations.ts';

const DAY = 86_400_000;
// a day well before today, so no partition of today's meets these; within the years a
// UUIDv7's day is believed (switchboard_uuidv7_day, migration 0017)
const D0 = Math.floor(Date.now() / DAY) * DAY - 200 * DAY;
const dayName = (table: string, ms: number) =>
  `${table}_p${new Date(ms).toISOString().slice(0, 10).replaceAll('-', '')}`;

/** Where each event of `messageId` is stored: its partition's name. */
async function homes(db: Db, messageId: string): Promise<string[]> {
  return rowsOf<{ part: string }>(
    await db.execute(
      sql`select tableoid::regclass::text as part from message_events where message_id = ${messageId}`,
    ),
  ).map((r) => r.part);
}

async function addEvent(db: Db, messageId: string, at: Date) {
  await db.execute(sql`
    insert into message_events (message_id, status, source, at, received_at)
    values (${messageId}, 'queued', 'api', ${at.toISOString()}::timestamptz, ${at.toISOString()}::timestamptz)`);
}

describeEachEngine('day partitions', (ctx) => {
  const db = (): Db => ctx.database().db;

  it("makes today's partition and the days ahead, once", async () => {
    const made = await ensurePartitions(db(), new Date(D0 + 3_600_000), 2);
    expect(made.sort()).toEqual(
      [0, 1, 2]
        .flatMap((i) => [
          dayName('message_events', D0 + i * DAY),
          dayName('call_events', D0 + i * DAY),
        ])
        .sort(),
    );
    expect(await ensurePartitions(db(), new Date(D0 + 3_600_000), 2)).toEqual([]);
    const spans = (await listPartitions(db())).filter((p) => p.fromMs === D0);
    expect(spans.map((p) => [p.table, p.fromMs, p.toMs]).sort()).toEqual([
      ['call_events', D0, D0 + DAY],
      ['message_events', D0, D0 + DAY],
    ]);
  });

  it('keeps a day made late in the default partition, and moves it out when the day is made', async () => {
    const late = D0 + 20 * DAY;
    const id = uuidv7(late + 5000);
    await addEvent(db(), id, new Date(late + 5000));
    await addEvent(db(), id, new Date(late + 6000));
    expect(await homes(db(), id)).toEqual(['message_events_default', 'message_events_default']);
    expect(await ensurePartitions(db(), new Date(late), 0)).toContain(
      dayName('message_events', late),
    );
    expect(await homes(db(), id)).toEqual([
      dayName('message_events', late),
      dayName('message_events', late),
    ]);
  });

  it('makes the past days whose events wait in the default partition, but none retention would drop', async () => {
    const past = D0 + 50 * DAY;
    const id = uuidv7(past + 1000);
    await addEvent(db(), id, new Date(past + 1000));
    const made = await ensurePartitions(db(), new Date(D0 + 55 * DAY), 0);
    expect(made).toContain(dayName('message_events', past));
    expect(await homes(db(), id)).toEqual([dayName('message_events', past)]);

    const older = D0 + 60 * DAY;
    const kept = uuidv7(older + 1000);
    await addEvent(db(), kept, new Date(older + 1000));
    const later = await ensurePartitions(db(), new Date(D0 + 70 * DAY), 0, {
      keepFrom: new Date(D0 + 65 * DAY),
    });
    expect(later).not.toContain(dayName('message_events', older));
    expect(await homes(db(), kept)).toEqual(['message_events_default']);
  });

  it('reads a message’s events from its own partition only, even as a generic plan', async () => {
    const id = uuidv7(D0 + DAY + 1000);
    await addEvent(db(), id, new Date(D0 + DAY + 1000));
    const plan = await db().transaction(async (tx) => {
      await tx.execute(sql`set local plan_cache_mode = force_generic_plan`);
      await tx.execute(
        sql.raw('prepare by_message(uuid) as select * from message_events where message_id = $1'),
      );
      const rows = rowsOf<Record<string, string>>(
        await tx.execute(
          sql.raw(
            `explain (analyze, costs off, timing off, summary off) execute by_message('${id}')`,
          ),
        ),
      );
      await tx.execute(sql.raw('deallocate by_message'));
      return rows.map((r) => Object.values(r)[0]).join('\n');
    });
    // the partitions the executor scanned: only the message's day
    const scanned = [...plan.matchAll(/ on (message_events_(?:p\d{8}|default))\b/g)].map(
      (m) => m[1],
    );
    expect(new Set(scanned)).toEqual(new Set([dayName('message_events', D0 + DAY)]));
    expect(plan).toMatch(/Subplans Removed: [1-9]/);
  });

  it('drops the days that ended before the cutoff, whole, and keeps the rest', async () => {
    const first = uuidv7(D0 + 1000);
    const second = uuidv7(D0 + DAY + 2000);
    await addEvent(db(), first, new Date(D0 + 1000));
    await addEvent(db(), second, new Date(D0 + DAY + 2000));
    // 30 days kept, an hour into the second day's thirtieth day after: the first day ended
    // before the cutoff, the second has not
    const clock: Clock = { now: () => new Date(D0 + DAY + 30 * DAY + 3_600_000) };
    const { removed } = await runRetention(db(), clock, 30);
    expect(removed.eventPartitions).toBe(2); // message_events and call_events of the first day
    expect(await homes(db(), first)).toEqual([]);
    expect(await homes(db(), second)).toEqual([dayName('message_events', D0 + DAY)]);
    const names = (await listPartitions(db())).map((p) => p.name);
    expect(names).not.toContain(dayName('message_events', D0));
    expect(names).not.toContain(dayName('call_events', D0));
    expect(names).toContain(dayName('message_events', D0 + DAY));
    // nothing else ended before that cutoff
    expect(await dropPartitionsBefore(db(), new Date(D0 + DAY + 3_600_000))).toEqual([]);
  });
});

for (const engine of availableEngines()) {
  describe(`migration 0017 over a populated database [${engine}]`, () => {
    let test: Awaited<ReturnType<typeof emptyDatabase>>;
    let before: string;
    beforeAll(async () => {
      before = migrationsBefore(17);
      test = await emptyDatabase(engine);
    });
    afterAll(async () => {
      await test?.drop();
      rmSync(before, { recursive: true, force: true });
    });

    it('moves every row into its day, keeps ids and the sequence, and leaves odd ids in the default', async () => {
      const { database } = test;
      await migrateWith(database, before);
      const db = database.db;
      // days the migration makes partitions for: within a year of today
      const today = Math.floor(Date.now() / DAY) * DAY;
      const days = [today - 40 * DAY, today - 39 * DAY, today - 2 * DAY];
      const foreign = '5b8e2c1a-0d4f-4c2b-9a1e-3f6d7c8b9a0e'; // a v4 id: no time in it
      const callIds = days.map((d) => uuidv7(d + 7000));
      for (const [i, d] of days.entries()) {
        for (let k = 0; k < 3; k++) {
          await addEvent(db, uuidv7(d + 1000 + k), new Date(d + 2000 + k));
        }
        await db.execute(sql`
          insert into calls (id, flow_id, flow_version, "to", "from", lang, vars, state, snapshot, message_id)
          values (${callIds[i]!}, 'f', 'v', '380501234567', 'Acme', 'en', '{}', 'ended', '{}', ${uuidv7(d)})`);
        await db.execute(sql`
          insert into call_events (call_id, kind, node, key, detail, at)
          values (${callIds[i]!}, 'key', 'main', '1', '{"n":1}', ${new Date(d + 8000).toISOString()}::timestamptz)`);
      }
      await addEvent(db, foreign, new Date(D0));
      const all = async (table: 'message_events' | 'call_events') =>
        rowsOf<Record<string, unknown>>(
          await db.execute(
            sql`select row_to_json(t)::text as r from ${sql.identifier(table)} t order by id`,
          ),
        ).map((r) => r.r);
      const eventsBefore = await all('message_events');
      const callEventsBefore = await all('call_events');
      expect(eventsBefore).toHaveLength(10);

      await migrateDatabase(database);

      expect(await all('message_events')).toEqual(eventsBefore);
      expect(await all('call_events')).toEqual(callEventsBefore);
      const names = (await listPartitions(db)).map((p) => p.name).sort();
      expect(names).toEqual(
        days.flatMap((d) => [dayName('call_events', d), dayName('message_events', d)]).sort(),
      );
      expect(await homes(db, foreign)).toEqual(['message_events_default']);
      // the sequence went along: a new event's id follows the old ones
      await addEvent(db, uuidv7(days[2]!), new Date(days[2]!));
      const [top] = rowsOf<{ id: number | string }>(
        await db.execute(sql`select max(id) as id from message_events`),
      );
      expect(Number(top?.id)).toBe(11);
      // the call's events still cascade with it
      await db.execute(sql`delete from calls where id = ${callIds[0]!}`);
      expect(await all('call_events')).toHaveLength(2);
    });
  });
}
