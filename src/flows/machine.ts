/**
 * The machine that follows one call on our side, built from a compiled flow's JSON config.
 *
 * It is meant to be run purely: `startFlow` (xstate `initialTransition`) and `stepFlow`
 * (`transition`) return the next snapshot and the effects as data; the caller executes the
 * effects inside the same database transaction that stores the snapshot. Nothing here has a
 * side effect, and timers are effects too (`startTimer` / `cancelTimer`), fired back as
 * `TIMER` events by whoever keeps them durable.
 *
 * Events:
 * - `{ type: 'KEY', node, key }` from a tracking webhook: `key` is the caller's input as the
 *   token names it, `0`-`9`, `*`, `#` or `timeout` (silence), or `wrong` (a menu rendered
 *   before silence and unhandled keys had entries of their own: either). A key the node does
 *   not handle, and silence, take its `wrong` transition, and the path step records the input.
 *   A KEY for another node than the current one is not handled (`handled: false`): hold it
 *   until the machine gets there, which is what makes out-of-order webhooks come out in order.
 * - `{ type: 'STATUS', status }` for the call message's statuses; each reacts once.
 * - `{ type: 'TIMER', timer: 'noResponse' }` when a started timer fires.
 *
 * @example
 * const machine = createFlowMachine(compiled);
 * let { snapshot, effects } = startFlow(machine, { vars, lang: 'uk', to: '+380501234567' });
 * ({ snapshot, effects } = stepFlow(machine, snapshot, { type: 'KEY', node: 'main', key: '1' }));
 * // effects: step, cancelTimer, outcome confirmed, send main:1:1, hangup
 */
import {
  type AnyMachineSnapshot,
  assign,
  initialTransition,
  type SnapshotFrom,
  setup,
  transition,
} from 'xstate';
import type { CompiledFlow } from './compile.ts';
import {
  type ConfigAction,
  type ConfigTransition,
  EFFECT_TYPES,
  END_STATE,
} from './machine-config.ts';
import { type RenderedMessage, renderMessage, resolveLanguage } from './render.ts';
import { FLOW_KEYS } from './schema.ts';
import { renderDeep } from './template.ts';
import { SILENCE } from './unroll.ts';

export interface PathStep {
  node: string;
  menu: string;
  visit: number;
  attempt: number;
  /** The node key whose actions ran: a key it handles, or `wrong`. */
  key: string;
  /**
   * On a `wrong` step, what the caller did: `timeout` (silence) or the key pressed that the
   * node does not handle. Absent on other steps (the key is the input), and on a `wrong` step
   * whose webhook came from a menu that did not tell them apart.
   */
  input?: string;
}

/** What may take a node's `wrong` transition: silence, a key, or `wrong` of an older menu. */
const WRONG_INPUTS: ReadonlySet<string> = new Set([...FLOW_KEYS, SILENCE, 'wrong']);

/** A path step of a transition: on a `wrong` step, with the caller's input when known. */
function pathStep(params: PathStep, event: FlowEvent): PathStep {
  if (params.key !== 'wrong' || event.type !== 'KEY' || event.key === 'wrong') return params;
  return { ...params, input: event.key };
}

export interface FlowContext {
  vars: Record<string, unknown>;
  lang: string;
  to: string | null;
  from: string | null;
  /** Every key handled, in order. */
  path: PathStep[];
  /** The last outcome recorded, if any. */
  outcome: string | null;
  /** Statuses of the call message seen so far. */
  statuses: string[];
  /** Timers started and neither cancelled nor fired. */
  timers: string[];
  /** True once the menu has hung up. */
  ended: boolean;
}

export interface FlowInput {
  /** Validated vars (see `validateVars`). */
  vars?: Record<string, unknown>;
  /** Defaults to the flow's first language. */
  lang?: string | null;
  /** The callee, the default recipient of follow-ups. */
  to?: string | null;
  /** The call's sender, the default sender of follow-ups. */
  from?: string | null;
}

export type FlowEvent =
  | { type: 'KEY'; node: string; key: string }
  | { type: 'STATUS'; status: string }
  | { type: 'TIMER'; timer: string };

