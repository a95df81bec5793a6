/**
 * Lists and gauges read what they answer, not the whole table, on PGlite and on Postgres.
 *
 * - A list's time filter (`GET /v1/messages?since=&until=`, `GET /v1/calls?since=`) is a range
 *   of the primary key (src/db/created-within.ts): held to the plain filter on `created_at`
 *   at every boundary, through the real submit path, and counted in the rows Postgres reads
 *   (`pg_stat_xact_user_tables`): before, a page walked the table past its span, to the
 *   table's end when the span held less than a page.
 * - So is a flow replay's period, at both ends (src/calls/replay.ts): its last page read
 *   every call of the flow made after the period.
 * - A list by phone number reads that number's messages through `message_recipients`
 *   (migration 0024), not the newest messages of every number; so does an erasure's lookup of
 *   a number's messages.
 * - A calls list by state or outcome walks `calls_state_id_idx` or `calls_outcome_id_idx`
 *   (migration 0021): before, a rare state or outcome read every call.
 * - The `switchboard_calls` gauge counts the live states through `calls_state_id_idx`
 *   (src/calls/read.ts callsByState), reading those calls alone.
 * - The audit log by token or by route (`GET /v1/audit?token=`, `?route=`) walks
 *   `audit_log_token_idx` or `audit_log_route_idx` (migration 0027): before, a rare token's
 *   page read every newer row of the log.
 * - The scheduler's round and a campaigns list by state (`GET /v1/campaigns?state=`) read the
 *   campaigns of their states through `campaigns_state_id_idx` (migration 0028): before, each
 *   round read every campaign ever made, four times.
 */
import { readFileSync } from 'node:fs';
import { sql } from 'drizzle-orm';
import { expect, it } from 'vitest';
import { CALL_STATES, LIVE_CALL_STATES } from '../../src/calls/deps.ts';
import { callsByState, listCalls } from '../../src/calls/read.ts';
import { compileReplayDraft, replayFlow } from '../../src/calls/replay.ts';
import { listCampaigns } from '../../src/campaigns/read.ts';
import { runCampaigns } from '../../src/campaigns/scheduler.ts';
import { NO_HOLIDAYS } from '../../src/campaigns/windows.ts';
import { type Db, rowsOf, type Tx } from '../../src/db/client.ts';
import { listAudit } from '../../src/http/audit.ts';
import { uuidv7Floor } from '../../src/ids.ts';
import { createLogger } from '../../src/logger.ts';
import { listMessages } from '../../src/messages/read.ts';
import { submitMessages } from '../../src/messages/submit.ts';
import { numberMessageIds } from '../../src/privacy/erasure.ts';
import { buildTestApp } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';

const MINUTE = 60_000;
// a fixed start well in the past, whole minutes
const T0 = Date.UTC(2026, 0, 5, 9, 0, 0);
const ROWS = 3000;

/**
 * `n` rows of `table` made one a minute from T0, each id the UUIDv7 of its created_at; calls
 * seeded by an earlier test stay as they are.
 */
async function seed(db: Db, table: 'messages' | 'calls', n: number) {
  const ms = `(${T0}::bigint + (i - 1) * ${MINUTE})`;
  // 12 hex digits of milliseconds, version 7, variant 8, the rest from the row number
  const id = sql.raw(`(lpad(to_hex(${ms}), 12, '0') || '7' ||
    substr(md5(i::text), 1, 3) || '8' || substr(md5(i::text), 4, 15))::uuid`);
  const at = sql.raw(`(timestamptz 'epoch' + ${ms} * interval '1 millisecond')`);
  if (table === 'messages') {
    await db.execute(sql`
      insert into messages (id, customer_message_id, type, "from", "to", payload, status,
                            created_at, updated_at)
      select ${id}, 'seed-' || i, 'sms', 'Shop', '380501234567', '{}'::jsonb, 'delivered',
             ${at}, ${at}
      from generate_series(1, ${n}::int) i
      on conflict (id) do nothing`);
  } else {
    await db.execute(sql`
      insert into calls (id, flow_id, flow_version, "to", "from", lang, vars, state, snapshot,
                         message_id, created_at, updated_at)
      select ${id}, 'seeded', 'v1', '380501234567', 'Shop', 'en', '{}'::jsonb, 'ended',
             '{}'::jsonb, gen_random_uuid(), ${at}, ${at}
      from generate_series(1, ${n}::int) i
      on conflict (id) do nothing`);
  }
  await db.execute(sql.raw(`analyze ${table}`));
}

