/**
 * Reading calls back: one call with its path, messages and timeline; lists; flow statistics.
 *
 * @example
 * const call = await getCall(db, id);
 * call.path // [{ menu: 'main', attempt: 1, key: '1', at: '...' }]
 */
import {
  and,
  asc,
  count,
  desc,
  eq,
  getTableColumns,
  gte,
  inArray,
  lt,
  type SQL,
} from 'drizzle-orm';
import { z } from 'zod';
import type { Db, Queryable } from '../db/client.ts';
import { createdIds, createdWithin } from '../db/created-within.ts';
import {
  type CallRow,
  callEvents,
  callRecipients,
  calls,
  flowStats,
  messages,
} from '../db/schema/index.ts';
import { AppError } from '../errors.ts';
import { isUuid } from '../ids.ts';
import { decodeCursor, encodeCursor } from '../messages/read.ts';
import { CALL_STATES, LIVE_CALL_STATES } from './deps.ts';
import { WRONG_INPUT_METRIC } from './stats.ts';

export const CallPathStep = z
  .object({
    node: z
      .string()
      .meta({ description: 'the unrolled menu node (a retry or revisit has its own)' }),
    menu: z.string().meta({ example: 'main' }),
    attempt: z
      .number()
      .int()
      .meta({ description: '1 for the first play, 2 for the first retry, ...' }),
    key: z.string().meta({
      example: '1',
      description: 'the key whose actions ran: one the menu handles, or `wrong`',
    }),
    input: z.string().optional().meta({
      example: 'timeout',
      description:
        'on a `wrong` step, what the caller did: `timeout` (silence) or the key pressed that this menu does not handle (`7`). Absent on other steps (`key` is the input), and on `wrong` steps of calls whose menu did not yet tell the two apart',
    }),
    at: z.string(),
  })
  .meta({ id: 'CallPathStep' });

export const CallMessage = z
  .object({
    id: z.string(),
    customerMessageId: z.string(),
    role: z.enum(['call', 'follow-up']),
    type: z.string(),
    to: z.string(),
    status: z.string(),
    deliveredVia: z.string().nullable(),
    createdAt: z.string(),
  })
  .meta({ id: 'CallMessage' });

export const CallTimelineEvent = z
  .object({
    kind: z.string().meta({
      description:
        'key, outcome, follow-up, follow-up-rejected, webhook, notify, notify-skipped (no enabled endpoint has the name: detail.reason), hangup, status, held, ignored, timer-started, timer-cancelled, timer-fired',
    }),
    at: z.string(),
    node: z.string().nullable(),
    key: z.string().nullable(),
    detail: z.unknown().optional(),
  })
  .meta({ id: 'CallTimelineEvent' });

export const CallSummary = z
  .object({
    id: z.string(),
    flow: z.string(),
    flowVersion: z.string(),
    to: z.string(),
    from: z.string(),
    lang: z.string(),
    state: z.enum(CALL_STATES),
    outcome: z.string().nullable(),
    createdAt: z.string(),
    updatedAt: z.string(),
    endedAt: z.string().nullable(),
  })
  .meta({ id: 'CallSummary' });
export type CallSummary = z.infer<typeof CallSummary>;

export const CallView = CallSummary.extend({
  vars: z.record(z.string(), z.unknown()),
  /** where the machine is waiting now (null once the menu ended) */
  node: z.string().nullable(),
  path: z.array(CallPathStep),
  messages: z.array(CallMessage),
  timeline: z.array(CallTimelineEvent),
}).meta({ id: 'Call' });
export type CallView = z.infer<typeof CallView>;

export const CallList = z
  .object({ items: z.array(CallSummary), nextCursor: z.string().nullable() })
  .meta({ id: 'CallList' });

function toSummary(row: CallRow): CallSummary {
  return {
    id: row.id,
    flow: row.flowId,
    flowVersion: row.flowVersion,
    to: row.to,
    from: row.from,
    lang: row.lang,
    state: row.state as CallSummary['state'],
    outcome: row.outcome,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
    endedAt: row.endedAt?.toISOString() ?? null,
  };
}