/** What the caller must do (or record) after a transition, in order. */
export type FlowEffect =
  /** A key (or silence) handled at a node: append to the call's path. */
  | ({ type: 'step' } & PathStep)
  /** Record the call's outcome (the last one wins). */
  | { type: 'outcome'; name: string }
  /** Queue a follow-up; `id` (`<node>:<key>:<index>`, `on:<status>:<index>`) is unique within the call. */
  | { type: 'send'; id: string; message: RenderedMessage }
  /**
   * Record a `flow.notify` event for the endpoint of that name: `node` is the node whose key
   * ran it (null for a reaction), `data` the action's extra fields rendered, and the call's
   * path, outcome, `to` and vars as the transition leaves them.
   */
  | {
      type: 'notify';
      endpoint: string;
      /** the flow and the version the call is pinned to */
      flow: string;
      flowVersion: string;
      node: string | null;
      data?: Record<string, unknown>;
      path: PathStep[];
      outcome: string | null;
      to: string | null;
      vars: Record<string, unknown>;
    }
  /** The provider called this URL itself; for the timeline only, never call it. */
  | {
      type: 'providerWebhook';
      url: string;
      body?: Record<string, unknown>;
      headers?: Record<string, string>;
    }
  /**
   * Put the callee (`to`) on the opt-out list: `node` is the node whose key ran it (null for
   * a reaction).
   */
  | { type: 'optOut'; node: string | null; to: string | null }
  /** The menu hung up after this node. */
  | { type: 'hangup'; node: string }
  /** Start a durable timer: send `{ type: 'TIMER', timer }` after `afterMs`. */
  | { type: 'startTimer'; timer: string; afterMs: number }
  /** Drop that timer, if it has not fired. */
  | { type: 'cancelTimer'; timer: string };

interface GuardArgs {
  context: FlowContext;
  event: FlowEvent;
}

const noop = () => {};

// Pure data: guards and effect placeholders shared by every flow machine.
const flowSetup = setup({
  types: {
    context: {} as FlowContext,
    events: {} as FlowEvent,
    input: {} as FlowInput,
  },
  guards: {
    key: ({ event }: GuardArgs, p: { node: string; key: string }) =>
      event.type === 'KEY' && event.node === p.node && event.key === p.key,
    wrong: ({ event }: GuardArgs, p: { node: string; keys: string[] }) =>
      event.type === 'KEY' &&
      event.node === p.node &&
      WRONG_INPUTS.has(event.key) &&
      !p.keys.includes(event.key),
    status: ({ context, event }: GuardArgs, p: { status: string; pendingTimer?: string }) =>
      event.type === 'STATUS' &&
      event.status === p.status &&
      !context.statuses.includes(p.status) &&
      (p.pendingTimer === undefined || context.timers.includes(p.pendingTimer)),
    newStatus: ({ context, event }: GuardArgs) =>
      event.type === 'STATUS' && !context.statuses.includes(event.status),
    timer: ({ context, event }: GuardArgs, p: { timer: string }) =>
      event.type === 'TIMER' && event.timer === p.timer && context.timers.includes(p.timer),
  },
  actions: {
    step: (_: unknown, _p: PathStep) => noop(),
    outcome: (_: unknown, _p: { name: string }) => noop(),
    send: (_: unknown, _p: { id: string; message: RenderedMessage }) => noop(),
    providerWebhook: (_: unknown, _p: { url: string }) => noop(),
    notify: (_: unknown, _p: { endpoint: string }) => noop(),
    optOut: (_: unknown, _p: { node: string | null }) => noop(),
    hangup: (_: unknown, _p: { node: string }) => noop(),
    startTimer: (_: unknown, _p: { timer: string; afterMs: number }) => noop(),
    cancelTimer: (_: unknown, _p: { timer: string }) => noop(),
  },
});

/** The context after a transition's actions, applied in order. */
function reduce(
  context: FlowContext,
  actions: readonly ConfigAction[],
  event: FlowEvent,
): FlowContext {
  let next = context;
  for (const action of actions) {
    switch (action.type) {
      case 'step':
        next = { ...next, path: [...next.path, { ...pathStep(action.params, event) }] };
        break;
      case 'outcome':
        next = { ...next, outcome: action.params.name };
        break;
      case 'hangup':
        next = { ...next, ended: true };
        break;
      case 'startTimer':
        next = { ...next, timers: [...next.timers, action.params.timer] };
        break;
      case 'cancelTimer':
      case 'timerFired':
        next = { ...next, timers: next.timers.filter((t) => t !== action.params.timer) };
        break;
      case 'status':
        if (event.type === 'STATUS') next = { ...next, statuses: [...next.statuses, event.status] };
        break;
      case 'send':
      case 'providerWebhook':
      case 'notify':
      case 'optOut':
        break;
    }
  }
  return next;
}

