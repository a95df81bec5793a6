/**
 * A flow's history: the versions Switchboard ran (`flow_versions`, each with the file's text
 * it was compiled from), the current file's version even before a call ran on it, and two
 * versions compared: their sources as a unified diff, their compiled menus node by node, and
 * their counters side by side, in total and per language, with the rates a person reads.
 *
 * @example
 * const list = await listFlowVersions(db, 'appointment-reminder', await flows.get('appointment-reminder'));
 * const diff = await diffFlowVersions(db, 'appointment-reminder', list.items[1].version, 'current', loaded);
 * diff.stats.outcomes.confirmed // { from: { count: 40, share: 0.4 }, to: { count: 55, share: 0.5 } }
 */
import { createTwoFilesPatch, structuredPatch } from 'diff';
import { and, desc, eq, inArray, max, sql } from 'drizzle-orm';
import { z } from 'zod';
import type { Queryable } from '../db/client.ts';
import { calls, flowStats, flowVersions } from '../db/schema/index.ts';
import { AppError } from '../errors.ts';
import type { CompiledFlow, LoadedFlow } from '../flows/index.ts';
import { diffCompiledMenus, type MenuDiff } from '../flows/menu-diff.ts';
import { type FlowStatRow, type FlowStats, foldFlowStats } from './read.ts';

// a flow version: its compiled form's hash (compile.ts: 16 hex digits)
const HASH = '[0-9a-f]{16}';
export const FLOW_VERSION_HASH = new RegExp(`^${HASH}$`);

/** What a version is asked by: its hash, or `current` (the file's). */
export const FLOW_VERSION_PATTERN = new RegExp(`^(${HASH}|current)$`);

export const FlowVersionItem = z
  .object({
    version: z.string().meta({ example: '3f9a1c0b7d2e4f68' }),
    current: z.boolean().meta({ description: "the flow file's version now" }),
    runs: z.boolean().meta({
      description: 'whether a call ran on it (false: the current file, no call started on it yet)',
    }),
    firstRunAt: z.iso
      .datetime()
      .nullable()
      .meta({ description: 'when the first call started on it; null when none did' }),
    lastCallAt: z.iso.datetime().nullable().meta({
      description:
        'when the newest call kept on it started (retention removes old calls); null when none is kept',
    }),
    started: z.number().int().meta({ description: 'calls started on it' }),
    outcomes: z
      .record(z.string(), z.number().int())
      .meta({ description: 'calls that reached each outcome' }),
    hasSource: z.boolean().meta({
      description: "whether its file's text is kept (versions run before it was kept have none)",
    }),
  })
  .meta({ id: 'FlowVersionItem' });
export type FlowVersionItem = z.infer<typeof FlowVersionItem>;

export const FlowVersionList = z
  .object({
    flow: z.string(),
    current: z
      .string()
      .nullable()
      .meta({ description: "the file's version; null when it does not compile or is gone" }),
    items: z.array(FlowVersionItem).meta({ description: 'newest first' }),
    unversioned: z.object({ started: z.number().int() }).meta({
      description: 'calls counted before counters were kept per version (in no item)',
    }),
  })
  .meta({ id: 'FlowVersionList' });
export type FlowVersionList = z.infer<typeof FlowVersionList>;

export const FlowVersionDetail = z
  .object({
    flow: z.string(),
    version: z.string(),
    current: z.boolean(),
    firstRunAt: z.iso.datetime().nullable(),
    source: z.string().nullable().meta({ description: "the file's text; null when not kept" }),
    title: z.string().nullable(),
    menus: z.array(z.string()).meta({ description: 'menus as written in the file' }),
    languages: z.array(z.string()),
    params: z.record(z.string(), z.object({ type: z.string(), optional: z.boolean() }).loose()),
    menuCount: z.number().int().meta({ description: 'provider menus after unrolling' }),
    nodes: z.array(z.string()).meta({ description: 'unrolled node ids in provider menu order' }),
  })
  .meta({ id: 'FlowVersionDetail' });