/** The caller's input a key event's detail records (on a `wrong` step). */
function inputOf(detail: unknown): string | undefined {
  const input = (detail as { input?: unknown } | null)?.input;
  return typeof input === 'string' ? input : undefined;
}

async function readCall(tx: Queryable, id: string): Promise<CallView> {
  const [row] = isUuid(id) ? await tx.select().from(calls).where(eq(calls.id, id)) : [];
  if (!row) throw new AppError('NOT_FOUND', `no call with id "${id}"`);
  const events = await tx
    .select()
    .from(callEvents)
    .where(eq(callEvents.callId, id))
    .orderBy(asc(callEvents.at), asc(callEvents.id));
  const msgs = await tx
    .select()
    .from(messages)
    .where(eq(messages.callId, id))
    .orderBy(asc(messages.id));
  const snapshot = row.snapshot as { value?: unknown };
  return {
    ...toSummary(row),
    vars: row.vars as Record<string, unknown>,
    node: typeof snapshot.value === 'string' && snapshot.value !== '$end' ? snapshot.value : null,
    path: events
      .filter((e) => e.kind === 'key')
      .map((e) => {
        const input = inputOf(e.detail);
        return {
          node: e.node!,
          menu: e.menu!,
          attempt: e.attempt ?? 1,
          key: e.key!,
          ...(input !== undefined && { input }),
          at: e.at.toISOString(),
        };
      }),
    messages: msgs.map((m) => ({
      id: m.id,
      customerMessageId: m.customerMessageId,
      role: m.role === 'call' ? 'call' : 'follow-up',
      type: m.type,
      to: m.to,
      status: m.status,
      deliveredVia: m.deliveredVia,
      createdAt: m.createdAt.toISOString(),
    })),
    timeline: events.map((e) => ({
      kind: e.kind,
      at: e.at.toISOString(),
      node: e.node,
      key: e.key,
      ...(e.detail != null && { detail: e.detail }),
    })),
  };
}

/** One call, read in one snapshot (its state agrees with its timeline). */
export async function getCall(db: Db, id: string): Promise<CallView> {
  return db.transaction((tx) => readCall(tx, id), {
    isolationLevel: 'repeatable read',
    accessMode: 'read only',
  });
}

export interface CallFilter {
  flow?: string | undefined;
  to?: string | undefined;
  state?: string | undefined;
  outcome?: string | undefined;
  since?: Date | undefined;
  limit?: number | undefined;
  cursor?: string | undefined;
}

/**
 * Newest first, keyset pages by id (UUIDv7). By phone number the page walks `call_recipients`
 * (its key ends in the call id, so the cursor and a time span bound that walk) and reads each
 * call by id.
 */
export async function listCalls(db: Queryable, filter: CallFilter) {
  const limit = filter.limit ?? 50;
  const id = filter.to ? callRecipients.callId : calls.id;
  const where: SQL[] = [];
  if (filter.flow) where.push(eq(calls.flowId, filter.flow));
  if (filter.to) where.push(eq(callRecipients.to, filter.to));
  if (filter.state) where.push(eq(calls.state, filter.state));
  if (filter.outcome) where.push(eq(calls.outcome, filter.outcome));
  // the id bounds on both sides of the join: either can be walked by its key
  where.push(...createdWithin(calls, filter.since, undefined));
  const from = filter.since && createdIds(filter.since, undefined).from;
  if (filter.to && from) where.push(gte(callRecipients.callId, from));
  if (filter.cursor) {
    const below = decodeCursor(filter.cursor);
    where.push(lt(calls.id, below));
    if (filter.to) where.push(lt(callRecipients.callId, below));
  }
  const all = db.select(getTableColumns(calls)).from(calls).$dynamic();
  const rows = await (filter.to
    ? all.innerJoin(callRecipients, eq(callRecipients.callId, calls.id))
    : all
  )
    .where(and(...where))
    .orderBy(desc(id))
    .limit(limit + 1);
  const page = rows.slice(0, limit);
  return {
    items: page.map(toSummary),
    nextCursor: rows.length > limit && page.length > 0 ? encodeCursor(page.at(-1)!.id) : null,
  };
}

