/**
 * Unrolling a flow's menus into the DAG the provider plays (README.md, "The flow language"):
 * the provider plays the whole tree without asking us, so every node of the DAG is unique, and
 * so is every webhook body within a call (duplicates are exact, and out-of-order arrival can be
 * resolved).
 *
 * The provider keeps no counters, so each counter becomes a copy of a menu:
 * - `retries: n` gives attempts 0..n of a menu; a wrong key or silence on attempt a goes to
 *   attempt a+1 (which plays `reprompt` when there is one), and on the last attempt runs the
 *   menu's `wrong` actions (a hangup when there are none, as the provider would do).
 * - a goto that closes a cycle (see `backEdges`) continues in round v+1 of the target; gotos
 *   that do not close a cycle stay in the round. Past round `maxVisits` the goto runs the
 *   menu's `wrong` actions instead (and a goto among those that would also pass the limit
 *   hangs up). Within a round every menu plays at most once, so every menu plays at most
 *   `maxVisits` times in a call.
 * - an action list that ends without a goto or hangup gets an explicit hangup: neither the
 *   provider's docs nor the condensed interface say what it does after the last action, so we
 *   leave it nothing to guess.
 *
 * A node is (menu, round, attempt); its id is `menu`, `menu/r1`, `menu/v2`, `menu/v2/r1`.
 * Nodes are numbered breadth-first from the start, keys in emit order, `wrong` last; node 0
 * is the start, as the provider plays `menu[0]` first.
 */
import { backEdges, edgeKey, effectiveActions, startMenu } from './graph.ts';
import {
  type Action,
  FLOW_KEYS,
  type FlowDefinition,
  type FlowKey,
  type Localized,
  type Prompt,
  type PromptValue,
  parseDuration,
  type SendMessage,
} from './schema.ts';

export type NodeKey = FlowKey | 'wrong';
/** Every key a compiled node may define, in emit order. */
export const NODE_KEYS: readonly NodeKey[] = [...FLOW_KEYS, 'wrong'];

/** The caller's silence: no key within the menu's idle timeout. */
export const SILENCE = 'timeout';

/**
 * What a tracking webhook's token names: the key the caller pressed, whether the node handles
 * it or not, or `timeout` for silence. A node's `wrong` actions run for silence and for every
 * key it does not handle; the provider's menu gets one entry per such key (running the same
 * actions) so that its own `wrong` entry runs on silence alone, and the token says which.
 */
export type MenuInput = FlowKey | typeof SILENCE;

/**
 * The keys a node does not handle, in emit order: each runs the node's `wrong` actions.
 *
 * @example
 * unhandledKeys({ keys: { '1': [...], '2': [...], wrong: [...] } }) // ['0', '3', ..., '#']
 */
export function unhandledKeys(node: Pick<CompiledNode, 'keys'>): FlowKey[] {
  return FLOW_KEYS.filter((key) => !node.keys[key]);
}

/**
 * The node key whose actions run for an input: the key itself when the node handles it, else
 * `wrong` (silence, or a key the node does not handle). `wrong` itself, as tokens of menus
 * rendered before the two were told apart name it, stays `wrong`.
 *
 * @example
 * entryFor(node, '7') // 'wrong' when node has no key 7
 */
export function entryFor(node: Pick<CompiledNode, 'keys'>, input: string): NodeKey {
  return input !== 'wrong' && node.keys[input as NodeKey] ? (input as NodeKey) : 'wrong';
}

export type CompiledAction =
  | { type: 'goto'; node: string }
  | { type: 'hangup' }
  /** ours: the callee goes on the opt-out list */
  | { type: 'opt-out' }
  | { type: 'outcome'; name: string }
  | { type: 'send'; message: SendMessage }
  /** ours, like outcome and send: a `flow.notify` event to the endpoint of that name */
  | { type: 'notify'; endpoint: string; data?: Record<string, unknown> }
  | {
      type: 'webhook';
      url: string;
      body?: Record<string, unknown>;
      headers?: Record<string, string>;
    };