export type FlowVersionDetail = z.infer<typeof FlowVersionDetail>;

const Count = z
  .object({
    count: z.number().int(),
    share: z
      .number()
      .nullable()
      .meta({ description: 'count / calls started, 0 to 1; null when none started' }),
  })
  .meta({ id: 'FlowStatShare' });
const Sides = <T extends z.ZodType>(side: T) => z.object({ from: side, to: side });

const NodeFigures = z
  .object({
    visits: z.number().int(),
    keys: z.record(z.string(), z.number().int()),
    hangups: z.number().int(),
    hangupsPerVisit: z.number().nullable().meta({ description: 'null when not visited' }),
  })
  .meta({ id: 'FlowNodeFigures' });
type NodeFigures = z.infer<typeof NodeFigures>;

export const StatsSideBySide = z
  .object({
    started: Sides(z.number().int()),
    outcomes: z.record(z.string(), Sides(Count)),
    failures: z.record(z.string(), Sides(Count)),
    nodes: z.record(z.string(), Sides(NodeFigures.nullable())).meta({
      description: 'per unrolled node of either version; null on the side whose version lacks it',
    }),
  })
  .meta({ id: 'FlowStatsSideBySide' });
export type StatsSideBySide = z.infer<typeof StatsSideBySide>;

const Action = z.record(z.string(), z.unknown()).meta({ id: 'FlowCompiledAction' });
const ChangeOf = <T extends z.ZodType>(v: T) => z.object({ from: v.nullable(), to: v.nullable() });

const VersionRef = z.object({
  version: z.string(),
  current: z.boolean(),
  firstRunAt: z.iso.datetime().nullable(),
  hasSource: z.boolean(),
});

export const FlowDiff = z
  .object({
    flow: z.string(),
    from: VersionRef,
    to: VersionRef,
    source: z
      .object({
        patch: z
          .string()
          .nullable()
          .meta({ description: 'unified diff; null when a side has no source' }),
        hunks: z.array(
          z.object({
            oldStart: z.number().int(),
            oldLines: z.number().int(),
            newStart: z.number().int(),
            newLines: z.number().int(),
            lines: z.array(z.string()),
          }),
        ),
        added: z.number().int().meta({ description: 'lines added' }),
        removed: z.number().int().meta({ description: 'lines removed' }),
        note: z.string().nullable().meta({ description: 'why there is no patch' }),
      })
      .meta({ id: 'FlowSourceDiff' }),
    menus: z
      .object({
        added: z.array(z.string()),
        removed: z.array(z.string()),
        changed: z.array(
          z.object({
            node: z.string(),
            menu: z.string(),
            intro: z.record(z.string(), ChangeOf(z.string())).optional(),
            timeoutMs: ChangeOf(z.number()).optional(),
            keys: z.record(z.string(), ChangeOf(z.array(Action))).optional(),
            limits: z.record(z.string(), ChangeOf(z.string())).optional(),
          }),
        ),
        unchanged: z.number().int(),
        params: z.object({
          added: z.array(z.string()),
          removed: z.array(z.string()),
          changed: z.array(z.object({ name: z.string(), from: z.unknown(), to: z.unknown() })),
        }),
        languages: z.object({ added: z.array(z.string()), removed: z.array(z.string()) }),
      })
      .meta({ id: 'FlowMenuDiff' }),
    stats: StatsSideBySide.extend({
      languages: z.record(z.string(), StatsSideBySide),
    }).meta({ id: 'FlowStatsCompared' }),
  })
  .meta({ id: 'FlowDiff' });
export type FlowDiff = z.infer<typeof FlowDiff>;

interface StoredVersion {
  version: string;
  createdAt: Date;
  hasSource: boolean;
}