/** Rows of `table` this transaction has read so far, by index and by sequential scan. */
async function rowsRead(tx: Tx, table: string): Promise<number> {
  const [row] = rowsOf<{ n: string | number }>(
    await tx.execute(sql`
      select coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) as n
      from pg_stat_xact_user_tables where relname = ${table}`),
  );
  return Number(row?.n ?? 0);
}

/** What `read` answers and how many rows of `table` it read, in a transaction of its own. */
async function counted<T>(db: Db, table: string, read: (tx: Tx) => Promise<T>) {
  let result: T | undefined;
  let read_ = 0;
  await db.transaction(async (tx) => {
    const before = await rowsRead(tx, table);
    result = await read(tx);
    read_ = (await rowsRead(tx, table)) - before;
  });
  return { result: result as T, read: read_ };
}

const minute = (k: number) => new Date(T0 + k * MINUTE);

/**
 * Rows of `messages` a count may hold beyond those asked for: planning a join reads the two
 * ends of messages' key (an EXPLAIN alone reads them), however many rows the table holds.
 */
const PLANNING = 2;

/**
 * The seeded messages (all to the busy number) in `db`, then one message per key to `to`, made at
 * minute `at` through the real submit path (`<prefix>-<key>`), and fresh statistics.
 */
async function quietNumber(db: Db, to: string, prefix: string, keys: string[], at: number) {
  await seed(db, 'messages', ROWS);
  const answer = await submitMessages(
    { db, clock: { now: () => minute(at) } },
    keys.map((k) => ({
      type: 'sms',
      from: 'Shop',
      to,
      text: k,
      customerMessageId: `${prefix}-${k}`,
    })),
  );
  expect(answer.accepted).toBe(keys.length);
  await db.execute(sql`analyze messages`);
  await db.execute(sql`analyze message_recipients`);
  return answer;
}

