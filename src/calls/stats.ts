/**
 * The flows' aggregate counters (`flow_stats`), per flow, version and language: counted in
 * memory per transaction, written in key order so that concurrent transactions queue for the
 * rows every call of a flow updates instead of deadlocking on them.
 *
 * @example
 * const counts: StatCounts = new Map();
 * countStats(counts, { flowId: 'survey', version: 'a3f1c2d4e5f60718', lang: 'en' }, [{ metric: 'visit', subject: 'main' }]);
 * await tx.execute(flowStatsUpsert(counts));
 */
import { type SQL, sql } from 'drizzle-orm';
import type { Tx } from '../db/client.ts';

export type StatEntry = { metric: string; subject: string; key?: string };

/** Whose counters: a call's flow, its pinned version and its language. */
export interface StatScope {
  flowId: string;
  version: string;
  lang: string;
}

/**
 * What ran a node's `wrong` actions, counted per node: `timeout` (silence) or the key the
 * node does not handle. The `key` metric counts them together as `wrong`, the diagram's edge.
 */
export const WRONG_INPUT_METRIC = 'wrong-input';

/** counts to add, by flow, version, language, metric, subject and key */
export type StatCounts = Map<
  string,
  {
    flowId: string;
    version: string;
    lang: string;
    metric: string;
    subject: string;
    key: string;
    count: number;
  }
>;

export function countStats(into: StatCounts, scope: StatScope, entries: StatEntry[]): void {
  const { flowId, version, lang } = scope;
  for (const e of entries) {
    const key = e.key ?? '';
    const k = `${flowId}\u0000${version}\u0000${lang}\u0000${e.metric}\u0000${e.subject}\u0000${key}`;
    const hit = into.get(k);
    if (hit) hit.count++;
    else
      into.set(k, { flowId, version, lang, metric: e.metric, subject: e.subject, key, count: 1 });
  }
}

/** The counts as `flowStatsUpsert` reads them, in key order (the same order for every writer). */
function statRows(counts: StatCounts): string {
  return JSON.stringify(
    [...counts.entries()]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([, m], seq) => ({
        seq,
        flow_id: m.flowId,
        version: m.version,
        lang: m.lang,
        metric: m.metric,
        subject: m.subject,
        key: m.key,
        count: m.count,
      })),
  );
}

/** Adds the counts to the flows' counters: a statement, or the body of a CTE. */
export function flowStatsUpsert(counts: StatCounts): SQL {
  return sql`
  insert into flow_stats (flow_id, version, lang, metric, subject, key, count)
  select v.flow_id, v.version, v.lang, v.metric, v.subject, v.key, v.count
  from jsonb_to_recordset(${statRows(counts)}::jsonb)
    as v(seq int, flow_id text, version text, lang text, metric text, subject text, key text, count bigint)
  order by v.seq
  on conflict (flow_id, version, lang, metric, subject, key) do update set count = flow_stats.count + excluded.count`;
}

/**
 * Adds to the flows' aggregate counters at once, in one statement (kept apart from personal
 * data): each item's entries under its own scope (a batch's calls differ in language).
 */
export async function bumpStats(
  tx: Tx,
  items: { scope: StatScope; entries: StatEntry[] }[],
): Promise<void> {
  const counts: StatCounts = new Map();
  for (const { scope, entries } of items) countStats(counts, scope, entries);
  if (counts.size > 0) await tx.execute(flowStatsUpsert(counts));
}
