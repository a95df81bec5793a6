/**
 * The console's flow diagram: Mermaid source for a compiled flow (every unrolled node, named
 * and labelled as `flowToMermaid` draws it, a spoken prompt's text included, the `on:` box
 * below the hang-up), with visit and drop-off counts written on the nodes, key counts
 * on the edges, and one call's path highlighted. The browser renders it with the locally
 * served Mermaid bundle; without JavaScript the same counts are in the tables beside it.
 *
 * Counts come from the flow's aggregate counters (`flowStatsOf`): a node is *visited* by
 * every call that arrived there (the start node: calls started and not failed; any other
 * node: the key counts of the edges into it), and a visit *drops off* when no key or timeout
 * came back from that node (the callee hung up there, or the call is still waiting).
 *
 * @example
 * flowDiagram(compiled, { stats }).source.split('\n')[0] // 'flowchart TD'
 */
import type { FlowStats } from '../calls/read.ts';
import {
  boxLabel,
  type CompiledFlow,
  type CompiledNode,
  edgeLabel,
  escapeLabel,
  NODE_KEYS,
  nodeLabel,
  reactionLines,
} from '../flows/index.ts';

export interface NodeCounts {
  visits: number;
  /** keys and timeouts handled at the node (`wrong` for a wrong key or silence) */
  keys: Partial<Record<string, number>>;
  dropped: number;
}

export interface DiagramOptions {
  stats?: FlowStats | undefined;
  /** One call: the (node, key) steps it took, the node it waits at, whether it ended. */
  call?: { path: readonly { node: string; key: string }[]; node: string | null; ended: boolean };
}

export interface FlowDiagram {
  source: string;
  /** per node id, when stats were given */
  counts: Map<string, NodeCounts>;
}

/** Visits, keys and drop-offs per node, from the flow's counters. */
export function nodeCounts(compiled: CompiledFlow, stats: FlowStats): Map<string, NodeCounts> {
  const into = new Map<string, number>();
  for (const node of compiled.nodes) {
    for (const key of NODE_KEYS) {
      const last = node.keys[key]?.at(-1);
      if (last?.type !== 'goto') continue;
      const n = stats.nodes[node.id]?.keys[key] ?? 0;
      into.set(last.node, (into.get(last.node) ?? 0) + n);
    }
  }
  const failed = Object.values(stats.failures).reduce((a, b) => a + b, 0);
  const out = new Map<string, NodeCounts>();
  compiled.nodes.forEach((node, i) => {
    const handled = stats.nodes[node.id]?.visits ?? 0;
    const arrived = i === 0 ? Math.max(0, stats.started - failed) : (into.get(node.id) ?? 0);
    // a key can come back for a call whose start was counted before its failure: never
    // show fewer visits than keys handled
    const visits = Math.max(arrived, handled);
    out.set(node.id, {
      visits,
      keys: { ...(stats.nodes[node.id]?.keys ?? {}) },
      dropped: visits - handled,
    });
  });
  return out;
}

interface Box {
  id: string;
  label: string;
  /** the node whose prompt the box shows (folded: the menu's first attempt, its intro) */
  node: CompiledNode;
  counts?: { visits: number; dropped: number };
}
interface Edge {
  from: string;
  to: string;
  label: string;
  dashed: boolean;
  count: number;
  /** the compiled (node, key) pairs drawn as this edge */
  steps: Set<string>;
}

const stepKey = (node: string, key: string) => `${node}\u0000${key}`;

/** One box per unrolled node (as the provider plays it), or per menu as written. */
function layout(compiled: CompiledFlow, counts: Map<string, NodeCounts>, folded: boolean) {
  const boxOf = new Map<string, string>(); // node id -> box id
  const boxes = new Map<string, Box>();
  for (const node of compiled.nodes) {
    const key = folded ? node.menu : node.id;
    if (!boxes.has(key)) {
      boxes.set(key, {
        id: `${folded ? 'm' : 'n'}${boxes.size}`,
        label: folded ? node.menu : nodeLabel(node),
        node,
      });
    }
    const box = boxes.get(key)!;
    if (box.node.attempt > 0 && node.attempt === 0) box.node = node;
    boxOf.set(node.id, box.id);
    const c = counts.get(node.id);
    if (c) {
      box.counts ??= { visits: 0, dropped: 0 };
      box.counts.visits += c.visits;
      box.counts.dropped += c.dropped;
    }
  }
  const edges = new Map<string, Edge>();
  for (const node of compiled.nodes) {
    for (const key of NODE_KEYS) {
      const actions = node.keys[key];
      if (!actions) continue;
      const last = actions.at(-1);
      const target =
        last?.type === 'goto' ? compiled.nodes.find((n) => n.id === last.node) : undefined;
      const to = target ? boxOf.get(target.id)! : 'hangup';
      const label = edgeLabel(compiled, node, key, folded);
      const from = boxOf.get(node.id)!;
      const id = `${from}\u0000${label}\u0000${to}`;
      let edge = edges.get(id);
      if (!edge) {
        edge = { from, to, label, dashed: key === 'wrong', count: 0, steps: new Set() };
        edges.set(id, edge);
      }
      edge.count += counts.get(node.id)?.keys[key] ?? 0;
      edge.steps.add(stepKey(node.id, key));
    }
  }
  return { boxes: [...boxes.values()], boxOf, edges: [...edges.values()] };
}

