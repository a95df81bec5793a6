/**
 * The day partitions of the timelines (migration 0017) and of the events for the user's
 * endpoints (0018), src/db/partitions.ts, on PGlite and on Postgres: the server makes each day
 * ahead, a day made late takes its rows back from the default partition, a read by id touches
 * one partition, retention drops whole days (a day of events with its deliveries and attempts,
 * once none is pending; no foreign key refers to the events), and each migration converts a
 * populated database without losing or changing a row.
 */
import { eq, sql } from 'drizzle-orm';
import { expect, it } from 'vitest';
import type { Clock } from '../../src/clock.ts';
import { type Db, rowsOf } from '../../src/db/client.ts';
import { INBOX_REFS } from '../../src/db/inbox-refs.ts';
import { migrateDatabase } from '../../src/db/migrate.ts';
import {
  DEFAULT_ROWS_COUNTED,
  dropPartitionsBefore,
  ensurePartitions,
  listPartitions,
  PARTITIONED,
  partitionHealth,
} from '../../src/db/partitions.ts';
import { deliveryAttempts, eventDeliveries, outgoingEvents } from '../../src/db/schema/index.ts';
import { recordEvents } from '../../src/events/record.ts';
import { replayEvent } from '../../src/events/replay.ts';
import { webhookId } from '../../src/events/sign.ts';
import { uuidv7 } from '../../src/ids.ts';
import { dedupKey, keysTimedSince, storeRaw } from '../../src/messages/inbox.ts';
import { runRetention } from '../../src/privacy/retention.ts';
import { insertEndpoint, insertEvent } from '../events/delivery-helpers.ts';
import { waitUntil } from '../faults/helpers.ts';
import { describeEachEngine } from '../support/db.ts';
import { describeMigration } from '../support/migrations.ts';
import { ONE_CONNECTION, onlyIf } from '../support/skip.ts';

/** Every row of `table` as its JSON text, in id order: what a migration must leave as it was. */
async function rowsAsJson(db: Db, table: string): Promise<string[]> {
  return rowsOf<{ r: string }>(
    await db.execute(
      sql`select row_to_json(t)::text as r from ${sql.identifier(table)} t order by id`,
    ),
  ).map((r) => r.r);
}

// keys as the code before migration 0023 wrote them: the SHA-256 alone
const PLAIN = Number.POSITIVE_INFINITY;
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

/** Where the raw callback body `id` is stored (none when it is gone). */
async function bodyHome(db: Db, id: number): Promise<string | undefined> {
  const [row] = rowsOf<{ part: string }>(
    await db.execute(sql`select tableoid::regclass::text as part from inbox where id = ${id}`),
  );
  return row?.part;
}

async function count(db: Db, query: ReturnType<typeof sql>): Promise<number> {
  const [row] = rowsOf<{ n: number | string }>(await db.execute(query));
  return Number(row?.n);
}

/** Where the event for the user's endpoints `id` is stored (none when it is gone). */
async function eventHome(db: Db, id: string): Promise<string | undefined> {
  const [row] = rowsOf<{ part: string }>(
    await db.execute(
      sql`select tableoid::regclass::text as part from outgoing_events where id = ${id}`,
    ),
  );
  return row?.part;
}

/** How many rows of `table` (event_deliveries, delivery_attempts) belong to the event `id`. */
async function rowsOfEvent(
  db: Db,
  table: 'event_deliveries' | 'delivery_attempts',
  id: string,
): Promise<number> {
  const [row] = rowsOf<{ n: number | string }>(
    await db.execute(
      sql`select count(*) as n from ${sql.identifier(table)} where event_id = ${id}`,
    ),
  );
  return Number(row?.n);
}

async function deliver(db: Db, deliveryId: number, eventId: string, endpointId: string, at: Date) {
  await db
    .update(eventDeliveries)
    .set({ state: 'delivered' })
    .where(eq(eventDeliveries.id, deliveryId));
  await db.insert(deliveryAttempts).values({
    deliveryId,
    eventId,
    endpointId,
    at,
    status: 'succeeded',
    responseStatus: 200,
    durationMs: 5,
  });
}

