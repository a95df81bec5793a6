/**
 * Recording events for the user's endpoints in the transaction of the change they report:
 * the event commits with its change or not at all, and the delivery worker
 * (src/events/deliver.ts) sends what committed.
 *
 * One statement, set-based: `ev_to` pairs each event with every enabled endpoint that wants
 * it (its `event_types` include the type, or are null), or with the one endpoint an event
 * names (`endpoint`: a flow's `notify:`, whatever types that endpoint subscribes to); `ev_out`
 * inserts only the events that found an endpoint; `ev_dl` one delivery per pair (pending, due
 * at the event's time, in the order the events came, so one subject's deliveries to one
 * endpoint are in the order they happened). Whether an endpoint wants a type is decided here,
 * in SQL: the in-memory cache (subscriptions.ts) only decides whether a writer adds this at
 * all, so a stale cache can cost a statement part, never an event.
 *
 * - `recordEvents(tx, events)`: the events given, alone in a statement; returns how many were
 *   written (a `notify:` to a name no enabled endpoint has writes none, and its caller says so).
 * - `eventsCte(events)`: the same CTEs for a statement the caller sends (`WriteOptions.also`).
 * - `eventsFrom(source)`: the CTEs for events a statement derives from its own rows (a
 *   timeline's new steps, a call's end): `source` selects them, ids made in SQL as uuidv7 of
 *   the event's time, as src/ids.ts makes them.
 *
 * CTE names: `ev_src`, `ev_to`, `ev_out`, `ev_dl`: one set per statement.
 *
 * @example
 * const written = await recordEvents(tx, [
 *   { type: 'call.outcome', subject: `call:${id}`, data: { callId: id, flow, outcome, at }, at: now },
 * ]);
 */
import { type SQL, sql } from 'drizzle-orm';
import { executePrepared, type Tx } from '../db/client.ts';
import { uuidv7 } from '../ids.ts';

export interface NewOutgoingEvent {
  /** a type of the catalog (types.ts) */
  type: string;
  /** what it is about: `call:<id>`, `message:<id>`, ...; the unit of ordering */
  subject: string;
  data: unknown;
  /** when it was recorded: the body's `timestamp`, and when its deliveries are first due */
  at: Date;
  /** only to the enabled endpoint of this name (a flow's `notify:`) */
  endpoint?: string;
}

/**
 * A uuidv7 of a timestamptz expression in SQL: its milliseconds in the first 48 bits of a
 * random uuid, the version nibble set to 7 (the variant bits are the v4's already).
 */
export function uuidv7Sql(at: SQL): SQL {
  return sql`encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
      placing substring(int8send(floor(extract(epoch from ${at}) * 1000)::bigint) from 3)
      from 1 for 6), 52, 1), 53, 1), 'hex')::uuid`;
}

/** A timestamptz as the API writes times: ISO 8601 in UTC with milliseconds (`...Z`). */
export function isoSql(at: SQL): SQL {
  return sql`to_char(${at} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
}

/**
 * The CTEs that record the events `source` selects, with the columns `id uuid, seq bigint,
 * type text, subject text, data jsonb, at timestamptz, endpoint text` (`seq`: their order).
 */
export function eventsFrom(source: SQL): SQL {
  return sql`ev_src as materialized (${source}),
    ev_to as materialized (
      select s.id, s.seq, s.subject, s.at, e.id as endpoint_id
      from ev_src s
      join endpoints e on e.enabled and (case when s.endpoint is null
        then e.event_types is null or s.type = any(e.event_types)
        else e.name = s.endpoint end)),
    ev_out as (
      insert into outgoing_events (id, type, subject, data, created_at)
      select s.id, s.type, s.subject, s.data, s.at from ev_src s
      where s.id in (select id from ev_to)
      order by s.seq
      returning id),
    ev_dl as (
      insert into event_deliveries (event_id, endpoint_id, subject, next_at)
      select t.id, t.endpoint_id, t.subject, t.at from ev_to t
      order by t.seq, t.endpoint_id)`;
}

/** The events as `eventsFrom`'s source: one JSON parameter, ids drawn here (uuidv7). */
function sourceOf(events: readonly NewOutgoingEvent[]): SQL {
  const rows = events.map((e, seq) => ({
    id: uuidv7(e.at.getTime()),
    seq,
    type: e.type,
    subject: e.subject,
    data: e.data,
    at: e.at.toISOString(),
    endpoint: e.endpoint ?? null,
  }));
  return sql`select v.id, v.seq, v.type, v.subject, v.data, v.at, v.endpoint
    from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
      as v(id uuid, seq bigint, type text, subject text, data jsonb, at timestamptz, endpoint text)`;
}

/** The CTEs that record `events`, for a statement the caller sends (after `with`). */
export function eventsCte(events: readonly NewOutgoingEvent[]): SQL {
  return eventsFrom(sourceOf(events));
}

/**
 * Writes `events` and their deliveries in one statement (none for an empty list); returns
 * how many events were written: those some enabled endpoint wanted, or that found the
 * endpoint they name.
 */
export async function recordEvents(tx: Tx, events: readonly NewOutgoingEvent[]): Promise<number> {
  if (events.length === 0) return 0;
  const [row] = await executePrepared<{ written: number | string }>(
    tx,
    sql`with ${eventsCte(events)} select (select count(*) from ev_out) as written`,
  );
  return Number(row?.written ?? 0);
}
