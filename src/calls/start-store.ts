/**
 * Started calls stored: their version pinned, messages, rows, first events and timers, and
 * their `call.started` events when an endpoint wants them (one statement more, then only).
 */
import { sql } from 'drizzle-orm';
import { executePrepared, type Tx } from '../db/client.ts';
import { type calls, flowVersions } from '../db/schema/index.ts';
import { recordEvents } from '../events/record.ts';
import { subscriptionsOf } from '../events/subscriptions.ts';
import type { EventData } from '../events/types.ts';
import type { CompiledFlow } from '../flows/index.ts';
import { storeMessages } from '../messages/submit.ts';
import { storeCompositions } from '../speech/spoken.ts';
import { runStartEffects } from './apply.ts';
import type { StartDeps } from './deps.ts';
import type { PreparedCall } from './start-prepare.ts';

/**
 * The flow version calls are pinned to (once per version), with the file's text it was
 * compiled from. A version stored before keeps the source it has: a conflict does nothing, so
 * concurrent starts never wait on the version's row (an edit that leaves the compiled form
 * alone, a comment, is the same version, and keeps the first text).
 */
export async function pinVersion(
  tx: Tx,
  compiled: CompiledFlow,
  source: string,
  now: Date,
): Promise<void> {
  await tx
    .insert(flowVersions)
    // created_at: the first call's start, on the clock its calls' own times come from
    .values({ flowId: compiled.id, version: compiled.version, compiled, source, createdAt: now })
    .onConflictDoNothing();
}

/** A new call's `call.started` event (src/events/types.ts). */
function startedEvent(row: typeof calls.$inferInsert & { id: string; createdAt: Date }) {
  const data: EventData<'call.started'> = {
    callId: row.id,
    flow: row.flowId,
    flowVersion: row.flowVersion,
    to: row.to,
    from: row.from,
    lang: row.lang,
    vars: row.vars as Record<string, unknown>,
    messageId: row.messageId!,
    at: row.createdAt.toISOString(),
  };
  return { type: 'call.started', subject: `call:${row.id}`, data, at: row.createdAt };
}

/** A new call's row: no outcome and no end yet. */
export type NewCall = Omit<typeof calls.$inferInsert, 'outcome' | 'endedAt'> & {
  id: string;
  messageId: string;
  createdAt: Date;
  updatedAt: Date;
};

/**
 * New calls inserted in one statement from one JSON parameter
 * (`jsonb_to_recordset`): a multi-row insert's fourteen parameters a call cost several times
 * more on both engines (test/calls/start-insert.test.ts holds it to that insert). The text is
 * the same for any number of calls, so it is prepared once.
 */
export async function insertCalls(tx: Tx, rows: readonly NewCall[]): Promise<void> {
  if (rows.length === 0) return;
  const values = JSON.stringify(
    rows.map((r) => ({
      id: r.id,
      flow_id: r.flowId,
      flow_version: r.flowVersion,
      to: r.to,
      from: r.from,
      lang: r.lang,
      vars: r.vars,
      snapshot: r.snapshot,
      state: r.state,
      message_id: r.messageId,
      created_at: r.createdAt,
      updated_at: r.updatedAt,
    })),
  );
  await executePrepared(
    tx,
    sql`insert into calls (id, flow_id, flow_version, "to", "from", lang, vars, state, snapshot,
                           message_id, created_at, updated_at)
        select v.id, v.flow_id, v.flow_version, v."to", v."from", v.lang, v.vars, v.state,
               v.snapshot, v.message_id, v.created_at, v.updated_at
        from rows from (
          jsonb_to_recordset(${values}::jsonb) as (id uuid, flow_id text, flow_version text,
            "to" text, "from" text, lang text, vars jsonb, snapshot jsonb, state text,
            message_id uuid, created_at timestamptz, updated_at timestamptz)
        ) with ordinality as v(id, flow_id, flow_version, "to", "from", lang, vars, snapshot,
                               state, message_id, created_at, updated_at, ord)
        order by v.ord`,
  );
}

/** A new call's timer, started at `now` (a `startTimer` effect). */
export interface StartedTimer {
  callId: string;
  timer: string;
  afterMs: number;
}

/**
 * New calls' timers and their `timer-started` events, in one statement from one JSON parameter,
 * the events in the timers' order (test/calls/start-insert.test.ts holds it to the plain
 * inserts).
 */
export async function insertStartedTimers(
  tx: Tx,
  timers: readonly StartedTimer[],
  now: Date,
): Promise<void> {
  if (timers.length === 0) return;
  const values = JSON.stringify(
    timers.map((t) => ({
      call_id: t.callId,
      timer: t.timer,
      fire_at: new Date(now.getTime() + t.afterMs),
      detail: { timer: t.timer, afterMs: t.afterMs },
    })),
  );
  await executePrepared(
    tx,
    sql`with v as (
          select * from rows from (
            jsonb_to_recordset(${values}::jsonb)
              as (call_id uuid, timer text, fire_at timestamptz, detail jsonb)
          ) with ordinality as v(call_id, timer, fire_at, detail, ord)),
        timers as (
          insert into call_timers (call_id, timer, fire_at)
          select call_id, timer, fire_at from v order by ord)
        insert into call_events (call_id, kind, detail, at)
        select call_id, 'timer-started', detail, ${now.toISOString()}::timestamptz
        from v order by ord`,
  );
}

/**
 * Stores prepared calls of one flow in a few set-based statements: their messages, events and
 * outbox rows, the call rows, and the first effects (the no-response timer).
 */
export async function storeCalls(
  tx: Tx,
  deps: StartDeps,
  compiled: CompiledFlow,
  items: { p: PreparedCall; input: { to: string; from: string } }[],
  now: Date,
) {
  const subs = subscriptionsOf(deps.db);
  await storeMessages(
    tx,
    items.map((i) => i.p.message),
    now,
    subs.wants('message.status'),
  );
  const rows: NewCall[] = items.map(({ p, input }) => ({
    id: p.id,
    flowId: compiled.id,
    flowVersion: compiled.version,
    to: input.to,
    from: input.from,
    lang: p.lang,
    vars: p.vars,
    state: 'queued',
    snapshot: p.snapshot,
    messageId: p.message.row.id!,
    createdAt: now,
    updatedAt: now,
  }));
  await insertCalls(tx, rows);
  const prompts = items.flatMap((i) => i.p.prompts);
  if (prompts.length > 0) await storeCompositions(tx, prompts);
  if (subs.wants('call.started')) await recordEvents(tx, rows.map(startedEvent));
  // a new call's only effects are timers: written in bulk; anything else goes the long way
  const timers: StartedTimer[] = [];
  for (const [n, { p }] of items.entries()) {
    const other = p.effects.filter((e) => e.type !== 'startTimer');
    if (other.length > 0) await runStartEffects(tx, deps, rows[n]!, other);
    for (const e of p.effects)
      if (e.type === 'startTimer')
        timers.push({ callId: p.id, timer: e.timer, afterMs: e.afterMs });
  }
  await insertStartedTimers(tx, timers, now);
}