// a v4 id: no time in it, so no day
const STRAY = '5b8e2c1a-0d4f-4c2b-9a1e-3f6d7c8b9a0e';

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
          dayName('outgoing_events', D0 + i * DAY),
          dayName('inbox', D0 + i * DAY),
        ])
        .sort(),
    );
    expect(await ensurePartitions(db(), new Date(D0 + 3_600_000), 2)).toEqual([]);
    const spans = (await listPartitions(db())).filter((p) => p.fromMs === D0);
    expect(spans.map((p) => [p.table, p.fromMs, p.toMs]).sort()).toEqual([
      ['call_events', D0, D0 + DAY],
      ['inbox', D0, D0 + DAY],
      ['message_events', D0, D0 + DAY],
      ['outgoing_events', D0, D0 + DAY],
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

  it('says how many days are made ahead and how many rows wait in the default partition', async () => {
    const at = (day: number) => new Date(D0 + day * DAY + 3_600_000);
    const of = async (day: number) =>
      Object.fromEntries(
        (await partitionHealth(db(), at(day))).map((h) => [h.table, [h.daysAhead, h.defaultRows]]),
      );
    await ensurePartitions(db(), at(180), 3);
    const made = await of(180);
    expect(Object.keys(made).sort()).toEqual(PARTITIONED.map((t) => t.table).sort());
    for (const [daysAhead] of Object.values(made)) expect(daysAhead).toBe(4);
    // the next day is counted from its own start: one fewer ahead
    for (const [daysAhead] of Object.values(await of(181))) expect(daysAhead).toBe(3);

    // a day in the middle that could not be made: the days after it do not count
    await db().execute(sql`drop table ${sql.identifier(dayName('call_events', D0 + 182 * DAY))}`);
    const gap = await of(180);
    expect(gap.call_events![0]).toBe(2);
    expect(gap.message_events![0]).toBe(4);

    // a day none was made for: nothing ahead, and its events fall into the default partition
    const before = (await of(190)).message_events!;
    expect(before[0]).toBe(0);
    const waiting = uuidv7(at(190).getTime());
    await addEvent(db(), waiting, at(190));
    expect((await of(190)).message_events).toEqual([0, before[1]! + 1]);

    // counted up to the bound, however many wait
    await db().execute(sql`
      insert into message_events (message_id, status, source, at, received_at)
      select ${STRAY}, 'queued', 'api', now(), now()
      from generate_series(1, ${DEFAULT_ROWS_COUNTED}::int)`);
    expect((await of(190)).message_events![1]).toBe(DEFAULT_ROWS_COUNTED);
    // left as found for the tests after this one
    await db().execute(sql`delete from message_events where message_id in (${STRAY}, ${waiting})`);
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
    // message_events, call_events, outgoing_events (no delivery in it) and inbox of the first day
    expect(removed.eventPartitions).toBe(4);
    expect(await homes(db(), first)).toEqual([]);
    expect(await homes(db(), second)).toEqual([dayName('message_events', D0 + DAY)]);
    const names = (await listPartitions(db())).map((p) => p.name);
    expect(names).not.toContain(dayName('message_events', D0));
    expect(names).not.toContain(dayName('call_events', D0));
    expect(names).not.toContain(dayName('outgoing_events', D0));
    expect(names).not.toContain(dayName('inbox', D0));
    expect(names).toContain(dayName('message_events', D0 + DAY));
    // nothing else ended before that cutoff
    expect(await dropPartitionsBefore(db(), new Date(D0 + DAY + 3_600_000))).toEqual([]);
  });

  it('drops a day of events for the endpoints with their deliveries and attempts, once none is pending', async () => {
    const day = D0 + 100 * DAY;
    await ensurePartitions(db(), new Date(day), 1);
    const ep = await insertEndpoint(db(), { url: 'https://receiver.example.org/hook' });
    const a = await insertEvent(db(), [ep.id], { at: new Date(day + 1000) });
    // recorded as the server records them: into their day's partition too
    const written = await db().transaction((tx) =>
      recordEvents(tx, [
        { type: 'call.ended', subject: 'call:b', data: { n: 1 }, at: new Date(day + 2000) },
      ]),
    );
    expect(written).toBe(1);
    const [b] = await db()
      .select({ id: eventDeliveries.id, eventId: eventDeliveries.eventId })
      .from(eventDeliveries)
      .where(eq(eventDeliveries.subject, 'call:b'));
    const next = await insertEvent(db(), [ep.id], { at: new Date(day + DAY + 1000) });
    expect(await eventHome(db(), a.eventId)).toBe(dayName('outgoing_events', day));
    expect(await eventHome(db(), b!.eventId)).toBe(dayName('outgoing_events', day));
    expect(await eventHome(db(), next.eventId)).toBe(dayName('outgoing_events', day + DAY));
    await deliver(db(), a.deliveryIds[0]!, a.eventId, ep.id, new Date(day + 1500));

    // 30 days kept, an hour into the next day's thirtieth day after: the day ended before
    // the cutoff, the next did not; b is still pending (a retry), so the day stays, whole
    const clock: Clock = { now: () => new Date(day + DAY + 30 * DAY + 3_600_000) };
    const names = async () => (await listPartitions(db())).map((p) => p.name);
    await runRetention(db(), clock, 30);
    expect(await names()).toContain(dayName('outgoing_events', day));
    expect(await rowsOfEvent(db(), 'event_deliveries', a.eventId)).toBe(1);
    expect(await rowsOfEvent(db(), 'delivery_attempts', a.eventId)).toBe(1);

    // b delivered, but a replayed meanwhile: pending again, the day still stays
    await deliver(db(), b!.id, b!.eventId, ep.id, new Date(day + 2500));
    const replayed = await replayEvent({ db: db(), clock }, { eventId: webhookId(a.eventId) });
    expect(replayed.requeued).toEqual([{ endpointId: ep.id, deliveryId: a.deliveryIds[0] }]);
    await runRetention(db(), clock, 30);
    expect(await names()).toContain(dayName('outgoing_events', day));
    expect(await eventHome(db(), a.eventId)).toBe(dayName('outgoing_events', day));

    // every delivery done: the day goes, with its deliveries and their attempts
    await deliver(db(), a.deliveryIds[0]!, a.eventId, ep.id, new Date(day + 1600));
    const { removed } = await runRetention(db(), clock, 30);
    expect(removed.eventPartitions).toBeGreaterThanOrEqual(1);
    expect(await names()).not.toContain(dayName('outgoing_events', day));
    for (const id of [a.eventId, b!.eventId]) {
      expect(await eventHome(db(), id)).toBeUndefined();
      expect(await rowsOfEvent(db(), 'event_deliveries', id)).toBe(0);
      expect(await rowsOfEvent(db(), 'delivery_attempts', id)).toBe(0);
    }
    // the next day's event and delivery stay
    expect(await eventHome(db(), next.eventId)).toBe(dayName('outgoing_events', day + DAY));
    expect(await rowsOfEvent(db(), 'event_deliveries', next.eventId)).toBe(1);
  });

  it('moves the events for the endpoints of a day made late into it, deliveries untouched', async () => {
    const late = D0 + 120 * DAY;
    const ep = await insertEndpoint(db(), { url: 'https://receiver.example.org/hook' });
    const e = await insertEvent(db(), [ep.id], { at: new Date(late + 1000) });
    await deliver(db(), e.deliveryIds[0]!, e.eventId, ep.id, new Date(late + 1500));
    // an id with no time in it (a v4) has no day: it stays in the default partition
    const stray = await insertEvent(db(), [ep.id], { at: new Date(late + 1000) });
    await db().execute(sql`update outgoing_events set id = ${STRAY} where id = ${stray.eventId}`);
    await db().execute(
      sql`update event_deliveries set event_id = ${STRAY} where event_id = ${stray.eventId}`,
    );
    await deliver(db(), stray.deliveryIds[0]!, STRAY, ep.id, new Date(late + 1500));
    expect(await eventHome(db(), e.eventId)).toBe('outgoing_events_default');
    const made = await ensurePartitions(db(), new Date(late), 0);
    expect(made).toContain(dayName('outgoing_events', late));
    expect(await eventHome(db(), e.eventId)).toBe(dayName('outgoing_events', late));
    expect(await eventHome(db(), STRAY)).toBe('outgoing_events_default');
    expect(await rowsOfEvent(db(), 'event_deliveries', e.eventId)).toBe(1);
    expect(await rowsOfEvent(db(), 'delivery_attempts', e.eventId)).toBe(1);
    // a write of that day lands in it too
    const f = await insertEvent(db(), [ep.id], { at: new Date(late + 2000) });
    expect(await eventHome(db(), f.eventId)).toBe(dayName('outgoing_events', late));

    // delivered, retention drops the day with its deliveries and attempts, and removes the
    // one in the default partition by itself, with its own
    await deliver(db(), f.deliveryIds[0]!, f.eventId, ep.id, new Date(late + 2500));
    const clock: Clock = { now: () => new Date(late + 31 * DAY) };
    let dropped = 0;
    let oneByOne = 0;
    for (let round = 0; round < 10; round++) {
      const { removed, more } = await runRetention(db(), clock, 30);
      dropped += removed.eventPartitions;
      oneByOne += removed.outgoingEvents;
      if (!more) break;
    }
    expect(dropped).toBeGreaterThanOrEqual(1);
    expect(oneByOne).toBe(1);
    expect((await listPartitions(db())).map((p) => p.name)).not.toContain(
      dayName('outgoing_events', late),
    );
    for (const id of [e.eventId, f.eventId, STRAY]) {
      expect(await eventHome(db(), id)).toBeUndefined();
      expect(await rowsOfEvent(db(), 'event_deliveries', id)).toBe(0);
      expect(await rowsOfEvent(db(), 'delivery_attempts', id)).toBe(0);
    }
  });

  it("keeps callback dedup across the inbox's days, and drops a day of bodies with what points at them", async () => {
    const day = D0 + 160 * DAY;
    await ensurePartitions(db(), new Date(day), 1);
    const body = (n: string) => ({ contentType: 'application/json', body: `{"n":"${n}"}` });
    const since = await keysTimedSince(db());
    const store = (n: string, at: number) =>
      db().transaction((tx) => storeRaw(tx, 'delivery', body(n), new Date(at), since));
    const first = await store('a', day + 1000);
    const kept = await store('b', day + DAY + 1000);
    expect(first).toBeTypeOf('number');
    expect(kept).toBeTypeOf('number');
    expect(await bodyHome(db(), first!)).toBe(dayName('inbox', day));
    expect(await bodyHome(db(), kept!)).toBe(dayName('inbox', day + DAY));
    // the provider's retry of a, a day later: a duplicate, though it would land in another day
    expect(await store('a', day + DAY + 2000)).toBeUndefined();
    expect(
      await count(db(), sql`select count(*) as n from inbox where body = ${body('a').body}`),
    ).toBe(1);

    // rows pointing at each body: an event waiting for its message, an incoming message
    for (const id of [first!, kept!]) {
      await db().execute(sql`
        insert into pending_events (inbox_id, customer_message_id, status, at)
        values (${id}, ${`c-${id}`}, 'delivered', now())`);
      await db().execute(sql`
        insert into inbound_messages (id, inbox_id, "from", at)
        values (${uuidv7(day + 1000)}, ${id}, '+380501234567', now())`);
    }
    const refs = async (id: number) =>
      (await count(db(), sql`select count(*) as n from pending_events where inbox_id = ${id}`)) +
      (await count(db(), sql`select count(*) as n from inbound_messages where inbox_id = ${id}`));

    // the first day ended before the cutoff, the next has not: the first day's bodies go, with
    // their rows; the next day's stay, with theirs
    const clock: Clock = { now: () => new Date(day + DAY + 30 * DAY + 3_600_000) };
    let dropped = 0;
    let keys = 0;
    for (let round = 0; round < 10; round++) {
      const { removed, more } = await runRetention(db(), clock, 30);
      dropped += removed.eventPartitions;
      keys += removed.callbackKeys;
      if (!more) break;
    }
    expect(dropped).toBeGreaterThanOrEqual(1);
    const names = (await listPartitions(db())).map((p) => p.name);
    expect(names).not.toContain(dayName('inbox', day));
    expect(names).toContain(dayName('inbox', day + DAY));
    expect(await bodyHome(db(), first!)).toBeUndefined();
    expect(await refs(first!)).toBe(0);
    expect(await bodyHome(db(), kept!)).toBe(dayName('inbox', day + DAY));
    expect(await refs(kept!)).toBe(2);
    // a's key went with its day (its body's day is wholly before the cutoff), b's stays
    expect(keys).toBeGreaterThanOrEqual(1);
    const key = (n: string) => dedupKey('delivery', body(n).body, since);
    expect(
      await count(
        db(),
        sql`select count(*) as n from inbox_keys where dedup_key = decode(${key('a')}, 'hex')`,
      ),
    ).toBe(0);
    expect(
      await count(
        db(),
        sql`select count(*) as n from inbox_keys where dedup_key = decode(${key('b')}, 'hex')`,
      ),
    ).toBe(1);
    // and b's retry is still a duplicate
    expect(await store('b', day + DAY + 5000)).toBeUndefined();
  });

  it('names every table that points at a raw body among those deleted with it', async () => {
    const tables = rowsOf<{ t: string }>(
      await db().execute(sql`
        select c.table_name as t from information_schema.columns c
        join information_schema.tables t using (table_schema, table_name)
        where c.table_schema = current_schema() and c.column_name = 'inbox_id'
          and t.table_type = 'BASE TABLE'
        order by 1`),
    ).map((r) => r.t);
    expect(tables).toEqual([...INBOX_REFS].sort());
  });

  it.runIf(ctx.engine === 'postgres')(
    onlyIf(
      ctx.engine === 'postgres',
      'keeps a day whose event a replay queues again while the day goes',
      ONE_CONNECTION,
    ),
    async () => {
      const day = D0 + 140 * DAY;
      await ensurePartitions(db(), new Date(day), 0);
      await dropPartitionsBefore(db(), new Date(day)); // nothing older in the way
      const ep = await insertEndpoint(db(), { url: 'https://receiver.example.org/hook' });
      const other = await insertEndpoint(db(), { url: 'https://other.example.org/hook' });
      const a = await insertEvent(db(), [ep.id], { at: new Date(day + 1000) });
      await deliver(db(), a.deliveryIds[0]!, a.eventId, ep.id, new Date(day + 1500));

      // a replay to another endpoint holds the event (src/events/replay.ts) while retention
      // deletes the day's deliveries, and queues its delivery while the drop waits for it
      let release = () => {};
      const held = new Promise<void>((resolve) => {
        release = resolve;
      });
      let read = () => {};
      const reading = new Promise<void>((resolve) => {
        read = resolve;
      });
      let replayPid = 0;
      const replay = db().transaction(async (tx) => {
        replayPid = rowsOf<{ pid: number }>(
          await tx.execute(sql`select pg_backend_pid() as pid`),
        )[0]!.pid;
        await tx
          .select({ id: outgoingEvents.id })
          .from(outgoingEvents)
          .where(eq(outgoingEvents.id, a.eventId))
          .for('key share');
        read();
        await held;
        await tx
          .insert(eventDeliveries)
          .values({ eventId: a.eventId, endpointId: other.id, subject: `call:${a.eventId}` });
      });
      await reading;
      const dropping = dropPartitionsBefore(db(), new Date(day + DAY), 10_000);
      // barrier: the drop waits on the replay's lock on the event
      await waitUntil(
        async () =>
          rowsOf<{ n: number }>(
            await db().execute(
              sql`select count(*)::int as n from pg_stat_activity
                  where ${replayPid}::int = any(pg_blocking_pids(pid))`,
            ),
          )[0]!.n > 0,
        'the drop to wait on the replay',
        10_000,
      );
      release();
      await replay;
      expect((await dropping).map((d) => d.name)).not.toContain(dayName('outgoing_events', day));

      // the day stays, whole: the delivered delivery back with its attempt, and the new one
      expect((await listPartitions(db())).map((p) => p.name)).toContain(
        dayName('outgoing_events', day),
      );
      expect(await eventHome(db(), a.eventId)).toBe(dayName('outgoing_events', day));
      expect(await rowsOfEvent(db(), 'event_deliveries', a.eventId)).toBe(2);
      expect(await rowsOfEvent(db(), 'delivery_attempts', a.eventId)).toBe(1);
    },
  );
});

