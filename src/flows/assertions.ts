/**
 * Proven properties of a flow: the `assert:` section (docs/flows.md, "Assertions"), checked
 * over every path of keys through the compiled, unrolled nodes.
 *
 * A path starts at the start node and ends where the call hangs up. At every node the inputs
 * are each key the node handles, `timeout` (silence) and one key it does not handle, as a
 * representative: every unhandled key runs the same `wrong` actions as silence. The unrolled
 * nodes form a DAG (retries and cycles are copies), so the properties are computed by dynamic
 * programming over it, each node once, never by listing paths (a flow of 200 nodes can have
 * more paths than there are atoms): the most messages and the longest call are longest-path
 * problems, the outcomes a path can end with are sets carried up from the ends. Each
 * counterexample is rebuilt by following the choice made at every node.
 *
 * A failing property is an issue with a path into `assert:` (the loader turns it into
 * file:line) and its counterexample keys, which `switchboard flows simulate --keys` plays.
 *
 * @example
 * for (const issue of checkFlowAssertions(compiled, definition.assert ?? {}))
 *   console.log(issue.rule, issue.message, issue.keys?.join(','));
 * // ASSERT_OUTCOME keys 2,timeout end the call without an outcome (it hangs up at reschedule) 2,timeout
 */
import type { FlowCheckIssue, FlowRule, IssuePath } from './checks.ts';
import type { CompiledFlow } from './compile.ts';
import { TERMINAL_STATUSES } from './machine-config.ts';
import {
  type AssertedPath,
  CALL_MESSAGE_STATUSES,
  FLOW_KEYS,
  type FlowAssertions,
  parseDuration,
  type SendMessage,
} from './schema.ts';
import {
  type CompiledAction,
  type CompiledNode,
  entryFor,
  type MenuInput,
  promptLabel,
  SILENCE,
  unhandledKeys,
} from './unroll.ts';

/** A failed assertion, with the keys of a path that shows it (when one does). */
export interface AssertionIssue extends FlowCheckIssue {
  keys?: string[];
}

/** A prompt as a node plays it: what the flow wrote (an audio URL or a provider id) and its language. */
export interface PromptRef {
  prompt: string;
  lang: string;
  /** The node that plays it (`main/r1`). */
  node: string;
}

/**
 * How long a prompt plays, in milliseconds, or undefined when unknown. The hook for prompts
 * whose length can be measured: text-to-speech prompts (not in the language yet) will plug a
 * measuring function in here, asked after the lengths the flow declares and before its
 * default.
 */
export type PromptMeasure = (prompt: PromptRef) => number | undefined;

export interface AssertionOptions {
  /** Measures prompts the flow declares no length for (see `PromptMeasure`). */
  measurePrompt?: PromptMeasure;
}

/** One input at one node: the actions it runs and the node it goes to (null: hang up). */
interface Edge {
  input: MenuInput;
  actions: readonly CompiledAction[];
  next: number | null;
}

interface Graph {
  nodes: readonly CompiledNode[];
  edges: Edge[][];
  /** Node indexes, every successor before its predecessors. */
  order: number[];
}

/**
 * The inputs that tell a node's paths apart: each key it handles in emit order, silence, and
 * the first key it does not handle (the rest run the same `wrong` actions).
 *
 * @example
 * assertionInputs(node) // ['1', '2', '9', 'timeout', '0']
 */
export function assertionInputs(node: Pick<CompiledNode, 'keys'>): MenuInput[] {
  const inputs: MenuInput[] = FLOW_KEYS.filter((key) => node.keys[key] !== undefined);
  inputs.push(SILENCE);
  const unhandled = unhandledKeys(node)[0];
  if (unhandled !== undefined) inputs.push(unhandled);
  return inputs;
}

function buildGraph(nodes: readonly CompiledNode[]): Graph {
  const indexOf = new Map(nodes.map((n, i) => [n.id, i]));
  const edges = nodes.map((node) =>
    assertionInputs(node).map((input): Edge => {
      const actions = node.keys[entryFor(node, input)] ?? [{ type: 'hangup' }];
      const last = actions.at(-1);
      return {
        input,
        actions,
        next: last?.type === 'goto' ? (indexOf.get(last.node) ?? null) : null,
      };
    }),
  );
  // Iterative depth-first post-order from the start: successors come out first. A grey node
  // met again would be a cycle, which unrolling never leaves.
  const order: number[] = [];
  const state = new Uint8Array(nodes.length); // 0 new, 1 on the stack, 2 done
  const stack: Array<[number, number]> = [[0, 0]];
  if (nodes.length > 0) state[0] = 1;
  while (stack.length > 0) {
    const top = stack[stack.length - 1]!;
    const [n, i] = top;
    const out = edges[n]!;
    if (i < out.length) {
      top[1] = i + 1;
      const next = out[i]!.next;
      if (next === null || state[next] === 2) continue;
      if (state[next] === 1)
        throw new Error(`unrolled flow has a cycle through ${nodes[next]!.id}`);
      state[next] = 1;
      stack.push([next, 0]);
    } else {
      state[n] = 2;
      order.push(n);
      stack.pop();
    }
  }
  return { nodes, edges, order };
}

