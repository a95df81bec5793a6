/**
 * The bench's own database on the Postgres of DATABASE_URL: created at the start, dropped at
 * the end (also on failure), so a run never touches another database's rows. Seeding is
 * set-based SQL (`insert ... select generate_series`), never the API: a million messages
 * through HTTP would measure the seeding, not the read.
 */
import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { OUTBOX_QUEUED } from '../../src/workers.ts';
import { benchCustomerIdSql, benchProviderIdSql } from './ids.ts';

export const DEFAULT_ADMIN_URL = 'postgres://postgres@127.0.0.1:5432/test';

export interface BenchDatabase {
  name: string;
  url: string;
  sql: postgres.Sql;
  drop(): Promise<void>;
}

export function withDatabaseName(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

/** Creates `sb_bench_<random>` next to the database of `adminUrl`. */
export async function createBenchDatabase(adminUrl: string): Promise<BenchDatabase> {
  const name = `sb_bench_${randomBytes(4).toString('hex')}`;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`create database "${name}"`);
  } finally {
    await admin.end();
  }
  const url = withDatabaseName(adminUrl, name);
  const sql = postgres(url, { max: 4, onnotice: () => {} });
  return {
    name,
    url,
    sql,
    async drop() {
      await sql.end({ timeout: 5 });
      const a = postgres(adminUrl, { max: 1, onnotice: () => {} });
      try {
        await a.unsafe(`drop database if exists "${name}" with (force)`);
      } finally {
        await a.end();
      }
    },
  };
}

/** A valid Ukrainian mobile number for index `i` (SQL expression over a column named `i`). */
export const PHONE_SQL = `'+38050' || lpad(((i::bigint * 7919) % 10000000)::text, 7, '0')`;

/**
 * A UUIDv7 for row `i` made at the millisecond `ms` (SQL bigint expression), as the API makes
 * them (src/ids.ts): the millisecond, then `i`'s low bits and randomness.
 */
export function uuidv7SqlAt(ms: string): string {
  return `(lpad(to_hex(${ms}), 12, '0')
  || '7' || lpad(to_hex(i % 4096), 3, '0') || '8' || substr(md5(random()::text), 1, 15))::uuid`;
}

/**
 * A UUIDv7 for row `i`, made now. Time-ordered ids put each insert at the right edge of the
 * primary key; random ones (gen_random_uuid) would make every later update and index insert
 * of the bench land on a random page, which is not what Switchboard's own rows do.
 */
const UUIDV7_SQL = uuidv7SqlAt('floor(extract(epoch from clock_timestamp()) * 1000)::bigint');

/**
 * Messages as the API would have stored them (status, payload, first timeline event); with
 * `outbox`, queued for the dispatcher. Their customerMessageIds are those of the set `prefix`
 * (`benchCustomerId`, bench/lib/ids.ts), 1..count.
 */
export async function seedMessages(
  sql: postgres.Sql,
  opts: {
    prefix: string;
    count: number;
    outbox: boolean;
    status?: string;
    events?: number;
    analyze?: boolean;
  },
): Promise<void> {
  const status = opts.status ?? 'queued';
  const events = opts.events ?? 1;
  const chunk = 250_000;
  for (let from = 1; from <= opts.count; from += chunk) {
    const to = Math.min(opts.count, from + chunk - 1);
    await sql.begin(async (tx) => {
      await tx.unsafe('set local synchronous_commit = off');
      // one statement: the messages, their timelines (queued, accepted, sent, delivered,
      // read: a whole life) and, when asked, their outbox rows
      await tx.unsafe(
        `with m as (
           insert into messages (id, customer_message_id, provider_message_id, type, "from", "to",
                                 payload, status, parts, created_at, updated_at)
           select ${UUIDV7_SQL}, ${benchCustomerIdSql('$1', 'i')},
                  case when $3 = 'queued' then null else ${benchProviderIdSql('$1', 'i')} end,
                  'sms', 'Bench', ${PHONE_SQL},
                  jsonb_build_object('from', 'Bench', 'to', ${PHONE_SQL}, 'type', 'sms',
                    'text', 'Your order ' || i || ' is on its way', 'customerMessageId', ${benchCustomerIdSql('$1', 'i')}),
                  $3, 1, now(), now()
           from generate_series($2::int, $4::int) as i
           returning id, created_at, octet_length(payload::text) as payload_bytes),
         e as (
           insert into message_events (message_id, status, source, detail, at, received_at)
           select m.id, (array['queued','accepted','sent','delivered','read'])[1 + (e - 1) % 5],
                  case when e = 1 then 'api' when e = 2 then 'dispatch' else 'callback' end,
                  jsonb_build_object('parts', 1), m.created_at + e * interval '1 second', now()
           from m cross join generate_series(1, $5::int) as e)
         insert into outbox (message_id, available_at, payload_bytes)
         select id, now() - interval '1 second', payload_bytes from m where $6::boolean`,
        [opts.prefix, from, status, to, events, opts.outbox],
      );
    });
  }
  // queued outside the server: tell its dispatcher, which may sleep while idle (src/workers.ts)
  if (opts.outbox) await sql`select pg_notify(${OUTBOX_QUEUED}, '')`;
  if (opts.analyze !== false) await sql.unsafe('analyze messages; analyze message_events');
}