/**
 * Mermaid source for `compiled`, annotated. `folded` draws one box per menu as written (the
 * copies that retries and rounds unroll into are added up); otherwise every unrolled node.
 *
 * @example
 * flowDiagram(compiled, { call: { path: [{ node: 'main', key: '1' }], node: null, ended: true } })
 */
export function flowDiagram(
  compiled: CompiledFlow,
  opts: DiagramOptions & { folded?: boolean } = {},
): FlowDiagram {
  const counts = opts.stats ? nodeCounts(compiled, opts.stats) : new Map<string, NodeCounts>();
  const { boxes, boxOf, edges } = layout(compiled, counts, opts.folded ?? false);
  const lines = [
    'flowchart TD',
    `  accTitle: ${escapeLabel(`Flow ${compiled.title ?? compiled.id}`)}`,
    `  accDescr: ${escapeLabel(
      `${opts.folded ? `the menus ${compiled.sourceMenus.join(', ')}` : `${compiled.nodes.length} menu nodes (every retry and round)`}; edges are keys${
        opts.stats ? ', with how many calls took them' : ''
      }${opts.call ? '; the call path is highlighted' : ''}`,
    )}`,
  ];
  for (const box of boxes) {
    // the name, the spoken prompt (as flowToMermaid draws it), then the counts
    const counts = box.counts
      ? [`visits ${box.counts.visits} · dropped ${box.counts.dropped}`]
      : [];
    lines.push(`  ${box.id}["${boxLabel(box.label, box.node, compiled.languages[0]!, counts)}"]`);
  }
  const usesHangup = edges.some((e) => e.to === 'hangup');
  for (const e of edges) {
    const text = `${e.label}${opts.stats && e.count > 0 ? ` (${e.count})` : ''}`;
    lines.push(`  ${e.from} ${e.dashed ? '-.->' : '-->'}|"${escapeLabel(text)}"| ${e.to}`);
  }
  if (usesHangup) lines.push('  hangup(((hang up)))');

  lines.push(...reactionLines(compiled, usesHangup ? 'hangup' : undefined));

  lines.push('  classDef visited fill:#fde68a,stroke:#78350f,stroke-width:2px,color:#111827');
  lines.push('  classDef current fill:#bfdbfe,stroke:#1e3a8a,stroke-width:3px,color:#111827');
  lines.push('  classDef dropped stroke:#b91c1c,stroke-width:2px,stroke-dasharray:4 3');
  const dropped = boxes.filter((b) => (b.counts?.dropped ?? 0) > 0).map((b) => b.id);
  if (dropped.length > 0) lines.push(`  class ${dropped.join(',')} dropped`);
  if (opts.call) {
    const visited = new Set<string>();
    for (const s of opts.call.path) {
      const box = boxOf.get(s.node);
      if (box) visited.add(box);
    }
    const taken = new Set<number>();
    for (const s of opts.call.path) {
      const i = edges.findIndex((e) => e.steps.has(stepKey(s.node, s.key)));
      if (i >= 0) taken.add(i);
    }
    const last = opts.call.path.at(-1);
    const lastEdge = last && edges.find((e) => e.steps.has(stepKey(last.node, last.key)));
    if (opts.call.ended && lastEdge?.to === 'hangup') visited.add('hangup');
    if (visited.size > 0) lines.push(`  class ${[...visited].join(',')} visited`);
    const current = opts.call.node === null ? undefined : boxOf.get(opts.call.node);
    if (current && !opts.call.ended) lines.push(`  class ${current} current`);
    if (taken.size > 0) {
      lines.push(`  linkStyle ${[...taken].join(',')} stroke:#b45309,stroke-width:4px`);
    }
  }
  return { source: `${lines.join('\n')}\n`, counts };
}