interface Longest {
  value: number;
  keys: string[];
  /** The node whose input hung up. */
  end: number;
}

/**
 * The path with the greatest sum of node and edge weights (DAG longest path), rebuilt from
 * the best edge kept at each node. Ties keep the earlier input: handled keys, then silence.
 */
function longestPath(
  graph: Graph,
  nodeWeight: (node: number) => number,
  edgeWeight: (edge: Edge) => number,
): Longest {
  const best = new Float64Array(graph.nodes.length);
  const choice = new Int32Array(graph.nodes.length);
  for (const n of graph.order) {
    let value = -Infinity;
    graph.edges[n]!.forEach((edge, i) => {
      const v = edgeWeight(edge) + (edge.next === null ? 0 : best[edge.next]!);
      if (v > value) {
        value = v;
        choice[n] = i;
      }
    });
    best[n] = nodeWeight(n) + value;
  }
  const keys: string[] = [];
  let n = 0;
  for (;;) {
    const edge = graph.edges[n]![choice[n]!]!;
    keys.push(edge.input);
    if (edge.next === null) return { value: best[0]!, keys, end: n };
    n = edge.next;
  }
}

/** The last outcome an action list records, or null. */
function lastOutcome(actions: readonly CompiledAction[]): string | null {
  for (let i = actions.length - 1; i >= 0; i--) {
    const action = actions[i]!;
    if (action.type === 'outcome') return action.name;
  }
  return null;
}

/** null: a path that records no outcome. */
type Final = string | null;

interface Finals {
  /**
   * Per node, each outcome a path from it can end with: the edge and the length (in keys) of
   * the shortest such path, so a counterexample is as short as it can be.
   */
  at: Array<Map<Final, { edge: number; length: number }>>;
  graph: Graph;
}

/** The outcomes each node's paths can end with (the last outcome recorded wins). */
function pathFinals(graph: Graph): Finals {
  const at: Finals['at'] = graph.nodes.map(() => new Map());
  for (const n of graph.order) {
    const finals = at[n]!;
    graph.edges[n]!.forEach((edge, i) => {
      const own = lastOutcome(edge.actions);
      const after: Iterable<[Final, { length: number }]> =
        edge.next === null ? [[null, { length: 0 }]] : at[edge.next]!.entries();
      for (const [later, { length }] of after) {
        const final = later ?? own;
        const known = finals.get(final);
        if (!known || length + 1 < known.length) finals.set(final, { edge: i, length: length + 1 });
      }
    });
  }
  return { at, graph };
}

/** A path from the start that ends with `final`, which must be one of the start's. */
function pathEndingWith(finals: Finals, final: Final): Longest {
  const keys: string[] = [];
  let n = 0;
  for (;;) {
    const { edge: chosen, length } = finals.at[n]!.get(final)!;
    const edge = finals.graph.edges[n]![chosen]!;
    keys.push(edge.input);
    if (edge.next === null) return { value: 0, keys, end: n };
    // the rest ends with `final`, or with none when this edge recorded it: the one that
    // made this the shortest
    const rest = finals.at[edge.next]!;
    const same = rest.get(final);
    final =
      same && same.length === length - 1 && (final !== null || lastOutcome(edge.actions) === null)
        ? final
        : null;
    n = edge.next;
  }
}

/** How many messages one send may put on the customer's phone, of one type or all. */
function messagesOf(message: SendMessage, type: string): number {
  const sameType = (t: string) => type === 'total' || kindOf(t) === kindOf(type);
  // a fallback is sent when the message (or the fallback before it) fails: count each
  const fallbacks = [...(message.fallback ? [message.fallback] : []), ...(message.fallbacks ?? [])];
  return (sameType(message.type) ? 1 : 0) + fallbacks.filter((f) => sameType(f.type)).length;
}