export const FlowStats = z
  .object({
    flow: z.string(),
    started: z.number().int(),
    nodes: z.record(
      z.string(),
      z.object({
        visits: z.number().int(),
        keys: z.record(z.string(), z.number().int()),
        wrongInputs: z.record(z.string(), z.number().int()).optional().meta({
          description:
            "what ran the node's `wrong` actions (`keys.wrong`): `timeout` (silence) and each key it does not handle; absent when none was recorded (calls whose menu did not yet tell them apart count in `keys.wrong` only)",
        }),
        hangups: z.number().int(),
      }),
    ),
    failures: z.record(z.string(), z.number().int()),
    outcomes: z.record(z.string(), z.number().int()),
  })
  .meta({ id: 'FlowStats' });
export type FlowStats = z.infer<typeof FlowStats>;

/** Which counters `flowStatsOf` adds up: a version, a language, or both (all when absent). */
export interface FlowStatsFilter {
  version?: string | undefined;
  lang?: string | undefined;
}

/** A `flow_stats` row as `foldFlowStats` reads it. */
export type FlowStatRow = Pick<
  typeof flowStats.$inferSelect,
  'metric' | 'subject' | 'key' | 'count'
>;

/**
 * Adds counter rows up into the API's shape. Several rows can hold one counter (a version's
 * languages, the versions of a flow): each adds, none replaces another.
 */
export function foldFlowStats(flowId: string, rows: Iterable<FlowStatRow>): FlowStats {
  const out: FlowStats = { flow: flowId, started: 0, nodes: {}, failures: {}, outcomes: {} };
  const node = (id: string) => {
    out.nodes[id] ??= { visits: 0, keys: {}, hangups: 0 };
    return out.nodes[id];
  };
  const add = (into: Record<string, number>, name: string, n: number) => {
    into[name] = (into[name] ?? 0) + n;
  };
  for (const r of rows) {
    switch (r.metric) {
      case 'started':
        out.started += r.count;
        break;
      case 'visit':
        node(r.subject).visits += r.count;
        break;
      case 'key':
        add(node(r.subject).keys, r.key, r.count);
        break;
      case WRONG_INPUT_METRIC: {
        const n = node(r.subject);
        n.wrongInputs ??= {};
        add(n.wrongInputs, r.key, r.count);
        break;
      }
      case 'hangup':
        node(r.subject).hangups += r.count;
        break;
      case 'failure':
        add(out.failures, r.subject, r.count);
        break;
      case 'outcome':
        add(out.outcomes, r.subject, r.count);
        break;
    }
  }
  return out;
}

/**
 * GET /v1/flows/{id}/stats: the aggregate counters (they outlive retention and erasure), of
 * every version and language unless the filter names one. Counts made before versions and
 * languages were kept apart have version and language '' and are only in the unfiltered sum.
 */
export async function flowStatsOf(
  db: Queryable,
  flowId: string,
  filter: FlowStatsFilter = {},
): Promise<FlowStats> {
  const where = [eq(flowStats.flowId, flowId)];
  if (filter.version !== undefined) where.push(eq(flowStats.version, filter.version));
  if (filter.lang !== undefined) where.push(eq(flowStats.lang, filter.lang));
  const rows = await db
    .select({
      metric: flowStats.metric,
      subject: flowStats.subject,
      key: flowStats.key,
      count: flowStats.count,
    })
    .from(flowStats)
    .where(and(...where));
  return foldFlowStats(flowId, rows);
}

/**
 * How many calls are in each state not over yet (the calls gauge of /metrics), every one of
 * LIVE_CALL_STATES with its count, 0 included. Read through the partial index of those states,
 * so a scrape costs the calls in flight, not every call ever made.
 */
export async function callsByState(db: Queryable): Promise<{ state: string; count: number }[]> {
  const rows = await db
    .select({ state: calls.state, n: count() })
    .from(calls)
    .where(inArray(calls.state, [...LIVE_CALL_STATES]))
    .groupBy(calls.state);
  const n = new Map(rows.map((r) => [r.state, Number(r.n)]));
  return LIVE_CALL_STATES.map((state) => ({ state, count: n.get(state) ?? 0 }));
}
