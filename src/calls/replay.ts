/**
 * Replay before release: the stored calls of a flow, played again through a changed flow.
 * Each call's inputs are rebuilt from its events (the keys pressed, silence, the statuses of
 * its message, the timers that fired) and run through the changed flow; what it would do is
 * compared with what the call actually did: its path (node, key), its outcome and its
 * follow-ups (type and rendered text). The report counts every call of the period and lists
 * the calls that would differ, and where their paths part.
 *
 * Calls are read a page at a time, one statement per page with their events aggregated.
 * Calls that cannot be replayed honestly are skipped and counted, with the reason: retention
 * removed some of their events or a follow-up's text, a follow-up message was erased, or the
 * changed flow refuses their vars or their language. An erasure deletes a person's calls
 * whole, so those are not in the report at all.
 *
 * @example
 * const loaded = parseFlowSource(draft, 'flows/appointment-reminder.yaml');
 * const report = await replayFlow(db, {
 *   flowId: 'appointment-reminder',
 *   compiled: loaded.compiled!,
 *   since: new Date(Date.now() - 7 * 86_400_000),
 * });
 * report.differing; // calls that would take another path, end otherwise or send otherwise
 */
import { setImmediate as nextTurn } from 'node:timers/promises';
import { sql } from 'drizzle-orm';
import { type Db, rowsOf } from '../db/client.ts';
import { createdIds } from '../db/created-within.ts';
import { AppError } from '../errors.ts';
import {
  type CompiledFlow,
  createFlowMachine,
  createSimulator,
  currentNode,
  type FlowEffect,
  type FlowEvent,
  type LoadedFlow,
  parseDuration,
  parseFlowSource,
  type RenderedMessage,
  resolveLanguage,
  type Simulation,
  startFlow,
  stepFlow,
  validateVars,
} from '../flows/index.ts';
import { isStorableInstant } from '../instants.ts';

/** Why a call was not replayed. */
export const REPLAY_SKIP_REASONS = [
  // retention removed some of its events: its inputs can no longer be rebuilt
  'events-removed',
  // retention removed the text of one of its follow-ups: nothing to compare it with
  'texts-removed',
  // one of its follow-up messages was erased (a DELETE /v1/subjects of its recipient)
  'erased',
  // a follow-up was refused when it was queued (too long, say): its text was never stored
  'follow-up-rejected',
  // a wrong-key step from a menu that did not tell silence from a key
  'input-unknown',
  // the changed flow refuses the call's vars (a new required param, another type)
  'vars-refused',
  // the changed flow does not speak the call's language
  'language-missing',
] as const;
export type ReplaySkipReason = (typeof REPLAY_SKIP_REASONS)[number];

/** One step of a path: the node and the node key whose actions ran (`1`, `wrong`). */
export interface ReplayStep {
  node: string;
  key: string;
  /** on a `wrong` step: `timeout` (silence) or the key pressed */
  input?: string;
}

export interface ReplayFollowUp {
  type: string;
  text: string | null;
}

/** One call whose replay differs from what it did. */
export interface ReplayedCall {
  id: string;
  flowVersion: string;
  createdAt: string;
  lang: string;
  /** what the caller did, in order: keys and `timeout` */
  inputs: string[];
  differs: Array<'path' | 'outcome' | 'followUps'>;
  path?: {
    before: ReplayStep[];
    after: ReplayStep[];
    /** the first step (1-based) where the paths part, with each side's step there (null: none) */
    partsAt: { step: number; before: ReplayStep | null; after: ReplayStep | null };
  };
  outcome?: { before: string | null; after: string | null };
  followUps?: { before: ReplayFollowUp[]; after: ReplayFollowUp[] };
  /** the changed flow's machine and provider menu disagree on this call (a compiler bug) */
  menuDifferences?: string[];
}

export interface ReplaySkip {
  id: string;
  reason: ReplaySkipReason;
  message: string;
}

