/**
 * A Mermaid flowchart of a compiled flow: every unrolled node (named as everywhere else,
 * `main/v2`), every key as an edge labelled with what it does, `timeout / wrong` edges
 * dashed, hangups into one end node, and the `on:` reactions in a box below it.
 * `folded: true` draws one box per menu as written instead.
 *
 * The round limit is drawn as what it is: a goto that closes a cycle is a loop (folded: back
 * into the same box; unrolled: `9: back to main` into the next round's copy), and the key
 * that would pass `maxVisits` is labelled `after 3 rounds, 9: ...` on its way to what runs
 * instead.
 *
 * A node whose prompt is spoken (`say:`) shows its text under its name, in the flow's default
 * language and cut short (`🔊 "Hello {{name}}, your appointm…"`), so a reader sees what each
 * menu says; a recorded prompt (a URL or an audio id) tells a reader nothing and is left out.
 *
 * @example
 * flowToMermaid(compiled).split('\n')[0] // 'flowchart TD'
 */
import type { CompiledFlow } from './compile.ts';
import {
  type CompiledAction,
  type CompiledNode,
  NODE_KEYS,
  type NodeKey,
  nodeLabel,
} from './unroll.ts';

/** How many characters of a spoken prompt a box shows (the rest becomes `…`). */
export const SPOKEN_LABEL_LENGTH = 40;

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

/**
 * The line a node's box shows for its spoken prompt in `lang` (else its first language):
 * `🔊 "<text>"`, whitespace collapsed, cut at SPOKEN_LABEL_LENGTH characters (not UTF-16
 * units, so a letter is never split); undefined for a recorded prompt. Not escaped.
 *
 * @example
 * spokenLine({ intro: { en: { say: 'Hello {{name}}' } } }, 'en') // '🔊 "Hello {{name}}"'
 */
export function spokenLine(node: Pick<CompiledNode, 'intro'>, lang: string): string | undefined {
  const prompt = node.intro[lang] ?? Object.values(node.intro)[0];
  if (prompt === undefined || typeof prompt === 'string') return undefined;
  const chars = [...prompt.say.replace(/\s+/g, ' ').trim()];
  const text =
    chars.length > SPOKEN_LABEL_LENGTH
      ? `${chars
          .slice(0, SPOKEN_LABEL_LENGTH - 1)
          .join('')
          .trimEnd()}…`
      : chars.join('');
  return `🔊 "${text}"`;
}

/**
 * A node's box text as Mermaid reads it (escaped): `label`, then the spoken prompt's line
 * (`spokenLine`) when it has one, then `extra` lines (the console's counts).
 */
export function boxLabel(
  label: string,
  node: Pick<CompiledNode, 'intro'>,
  lang: string,
  extra: readonly string[] = [],
): string {
  const spoken = spokenLine(node, lang);
  return [label, ...(spoken === undefined ? [] : [spoken]), ...extra]
    .map(escapeLabel)
    .join('<br/>');
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

/**
 * What a key's or a reaction's actions do, as short labels (`outcome x`, `send sms`,
 * `webhook`, `notify crm`).
 */
export function effectLabel(actions: readonly CompiledAction[]): string[] {
  const out: string[] = [];
  for (const a of actions) {
    if (a.type === 'outcome') out.push(`outcome ${a.name}`);
    else if (a.type === 'send') out.push(`send ${a.message.type}`);
    else if (a.type === 'webhook') out.push('webhook');
    else if (a.type === 'notify') out.push(`notify ${a.endpoint}`);
    else if (a.type === 'opt-out') out.push('opt-out');
  }
  return out;
}

/**
 * What the edge of `key` at `node` says: the key and its effects; `retry` for a retry when
 * folded; `back to <menu>` for a goto into a later round (unrolled); and, for a goto that
 * would pass the round limit, the limit first: `after 3 rounds, 9: outcome no-input`.
 *
 * @example
 * edgeLabel(compiled, compiled.nodes[0], '2', false) // '2'
 */
export function edgeLabel(
  compiled: Pick<CompiledFlow, 'nodes' | 'maxVisits'>,
  node: CompiledNode,
  key: NodeKey,
  folded: boolean,
): string {
  const actions = node.keys[key] ?? [];
  const last = actions.at(-1);
  const target = last?.type === 'goto' ? compiled.nodes.find((n) => n.id === last.node) : undefined;
  const notes = effectLabel(actions);
  if (folded && target?.menu === node.menu && target.attempt > node.attempt) {
    notes.splice(0, notes.length, 'retry');
  } else if (!folded && target && target.visit > node.visit) {
    notes.push(`back to ${target.menu}`);
  }
  const limit = node.limits?.[key] !== undefined;
  const head = limit ? `after ${compiled.maxVisits} rounds, ${keyLabel(key)}` : keyLabel(key);
  return notes.length > 0 ? `${head}: ${notes.join(', ')}` : head;
}

/** The Mermaid arrow of a key's edge: dashed for `timeout / wrong`. */
export function edgeArrow(key: NodeKey): string {
  return key === 'wrong' ? '-.->' : '-->';
}

function edge(from: string, to: string, key: NodeKey, label: string): string {
  return `  ${from} ${edgeArrow(key)}|"${escapeLabel(label)}"| ${to}`;
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
  // the language a call gets when it names none, as the menu template shows it
  const lang = compiled.languages[0]!;
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
    for (const menu of menus) {
      // a box per menu shows what its first attempt plays: the intro, not the reprompt
      const first =
        compiled.nodes.find((n) => n.menu === menu && n.attempt === 0) ??
        compiled.nodes.find((n) => n.menu === menu)!;
      lines.push(`  ${ids.get(menu)}["${boxLabel(menu, first, lang)}"]`);
    }
    const seen = new Set<string>();
    for (const node of compiled.nodes) {
      for (const key of NODE_KEYS) {
        const actions = node.keys[key];
        if (!actions) continue;
        const last = actions.at(-1);
        const targetNode =
          last?.type === 'goto' ? compiled.nodes.find((n) => n.id === last.node) : undefined;
        const to = targetNode ? ids.get(targetNode.menu)! : target(undefined);
        const line = edge(ids.get(node.menu)!, to, key, edgeLabel(compiled, node, key, true));
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
      lines.push(`  ${ids.get(node.id)}["${boxLabel(nodeLabel(node), node, lang)}"]`);
    }
    for (const node of compiled.nodes) {
      for (const key of NODE_KEYS) {
        const actions = node.keys[key];
        if (!actions) continue;
        const label = edgeLabel(compiled, node, key, false);
        lines.push(edge(ids.get(node.id)!, target(actions.at(-1)), key, label));
      }
    }
  }
  if (usesHangup) lines.push('  hangup(((hang up)))');

  lines.push(...reactionLines(compiled, usesHangup ? 'hangup' : undefined));
  return `${lines.join('\n')}\n`;
}

/**
 * The `on:` reactions (call statuses, no response) as a Mermaid subgraph; none: no lines.
 * `below`: the node to hang the box under (the hang-up, the one node every path ends in),
 * by invisible links, so the layout puts it past the last rank where no edge runs. Left to
 * itself the layout puts the box in the first rank, where the edges to the hang-up cross it.
 * The links come last, so `linkStyle` indexes of the edges before them stay as they are.
 */
export function reactionLines(compiled: CompiledFlow, below?: string): string[] {
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
    ...(below === undefined ? [] : reactions.map((_, i) => `  ${below} ~~~ r${i}`)),
  ];
}