function unknownVersion(flowId: string, field: string, version: string): AppError {
  const message =
    version === 'current'
      ? `flow "${flowId}" has no current version: its file is gone or does not compile`
      : `flow "${flowId}" never ran version "${version}" and its file is not at it`;
  return new AppError('UNKNOWN_FLOW_VERSION', message, [
    { path: field, code: 'UNKNOWN_FLOW_VERSION', message },
  ]);
}

async function storedVersions(db: Queryable, flowId: string): Promise<StoredVersion[]> {
  return db
    .select({
      version: flowVersions.version,
      createdAt: flowVersions.createdAt,
      hasSource: sql<boolean>`${flowVersions.source} is not null`,
    })
    .from(flowVersions)
    .where(eq(flowVersions.flowId, flowId))
    .orderBy(desc(flowVersions.createdAt), desc(flowVersions.version));
}

/** Whether any call of the flow ran (a version of it is stored). */
export async function flowHasRun(db: Queryable, flowId: string): Promise<boolean> {
  const [row] = await db
    .select({ one: sql<number>`1` })
    .from(flowVersions)
    .where(eq(flowVersions.flowId, flowId))
    .limit(1);
  return row !== undefined;
}

/**
 * GET /v1/flows/{id}/versions: the versions run, newest first, with calls started and
 * outcomes reached on each; the file's version first when no call ran on it yet. 404 when
 * neither the file nor any run version exists.
 */
export async function listFlowVersions(
  db: Queryable,
  flowId: string,
  file: LoadedFlow | undefined,
): Promise<FlowVersionList> {
  const [stored, counts, latest] = await Promise.all([
    storedVersions(db, flowId),
    db
      .select({
        version: flowStats.version,
        metric: flowStats.metric,
        subject: flowStats.subject,
        n: sql<string>`sum(${flowStats.count})`,
      })
      .from(flowStats)
      .where(and(eq(flowStats.flowId, flowId), inArray(flowStats.metric, ['started', 'outcome'])))
      .groupBy(flowStats.version, flowStats.metric, flowStats.subject),
    // the calls still kept, through the (flow_id, id) index: a console read, not a hot path
    db
      .select({ version: calls.flowVersion, at: max(calls.createdAt) })
      .from(calls)
      .where(eq(calls.flowId, flowId))
      .groupBy(calls.flowVersion),
  ]);
  const lastCall = new Map(latest.map((r) => [r.version, r.at?.toISOString() ?? null]));
  if (!file && stored.length === 0)
    throw new AppError('NOT_FOUND', `no flow "${flowId}" in the flows directory`);
  const current = file?.compiled?.version ?? null;
  const tally = new Map<string, { started: number; outcomes: Record<string, number> }>();
  const of = (version: string) => {
    let t = tally.get(version);
    if (!t) {
      t = { started: 0, outcomes: {} };
      tally.set(version, t);
    }
    return t;
  };
  for (const r of counts) {
    const t = of(r.version);
    if (r.metric === 'started') t.started += Number(r.n);
    else t.outcomes[r.subject] = Number(r.n);
  }
  const items: FlowVersionItem[] = stored.map((s) => ({
    version: s.version,
    current: s.version === current,
    runs: true,
    firstRunAt: s.createdAt.toISOString(),
    lastCallAt: lastCall.get(s.version) ?? null,
    started: tally.get(s.version)?.started ?? 0,
    outcomes: tally.get(s.version)?.outcomes ?? {},
    hasSource: s.hasSource || s.version === current,
  }));
  if (current && !stored.some((s) => s.version === current)) {
    items.unshift({
      version: current,
      current: true,
      runs: false,
      firstRunAt: null,
      lastCallAt: null,
      started: 0,
      outcomes: {},
      hasSource: true,
    });
  }
  return { flow: flowId, current, items, unversioned: { started: tally.get('')?.started ?? 0 } };
}

/** A version with what the diff and the detail need. */
export interface ResolvedVersion {
  version: string;
  current: boolean;
  firstRunAt: Date | null;
  source: string | null;
  compiled: CompiledFlow;
}

/**
 * A version of the flow by hash or `current`: the file's when it compiles to it (its text
 * now), else the stored one. `field` names the query or path field in the 404's detail.
 */
