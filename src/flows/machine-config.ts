/**
 * The call machine as a JSON xstate config: one state per unrolled node plus `$end`, key
 * events guarded by (node, key), status and timer reactions at the root. Guards and actions
 * are named with params, so the config is data (hashable, storable, snapshot-tested) and
 * `createFlowMachine` supplies the implementations.
 *
 * Action entries are the effects a transition has, in order; see `FlowEffect` in
 * `machine.ts` for what the caller receives.
 */
import type { CompiledReactions } from './compile.ts';
import type { CallMessageStatus, SendMessage } from './schema.ts';
import { type CompiledAction, type CompiledNode, NODE_KEYS } from './unroll.ts';

/** The state a call is in once the provider has hung up (or we know it will). */
export const END_STATE = '$end';
/** The only durable timer of the language today. */
export const NO_RESPONSE_TIMER = 'noResponse';
/** Statuses after which the call can produce no key, so its timer is moot. */
export const TERMINAL_STATUSES: readonly CallMessageStatus[] = ['rejected', 'failed', 'expired'];

export type ConfigAction =
  | {
      type: 'step';
      params: { node: string; menu: string; visit: number; attempt: number; key: string };
    }
  | { type: 'outcome'; params: { name: string } }
  | { type: 'send'; params: { id: string; message: SendMessage } }
  /** `node`: the node whose key ran it; null for an `on:` reaction */
  | {
      type: 'notify';
      params: { endpoint: string; node: string | null; data?: Record<string, unknown> };
    }
  | {
      type: 'providerWebhook';
      params: { url: string; body?: Record<string, unknown>; headers?: Record<string, string> };
    }
  | { type: 'hangup'; params: { node: string } }
  /** `node`: the node whose key ran it; null for an `on:` reaction */
  | { type: 'optOut'; params: { node: string | null } }
  | { type: 'startTimer'; params: { timer: string; afterMs: number } }
  | { type: 'cancelTimer'; params: { timer: string } }
  | { type: 'timerFired'; params: { timer: string } }
  /** Records the event's status as seen. */
  | { type: 'status' };

export type ConfigGuard =
  | { type: 'key'; params: { node: string; key: string } }
  | { type: 'wrong'; params: { node: string; keys: string[] } }
  | { type: 'status'; params: { status: string; pendingTimer?: string } }
  | { type: 'newStatus' }
  | { type: 'timer'; params: { timer: string } };

export interface ConfigTransition {
  guard: ConfigGuard;
  target?: string;
  actions: ConfigAction[];
}

export interface FlowMachineConfig {
  id: string;
  initial: string;
  entry: ConfigAction[];
  states: Record<string, { on?: { KEY: ConfigTransition[] } }>;
  on: { STATUS: ConfigTransition[]; TIMER: ConfigTransition[] };
}

/**
 * Effects of one action list; `id` prefixes follow-up ids (`<id>:<index>`), `node` is the
 * node whose key runs it (null for a reaction).
 */
function effects(
  actions: readonly CompiledAction[],
  id: string,
  node: string | null = null,
): ConfigAction[] {
  const out: ConfigAction[] = [];
  actions.forEach((action, i) => {
    switch (action.type) {
      case 'outcome':
        out.push({ type: 'outcome', params: { name: action.name } });
        break;
      case 'send':
        out.push({ type: 'send', params: { id: `${id}:${i}`, message: action.message } });
        break;
      case 'webhook': {
        const { type: _, ...params } = action;
        out.push({ type: 'providerWebhook', params });
        break;
      }
      case 'notify':
        out.push({
          type: 'notify',
          params: {
            endpoint: action.endpoint,
            node,
            ...(action.data ? { data: action.data } : {}),
          },
        });
        break;
      case 'opt-out':
        out.push({ type: 'optOut', params: { node } });
        break;
      case 'goto':
      case 'hangup':
        break;
    }
  });
  return out;
}