export interface FlowReplayReport {
  flowId: string;
  /** the changed flow's version */
  version: string;
  since: string;
  until: string | null;
  /** calls of the period looked at: replayed + skipped */
  calls: number;
  replayed: number;
  same: number;
  differing: number;
  skipped: number;
  /** calls differing in each respect (a call can count in several) */
  differingBy: { path: number; outcome: number; followUps: number };
  skippedBy: Record<ReplaySkipReason, number>;
  /** outcomes of the replayed calls, as they were and as the changed flow gives them */
  outcomes: { before: Record<string, number>; after: Record<string, number> };
  /** calls replayed event by event in stored order (a status or timer came before a key) */
  inOrder: number;
  /** calls on which the changed flow's machine and menu disagree */
  menuMismatches: number;
  /** the differing calls, the first `maxItems` by id */
  items: ReplayedCall[];
  /** the skipped calls, the first `maxItems` by id */
  skippedCalls: ReplaySkip[];
  /** more differing or skipped calls than listed: the totals still count them all */
  truncated: boolean;
  /** `limit` stopped the replay before the end of the period */
  limited: boolean;
}

export interface ReplayFlowOptions {
  flowId: string;
  compiled: CompiledFlow;
  since: Date;
  until?: Date;
  /** at most this many calls (the oldest of the period first) */
  limit?: number;
  /** calls listed per list (default 200) */
  maxItems?: number;
}

/**
 * A replay period's bound: a time back from `now` (`30m`, `12h`, `7d`, `2w`) or an ISO 8601
 * time (`2025-03-01`, `2025-03-01T09:00:00Z`); null when it is neither.
 *
 * @example
 * replayTime('7d', new Date('2025-03-08T00:00:00Z')) // 2025-03-01T00:00:00.000Z
 */
export function replayTime(value: string, now: Date): Date | null {
  const ago = /^(\d{1,6})\s*([mhdw])$/.exec(value.trim());
  if (ago) {
    // the flow language's durations (parseDuration), and weeks: 2w is 14d
    const [, n, unit] = ago;
    const ms = unit === 'w' ? 7 * parseDuration(`${n}d`) : parseDuration(`${n}${unit}`);
    const at = now.getTime() - ms;
    return isStorableInstant(at) ? new Date(at) : null;
  }
  if (
    !/^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$/.test(
      value.trim(),
    )
  )
    return null;
  const at = new Date(value.trim());
  return isStorableInstant(at.getTime()) ? at : null;
}

/** What `since` and `until` may be, in words. */
export const REPLAY_TIME_RULE =
  'a time back from now (30m, 12h, 7d, 2w) or an ISO 8601 time, in years 0001 to 9999';

/**
 * The draft compiled as `flows/<id>.yaml`, or INVALID_FLOW with each error at file:line. Its
 * `assert:` section is left unchecked, as `flows simulate` and `flows test` leave it: a replay
 * shows what calls would do, whatever the flow claims about them (`flows validate` checks that).
 */
export function compileReplayDraft(
  id: string,
  source: string,
): LoadedFlow & { compiled: CompiledFlow } {
  const loaded = parseFlowSource(source, `flows/${id}.yaml`, { assertions: false });
  if (!loaded.compiled) {
    throw new AppError(
      'INVALID_FLOW',
      `the changed flow "${id}" does not compile`,
      loaded.errors.map((e) => ({
        path: 'source',
        code: e.rule,
        message: `${e.file}:${e.line}:${e.column} ${e.message}`,
      })),
    );
  }
  return loaded as LoadedFlow & { compiled: CompiledFlow };
}

/** The period of a replay from the request's words, or VALIDATION_ERROR naming the field. */
export function replayPeriod(
  input: { since: string; until?: string | undefined },
  now: Date,
): Pick<ReplayFlowOptions, 'since' | 'until'> {
  const bad = (path: string) =>
    new AppError('VALIDATION_ERROR', `${path}: must be ${REPLAY_TIME_RULE}`, [
      { path, code: 'INVALID_FORMAT', message: `must be ${REPLAY_TIME_RULE}` },
    ]);
  const since = replayTime(input.since, now);
  if (!since) throw bad('since');
  if (input.until === undefined) return { since };
  const until = replayTime(input.until, now);
  if (!until) throw bad('until');
  if (until <= since) {
    throw new AppError('VALIDATION_ERROR', 'until: must be after since', [
      { path: 'until', code: 'INVALID_VALUE', message: 'must be after since' },
    ]);
  }
  return { since, until };
}