describeMigration(19, 'over a populated database', (migrated) => {
  it('moves every raw body into its day, its key into inbox_keys, keeps what points at it, and drops those foreign keys', async () => {
    const database = migrated();
    const db = database.db;
    const today = Math.floor(Date.now() / DAY) * DAY;
    const days = [today - 40 * DAY, today - 39 * DAY, today - 2 * DAY];
    const bodies: { n: string; at: number }[] = [];
    for (const d of days)
      for (let k = 0; k < 2; k++) bodies.push({ n: `${d}-${k}`, at: d + 1000 + k });
    // a time no day is made for (before 2020): it stays in the default partition
    bodies.push({ n: 'old', at: Date.UTC(2019, 5, 1) });
    for (const b of bodies) {
      const body = `{"n":"${b.n}"}`;
      await db.execute(sql`
          insert into inbox (kind, dedup_key, content_type, body, received_at)
          values ('delivery', ${dedupKey('delivery', body, PLAIN)}, 'application/json', ${body},
                  ${new Date(b.at).toISOString()}::timestamptz)`);
    }
    const ids = rowsOf<{ id: number | string }>(
      await db.execute(sql`select id from inbox order by id`),
    ).map((r) => Number(r.id));
    await db.execute(sql`
        insert into pending_events (inbox_id, customer_message_id, status, at)
        values (${ids[0]!}, 'c-1', 'delivered', now()), (${ids[5]!}, 'c-2', 'read', now())`);
    await db.execute(sql`
        insert into inbound_messages (id, inbox_id, "from", at)
        values (${uuidv7(days[2]! + 5000)}, ${ids[4]!}, '+380501234567', now())`);
    const all = (table: 'inbox' | 'pending_events' | 'inbound_messages') => rowsAsJson(db, table);
    const inboxBefore = await all('inbox');
    const pendingBefore = await all('pending_events');
    const inboundBefore = await all('inbound_messages');
    expect(inboxBefore).toHaveLength(7);

    await migrateDatabase(database);

    expect(await all('inbox')).toEqual(inboxBefore);
    expect(await all('pending_events')).toEqual(pendingBefore);
    expect(await all('inbound_messages')).toEqual(inboundBefore);
    const names = (await listPartitions(db)).filter((p) => p.table === 'inbox');
    expect(names.map((p) => p.name)).toEqual(days.map((d) => dayName('inbox', d)));
    expect(names.map((p) => [p.fromMs, p.toMs])).toEqual(days.map((d) => [d, d + DAY]));
    expect(await bodyHome(db, ids[0]!)).toBe(dayName('inbox', days[0]!));
    expect(await bodyHome(db, ids[6]!)).toBe('inbox_default');
    // every body's key, and nothing else
    const keys = rowsOf<{ k: string }>(
      await db.execute(sql`select encode(dedup_key, 'hex') as k from inbox_keys order by 1`),
    ).map((r) => r.k);
    expect(keys).toEqual(bodies.map((b) => dedupKey('delivery', `{"n":"${b.n}"}`, PLAIN)).sort());
    // no foreign key refers to the inbox any more
    const refers = rowsOf<{ name: string }>(
      await db.execute(sql`
          select conname as name from pg_constraint
          where contype = 'f' and confrelid = 'inbox'::regclass`),
    );
    expect(refers).toEqual([]);
    // a body stored before is still a duplicate; a new one gets an id after the old ones
    const since = await keysTimedSince(db);
    const again = await db.transaction((tx) =>
      storeRaw(
        tx,
        'delivery',
        { contentType: 'application/json', body: `{"n":"${bodies[0]!.n}"}` },
        new Date(),
        since,
      ),
    );
    expect(again).toBeUndefined();
    const fresh = await db.transaction((tx) =>
      storeRaw(
        tx,
        'delivery',
        { contentType: 'application/json', body: '{"n":"new"}' },
        new Date(),
        since,
      ),
    );
    expect(fresh).toBeGreaterThan(Math.max(...ids));
  });
});