/**
 * The machine config of unrolled nodes and reactions.
 *
 * @example
 * buildMachineConfig('survey', nodes, { statuses: {} }).states.main.on.KEY[0].guard
 * // { type: 'key', params: { node: 'main', key: '1' } }
 */
export function buildMachineConfig(
  id: string,
  nodes: readonly CompiledNode[],
  on: CompiledReactions,
): FlowMachineConfig {
  const start = nodes[0]!;
  const timer = on.noResponse ? NO_RESPONSE_TIMER : undefined;
  const states: FlowMachineConfig['states'] = {};
  for (const node of nodes) {
    const transitions: ConfigTransition[] = [];
    const defined = NODE_KEYS.filter((k) => k !== 'wrong' && node.keys[k]);
    for (const key of NODE_KEYS) {
      const actions = node.keys[key];
      if (!actions) continue;
      const last = actions.at(-1)!;
      const out: ConfigAction[] = [
        {
          type: 'step',
          params: { node: node.id, menu: node.menu, visit: node.visit, attempt: node.attempt, key },
        },
      ];
      // The start node is never entered again (every goto to it closes a cycle), so its keys
      // are the only possible first key: that is where the no-response timer stops.
      if (timer && node === start) out.push({ type: 'cancelTimer', params: { timer } });
      out.push(...effects(actions, `${node.id}:${key}`, node.id));
      if (last.type === 'hangup') out.push({ type: 'hangup', params: { node: node.id } });
      transitions.push({
        guard:
          key === 'wrong'
            ? { type: 'wrong', params: { node: node.id, keys: defined } }
            : { type: 'key', params: { node: node.id, key } },
        target: last.type === 'goto' ? last.node : END_STATE,
        actions: out,
      });
    }
    states[node.id] = { on: { KEY: transitions } };
  }
  states[END_STATE] = {};

  // First match wins: a terminal status with the timer still running also cancels it; any
  // status not seen before is recorded; a repeated status matches nothing and changes nothing.
  const status: ConfigTransition[] = [];
  for (const name of Object.keys(on.statuses) as CallMessageStatus[]) {
    const reaction = effects(on.statuses[name]!, `on:${name}`);
    if (timer && TERMINAL_STATUSES.includes(name)) {
      status.push({
        guard: { type: 'status', params: { status: name, pendingTimer: timer } },
        actions: [{ type: 'status' }, { type: 'cancelTimer', params: { timer } }, ...reaction],
      });
    }
    status.push({
      guard: { type: 'status', params: { status: name } },
      actions: [{ type: 'status' }, ...reaction],
    });
  }
  if (timer) {
    for (const name of TERMINAL_STATUSES) {
      if (on.statuses[name]) continue;
      status.push({
        guard: { type: 'status', params: { status: name, pendingTimer: timer } },
        actions: [{ type: 'status' }, { type: 'cancelTimer', params: { timer } }],
      });
    }
  }
  status.push({ guard: { type: 'newStatus' }, actions: [{ type: 'status' }] });

  return {
    id,
    initial: start.id,
    entry: on.noResponse
      ? [
          {
            type: 'startTimer',
            params: { timer: NO_RESPONSE_TIMER, afterMs: on.noResponse.afterMs },
          },
        ]
      : [],
    states,
    on: {
      STATUS: status,
      TIMER: on.noResponse
        ? [
            {
              guard: { type: 'timer', params: { timer: NO_RESPONSE_TIMER } },
              actions: [
                { type: 'timerFired', params: { timer: NO_RESPONSE_TIMER } },
                ...effects(on.noResponse.actions, `on:${NO_RESPONSE_TIMER}`),
              ],
            },
          ]
        : [],
    },
  };
}

/** Types of `ConfigAction` that the caller receives as effects (the rest only update context). */
export const EFFECT_TYPES = new Set([
  'step',
  'outcome',
  'send',
  'providerWebhook',
  'notify',
  'optOut',
  'hangup',
  'startTimer',
  'cancelTimer',
]);
