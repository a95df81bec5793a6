/**
 * A Mermaid flowchart of a compiled flow: every unrolled node, every key as an edge labelled
 * with what it does, `timeout / wrong` edges dashed, hangups into one end node, and the
 * `on:` reactions beside. `folded: true` draws one box per menu as written instead.
 *
 * @example
 * flowToMermaid(compiled).split('\n')[0] // 'flowchart TD'
 */
import type { CompiledFlow } from './compile.ts';
import { type CompiledAction, NODE_KEYS, type NodeKey } from './unroll.ts';

export interface MermaidOptions {
  /** One box per source menu, not per unrolled copy. */
  folded?: boolean;
}

/** Text made safe inside a Mermaid label (`#`, quotes and angle brackets as entities). */
export function escapeLabel(text: string): string {
  return text
    .replace(/#/g, '#35;')
    .replace(/"/g, '#quot;')
    .replace(/</g, '#lt;')
    .replace(/>/g, '#gt;');
}

/** `7200000` -> `2h`: the largest unit that divides the time evenly. */
function duration(ms: number): string {
  for (const [unit, size] of [
    ['d', 86_400_000],
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1000],
  ] as const) {
    if (ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}

export function keyLabel(key: NodeKey): string {
  return key === 'wrong' ? 'timeout / wrong' : key;
}

/** What a key's or a reaction's actions do, as short labels (`outcome x`, `send sms`, `webhook`). */
export function effectLabel(actions: readonly CompiledAction[]): string[] {
  const out: string[] = [];
  for (const a of actions) {
    if (a.type === 'outcome') out.push(`outcome ${a.name}`);
    else if (a.type === 'send') out.push(`send ${a.message.type}`);
    else if (a.type === 'webhook') out.push('webhook');
  }
  return out;
}

function edge(from: string, to: string, key: NodeKey, label: string[]): string {
  const text = escapeLabel(
    label.length > 0 ? `${keyLabel(key)}: ${label.join(', ')}` : keyLabel(key),
  );
  return `  ${from} ${key === 'wrong' ? '-.->' : '-->'}|"${text}"| ${to}`;
}

/**
 * Mermaid source for a compiled flow.
 *
 * @example
 * flowToMermaid(compiled, { folded: true })
 */
export function flowToMermaid(compiled: CompiledFlow, opts: MermaidOptions = {}): string {
  const lines = ['flowchart TD'];
  const ids = new Map<string, string>();
  let usesHangup = false;
  const target = (action: CompiledAction | undefined): string => {
    if (action?.type === 'goto') return ids.get(action.node)!;
    usesHangup = true;
    return 'hangup';
  };

  if (opts.folded) {
    const menus = [...new Set(compiled.nodes.map((n) => n.menu))];
    menus.forEach((menu, i) => {
      ids.set(menu, `m${i}`);
    });
    for (const menu of menus) lines.push(`  ${ids.get(menu)}["${escapeLabel(menu)}"]`);
    const seen = new Set<string>();
    for (const node of compiled.nodes) {
      for (const key of NODE_KEYS) {
        const actions = node.keys[key];
        if (!actions) continue;
        const last = actions.at(-1);
        const targetNode =
          last?.type === 'goto' ? compiled.nodes.find((n) => n.id === last.node) : undefined;
        const to = targetNode ? ids.get(targetNode.menu)! : target(undefined);
        const retry = targetNode?.menu === node.menu && targetNode.attempt > node.attempt;
        const label = retry ? ['retry'] : effectLabel(actions);
        const line = edge(ids.get(node.menu)!, to, key, label);
        if (!seen.has(line)) {
          seen.add(line);
          lines.push(line);
        }
      }
    }
  } else {
    compiled.nodes.forEach((node, i) => {
      ids.set(node.id, `n${i}`);
    });
    for (const node of compiled.nodes) {
      const notes = [
        node.visit > 1 ? `round ${node.visit}` : '',
        node.attempt > 0 ? `retry ${node.attempt}` : '',
      ].filter(Boolean);
      const label = `${node.index}: ${node.menu}${notes.length ? ` (${notes.join(', ')})` : ''}`;
      lines.push(`  ${ids.get(node.id)}["${escapeLabel(label)}"]`);
    }
    for (const node of compiled.nodes) {
      for (const key of NODE_KEYS) {
        const actions = node.keys[key];
        if (!actions) continue;
        lines.push(edge(ids.get(node.id)!, target(actions.at(-1)), key, effectLabel(actions)));
      }
    }
  }
  if (usesHangup) lines.push('  hangup(((hang up)))');

  lines.push(...reactionLines(compiled));
  return `${lines.join('\n')}\n`;
}

/** The `on:` reactions (call statuses, no response) as a Mermaid subgraph; none: no lines. */
export function reactionLines(compiled: CompiledFlow): string[] {
  const reactions: Array<readonly [string, readonly CompiledAction[]]> = Object.entries(
    compiled.on.statuses,
  ).map(([status, actions]) => [`on ${status}`, actions ?? []] as const);
  if (compiled.on.noResponse) {
    reactions.push([
      `no response after ${duration(compiled.on.noResponse.afterMs)}`,
      compiled.on.noResponse.actions,
    ]);
  }
  if (reactions.length === 0) return [];
  return [
    '  subgraph reactions [on: call status and timers]',
    ...reactions.map(
      ([name, actions], i) =>
        `    r${i}[/"${escapeLabel(`${name}: ${effectLabel(actions).join(', ')}`)}"/]`,
    ),
    '  end',
  ];
}