/**
 * xstate actions of one config action list: the context update, then each effect. `flow`:
 * the compiled flow's id and version, which a notify effect names.
 */
function toActions(
  actions: readonly ConfigAction[],
  flow: Pick<CompiledFlow, 'id' | 'version'>,
): unknown[] {
  const out: unknown[] = [
    assign(({ context, event }: { context: FlowContext; event: FlowEvent }) =>
      reduce(context, actions, event),
    ),
  ];
  for (const action of actions) {
    if (!EFFECT_TYPES.has(action.type)) continue;
    if (action.type === 'send') {
      const { id, message } = action.params;
      out.push({
        type: 'send',
        params: ({ context }: { context: FlowContext }) => ({
          id,
          message: renderMessage(message, context),
        }),
      });
    } else if (action.type === 'step') {
      const params = action.params;
      out.push({
        type: 'step',
        params: ({ event }: { event: FlowEvent }) => pathStep(params, event),
      });
    } else if (action.type === 'notify') {
      const { endpoint, node, data } = action.params;
      // the context here is the one the transition's assign (first) left: path and outcome
      // include this key's step and every outcome of its list
      out.push({
        type: 'notify',
        params: ({ context }: { context: FlowContext }) => ({
          endpoint,
          flow: flow.id,
          flowVersion: flow.version,
          node,
          ...(data ? { data: renderDeep(data, context.vars) } : {}),
          path: context.path,
          outcome: context.outcome,
          to: context.to,
          vars: context.vars,
        }),
      });
    } else if (action.type === 'optOut') {
      const { node } = action.params;
      out.push({
        type: 'optOut',
        params: ({ context }: { context: FlowContext }) => ({ node, to: context.to }),
      });
    } else if (action.type === 'providerWebhook') {
      const params = action.params;
      out.push({
        type: 'providerWebhook',
        params: ({ context }: { context: FlowContext }) => renderDeep(params, context.vars),
      });
    } else {
      out.push(action);
    }
  }
  return out;
}

function toTransition(
  t: ConfigTransition,
  flow: Pick<CompiledFlow, 'id' | 'version'>,
): Record<string, unknown> {
  return {
    guard: t.guard,
    ...(t.target !== undefined ? { target: t.target } : {}),
    actions: toActions(t.actions, flow),
  };
}

/**
 * The xstate machine of a compiled flow. Input: `FlowInput`; the language is checked
 * against the flow's (an unknown one throws `INVALID_LANGUAGE`).
 *
 * @example
 * const [snapshot, actions] = initialTransition(createFlowMachine(compiled), { vars });
 */
export function createFlowMachine(compiled: CompiledFlow) {
  const config = compiled.machineConfig;
  const states: Record<string, unknown> = {};
  for (const [id, state] of Object.entries(config.states)) {
    states[id] = state.on
      ? { on: { KEY: state.on.KEY.map((t) => toTransition(t, compiled)) } }
      : {};
  }
  const machineConfig = {
    id: config.id,
    initial: config.initial,
    context: ({ input }: { input: FlowInput | undefined }): FlowContext => ({
      vars: { ...(input?.vars ?? {}) },
      lang: resolveLanguage(compiled, input?.lang),
      to: input?.to ?? null,
      from: input?.from ?? null,
      path: [],
      outcome: null,
      statuses: [],
      timers: [],
      ended: false,
    }),
    entry: toActions(config.entry, compiled),
    states,
    on: {
      STATUS: config.on.STATUS.map((t) => toTransition(t, compiled)),
      TIMER: config.on.TIMER.map((t) => toTransition(t, compiled)),
    },
  };
  // The states are built from data, so their names cannot be known to the type checker;
  // the guards and actions they name are the typed ones of `flowSetup`.
  return flowSetup.createMachine(
    machineConfig as unknown as Parameters<typeof flowSetup.createMachine>[0],
  );
}