export async function resolveFlowVersion(
  db: Queryable,
  flowId: string,
  wanted: string,
  file: LoadedFlow | undefined,
  field = 'version',
): Promise<ResolvedVersion> {
  const fileVersion = file?.compiled?.version;
  const version = wanted === 'current' ? fileVersion : wanted;
  if (!version) throw unknownVersion(flowId, field, wanted);
  const [row] = await db
    .select({
      compiled: flowVersions.compiled,
      source: flowVersions.source,
      createdAt: flowVersions.createdAt,
    })
    .from(flowVersions)
    .where(and(eq(flowVersions.flowId, flowId), eq(flowVersions.version, version)));
  if (file?.compiled && version === fileVersion) {
    return {
      version,
      current: true,
      firstRunAt: row?.createdAt ?? null,
      // `current` is the file as it is now; a hash is the text it first ran with, when kept
      source: wanted === 'current' ? file.source : (row?.source ?? file.source),
      compiled: file.compiled,
    };
  }
  if (!row) throw unknownVersion(flowId, field, wanted);
  return {
    version,
    current: false,
    firstRunAt: row.createdAt,
    source: row.source,
    compiled: row.compiled as CompiledFlow,
  };
}

/** GET /v1/flows/{id}/versions/{version}: its source and a summary of its compiled form. */
export async function flowVersionDetail(
  db: Queryable,
  flowId: string,
  wanted: string,
  file: LoadedFlow | undefined,
): Promise<FlowVersionDetail> {
  const v = await resolveFlowVersion(db, flowId, wanted, file);
  const c = v.compiled;
  return {
    flow: flowId,
    version: v.version,
    current: v.current,
    firstRunAt: v.firstRunAt?.toISOString() ?? null,
    source: v.source,
    title: c.title ?? null,
    menus: c.sourceMenus,
    languages: c.languages,
    params: Object.fromEntries(Object.entries(c.params).map(([k, p]) => [k, { ...p }])),
    menuCount: c.menuCount,
    nodes: c.nodes.map((n) => n.id),
  };
}

/** A share of calls started, rounded for people (four decimals); null with none started. */
function rate(n: number, of: number): number | null {
  return of > 0 ? Math.round((n / of) * 10_000) / 10_000 : null;
}

function figures(stats: FlowStats, node: string): NodeFigures {
  const n = stats.nodes[node];
  const visits = n?.visits ?? 0;
  const hangups = n?.hangups ?? 0;
  return { visits, keys: { ...(n?.keys ?? {}) }, hangups, hangupsPerVisit: rate(hangups, visits) };
}

function shares(
  a: Record<string, number>,
  b: Record<string, number>,
  startedA: number,
  startedB: number,
) {
  const out: Record<string, { from: z.infer<typeof Count>; to: z.infer<typeof Count> }> = {};
  for (const name of [...new Set([...Object.keys(a), ...Object.keys(b)])].sort()) {
    const x = a[name] ?? 0;
    const y = b[name] ?? 0;
    out[name] = {
      from: { count: x, share: rate(x, startedA) },
      to: { count: y, share: rate(y, startedB) },
    };
  }
  return out;
}

/** Two versions' counters side by side, over the nodes of both (menu order, newer first). */
export function statsSideBySide(
  from: { stats: FlowStats; compiled: CompiledFlow },
  to: { stats: FlowStats; compiled: CompiledFlow },
): StatsSideBySide {
  const inFrom = new Set(from.compiled.nodes.map((n) => n.id));
  const inTo = new Set(to.compiled.nodes.map((n) => n.id));
  const nodes: StatsSideBySide['nodes'] = {};
  for (const id of [...inTo, ...inFrom]) {
    if (nodes[id]) continue;
    nodes[id] = {
      from: inFrom.has(id) ? figures(from.stats, id) : null,
      to: inTo.has(id) ? figures(to.stats, id) : null,
    };
  }
  return {
    started: { from: from.stats.started, to: to.stats.started },
    outcomes: shares(from.stats.outcomes, to.stats.outcomes, from.stats.started, to.stats.started),
    failures: shares(from.stats.failures, to.stats.failures, from.stats.started, to.stats.started),
    nodes,
  };
}

