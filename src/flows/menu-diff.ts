/**
 * Two compiled versions of a flow compared node by node (by unrolled node id): the nodes one
 * has and the other has not, and for each node both have, what changed: its intro in each
 * language, its timeout, each key's actions, the keys its round limit turns away. Also the
 * params and languages. Pure: the API's diff and the console's compare page render it.
 *
 * @example
 * const changes = diffCompiledMenus(before, after);
 * changes.changed[0] // { node: 'main', keys: { '2': { from: [...], to: [...] } } }
 */
import type { CompiledFlow, CompiledParam } from './compile.ts';
import { type CompiledAction, type CompiledNode, promptLabel } from './unroll.ts';

/** One value before and after (null where that side has none). */
export interface Change<T> {
  from: T | null;
  to: T | null;
}

export interface NodeChange {
  node: string;
  /** the menu as written that the node unrolls from */
  menu: string;
  /** per language, the intro (or reprompt) before and after */
  intro?: Record<string, Change<string>>;
  timeoutMs?: Change<number>;
  /** per key, its actions before and after (null: the node did not handle the key) */
  keys?: Record<string, Change<CompiledAction[]>>;
  /** per key, the menu its round limit names instead of going there */
  limits?: Record<string, Change<string>>;
}

export interface MenuDiff {
  /** node ids only the newer version has, in its menu order */
  added: string[];
  /** node ids only the older version has, in its menu order */
  removed: string[];
  /** nodes both have that differ, in the newer version's menu order */
  changed: NodeChange[];
  /** nodes both have, unchanged */
  unchanged: number;
  params: {
    added: string[];
    removed: string[];
    changed: { name: string; from: CompiledParam; to: CompiledParam }[];
  };
  languages: { added: string[]; removed: string[] };
}

/** Key-order independent JSON: two equal values give one text. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

const same = (a: unknown, b: unknown) => canonical(a) === canonical(b);

/** The entries of two records that differ, by name (a missing one is null). */
function changedEntries<T>(
  a: Partial<Record<string, T>> | undefined,
  b: Partial<Record<string, T>> | undefined,
  order: (names: string[]) => string[] = (names) => names.sort(),
): Record<string, Change<T>> | undefined {
  const names = order([...new Set([...Object.keys(a ?? {}), ...Object.keys(b ?? {})])]);
  const out: Record<string, Change<T>> = {};
  for (const name of names) {
    const from = a?.[name] ?? null;
    const to = b?.[name] ?? null;
    if (!same(from, to)) out[name] = { from, to };
  }
  return Object.keys(out).length > 0 ? out : undefined;
}

// keys in keypad order, then `wrong` and `timeout`
const KEY_ORDER = [...'1234567890*#', 'wrong', 'timeout'];
const keyOrder = (names: string[]) =>
  names.sort((x, y) => {
    const i = KEY_ORDER.indexOf(x);
    const j = KEY_ORDER.indexOf(y);
    return (i < 0 ? KEY_ORDER.length : i) - (j < 0 ? KEY_ORDER.length : j) || (x < y ? -1 : 1);
  });

/** A node's prompts as people read them (`say: <text>` for a spoken one). */
const labels = (intro: CompiledNode['intro']) =>
  Object.fromEntries(Object.entries(intro).map(([lang, p]) => [lang, promptLabel(p)]));

function nodeChange(a: CompiledNode, b: CompiledNode): NodeChange | undefined {
  const change: NodeChange = { node: b.id, menu: b.menu };
  const intro = changedEntries(labels(a.intro), labels(b.intro));
  if (intro) change.intro = intro;
  if ((a.timeoutMs ?? null) !== (b.timeoutMs ?? null))
    change.timeoutMs = { from: a.timeoutMs ?? null, to: b.timeoutMs ?? null };
  const keys = changedEntries<CompiledAction[]>(a.keys, b.keys, keyOrder);
  if (keys) change.keys = keys;
  const limits = changedEntries<string>(a.limits, b.limits, keyOrder);
  if (limits) change.limits = limits;
  return Object.keys(change).length > 2 ? change : undefined;
}

/** What changed from `from` to `to`, node by node. */
export function diffCompiledMenus(from: CompiledFlow, to: CompiledFlow): MenuDiff {
  const before = new Map(from.nodes.map((n) => [n.id, n]));
  const after = new Map(to.nodes.map((n) => [n.id, n]));
  const changed: NodeChange[] = [];
  let unchanged = 0;
  for (const node of to.nodes) {
    const old = before.get(node.id);
    if (!old) continue;
    const change = nodeChange(old, node);
    if (change) changed.push(change);
    else unchanged++;
  }
  const params = changedEntries<CompiledParam>(from.params, to.params) ?? {};
  return {
    added: to.nodes.filter((n) => !before.has(n.id)).map((n) => n.id),
    removed: from.nodes.filter((n) => !after.has(n.id)).map((n) => n.id),
    changed,
    unchanged,
    params: {
      added: Object.keys(params).filter((p) => params[p]!.from === null),
      removed: Object.keys(params).filter((p) => params[p]!.to === null),
      changed: Object.entries(params)
        .filter(([, c]) => c.from !== null && c.to !== null)
        .map(([name, c]) => ({ name, from: c.from!, to: c.to! })),
    },
    languages: {
      added: to.languages.filter((l) => !from.languages.includes(l)),
      removed: from.languages.filter((l) => !to.languages.includes(l)),
    },
  };
}
