/**
 * Shared test helpers: the example flows with sample vars, a small flow builder, and an
 * oracle that plays keys against a flow *as written* (no unrolling, no nodes), so that a
 * wrong unroller cannot agree with itself.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import {
  type CompiledFlow,
  compileFlow,
  FLOW_KEYS,
  type FlowDefinition,
  parseFlowSource,
  type RenderedMessage,
  renderMessage,
} from '../../src/flows/index.ts';
import { renderDeep } from '../../src/flows/template.ts';

export const FLOWS_DIR = fileURLToPath(new URL('../../flows', import.meta.url));

export const EXAMPLES = [
  'appointment-reminder',
  'order-confirmation',
  'satisfaction-survey',
  'delivery-failure',
] as const;
export type ExampleId = (typeof EXAMPLES)[number];

export const SAMPLE_VARS: Record<ExampleId, Record<string, string>> = {
  'appointment-reminder': { name: 'Ann', date: '2025-03-01' },
  'order-confirmation': {
    customerName: 'Taras',
    orderId: 'A-1001',
    total: '1 250 UAH',
    trackingUrl: 'https://shop.example.com/t/A-1001',
  },
  'satisfaction-survey': { name: 'Olena', ticketId: 'T-77' },
  'delivery-failure': {
    name: 'Ivan',
    parcelId: 'P-5',
    branchAddress: 'Kyiv, Khreshchatyk 1',
    manageUrl: 'https://logistics.example.com/p/P-5',
  },
};

export function exampleSource(id: string): string {
  return readFileSync(`${FLOWS_DIR}/${id}.yaml`, 'utf8');
}

/** An example flow, loaded through the real loader; fails the test on any error. */
export function loadExample(id: ExampleId): CompiledFlow {
  const loaded = parseFlowSource(exampleSource(id), `flows/${id}.yaml`);
  if (!loaded.compiled) throw new Error(`${id}: ${JSON.stringify(loaded.errors)}`);
  return loaded.compiled;
}

export function exampleDefinition(id: ExampleId): FlowDefinition {
  return parse(exampleSource(id)) as FlowDefinition;
}

/** Parses YAML text as a flow in a fake file, for loader and check tests. */
export function parseYaml(text: string, file = 'flows/test.yaml') {
  return parseFlowSource(text, file);
}

export function compileDef(definition: FlowDefinition, opts = {}) {
  return compileFlow({ id: 'test', definition }, opts);
}

export interface OracleResult {
  path: Array<{ menu: string; visit: number; attempt: number; key: string }>;
  outcome: string | null;
  sends: RenderedMessage[];
  webhooks: Array<{ url: string; body?: unknown; headers?: unknown }>;
  ended: boolean;
  waiting: { menu: string; visit: number; attempt: number } | null;
}

type SourceAction = FlowDefinition['menus'][string]['wrong'] extends (infer A)[] | undefined
  ? A
  : never;

/**
 * Plays keys against the flow as written. Its own reading of the README's flow language: counters for the
 * attempt and the round, a cycle-closing goto (found by its own depth-first search) starts
 * the next round, past `maxVisits` a key's goto runs the menu's wrong actions, and a goto
 * among those hangs up.
 */
export function oracle(
  flow: FlowDefinition,
  keys: readonly string[],
  vars: Record<string, unknown>,
  lang: string,
  maxVisits = 3,
): OracleResult {
  const menus = flow.menus;
  const start = flow.start ?? Object.keys(menus)[0]!;
  const listsOf = (name: string): SourceAction[][] => {
    const m = menus[name]!;
    const lists: SourceAction[][] = [];
    for (const k of FLOW_KEYS) if (m.keys?.[k]) lists.push(m.keys[k]!);
    if (m.wrong) lists.push(m.wrong);
    return lists;
  };
  const targetOf = (list: SourceAction[]): string | undefined => {
    for (const a of list) {
      if (a === 'hangup') return undefined;
      if (typeof a === 'object' && 'goto' in a) return a.goto;
    }
    return undefined;
  };
  // back edges by an explicit-stack DFS (the compiler's is recursive)
  const back = new Set<string>();
  const state = new Map<string, 'open' | 'closed'>();
  const stack: Array<{ menu: string; next: string[] }> = [];
  const push = (menu: string) => {
    state.set(menu, 'open');
    const next: string[] = [];
    for (const l of listsOf(menu)) {
      const t = targetOf(l);
      if (t !== undefined && !next.includes(t)) next.push(t);
    }
    stack.push({ menu, next });
  };
  push(start);
  while (stack.length > 0) {
    const top = stack[stack.length - 1]!;
    const t = top.next.shift();
    if (t === undefined) {
      state.set(top.menu, 'closed');
      stack.pop();
    } else if (state.get(t) === 'open') back.add(`${top.menu}->${t}`);
    else if (!state.has(t)) push(t);
  }

  const result: OracleResult = {
    path: [],
    outcome: null,
    sends: [],
    webhooks: [],
    ended: false,
    waiting: null,
  };
  let at: { menu: string; visit: number; attempt: number } | null = {
    menu: start,
    visit: 1,
    attempt: 0,
  };
  const ctx = { vars, lang };
  const run = (
    from: { menu: string; visit: number },
    list: readonly SourceAction[],
    isKey: boolean,
  ): { menu: string; visit: number; attempt: number } | null => {
    for (const a of list) {
      if (a === 'hangup') return null;
      if (a === 'opt-out') continue;
      if ('goto' in a) {
        const visit = back.has(`${from.menu}->${a.goto}`) ? from.visit + 1 : from.visit;
        if (visit <= maxVisits) return { menu: a.goto, visit, attempt: 0 };
        if (!isKey) return null;
        return run(from, menus[from.menu]!.wrong ?? ['hangup'], false);
      }
      if ('outcome' in a) result.outcome = a.outcome;
      if ('send' in a) result.sends.push(renderMessage(a.send, ctx));
      if ('webhook' in a) {
        const w = typeof a.webhook === 'string' ? { url: a.webhook } : a.webhook;
        result.webhooks.push(renderDeep(w, vars));
      }
    }
    return null;
  };
  for (const key of keys) {
    if (at === null) break;
    const menu: FlowDefinition['menus'][string] = menus[at.menu]!;
    const defined = key !== 'timeout' && menu.keys?.[key as (typeof FLOW_KEYS)[number]];
    const name = defined ? key : 'wrong';
    result.path.push({ ...at, key: name });
    if (defined) at = run(at, defined, true);
    else if (at.attempt < (menu.retries ?? 0)) at = { ...at, attempt: at.attempt + 1 };
    else at = run(at, menu.wrong ?? ['hangup'], false);
  }
  result.ended = at === null;
  result.waiting = at;
  return result;
}