export interface CompiledNode {
  id: string;
  /** Position in the provider's menu array. */
  index: number;
  menu: string;
  /** Round, from 1: how many cycle-closing gotos led here, plus one. */
  visit: number;
  /** Attempt, from 0: how many wrong keys or silences in a row led here. */
  attempt: number;
  /** Intro per language (reprompt on a retry), templates not yet rendered. */
  intro: Record<string, PromptSource>;
  timeoutMs?: number;
  /** Actions per key; `wrong` is always present, and every list ends in a goto or hangup. */
  keys: Partial<Record<NodeKey, CompiledAction[]>>;
  /**
   * Keys whose goto would pass the round limit (`maxVisits`), with the menu it names: they
   * run the menu's `wrong` actions (or hang up) instead. Absent when there are none.
   */
  limits?: Partial<Record<NodeKey, string>>;
}

export interface UnrollOptions {
  maxVisits: number;
  /** Stop once the node count passes this (the count is then a lower bound). */
  stopAfter: number;
}

export interface Unrolled {
  nodes: CompiledNode[];
  /** False when unrolling stopped at `stopAfter`. */
  complete: boolean;
}

/**
 * The name of a node, from its coordinates: `main`, `main/r1`, `main/v2`, `main/v2/r1`. The
 * one naming of unrolled nodes: the API's paths, `simulate`, the graph and the console's
 * diagram all print this (a node's `id`), never a paraphrase of it.
 */
export function nodeId(menu: string, visit: number, attempt: number): string {
  return `${menu}${visit > 1 ? `/v${visit}` : ''}${attempt > 0 ? `/r${attempt}` : ''}`;
}

/**
 * A node's box label in a diagram: its provider menu index and its name (`2: main/v2`).
 *
 * @example
 * nodeLabel({ index: 3, menu: 'main', visit: 2, attempt: 0 }) // '3: main/v2'
 */
export function nodeLabel(
  node: Pick<CompiledNode, 'index' | 'menu' | 'visit' | 'attempt'>,
): string {
  return `${node.index}: ${nodeId(node.menu, node.visit, node.attempt)}`;
}

/** A source action as a compiled one (goto excluded: it needs the unroller's context). */
export function compileEffect(action: Exclude<Action, { goto: string }>): CompiledAction {
  if (action === 'hangup') return { type: 'hangup' };
  if (action === 'opt-out') return { type: 'opt-out' };
  if ('outcome' in action) return { type: 'outcome', name: action.outcome };
  if ('send' in action) return { type: 'send', message: action.send };
  if ('notify' in action) {
    const spec = action.notify;
    if (typeof spec === 'string') return { type: 'notify', endpoint: spec };
    return { type: 'notify', endpoint: spec.endpoint, ...(spec.data ? { data: spec.data } : {}) };
  }
  const spec = action.webhook;
  if (typeof spec === 'string') return { type: 'webhook', url: spec };
  return {
    type: 'webhook',
    url: spec.url,
    ...(spec.body ? { body: spec.body } : {}),
    ...(spec.headers ? { headers: spec.headers } : {}),
  };
}

/**
 * One language's prompt as compiled: an audio URL or provider id as written, or text to
 * speak (`say` already picked for the language).
 */
export type PromptSource = string | SpokenPrompt;

/** A `say:` prompt for one language. */
export interface SpokenPrompt {
  say: string;
  voice?: string;
  rate?: number;
}

/**
 * A prompt as people read it and as keys name it (assert.promptLengths, version diffs): an
 * audio URL or id as written, a spoken one as `say: <text>`.
 *
 * @example
 * promptLabel({ say: 'Hello {{name}}' }) // 'say: Hello {{name}}'
 */
export function promptLabel(prompt: PromptSource): string {
  return typeof prompt === 'string' ? prompt : `say: ${prompt.say}`;
}

/** The prompt of each of the flow's languages (a `say:` map picks its language too). */
export function localizePrompt(
  value: Prompt,
  languages: readonly string[],
): Record<string, PromptSource> {
  const pick = (v: PromptValue, lang: string): PromptSource => {
    if (typeof v === 'string') return v;
    const spoken: SpokenPrompt = {
      say: typeof v.say === 'string' ? v.say : (v.say[lang] ?? v.say[languages[0]!] ?? ''),
    };
    if (v.voice !== undefined) spoken.voice = v.voice;
    if (v.rate !== undefined) spoken.rate = v.rate;
    return spoken;
  };
  const out: Record<string, PromptSource> = {};
  for (const lang of languages) {
    if (typeof value === 'string' || 'say' in value) {
      out[lang] = pick(value as PromptValue, lang);
    } else {
      const v = value[lang] ?? value[languages[0]!];
      out[lang] = v === undefined ? '' : pick(v, lang);
    }
  }
  return out;
}

