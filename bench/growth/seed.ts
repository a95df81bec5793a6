/**
 * The growth bench's history (bench/growth.ts): messages as they are after a whole life,
 * seeded set-based (`insert ... select generate_series`), a chunk a statement, two chunks at
 * once. Each message gets a UUIDv7 id of its own creation time, spread over the past 30
 * days (options.ts `spreadOffsetMs`), its five timeline events (queued by the API, accepted
 * by the dispatch, sent, delivered and read by callbacks) and the three callback bodies the
 * inbox keeps for those, as `/hooks/delivery` stores them (dedup key, body, outcome), each
 * received when its event happened. Message `i`'s ids are `benchCustomerId(prefix, i)` and `benchProviderId` (bench/lib/ids.ts).
 * A chunk's rows are written in time order, so within a chunk a day's rows lie together as
 * in a table that filled day by day (the whole history is a chunk count of such runs).
 *
 * @example
 * const ms = eventIdsByTime(await eventIdColumn(sql));
 * await seedHistory(sql, { prefix: 'g-', from: 1, to: 1_000_000, anchor, eventIds: ms });
 */
import type postgres from 'postgres';
import { KEYS_TIMED_SINCE } from '../../src/messages/inbox.ts';
import { PHONE_SQL, uuidv7SqlAt } from '../lib/database.ts';
import { benchCustomerIdSql, benchProviderIdSql } from '../lib/ids.ts';
import { SPREAD_MS, SPREAD_STEP_MS } from './options.ts';

const CHUNK = 250_000;

/**
 * The dedup key `/hooks/delivery` gives a body (src/messages/inbox.ts `dedupKey`), in SQL over
 * the seeded body, its time `at` (the body's timestamp, to the millisecond) and the database's
 * `inbox_keys.timed_since` in seconds (`since`): the four bytes of the body's seconds, then the
 * first 28 bytes of the SHA-256, or the SHA-256 alone for a body timed before `since`. In hex,
 * as the inbox holds it; test/bench/growth.test.ts holds it to `dedupKey`.
 */
export function seededKeySql(body: string, at: string, since: string): string {
  const hash = `sha256(convert_to('delivery' || E'\\n' || ${body}, 'UTF8'))`;
  const seconds = `floor(extract(epoch from ${at}))::bigint`;
  return `encode(case when ${seconds} >= ${since}
    then substring(int8send(${seconds}) from 5 for 4) || substring(${hash} from 1 for 28)
    else ${hash} end, 'hex')`;
}

/** The database's `inbox_keys.timed_since` in seconds (none before migration 0023: never). */
export async function keysTimedSinceSeconds(sql: postgres.Sql): Promise<number | null> {
  const [table] = await sql<{ present: boolean }[]>`
    select to_regclass('settings') is not null as present`;
  if (!table?.present) return null;
  const [row] = await sql<{ value: string }[]>`
    select value from settings where key = ${KEYS_TIMED_SINCE}`;
  return row ? Date.parse(row.value) / 1000 : null;
}
/** chunks seeded at once, each in its own transaction on its own connection */
const SEED_WORKERS = 2;

/**
 * Whether message_events has a bigint id drawn from a sequence (the schema of today), and
 * that sequence: then the seeded events get ids in the order of their time, as a table that
 * filled over the 30 days would have (retention walks the oldest ids first). Any other id
 * (say a partitioned table's) is left to its default.
 */
export async function eventIdColumn(sql: postgres.Sql): Promise<string | undefined> {
  const [row] = await sql<{ seq: string | null; type: string | null }[]>`
    select pg_get_serial_sequence('message_events', 'id') as seq,
           (select data_type from information_schema.columns
            where table_schema = current_schema() and table_name = 'message_events'
              and column_name = 'id') as type`;
  return row?.seq && row.type === 'bigint' ? row.seq : undefined;
}

/**
 * Event ids by time: `ms * 8 + e` for event `e` (1..5) at millisecond `ms`; distinct messages
 * have distinct milliseconds, so ids are unique. The sequence moves past `anchor`'s, so
 * every event the server writes from now on gets a higher id than any seeded one.
 */
export async function eventIdsFollowTime(
  sql: postgres.Sql,
  sequence: string,
  anchor: Date,
): Promise<void> {
  await sql`select setval(${sequence}::regclass, greatest(${anchor.getTime() * 8 + 8}::bigint,
    (select last_value from pg_sequences where schemaname || '.' || sequencename = ${sequence})))`;
}

/**
 * With day partitions of the timelines (when the schema has them: a table partitioned by
 * RANGE of one column, and `switchboard_day_partition` to make a day), each day of the
 * history made first, as a server that ran through those days made them ahead; without them
 * every seeded event would land in the default partition. The tables partitioned; none when
 * the schema has no such partitions.
 */