/** The key used in outcome counts for a call without an outcome. */
export const NO_OUTCOME = '(none)';

const PAGE = 500;
/**
 * Calls replayed between two turns of the event loop: a replay is CPU work on the server that
 * also answers the provider's webhooks, which must not wait behind a whole page.
 */
const CALLS_PER_TURN = 25;
const MAX_ITEMS = 200;

/** One stored event as the page's query aggregates it. */
interface StoredEvent {
  kind: string;
  node: string | null;
  key: string | null;
  detail: Record<string, unknown> | null;
  /** follow-ups only: the message's type and text, whether it exists and lost its texts */
  type: string | null;
  text: string | null;
  found: boolean;
  removed: boolean;
}

interface StoredCall {
  id: string;
  flow_version: string;
  to: string;
  from: string;
  lang: string;
  vars: Record<string, unknown>;
  outcome: string | null;
  created_at: string | Date;
  path_len: number;
  status_len: number;
  /** retention removed the texts of the call's own message: it has reached this call */
  call_removed: boolean;
  /** the call's follow-up messages still stored (an erasure deletes some) */
  follow_up_count: number;
  events: StoredEvent[];
}

/**
 * One page of the flow's calls after `after` (by id), with their events in order. Call ids
 * are UUIDv7 of their start, so the period is also a range of the (flow_id, id) index
 * (src/db/created-within.ts): at both ends, or the last page would read every later call.
 */
async function readPage(
  db: Db,
  flowId: string,
  range: { since: Date; until: Date | undefined },
  after: string,
  size: number,
): Promise<StoredCall[]> {
  const until = range.until;
  const ids = createdIds(range.since, until);
  const result = await db.execute(sql`
    select c.id, c.flow_version, c."to", c."from", c.lang, c.vars, c.outcome, c.created_at,
      coalesce(jsonb_array_length(c.snapshot->'context'->'path'), 0) as path_len,
      coalesce(jsonb_array_length(c.snapshot->'context'->'statuses'), 0) as status_len,
      exists (select 1 from messages cm
        where cm.id = c.message_id and cm.content_removed_at is not null) as call_removed,
      (select count(*) from messages fm
        where fm.call_id = c.id and fm.role = 'follow-up') as follow_up_count,
      coalesce((
        select jsonb_agg(jsonb_build_object(
            'kind', e.kind, 'node', e.node, 'key', e.key, 'detail', e.detail,
            'type', m.type, 'text', m.payload->>'text', 'found', m.id is not null,
            'removed', m.content_removed_at is not null)
          order by e.id)
        from call_events e
        left join message_customer_ids k
          on e.kind = 'follow-up' and k.customer_message_id = e.detail->>'customerMessageId'
        left join messages m on m.id = k.message_id
        where e.call_id = c.id
          and e.kind in ('key', 'status', 'timer-fired', 'follow-up', 'follow-up-rejected',
            'outcome')
      ), '[]'::jsonb) as events
    from calls c
    where c.flow_id = ${flowId}
      and c.id > ${after}::uuid
      and c.id >= ${ids.from}::uuid
      and c.created_at >= ${range.since.toISOString()}::timestamptz
      ${until ? sql`and c.id < ${ids.below}::uuid and c.created_at < ${until.toISOString()}::timestamptz` : sql``}
    order by c.id
    limit ${size}`);
  return rowsOf<StoredCall>(result).map((r) => ({
    ...r,
    path_len: Number(r.path_len),
    status_len: Number(r.status_len),
    follow_up_count: Number(r.follow_up_count),
    events: typeof r.events === 'string' ? JSON.parse(r.events) : r.events,
    vars: typeof r.vars === 'string' ? JSON.parse(r.vars) : r.vars,
  }));
}

const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);

/** What a stored call did and what it was given, or why it cannot be replayed. */
type Rebuilt =
  | { skip: ReplaySkipReason; message: string }
  | {
      skip?: undefined;
      inputs: string[];
      statuses: string[];
      timers: string[];
      /** the stored order of the inputs, statuses and timers */
      sequence: FlowEvent[];
      path: ReplayStep[];
      followUps: ReplayFollowUp[];
    };