// the provider reads viber_service as viber_trans: one type
const kindOf = (type: string) => (type === 'viber_service' ? 'viber_trans' : type);

function sendsIn(actions: readonly CompiledAction[], type: string): number {
  let n = 0;
  for (const action of actions) if (action.type === 'send') n += messagesOf(action.message, type);
  return n;
}

/**
 * The most messages of a type the `on:` reactions may add to one call, and which.
 *
 * Conservative on purpose. Each status reacts at most once per call (the machine records the
 * statuses it has seen). A status only moves up and `rejected`, `failed`, `expired` are final,
 * so at most one of those three runs; all the others may. Any of them may come with any path:
 * the docs leave open which status an answered call gets, and a late one may name a final
 * status after keys were pressed. `noResponse` is cancelled by the first key, but the call may
 * queue or ring for any time before it is answered and a key's webhook may arrive late, so
 * the timer may still fire with any path: it counts too.
 */
function reactionMessages(
  compiled: CompiledFlow,
  type: string,
): { count: number; parts: string[] } {
  const parts: string[] = [];
  let count = 0;
  let final: { status: string; n: number } | null = null;
  for (const status of CALL_MESSAGE_STATUSES) {
    const actions = compiled.on.statuses[status];
    if (!actions) continue;
    const n = sendsIn(actions, type);
    if (n === 0) continue;
    if (TERMINAL_STATUSES.includes(status)) {
      if (!final || n > final.n) final = { status, n };
    } else {
      count += n;
      parts.push(`${status} ${n}`);
    }
  }
  if (final) {
    count += final.n;
    parts.push(`${final.status} ${final.n}`);
  }
  const timer = compiled.on.noResponse;
  const n = timer ? sendsIn(timer.actions, type) : 0;
  if (n > 0) {
    count += n;
    parts.push(`noResponse ${n}`);
  }
  return { count, parts };
}

/** The outcome each `on:` reaction leaves, by the reaction's name. */
function reactionOutcomes(compiled: CompiledFlow): Map<string, string> {
  const out = new Map<string, string>();
  for (const status of CALL_MESSAGE_STATUSES) {
    const actions = compiled.on.statuses[status];
    const outcome = actions ? lastOutcome(actions) : null;
    if (outcome !== null) out.set(status, outcome);
  }
  const timer = compiled.on.noResponse;
  const outcome = timer ? lastOutcome(timer.actions) : null;
  if (outcome !== null) out.set('noResponse', outcome);
  return out;
}

/**
 * A duration for people: `3m 30s`, `12s`, `1h 5m`, `750ms`.
 *
 * @example
 * spokenDuration(210_000) // '3m 30s'
 */
export function spokenDuration(ms: number): string {
  if (ms < 1000) return `${ms}ms`;
  const parts: string[] = [];
  let s = Math.round(ms / 1000);
  for (const [unit, size] of [
    ['h', 3600],
    ['m', 60],
  ] as const) {
    if (s >= size) {
      parts.push(`${Math.floor(s / size)}${unit}`);
      s %= size;
    }
  }
  if (s > 0 || parts.length === 0) parts.push(`${s}s`);
  return parts.join(' ');
}

/** The declared lengths of prompts, then the measure hook, then the default. */
function promptLengthOf(assert: FlowAssertions, measure: PromptMeasure | undefined): PromptMeasure {
  const declared = new Map(
    Object.entries(assert.promptLengths ?? {}).map(([p, d]) => [p, parseDuration(d)]),
  );
  const fallback =
    assert.defaultPromptLength !== undefined
      ? parseDuration(assert.defaultPromptLength)
      : undefined;
  return (ref) => declared.get(ref.prompt) ?? measure?.(ref) ?? fallback;
}

/** A counterexample as `simulate --keys` takes it: `keys 2,timeout`. */
const pathText = (keys: readonly string[]) => `keys ${keys.join(',')}`;

/**
 * Checks a compiled flow against its `assert:` section; an empty list when every property
 * holds. Issue paths point into `assert:`; `keys` is the counterexample, when there is one.
 *
 * @example
 * checkFlowAssertions(compiled, { maxMessages: { sms: 1 } })
 * // [{ rule: 'ASSERT_MAX_MESSAGES', path: ['assert', 'maxMessages', 'sms'], keys: ['1'], ... }]
 */