export async function makeDayPartitions(
  sql: postgres.Sql,
  anchor: Date,
  days: number,
): Promise<string[]> {
  const [fn] = await sql<{ present: boolean }[]>`
    select to_regproc('switchboard_day_partition') is not null as present`;
  if (!fn?.present) return [];
  const tables = await sql<{ name: string; key: string }[]>`
    select c.relname as name, pg_get_partkeydef(c.oid) as key
    from pg_partitioned_table p join pg_class c on c.oid = p.partrelid
    where c.relnamespace = current_schema()::regnamespace
      and c.relname in ('message_events', 'call_events', 'inbox')`;
  const made: string[] = [];
  for (const t of tables) {
    const column = t.key.match(/^RANGE \((\w+)\)$/)?.[1];
    if (!column) continue;
    await sql`
      select switchboard_day_partition(${t.name}, ${column}, d::date)
      from generate_series((${anchor.toISOString()}::timestamptz at time zone 'UTC'
                             - make_interval(days => ${days}, secs => 5))::date,
                           (${anchor.toISOString()}::timestamptz at time zone 'UTC')::date,
                           interval '1 day') as d`;
    made.push(t.name);
  }
  return made;
}

/**
 * Messages `prefix` + from..to (1-based, globally numbered across the bench's steps), made in
 * the 30 days up to 5 s before `anchor` (so their last event is before it too), with their
 * events and inbox rows. `eventIds`: give events ids by time (see `eventIdsFollowTime`).
 * `onChunk` is told how many are stored so far.
 */
export async function seedHistory(
  sql: postgres.Sql,
  opts: {
    prefix: string;
    from: number;
    to: number;
    anchor: Date;
    eventIds: boolean;
    onChunk?: (stored: number) => void;
  },
): Promise<void> {
  const ms = 'floor(extract(epoch from t) * 1000)::bigint';
  // the dedup keys' own table (migration 0019), when the schema has it
  const [keys] = await sql<{ present: boolean }[]>`
    select to_regclass('inbox_keys') is not null as present`;
  // keys in time order from migration 0023 (null before it: plain keys)
  const since = await keysTimedSinceSeconds(sql);
  const eventMs = 'floor(extract(epoch from at) * 1000)::bigint';
  const chunks: [number, number][] = [];
  for (let from = opts.from; from <= opts.to; from += CHUNK) {
    chunks.push([from, Math.min(opts.to, from + CHUNK - 1)]);
  }
  let stored = 0;
  const seedChunk = async ([from, to]: [number, number]) => {
    await sql.begin(async (tx) => {
      await tx.unsafe('set local synchronous_commit = off');
      await tx.unsafe(
        `with s as (
           select i, $1::timestamptz - interval '30 days 5 seconds'
                     + ((i * $2::bigint) % $3::bigint) * interval '1 millisecond' as t
           from generate_series($4::bigint, $5::bigint) as i
           -- in time order, as rows that arrived over the days lie (a day's together)
           order by t),
         m as (
           insert into messages (id, customer_message_id, provider_message_id, type, "from", "to",
                                 payload, status, parts, created_at, updated_at)
           select ${uuidv7SqlAt(ms)}, ${benchCustomerIdSql('$6', 'i')}, ${benchProviderIdSql('$6', 'i')}, 'sms', 'Bench', ${PHONE_SQL},
                  jsonb_build_object('from', 'Bench', 'to', ${PHONE_SQL}, 'type', 'sms',
                    'text', 'Your order ' || i || ' is on its way', 'customerMessageId', ${benchCustomerIdSql('$6', 'i')}),
                  'read', 1, t, t + interval '4 seconds'
           from s
           returning id, customer_message_id as cmid, created_at),
         ev as (
           select m.id, m.cmid, e, (array['queued','accepted','sent','delivered','read'])[e] as status,
                  m.created_at + (e - 1) * interval '1 second' as at
           from m cross join generate_series(1, 5) as e),
         e as (
           insert into message_events (${opts.eventIds ? 'id, ' : ''}message_id, status, source,
                                       detail, at, received_at)
           select ${opts.eventIds ? `${eventMs} * 8 + e, ` : ''}id, status,
                  case e when 1 then 'api' when 2 then 'dispatch' else 'callback' end,
                  case when e <= 2 then '{"parts":1}'::jsonb else '{"channel":"sms"}'::jsonb end,
                  at, at
           from ev)
         ${keys?.present ? ', ib as (' : ''}
         insert into inbox (kind, dedup_key, content_type, body, outcome, pending, received_at)
         select 'delivery', ${seededKeySql('body', 'at', since === null ? "'infinity'::float8" : String(since))},
                'application/json', body,
                '{"events":1,"matched":1,"pending":0,"problems":[]}'::jsonb, 0, at
         from (
           select at, '{"eventId":"' || cmid || ':' || status || '","customerMessageId":"' || cmid
                  || '","messageId":"pm-' || cmid || '","status":"' || status || '","timestamp":"'
                  || to_char(at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
                  || '","channel":"sms"}' as body
           from ev where e >= 3) b
         ${keys?.present ? "returning dedup_key, received_at) insert into inbox_keys select decode(dedup_key, 'hex'), received_at from ib" : ''}`,
        [opts.anchor.toISOString(), SPREAD_STEP_MS, SPREAD_MS, from, to, opts.prefix],
      );
    });
    stored += to - from + 1;
    opts.onChunk?.(stored);
  };
  // one statement runs on one core: SEED_WORKERS chunks at once keep both of the machine's busy
  const next = () => chunks.shift();
  await Promise.all(
    Array.from({ length: SEED_WORKERS }, async () => {
      for (let c = next(); c; c = next()) await seedChunk(c);
    }),
  );
}