type StatRow = FlowStatRow & { version: string; lang: string };

/** The counters of the versions, in one read: each version's rows, in total and by language. */
async function versionStatRows(
  db: Queryable,
  flowId: string,
  versions: string[],
): Promise<StatRow[]> {
  return db
    .select({
      version: flowStats.version,
      lang: flowStats.lang,
      metric: flowStats.metric,
      subject: flowStats.subject,
      key: flowStats.key,
      count: flowStats.count,
    })
    .from(flowStats)
    .where(and(eq(flowStats.flowId, flowId), inArray(flowStats.version, versions)));
}

/** How two sources differ: a unified patch and its hunks (none when a side has no text). */
function sourceDiff(
  flowId: string,
  from: ResolvedVersion,
  to: ResolvedVersion,
): FlowDiff['source'] {
  if (from.source === null || to.source === null) {
    const which = from.source === null ? from.version : to.version;
    return {
      patch: null,
      hunks: [],
      added: 0,
      removed: 0,
      note: `the source of version ${which} is not kept (it ran before sources were kept)`,
    };
  }
  const name = (v: ResolvedVersion) => `${flowId}.yaml@${v.current ? 'current' : v.version}`;
  const structured = structuredPatch(name(from), name(to), from.source, to.source, '', '');
  let added = 0;
  let removed = 0;
  for (const h of structured.hunks)
    for (const line of h.lines) {
      if (line.startsWith('+')) added++;
      else if (line.startsWith('-')) removed++;
    }
  return {
    patch: createTwoFilesPatch(name(from), name(to), from.source, to.source, '', ''),
    hunks: structured.hunks.map((h) => ({
      oldStart: h.oldStart,
      oldLines: h.oldLines,
      newStart: h.newStart,
      newLines: h.newLines,
      lines: h.lines,
    })),
    added,
    removed,
    note: null,
  };
}

const ref = (v: ResolvedVersion, hasSource: boolean) => ({
  version: v.version,
  current: v.current,
  firstRunAt: v.firstRunAt?.toISOString() ?? null,
  hasSource,
});

/**
 * GET /v1/flows/{id}/diff: `from` and `to` (hash or `current`) compared: sources, menus node
 * by node, and counters side by side, in total and per language.
 */
export async function diffFlowVersions(
  db: Queryable,
  flowId: string,
  fromWanted: string,
  toWanted: string,
  file: LoadedFlow | undefined,
): Promise<FlowDiff> {
  const from = await resolveFlowVersion(db, flowId, fromWanted, file, 'from');
  const to = await resolveFlowVersion(db, flowId, toWanted, file, 'to');
  const rows = await versionStatRows(db, flowId, [...new Set([from.version, to.version])]);
  const of = (version: string, lang?: string) =>
    foldFlowStats(
      flowId,
      rows.filter((r) => r.version === version && (lang === undefined || r.lang === lang)),
    );
  const langs = [
    ...new Set([
      ...to.compiled.languages,
      ...from.compiled.languages,
      ...rows.map((r) => r.lang).filter((l) => l !== ''),
    ]),
  ];
  const pair = (lang?: string) =>
    statsSideBySide(
      { stats: of(from.version, lang), compiled: from.compiled },
      { stats: of(to.version, lang), compiled: to.compiled },
    );
  const menus: MenuDiff = diffCompiledMenus(from.compiled, to.compiled);
  return {
    flow: flowId,
    from: ref(from, from.source !== null),
    to: ref(to, to.source !== null),
    source: sourceDiff(flowId, from, to),
    menus,
    stats: { ...pair(), languages: Object.fromEntries(langs.map((l) => [l, pair(l)])) },
  };
}