describeEachEngine('lists and gauges as the tables grow', (ctx) => {
  const db = (): Db => ctx.database().db;

  it('lists messages by time as the plain created_at filter does, at every boundary', async () => {
    // through the real submit path: the ids and created_at it makes, a millisecond apart
    const made: { id: string; at: number }[] = [];
    for (let k = 0; k < 6; k++) {
      const at = T0 - 3_600_000 + k; // before the seeded rows, none of which meet these spans
      const answer = await submitMessages({ db: db(), clock: { now: () => new Date(at) } }, [
        {
          type: 'sms',
          from: 'Shop',
          to: '+380501234567',
          text: `m${k}`,
          customerMessageId: `edge-${k}`,
        },
      ]);
      expect(answer.accepted, JSON.stringify(answer.results)).toBe(1);
      made.push({ id: answer.created[0]!, at });
    }
    const plain = (since?: number, until?: number) =>
      made
        .filter(
          (m) => (since === undefined || m.at >= since) && (until === undefined || m.at <= until),
        )
        .map((m) => m.id)
        .reverse();
    const listed = async (since?: number, until?: number) =>
      (
        await listMessages(db(), {
          ...(since !== undefined && { since: new Date(since) }),
          ...(until !== undefined && { until: new Date(until) }),
          limit: 200,
        })
      ).items
        .map((i) => i.id)
        .filter((id) => made.some((m) => m.id === id));
    const first = made[0]!.at;
    for (const [since, until] of [
      [first + 2, undefined],
      [undefined, first + 3],
      [first + 1, first + 4],
      [first + 2, first + 2],
      [first + 3, first + 2],
      [first - 1, first + 99],
    ] as [number | undefined, number | undefined][]) {
      expect(await listed(since, until), `since ${since}, until ${until}`).toEqual(
        plain(since, until),
      );
    }
  });

  it('takes the widest times the API accepts, years 0001 to 9999', async () => {
    const all = await listMessages(db(), { limit: 200 });
    const widest = await listMessages(db(), {
      since: new Date('0001-01-01T00:00:00Z'),
      until: new Date('9999-12-31T23:59:59.999Z'),
      limit: 200,
    });
    expect(widest.items.length).toBeGreaterThan(0);
    expect(widest).toEqual(all);
    expect((await listMessages(db(), { until: new Date('0001-01-01T00:00:00Z') })).items).toEqual(
      [],
    );
    expect(
      (await listMessages(db(), { since: new Date('9999-12-31T23:59:59.999Z') })).items,
    ).toEqual([]);
    expect((await listCalls(db(), { since: new Date('0001-01-01T00:00:00Z') })).items).toEqual(
      (await listCalls(db(), {})).items,
    );
  });

  it('reads only the span of a time filter, however many messages there are', async () => {
    await seed(db(), 'messages', ROWS);
    // the last 10 minutes: less than a page, so the old filter read to the table's end
    const since = await counted(db(), 'messages', (tx) =>
      listMessages(tx, { since: minute(ROWS - 10), limit: 50 }),
    );
    expect(since.result.items).toHaveLength(10);
    expect(since.read).toBeLessThanOrEqual(60);
    // the first 10 minutes: the old filter read every newer message first
    const until = await counted(db(), 'messages', (tx) =>
      listMessages(tx, { until: minute(9), limit: 50 }),
    );
    expect(until.result.items.filter((i) => i.customerMessageId.startsWith('seed-'))).toHaveLength(
      10,
    );
    expect(until.read).toBeLessThanOrEqual(60);
    // a page inside both bounds, and the next one from its cursor
    const page = await listMessages(db(), { since: minute(100), until: minute(199), limit: 60 });
    expect(page.items).toHaveLength(60);
    const next = await listMessages(db(), {
      since: minute(100),
      until: minute(199),
      limit: 60,
      cursor: page.nextCursor!,
    });
    expect(next.items).toHaveLength(40);
    expect(next.nextCursor).toBeNull();
    expect(new Set([...page.items, ...next.items].map((i) => i.customerMessageId))).toEqual(
      new Set(Array.from({ length: 100 }, (_, k) => `seed-${101 + k}`)),
    );
  });

  it("reads only the number's messages in a list by number, however many others there are", async () => {
    const answer = await quietNumber(db(), '+380661234567', 'by-number', ['a', 'b', 'c'], 5);
    // a quiet number among thousands of the busy one's: its own rows, not the newest of all
    const quiet = await counted(db(), 'messages', (tx) =>
      listMessages(tx, { to: '+380661234567', limit: 50 }),
    );
    // one clock reading: newest first is by id, which is random within the millisecond
    expect(quiet.result.items.map((i) => i.id)).toEqual([...answer.created].sort().reverse());
    expect(quiet.read).toBeLessThanOrEqual(3 + PLANNING);
    // the busy number: a page, then a page of a span deep in its history
    const busy = await counted(db(), 'messages', (tx) =>
      listMessages(tx, { to: '380501234567', limit: 50 }),
    );
    expect(busy.result.items).toHaveLength(50);
    expect(busy.read).toBeLessThanOrEqual(51 + PLANNING);
    const old = await counted(db(), 'messages', (tx) =>
      listMessages(tx, { to: '380501234567', since: minute(100), until: minute(109), limit: 50 }),
    );
    expect(old.result.items.map((i) => i.customerMessageId)).toEqual(
      Array.from({ length: 10 }, (_, k) => `seed-${110 - k}`),
    );
    expect(old.read).toBeLessThanOrEqual(10 + PLANNING);
  });

  it('reads only the messages of a list by type, however many of other types there are', async () => {
    await seed(db(), 'messages', ROWS);
    // the oldest messages of all, of a type no other message has: walked newest first, they
    // came after every sms
    const answer = await submitMessages(
      { db: db(), clock: { now: () => new Date(T0 - 10 * MINUTE) } },
      ['a', 'b', 'c'].map((k) => ({
        type: 'flashcall',
        from: 'Shop',
        to: '+380631234567',
        customerMessageId: `by-type-${k}`,
      })),
    );
    expect(answer.created).toHaveLength(3);
    await db().execute(sql`analyze messages`);
    const rare = await counted(db(), 'messages', (tx) =>
      listMessages(tx, { type: 'flashcall', limit: 50 }),
    );
    expect(rare.result.items.map((i) => i.customerMessageId).sort()).toEqual([
      'by-type-a',
      'by-type-b',
      'by-type-c',
    ]);
    // without the index: every one of the 3 000 sms as well
    expect(rare.read).toBeLessThanOrEqual(3 + PLANNING);
    // a page of the common type, and one of a span deep in its history
    const common = await counted(db(), 'messages', (tx) =>
      listMessages(tx, { type: 'sms', limit: 50 }),
    );
    expect(common.result.items).toHaveLength(50);
    expect(common.read).toBeLessThanOrEqual(51 + PLANNING);
    const old = await counted(db(), 'messages', (tx) =>
      listMessages(tx, { type: 'sms', since: minute(100), until: minute(109), limit: 50 }),
    );
    expect(old.result.items.map((i) => i.customerMessageId)).toEqual(
      Array.from({ length: 10 }, (_, k) => `seed-${110 - k}`),
    );
    expect(old.read).toBeLessThanOrEqual(10 + PLANNING);
  });

  it("finds a number's messages for an erasure by index, however many others there are", async () => {
    const answer = await quietNumber(db(), '+380671234567', 'erase-me', ['a', 'b'], 7);
    // as the erasure locks them (src/privacy/erasure.ts): before, an OR over messages read
    // every message
    const found = await counted(db(), 'messages', (tx) =>
      tx.execute(sql`
        select id from messages where id in (${numberMessageIds('+380671234567')})
        order by id for update`),
    );
    expect(rowsOf<{ id: string }>(found.result).map((r) => r.id)).toEqual(
      [...answer.created].sort(),
    );
    expect(found.read).toBeLessThanOrEqual(2 + PLANNING);
  });

  it('reads only the span of a calls list since a time', async () => {
    await seed(db(), 'calls', ROWS);
    const since = await counted(db(), 'calls', (tx) =>
      listCalls(tx, { since: minute(ROWS - 10), limit: 50 }),
    );
    expect(since.result.items).toHaveLength(10);
    expect(since.read).toBeLessThanOrEqual(60);
  });

  it('replays only the calls of the period, however many came after it', async () => {
    await seed(db(), 'calls', ROWS);
    const { compiled } = compileReplayDraft(
      'appointment-reminder',
      readFileSync('flows/appointment-reminder.yaml', 'utf8'),
    );
    const replay = await counted(db(), 'calls', (tx) =>
      replayFlow(tx as unknown as Db, {
        flowId: 'seeded',
        compiled,
        since: minute(0),
        until: minute(10),
      }),
    );
    expect(replay.result.calls).toBe(10);
    // before, the period's last page read every later call of the flow: 3 000 rows
    expect(replay.read).toBeLessThanOrEqual(60);
  });

  it('reads only the calls of a list by state or outcome, however many others there are', async () => {
    await seed(db(), 'calls', ROWS);
    // the oldest calls of all: a page of them, walked newest first, came after every other
    const old = new Date(T0 - 10 * MINUTE).toISOString();
    await db().execute(sql`
      insert into calls (id, flow_id, flow_version, "to", "from", lang, vars, state, outcome,
                         snapshot, message_id, created_at, updated_at)
      select gen_random_uuid(), 'rare', 'v1', '380501234567', 'Shop', 'en', '{}'::jsonb,
             case when i <= 3 then 'failed' else 'ended' end,
             case when i > 3 then 'callback-requested' end,
             '{}'::jsonb, gen_random_uuid(), ${old}::timestamptz, ${old}::timestamptz
      from generate_series(1, 5) i`);
    await db().execute(sql`analyze calls`);
    const failed = await counted(db(), 'calls', (tx) =>
      listCalls(tx, { state: 'failed', limit: 50 }),
    );
    expect(failed.result.items.map((c) => c.state)).toEqual(['failed', 'failed', 'failed']);
    // without the index: every one of the 3 000 ended calls
    expect(failed.read).toBeLessThanOrEqual(10);
    const outcome = await counted(db(), 'calls', (tx) =>
      listCalls(tx, { outcome: 'callback-requested', limit: 50 }),
    );
    expect(outcome.result.items.map((c) => c.outcome)).toEqual([
      'callback-requested',
      'callback-requested',
    ]);
    expect(outcome.read).toBeLessThanOrEqual(10);
  });

  it("reads only the number's calls in a list by number, however many others there are", async () => {
    await seed(db(), 'calls', ROWS);
    // the oldest calls of all, to a number no other call went to: walked newest first by id,
    // they came after every call of the busy number
    const old = T0 - 10 * MINUTE;
    // UUIDv7s of their time, as calls are made (the seed's ids, from other row numbers)
    const id = sql.raw(`(lpad(to_hex(${old}::bigint), 12, '0') || '7' ||
      substr(md5('q' || i), 1, 3) || '8' || substr(md5('q' || i), 4, 15))::uuid`);
    const at = new Date(old).toISOString();
    await db().execute(sql`
      insert into calls (id, flow_id, flow_version, "to", "from", lang, vars, state, snapshot,
                         message_id, created_at, updated_at)
      select ${id}, 'quiet', 'v1', '+380931234567', 'Shop', 'en', '{}'::jsonb, 'ended',
             '{}'::jsonb, gen_random_uuid(), ${at}::timestamptz, ${at}::timestamptz
      from generate_series(1, 3) i`);
    await db().execute(sql`analyze calls`);
    await db().execute(sql`analyze call_recipients`);
    const quiet = await counted(db(), 'calls', (tx) =>
      listCalls(tx, { to: '+380931234567', limit: 50 }),
    );
    expect(quiet.result.items.map((c) => c.flow)).toEqual(['quiet', 'quiet', 'quiet']);
    // with calls_to_id_idx (before migration 0029) as few; a walk of calls by id, 3 000
    expect(quiet.read).toBeLessThanOrEqual(3 + PLANNING);
    // the busy number: a page, then a page of its last ten minutes
    const busy = await counted(db(), 'calls', (tx) =>
      listCalls(tx, { to: '380501234567', limit: 50 }),
    );
    expect(busy.result.items).toHaveLength(50);
    expect(busy.read).toBeLessThanOrEqual(51 + PLANNING);
    const recent = await counted(db(), 'calls', (tx) =>
      listCalls(tx, { to: '380501234567', since: minute(ROWS - 10), limit: 50 }),
    );
    expect(recent.result.items).toHaveLength(10);
    // the calls whose ids are in the span: its 10, and those an earlier test made with random
    // (not time-ordered) ids
    const [span] = rowsOf<{ n: string | number }>(
      await db().execute(
        sql`select count(*) as n from calls where id >= ${uuidv7Floor(minute(ROWS - 10))}`,
      ),
    );
    expect(Number(span!.n)).toBeLessThan(30);
    // planning a range of the key reads its end as well (an EXPLAIN alone reads 3 here)
    expect(recent.read).toBeLessThanOrEqual(Number(span!.n) + PLANNING + 1);
  });

  it('counts the live calls by state from their index, every live state named', async () => {
    // a few calls of every state beside the thousands ended above
    const want = new Map<string, number>([
      ['queued', 2],
      ['accepted', 0],
      ['in-progress', 3],
      ['ended', 4],
      ['failed', 1],
    ]);
    expect([...want.keys()].sort()).toEqual([...CALL_STATES].sort());
    for (const [state, n] of want) {
      if (n === 0) continue;
      await db().execute(sql`
        insert into calls (id, flow_id, flow_version, "to", "from", lang, vars, state, snapshot,
                           message_id)
        select gen_random_uuid(), 'gauge', 'v1', '380501234567', 'Shop', 'en', '{}'::jsonb,
               ${state}, '{}'::jsonb, gen_random_uuid()
        from generate_series(1, ${n}::int)`);
    }
    await db().execute(sql`analyze calls`);
    const gauge = await counted(db(), 'calls', async (tx) => {
      const rows = await callsByState(tx);
      const [used] = rowsOf<{ n: string | number }>(
        await tx.execute(sql`
          select pg_stat_get_xact_numscans('calls_state_id_idx'::regclass) as n`),
      );
      return { rows, used: Number(used?.n ?? 0) };
    });
    expect(gauge.result.rows).toEqual(
      LIVE_CALL_STATES.map((state) => ({ state, count: want.get(state)! })),
    );
    expect(gauge.result.used).toBeGreaterThan(0);
    expect(gauge.read).toBeLessThanOrEqual(5);
  });
  it('reads only the rows of an audit list by token or by route, however many others there are', async () => {
    // rows one a minute; the five oldest of all by a token and on a route no other row has
    await db().execute(sql`
      insert into audit_log (at, token, method, route, status, request_id, changes)
      select timestamptz 'epoch' + (${T0}::bigint + i * ${MINUTE}) * interval '1 millisecond',
             case when i <= 5 then 'rare' else 'busy' end, 'POST',
             case when i <= 5 then '/v1/opt-outs' else '/v1/messages' end, 202, 'seed-' || i,
             '{}'::jsonb
      from generate_series(1, ${ROWS}::int) i`);
    await db().execute(sql`analyze audit_log`);
    for (const filter of [{ token: 'rare' }, { route: '/v1/opt-outs' }]) {
      const rare = await counted(db(), 'audit_log', (tx) =>
        listAudit(tx, { ...filter, limit: 50 }),
      );
      expect(rare.result.items.map((i) => i.requestId)).toEqual([
        'seed-5',
        'seed-4',
        'seed-3',
        'seed-2',
        'seed-1',
      ]);
      // without the indexes: every one of the 2 995 newer rows as well
      expect(rare.read, JSON.stringify(filter)).toBeLessThanOrEqual(5);
    }
    // the busy token: a page, and the next from its cursor
    const busy = await counted(db(), 'audit_log', (tx) =>
      listAudit(tx, { token: 'busy', limit: 50 }),
    );
    expect(busy.result.items).toHaveLength(50);
    expect(busy.result.items[0]!.requestId).toBe(`seed-${ROWS}`);
    expect(busy.read).toBeLessThanOrEqual(51 + PLANNING);
    const next = await counted(db(), 'audit_log', (tx) =>
      listAudit(tx, { token: 'busy', limit: 50, cursor: busy.result.nextCursor! }),
    );
    expect(next.result.items[0]!.requestId).toBe(`seed-${ROWS - 50}`);
    expect(next.read).toBeLessThanOrEqual(51 + PLANNING);
  });

  it('reads only the live campaigns in a scheduler round and a list by state, however many are done', async () => {
    // one a minute, ids in time order: the three oldest scheduled (in 2099), the rest done
    const ms = `(${T0}::bigint + i * ${MINUTE})`;
    await db().execute(sql`
      insert into campaigns (id, name, flow_id, "from", state, start_at, per_minute, retry,
                             paced_at, created_at, updated_at, finished_at)
      select ${sql.raw(`(lpad(to_hex(${ms}), 12, '0') || '7' || substr(md5(i::text), 1, 3) || '8' ||
                          substr(md5(i::text), 4, 15))::uuid`)},
             'seed-' || i, 'appointment-reminder', 'Clinic',
             case when i <= 3 then 'scheduled' else 'done' end,
             case when i <= 3 then timestamptz '2099-01-01' else timestamptz '2026-01-05' end,
             60, '{"on": ["failed"], "after": "1h", "maxAttempts": 1}'::jsonb,
             timestamptz '2026-01-05', timestamptz '2026-01-05', timestamptz '2026-01-05',
             case when i <= 3 then null else timestamptz '2026-01-05' end
      from generate_series(1, ${ROWS}::int) i`);
    await db().execute(sql`analyze campaigns`);
    const listed = await counted(db(), 'campaigns', (tx) =>
      listCampaigns(tx, { state: 'scheduled', limit: 50 }),
    );
    expect(listed.result.items.map((c) => c.name)).toEqual(['seed-3', 'seed-2', 'seed-1']);
    // without the index: the 2 997 done campaigns newer than them as well
    expect(listed.read).toBeLessThanOrEqual(3);
    // one scheduler round with nothing due, its transactions made savepoints of one, so that
    // what they read is counted
    const app = buildTestApp(ctx.database());
    const round = await counted(db(), 'campaigns', (tx) =>
      runCampaigns({
        ...app.calls,
        db: tx as unknown as Db,
        logger: createLogger('silent'),
        window: { from: '00:00', to: '23:59' },
        holidays: NO_HOLIDAYS,
        capPerDay: undefined,
      }),
    );
    expect(round.result).toBe(false);
    // the scheduled ones, once (not due); without the index every campaign at each of the
    // round's four questions (stale uploads, due, running, finished)
    expect(round.read).toBeLessThanOrEqual(3);
  });
});