describeMigration(18, 'over a populated database', (migrated) => {
  it('moves every event into its day, keeps the deliveries and their attempts, and drops the foreign key', async () => {
    const database = migrated();
    const db = database.db;
    const today = Math.floor(Date.now() / DAY) * DAY;
    const days = [today - 40 * DAY, today - 39 * DAY, today - 2 * DAY];
    const ep = await insertEndpoint(db, { url: 'https://receiver.example.org/hook' });
    const events: string[] = [];
    for (const d of days) {
      for (let k = 0; k < 2; k++) {
        const e = await insertEvent(db, [ep.id], { at: new Date(d + 1000 + k) });
        if (k === 0) await deliver(db, e.deliveryIds[0]!, e.eventId, ep.id, new Date(d + 1500));
        events.push(e.eventId);
      }
    }
    const foreign = STRAY;
    await db.execute(sql`
        insert into outgoing_events (id, type, subject, data, created_at)
        values (${foreign}, 'call.ended', 'call:x', '{"n":1}', now())`);
    const all = (table: 'outgoing_events' | 'event_deliveries' | 'delivery_attempts') =>
      rowsAsJson(db, table);
    const eventsBefore = await all('outgoing_events');
    const deliveriesBefore = await all('event_deliveries');
    const attemptsBefore = await all('delivery_attempts');
    expect(eventsBefore).toHaveLength(7);
    expect(deliveriesBefore).toHaveLength(6);
    expect(attemptsBefore).toHaveLength(3);

    await migrateDatabase(database);

    expect(await all('outgoing_events')).toEqual(eventsBefore);
    expect(await all('event_deliveries')).toEqual(deliveriesBefore);
    expect(await all('delivery_attempts')).toEqual(attemptsBefore);
    const names = (await listPartitions(db))
      .filter((p) => p.table === 'outgoing_events')
      .map((p) => p.name);
    expect(names).toEqual(days.map((d) => dayName('outgoing_events', d)));
    expect(await eventHome(db, events[0]!)).toBe(dayName('outgoing_events', days[0]!));
    expect(await eventHome(db, foreign)).toBe('outgoing_events_default');
    // no foreign key refers to the events any more; the attempts' to the deliveries stays
    const keys = rowsOf<{ name: string; refers: string }>(
      await db.execute(sql`
          select conname as name, confrelid::regclass::text as refers from pg_constraint
          where contype = 'f'
            and conrelid in ('event_deliveries'::regclass, 'delivery_attempts'::regclass)
          order by conname`),
    );
    expect(keys).toEqual([
      {
        name: 'delivery_attempts_delivery_id_event_deliveries_id_fk',
        refers: 'event_deliveries',
      },
      { name: 'event_deliveries_endpoint_id_endpoints_id_fk', refers: 'endpoints' },
    ]);
    // retention drops the two old days with their deliveries and attempts, once delivered
    await db.update(eventDeliveries).set({ state: 'delivered' });
    let dropped = 0;
    for (let round = 0; round < 10; round++) {
      const { removed, more } = await runRetention(db, { now: () => new Date() }, 30);
      dropped += removed.eventPartitions;
      if (!more) break;
    }
    expect(dropped).toBe(2);
    for (const [i, id] of events.entries()) {
      const kept = i >= 4 ? 1 : 0;
      expect(await rowsOfEvent(db, 'event_deliveries', id)).toBe(kept);
      expect(await eventHome(db, id)).toBe(kept ? dayName('outgoing_events', days[2]!) : undefined);
    }
    expect(await all('delivery_attempts')).toEqual(attemptsBefore.slice(2));
  });
});

describeMigration(17, 'over a populated database', (migrated) => {
  it('moves every row into its day, keeps ids and the sequence, and leaves odd ids in the default', async () => {
    const database = migrated();
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
    const all = (table: 'message_events' | 'call_events') => rowsAsJson(db, table);
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