function rebuild(call: StoredCall): Rebuilt {
  // Retention takes events, and the texts of messages, older than one cutoff: once the call's
  // own message lost its texts, the call's older events are gone (or going), including those
  // the counts below can miss (a timer that fired on a call with no status, key or outcome).
  if (call.call_removed) {
    return {
      skip: 'events-removed',
      message: "retention reached this call (its call message's texts were removed)",
    };
  }
  const inputs: string[] = [];
  const statuses: string[] = [];
  const timers: string[] = [];
  const sequence: FlowEvent[] = [];
  const path: ReplayStep[] = [];
  const followUps: ReplayFollowUp[] = [];
  let outcomes = 0;
  let followUpEvents = 0;
  for (const e of call.events) {
    if (e.kind === 'outcome') {
      outcomes++;
      continue;
    }
    if (e.kind === 'follow-up') followUpEvents++;
    if (e.kind === 'key' && e.node && e.key) {
      // a handled key is its own input; a `wrong` step keeps what the caller did
      const input = e.key === 'wrong' ? str(e.detail?.input) : e.key;
      if (input === null || input === 'wrong') {
        return {
          skip: 'input-unknown',
          message: `step ${path.length + 1} at ${e.node}: a menu that did not tell silence from a key`,
        };
      }
      inputs.push(input);
      sequence.push({ type: 'KEY', node: e.node, key: input });
      path.push(
        e.key === 'wrong' ? { node: e.node, key: e.key, input } : { node: e.node, key: e.key },
      );
    } else if (e.kind === 'status') {
      const status = str(e.detail?.status);
      if (status) {
        statuses.push(status);
        sequence.push({ type: 'STATUS', status });
      }
    } else if (e.kind === 'timer-fired') {
      const timer = str(e.detail?.timer);
      if (timer) {
        timers.push(timer);
        sequence.push({ type: 'TIMER', timer });
      }
    } else if (e.kind === 'follow-up-rejected') {
      return {
        skip: 'follow-up-rejected',
        message: `follow-up ${str(e.detail?.id) ?? ''} was refused when queued; its text was never stored`,
      };
    } else if (e.kind === 'follow-up') {
      if (!e.found)
        return { skip: 'erased', message: `follow-up ${str(e.detail?.id) ?? ''} was erased` };
      if (e.removed)
        return {
          skip: 'texts-removed',
          message: `retention removed the text of follow-up ${str(e.detail?.id) ?? ''}`,
        };
      followUps.push({ type: e.type ?? '', text: e.text });
    }
  }
  // The call row keeps the machine's context (path, statuses seen): fewer stored events than
  // it counts means retention removed the oldest of them. Retention goes oldest first, and a
  // call's fired timer comes after its statuses, so a removed timer shows here too.
  // The same for what a removed timer did: its outcome (kept on the row) and its follow-ups
  // (kept as messages) without their events.
  const seen = new Set(statuses);
  if (
    path.length < call.path_len ||
    seen.size < call.status_len ||
    (call.outcome !== null && outcomes === 0) ||
    followUpEvents < call.follow_up_count
  ) {
    return {
      skip: 'events-removed',
      message: `retention removed some of its events (${path.length} of ${call.path_len} steps, ${seen.size} of ${call.status_len} statuses, ${followUpEvents} of ${call.follow_up_count} follow-ups kept${call.outcome !== null && outcomes === 0 ? ', its outcome event gone' : ''})`,
    };
  }
  return { inputs, statuses, timers, sequence, path, followUps };
}

const followUpOf = (m: RenderedMessage): ReplayFollowUp => ({ type: m.type, text: m.text ?? null });

/**
 * True when the simulator's order (keys, then statuses, then timers) could change what the
 * call does: a status the flow reacts to, or a timer, came before a key, or a timer before
 * a status (a failing status cancels the timer). Most calls have their statuses before their
 * keys, and most flows react only to failing statuses, which end a call before any key.
 */