/** A prompt for each of the flow's languages. */
export function localize(value: Localized, languages: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const lang of languages) {
    out[lang] = typeof value === 'string' ? value : (value[lang] ?? value[languages[0]!] ?? '');
  }
  return out;
}

/**
 * The unrolled DAG of a checked flow (unknown gotos are treated as hangups; the checks
 * refuse such flows before this runs).
 *
 * @example
 * unroll(flow, ['en'], { maxVisits: 3, stopAfter: 200 }).nodes.map((n) => n.id)
 * // ['main', 'main/r1', 'reschedule', 'main/v2', ...]
 */
export function unroll(
  flow: FlowDefinition,
  languages: readonly string[],
  opts: UnrollOptions,
): Unrolled {
  const back = backEdges(flow);
  const nodes: CompiledNode[] = [];
  const byId = new Map<string, CompiledNode>();
  const queue: Array<[string, number, number]> = [];

  const enqueue = (menu: string, visit: number, attempt: number): string => {
    const id = nodeId(menu, visit, attempt);
    if (!byId.has(id)) {
      const m = flow.menus[menu]!;
      const prompt = attempt > 0 && m.reprompt !== undefined ? m.reprompt : m.intro;
      const node: CompiledNode = {
        id,
        index: nodes.length,
        menu,
        visit,
        attempt,
        intro: localizePrompt(prompt, languages),
        ...(m.timeout !== undefined ? { timeoutMs: parseDuration(m.timeout) } : {}),
        keys: {},
      };
      nodes.push(node);
      byId.set(id, node);
      queue.push([menu, visit, attempt]);
    }
    return id;
  };

  const resolve = (
    menu: string,
    visit: number,
    actions: readonly Action[],
    // a key's goto past the limit runs the menu's wrong actions; a goto among those hangs up
    fallbackToWrong: boolean,
    // told the menu a goto would have entered past the round limit
    onLimit: (target: string) => void,
  ): CompiledAction[] => {
    const out: CompiledAction[] = [];
    for (const action of effectiveActions(actions)) {
      if (typeof action === 'object' && 'goto' in action) {
        const target = action.goto;
        if (!flow.menus[target]) return [...out, { type: 'hangup' }];
        const round = back.has(edgeKey(menu, target)) ? visit + 1 : visit;
        if (round <= opts.maxVisits) {
          return [...out, { type: 'goto', node: enqueue(target, round, 0) }];
        }
        onLimit(target);
        if (!fallbackToWrong) return [...out, { type: 'hangup' }];
        const wrong = flow.menus[menu]!.wrong ?? ['hangup'];
        return [...out, ...resolve(menu, visit, wrong, false, () => {})];
      }
      out.push(compileEffect(action));
      if (action === 'hangup') return out;
    }
    out.push({ type: 'hangup' });
    return out;
  };

  enqueue(startMenu(flow), 1, 0);
  for (let i = 0; i < queue.length; i++) {
    if (nodes.length > opts.stopAfter) return { nodes, complete: false };
    const [menu, visit, attempt] = queue[i]!;
    const m = flow.menus[menu]!;
    const node = byId.get(nodeId(menu, visit, attempt))!;
    const limits: Partial<Record<NodeKey, string>> = {};
    for (const key of FLOW_KEYS) {
      const actions = m.keys?.[key];
      if (actions) {
        node.keys[key] = resolve(menu, visit, actions, true, (to) => {
          limits[key] = to;
        });
      }
    }
    node.keys.wrong =
      attempt < (m.retries ?? 0)
        ? [{ type: 'goto', node: enqueue(menu, visit, attempt + 1) }]
        : resolve(menu, visit, m.wrong ?? ['hangup'], false, (to) => {
            limits.wrong = to;
          });
    if (Object.keys(limits).length > 0) node.limits = limits;
  }
  return { nodes, complete: nodes.length <= opts.stopAfter };
}