export function checkFlowAssertions(
  compiled: CompiledFlow,
  assert: FlowAssertions,
  opts: AssertionOptions = {},
): AssertionIssue[] {
  const issues: AssertionIssue[] = [];
  const fail: Fail = (rule, path, message, keys, severity = 'error') =>
    issues.push({ severity, rule, path, message, ...(keys ? { keys } : {}) });
  if (compiled.nodes.length === 0) return issues;
  const graph = buildGraph(compiled.nodes);
  const nodeId = (n: number) => graph.nodes[n]!.id;

  const finals = pathFinals(graph);
  const atStart = finals.at[0]!;
  if (assert.outcomeOnEveryPath !== false && atStart.has(null)) {
    const p = pathEndingWith(finals, null);
    // on by default: pointed at the menu the call hangs up in, unless the flow asked for it
    fail(
      'ASSERT_OUTCOME',
      assert.outcomeOnEveryPath === undefined
        ? ['menus', graph.nodes[p.end]!.menu]
        : ['assert', 'outcomeOnEveryPath'],
      `${pathText(p.keys)} end the call without an outcome (it hangs up at ${nodeId(p.end)})${
        assert.outcomeOnEveryPath === undefined
          ? '; every path needs one (on by default): record an outcome there, or set assert: { outcomeOnEveryPath: false }'
          : ''
      }`,
      p.keys,
    );
  }

  for (const [type, limit] of Object.entries(assert.maxMessages ?? {})) {
    if (limit === undefined) continue;
    const onPath = longestPath(
      graph,
      () => 0,
      (edge) => sendsIn(edge.actions, type),
    );
    const reactions = reactionMessages(compiled, type);
    const total = onPath.value + reactions.count;
    if (total <= limit) continue;
    const what = type === 'total' ? 'messages' : `messages of type ${type}`;
    const along =
      onPath.value > 0 ? `${pathText(onPath.keys)} send ${onPath.value}` : 'no path sends one';
    const added =
      reactions.count > 0
        ? `, and on: reactions may add ${reactions.count} in the same call (${reactions.parts.join(', ')})`
        : '';
    fail(
      'ASSERT_MAX_MESSAGES',
      ['assert', 'maxMessages', type],
      `up to ${total} ${what} in one call, over ${limit}: ${along}${added}`,
      onPath.value > 0 ? onPath.keys : undefined,
    );
  }

  if (assert.maxDuration !== undefined) checkDuration(graph, assert, opts, fail);

  const recorded = reactionOutcomes(compiled);
  assert.reachable?.forEach((name, i) => {
    if (atStart.has(name) || [...recorded.values()].includes(name)) return;
    const known = new Set([...atStart.keys(), ...recorded.values()].filter((o) => o !== null));
    fail(
      'ASSERT_REACHABLE',
      ['assert', 'reachable', i],
      `no path and no on: reaction ends a call with outcome ${name} (those that can: ${[...known].join(', ') || 'none'})`,
    );
  });
  assert.unreachable?.forEach((name, i) => {
    if (atStart.has(name)) {
      const p = pathEndingWith(finals, name);
      fail(
        'ASSERT_UNREACHABLE',
        ['assert', 'unreachable', i],
        `${pathText(p.keys)} end the call with outcome ${name} (it hangs up at ${nodeId(p.end)})`,
        p.keys,
      );
      return;
    }
    const reaction = [...recorded].find(([, outcome]) => outcome === name)?.[0];
    if (reaction !== undefined) {
      fail(
        'ASSERT_UNREACHABLE',
        ['assert', 'unreachable', i],
        `on: ${reaction} records outcome ${name}, and may come last in a call`,
      );
    }
  });

  assert.paths?.forEach((path, i) => {
    checkPath(graph, path, ['assert', 'paths', i], fail);
  });
  return issues;
}

type Fail = (
  rule: FlowRule,
  path: IssuePath,
  message: string,
  keys?: string[],
  severity?: 'error' | 'warning',
) => void;