export type FlowMachine = ReturnType<typeof createFlowMachine>;
export type FlowSnapshot = SnapshotFrom<FlowMachine>;

/** Effects from xstate's executable actions (context updates are not effects). */
export function effectsOf(
  actions: ReadonlyArray<{ type: string; params?: unknown }>,
): FlowEffect[] {
  return actions
    .filter((a) => EFFECT_TYPES.has(a.type))
    .map((a) => ({ type: a.type, ...(a.params as object) }) as FlowEffect);
}

/**
 * The first snapshot of a call and its effects (the no-response timer, if the flow has one).
 *
 * @example
 * const { snapshot, effects } = startFlow(machine, { vars: { name: 'Ann' } });
 */
export function startFlow(
  machine: FlowMachine,
  input: FlowInput = {},
): { snapshot: FlowSnapshot; effects: FlowEffect[] } {
  const [snapshot, actions] = initialTransition(machine, input);
  // xstate keeps an error thrown while building the context in the snapshot; surface it
  if (snapshot.status === 'error') throw snapshot.error;
  return { snapshot, effects: effectsOf(actions) };
}

/**
 * One event: the next snapshot and its effects. `handled` is false when the event changes
 * nothing (a key for another node, a repeated status, a timer no longer running).
 *
 * @example
 * stepFlow(machine, snapshot, { type: 'STATUS', status: 'failed' }).effects
 * // [{ type: 'send', id: 'on:failed:0', message: { type: 'sms', ... } }]
 */
export function stepFlow(
  machine: FlowMachine,
  snapshot: FlowSnapshot,
  event: FlowEvent,
): { snapshot: FlowSnapshot; effects: FlowEffect[]; handled: boolean } {
  const [next, actions] = transition(machine, snapshot, event);
  return { snapshot: next, effects: effectsOf(actions), handled: next !== snapshot };
}

/** The node whose keys the call is waiting for; null once the menu has ended. */
export function currentNode(snapshot: AnyMachineSnapshot): string | null {
  const value = snapshot.value;
  return typeof value === 'string' && value !== END_STATE ? value : null;
}

/**
 * What to do with a key event (from a verified webhook token) given where the call is:
 * - `apply`: it is for the current node; `stepFlow` it.
 * - `hold`: its node is still ahead; keep it and retry after each applied event (webhooks
 *   arrive out of order, the path must not depend on it).
 * - `duplicate`: its node was already left; a retried or repeated webhook, nothing to do.
 * - `stale`: its node can no longer be reached (another branch was taken, or the call ended).
 *
 * @example
 * keyEventDisposition(compiled, snapshot, { type: 'KEY', node: 'reschedule', key: '1' }) // 'hold'
 */
export function keyEventDisposition(
  compiled: CompiledFlow,
  snapshot: FlowSnapshot,
  event: { node: string },
): 'apply' | 'hold' | 'duplicate' | 'stale' {
  if (snapshot.context.path.some((step) => step.node === event.node)) return 'duplicate';
  const current = currentNode(snapshot);
  if (current === null) return 'stale';
  if (current === event.node) return 'apply';
  const byId = new Map(compiled.nodes.map((n) => [n.id, n]));
  const seen = new Set([current]);
  const queue = [current];
  while (queue.length > 0) {
    const node = byId.get(queue.shift()!);
    for (const actions of Object.values(node?.keys ?? {})) {
      const last = actions.at(-1);
      if (last?.type !== 'goto' || seen.has(last.node)) continue;
      if (last.node === event.node) return 'hold';
      seen.add(last.node);
      queue.push(last.node);
    }
  }
  return 'stale';
}

/** A snapshot as JSON for the database; `restoreFlowSnapshot` reads it back. */
export function persistFlowSnapshot(snapshot: FlowSnapshot): {
  value: string;
  context: FlowContext;
} {
  return { value: snapshot.value as string, context: snapshot.context };
}

/**
 * A stored snapshot back as one the machine can transition; the machine must be the one of
 * the flow version the call is pinned to.
 *
 * @example
 * stepFlow(machine, restoreFlowSnapshot(machine, row.snapshot), event)
 */
export function restoreFlowSnapshot(
  machine: FlowMachine,
  stored: { value: string; context: FlowContext },
): FlowSnapshot {
  return machine.resolveState({ value: stored.value, context: stored.context } as never);
}