function orderMatters(compiled: CompiledFlow, sequence: FlowEvent[]): boolean {
  const reacts = new Set(Object.keys(compiled.on.statuses));
  let laterKey = false;
  let laterStatus = false;
  for (let i = sequence.length - 1; i >= 0; i--) {
    const e = sequence[i]!;
    if (e.type === 'KEY') laterKey = true;
    else if (e.type === 'STATUS') {
      if (laterKey && reacts.has(e.status)) return true;
      laterStatus = true;
    } else if (laterKey || laterStatus) return true;
  }
  return false;
}

/** The changed flow's outcome and follow-ups with every event in its stored order. */
function inOrder(
  machine: ReturnType<typeof createFlowMachine>,
  call: StoredCall,
  vars: Record<string, unknown>,
  lang: string,
  sequence: FlowEvent[],
): { outcome: string | null; followUps: ReplayFollowUp[] } {
  let { snapshot, effects } = startFlow(machine, { vars, lang, to: call.to, from: call.from });
  const all: FlowEffect[] = [...effects];
  for (const event of sequence) {
    let e = event;
    if (e.type === 'KEY') {
      const node = currentNode(snapshot);
      if (node === null) continue;
      e = { type: 'KEY', node, key: e.key };
    }
    const step = stepFlow(machine, snapshot, e);
    if (!step.handled) continue;
    ({ snapshot, effects } = step);
    all.push(...effects);
  }
  const followUps = all.flatMap((x) => (x.type === 'send' ? [followUpOf(x.message)] : []));
  return { outcome: snapshot.context.outcome, followUps };
}

const sameSteps = (a: ReplayStep | undefined, b: ReplayStep | undefined) =>
  a !== undefined && b !== undefined && a.node === b.node && a.key === b.key;

const followUpKey = (f: ReplayFollowUp) => JSON.stringify([f.type, f.text]);

/** Follow-ups compared as a list in a stable order: reactions may come before or after keys. */
const sortedFollowUps = (list: ReplayFollowUp[]) =>
  [...list].sort((a, b) => followUpKey(a).localeCompare(followUpKey(b)));

function count(map: Record<string, number>, key: string | null): void {
  const k = key ?? NO_OUTCOME;
  map[k] = (map[k] ?? 0) + 1;
}

/**
 * Replays the flow's stored calls of a period through a changed flow (see the module doc).
 *
 * @example
 * const report = await replayFlow(db, { flowId, compiled, since: new Date('2025-03-01') });
 * for (const c of report.items) console.log(c.id, c.differs, c.outcome);
 */