/** Plays one `assert.paths` entry through the nodes. */
function checkPath(graph: Graph, path: AssertedPath, at: IssuePath, fail: Fail): void {
  const keys = path.keys.map(String);
  const named = path.name === undefined ? '' : `"${path.name}": `;
  let n: number | null = 0;
  let outcome: string | null = null;
  let end = 0;
  for (let i = 0; i < keys.length; i++) {
    if (n === null) {
      fail(
        'ASSERT_PATH',
        [...at, 'keys', i],
        `${named}the call hangs up at ${graph.nodes[end]!.id} after ${pathText(keys.slice(0, i))}: ${keys.slice(i).join(',')} is never heard`,
        keys.slice(0, i),
      );
      return;
    }
    const node: CompiledNode = graph.nodes[n]!;
    const actions: readonly CompiledAction[] = node.keys[entryFor(node, keys[i]!)] ?? [
      { type: 'hangup' },
    ];
    outcome = lastOutcome(actions) ?? outcome;
    const last: CompiledAction | undefined = actions.at(-1);
    end = n;
    n = last?.type === 'goto' ? graph.nodes.findIndex((x) => x.id === last.node) : null;
  }
  if (n !== null) {
    fail(
      'ASSERT_PATH',
      [...at, 'keys'],
      `${named}after ${pathText(keys)} the call still waits at ${graph.nodes[n]!.id}: give the keys until it hangs up`,
      keys,
    );
    return;
  }
  const ends =
    outcome === null ? 'end the call without an outcome' : `end the call with outcome ${outcome}`;
  if (path.outcome !== undefined && outcome !== path.outcome) {
    fail(
      'ASSERT_PATH',
      [...at, 'outcome'],
      `${named}${pathText(keys)} ${ends}, not ${path.outcome}`,
      keys,
    );
  }
  const not = path.not === undefined ? [] : typeof path.not === 'string' ? [path.not] : path.not;
  if (outcome !== null && not.includes(outcome)) {
    fail('ASSERT_PATH', [...at, 'not'], `${named}${pathText(keys)} ${ends}`, keys);
  }
}

/**
 * `maxDuration`: every node on a path plays its longest prompt (over the languages) and then
 * waits its whole timeout, the most a caller can make it last whatever they press. The call
 * is counted from answer to hang-up: ringing is not the flow's.
 */
function checkDuration(
  graph: Graph,
  assert: FlowAssertions,
  opts: AssertionOptions,
  fail: Fail,
): void {
  const at: IssuePath = ['assert', 'maxDuration'];
  const limit = parseDuration(assert.maxDuration!);
  const lengthOf = promptLengthOf(assert, opts.measurePrompt);
  const defaultTimeout =
    assert.defaultTimeout !== undefined ? parseDuration(assert.defaultTimeout) : undefined;
  const weights = new Float64Array(graph.nodes.length);
  const unknownPrompts = new Map<string, string>();
  const noTimeout = new Set<string>();
  graph.nodes.forEach((node, n) => {
    let prompt = 0;
    for (const [lang, source] of Object.entries(node.intro)) {
      // a spoken prompt is named `say: <text>`, as promptLengths lists it
      const text = promptLabel(source);
      const ms = lengthOf({ prompt: text, lang, node: node.id });
      if (ms === undefined) {
        if (!unknownPrompts.has(text)) unknownPrompts.set(text, node.id);
      } else prompt = Math.max(prompt, ms);
    }
    const timeout = node.timeoutMs ?? defaultTimeout;
    if (timeout === undefined) noTimeout.add(node.menu);
    weights[n] = prompt + (timeout ?? 0);
  });
  for (const [prompt, node] of unknownPrompts) {
    fail(
      'ASSERT_PROMPT_LENGTH',
      at,
      `prompt "${prompt}" (played by ${node}) has no declared length: list it in assert.promptLengths or set assert.defaultPromptLength`,
    );
  }
  for (const menu of noTimeout) {
    fail(
      'ASSERT_TIMEOUT',
      at,
      `menu ${menu} has no timeout and the provider documents no default wait for a key: give the menu a timeout, or state the wait to assume as assert.defaultTimeout`,
    );
  }
  const declared = new Set(
    graph.nodes.flatMap((node) => Object.values(node.intro).map(promptLabel)),
  );
  for (const prompt of Object.keys(assert.promptLengths ?? {})) {
    if (!declared.has(prompt)) {
      fail(
        'ASSERT_PROMPT_LENGTH',
        ['assert', 'promptLengths', prompt],
        `no menu plays prompt "${prompt}" (a prompt is named as its intro or reprompt is written)`,
        undefined,
        'warning',
      );
    }
  }
  if (unknownPrompts.size > 0 || noTimeout.size > 0) return;
  const longest = longestPath(
    graph,
    (n) => weights[n]!,
    () => 0,
  );
  if (longest.value <= limit) return;
  fail(
    'ASSERT_MAX_DURATION',
    at,
    `the longest call lasts ${spokenDuration(longest.value)}, over ${spokenDuration(limit)}: ${pathText(longest.keys)} play ${longest.keys.length} menus, each its longest prompt and then its whole timeout`,
    longest.keys,
  );
}