export async function replayFlow(db: Db, opts: ReplayFlowOptions): Promise<FlowReplayReport> {
  const { compiled } = opts;
  const maxItems = opts.maxItems ?? MAX_ITEMS;
  const report: FlowReplayReport = {
    flowId: opts.flowId,
    version: compiled.version,
    since: opts.since.toISOString(),
    until: opts.until?.toISOString() ?? null,
    calls: 0,
    replayed: 0,
    same: 0,
    differing: 0,
    skipped: 0,
    differingBy: { path: 0, outcome: 0, followUps: 0 },
    skippedBy: Object.fromEntries(REPLAY_SKIP_REASONS.map((r) => [r, 0])) as Record<
      ReplaySkipReason,
      number
    >,
    outcomes: { before: {}, after: {} },
    inOrder: 0,
    menuMismatches: 0,
    items: [],
    skippedCalls: [],
    truncated: false,
    limited: false,
  };
  const machine = createFlowMachine(compiled);
  const skip = (id: string, reason: ReplaySkipReason, message: string) => {
    report.skipped++;
    report.skippedBy[reason]++;
    if (report.skippedCalls.length < maxItems) report.skippedCalls.push({ id, reason, message });
    else report.truncated = true;
  };
  const limit = opts.limit ?? Number.POSITIVE_INFINITY;
  const range = { since: opts.since, until: opts.until };
  let after = '00000000-0000-0000-0000-000000000000';
  for (;;) {
    const size = Math.min(PAGE, limit - report.calls);
    if (size <= 0) {
      // one call more would tell whether the limit cut the period short
      report.limited = (await readPage(db, opts.flowId, range, after, 1)).length > 0;
      break;
    }
    const page = await readPage(db, opts.flowId, range, after, size);
    if (page.length === 0) break;
    after = page[page.length - 1]!.id;
    // A simulator per page: its caches are keyed by each call's vars, which calls rarely
    // share, and a rendered menu weighs tens of kilobytes; per page, memory stays bounded.
    const simulate = createSimulator(compiled);
    for (const [i, call] of page.entries()) {
      if (i > 0 && i % CALLS_PER_TURN === 0) await nextTurn();
      report.calls++;
      const rebuilt = rebuild(call);
      if (rebuilt.skip) {
        skip(call.id, rebuilt.skip, rebuilt.message);
        continue;
      }
      const checked = validateVars(compiled, call.vars);
      if (!checked.ok) {
        const why = checked.details.map((d) => `${d.path}: ${d.message}`).join('; ');
        skip(call.id, 'vars-refused', `the changed flow refuses its vars (${why})`);
        continue;
      }
      let lang: string;
      try {
        lang = resolveLanguage(compiled, call.lang);
      } catch (e) {
        if (!(e instanceof AppError)) throw e;
        skip(call.id, 'language-missing', e.message);
        continue;
      }
      let sim: Simulation;
      try {
        sim = simulate({
          keys: rebuilt.inputs,
          vars: checked.vars,
          lang,
          to: call.to,
          from: call.from,
          statuses: rebuilt.statuses,
          timers: rebuilt.timers,
        });
      } catch (e) {
        if (!(e instanceof AppError)) throw e;
        skip(
          call.id,
          e.code === 'INVALID_LANGUAGE' ? 'language-missing' : 'vars-refused',
          e.message,
        );
        continue;
      }
      report.replayed++;
      const afterPath: ReplayStep[] = sim.machine.path.map((s) =>
        s.input !== undefined
          ? { node: s.node, key: s.key, input: s.input }
          : { node: s.node, key: s.key },
      );
      let outcome = sim.outcome;
      let followUps = [
        ...sim.machine.sends.map((s) => followUpOf(s.message)),
        ...sim.reactions.flatMap((x) => (x.type === 'send' ? [followUpOf(x.message)] : [])),
      ];
      if (orderMatters(compiled, rebuilt.sequence)) {
        report.inOrder++;
        ({ outcome, followUps } = inOrder(machine, call, checked.vars, lang, rebuilt.sequence));
      }
      count(report.outcomes.before, call.outcome);
      count(report.outcomes.after, outcome);
      if (!sim.agree) report.menuMismatches++;

      const item: ReplayedCall = {
        id: call.id,
        flowVersion: call.flow_version,
        createdAt: new Date(call.created_at).toISOString(),
        lang: call.lang,
        inputs: rebuilt.inputs,
        differs: [],
      };
      const before = rebuilt.path;
      const parts = Array.from(
        { length: Math.max(before.length, afterPath.length) },
        (_, i) => i,
      ).find((i) => !sameSteps(before[i], afterPath[i]));
      if (parts !== undefined) {
        item.differs.push('path');
        report.differingBy.path++;
        item.path = {
          before,
          after: afterPath,
          partsAt: {
            step: parts + 1,
            before: before[parts] ?? null,
            after: afterPath[parts] ?? null,
          },
        };
      }
      if (outcome !== call.outcome) {
        item.differs.push('outcome');
        report.differingBy.outcome++;
        item.outcome = { before: call.outcome, after: outcome };
      }
      const was = sortedFollowUps(rebuilt.followUps);
      const now = sortedFollowUps(followUps);
      if (JSON.stringify(was) !== JSON.stringify(now)) {
        item.differs.push('followUps');
        report.differingBy.followUps++;
        item.followUps = { before: was, after: now };
      }
      if (!sim.agree) item.menuDifferences = sim.differences;
      // a menu mismatch alone is counted (menuMismatches), not listed: the call is the same
      if (item.differs.length === 0) {
        report.same++;
        continue;
      }
      report.differing++;
      if (report.items.length < maxItems) report.items.push(item);
      else report.truncated = true;
    }
    if (page.length < size) break;
  }
  return report;
}
