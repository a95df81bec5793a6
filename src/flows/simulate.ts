/**
 * One call, played twice: by the flow's machine (key events in, effects out) and by the
 * reference executor over the rendered provider menu (keys in, webhooks out). The menu side
 * learns each step's (node, key) only from the signed token of its tracking webhook, so
 * when the two disagree on the path, the outcome, the follow-ups, the provider's own
 * webhooks or where the call ends, the compiler is wrong, and `differences` says where.
 *
 * @example
 * const sim = simulateFlow(compiled, { keys: ['1', 'timeout', '2'], vars });
 * sim.agree // true
 * sim.machine.outcome // 'confirmed'
 */
import { AppError } from '../errors.ts';
import type { SpeechMenu } from '../provider/menu.ts';
import type { CompiledFlow } from './compile.ts';
import { CALLER_INPUTS, executeMenu, type MenuRun, type PostedWebhook } from './executor.ts';
import {
  createFlowMachine,
  currentNode,
  type FlowEffect,
  type FlowEvent,
  type FlowMachine,
  type FlowSnapshot,
  startFlow,
  stepFlow,
} from './machine.ts';
import { type RenderedMessage, renderMenu, renderMessage, resolveLanguage } from './render.ts';
import { renderDeep } from './template.ts';
import { type NodeToken, signNodeToken, type TokenSecret, verifyNodeToken } from './token.ts';
import { entryFor } from './unroll.ts';
import { validateVars } from './vars.ts';

/**
 * One key handled: the node and the node key whose actions ran (`1`, `wrong`). On a `wrong`
 * step, `input` says what the caller did: `timeout` (silence) or the key pressed that the
 * node does not handle (`7`). A real call records the same: each unhandled key has its own
 * menu entry whose token names it, and the provider's `wrong` entry runs on silence alone.
 */
export interface SimulatedStep {
  node: string;
  key: string;
  input?: string;
}

export interface SimulatedNotify {
  endpoint: string;
  node: string;
  data?: Record<string, unknown>;
}

export interface SimulationSide {
  /** Every key handled, in order. */
  path: SimulatedStep[];
  outcome: string | null;
  sends: Array<{ id: string; message: RenderedMessage }>;
  /** Webhooks the provider calls itself (the flow's `webhook:` actions). */
  providerWebhooks: PostedWebhook[];
  /** `notify:` actions run, in order: the endpoint, the node and the rendered extra data. */
  notifies: SimulatedNotify[];
  /** True once the menu hung up. */
  ended: boolean;
  /** The node still waiting for a key, when not ended. */
  waitingAt: string | null;
}

export interface SimulateOptions {
  keys: readonly string[];
  vars?: Record<string, unknown>;
  lang?: string;
  to?: string;
  from?: string;
  /** Statuses of the call message, fed to the machine after the keys. */
  statuses?: readonly string[];
  /** Timers to fire after the statuses (`noResponse`). */
  timers?: readonly string[];
}

export interface Simulation {
  lang: string;
  machine: SimulationSide & { effects: FlowEffect[] };
  menu: SimulationSide & { run: MenuRun };
  /** Keys given after the call had ended. */
  ignored: string[];
  /** Effects of the statuses and timers (the machine's side only: the menu has none). */
  reactions: FlowEffect[];
  /** Outcome after keys, statuses and timers. */
  outcome: string | null;
  agree: boolean;
  differences: string[];
}

/** A step, with the caller's input when the `wrong` actions ran (silence or an unhandled key). */
function simulatedStep(node: string, key: string, input: string | undefined): SimulatedStep {
  return key === 'wrong' && input !== undefined ? { node, key, input } : { node, key };
}

const SIM_SECRET: TokenSecret = { id: 'simulate', key: 'switchboard-simulation' };
const SIM_CALL = 'simulation';
const SIM_HOOK = 'https://switchboard.invalid/hooks/speechcall';

interface Played {
  snapshot: FlowSnapshot;
  effects: FlowEffect[];
  ignored: string[];
  /** Set when the machine refused a key at its own node: a compiler bug, reported. */
  stuck?: string;
}

function machineSide(
  machine: FlowMachine,
  opts: SimulateOptions,
  vars: Record<string, unknown>,
  lang: string,
  // key prefix -> state after it: sequences that share a prefix replay it once
  played: Map<string, Played>,
) {
  let prefix = JSON.stringify([vars, lang, opts.to, opts.from]);
  let state = played.get(prefix);
  if (!state) {
    const { snapshot, effects } = startFlow(machine, {
      vars,
      lang,
      ...(opts.to !== undefined ? { to: opts.to } : {}),
      ...(opts.from !== undefined ? { from: opts.from } : {}),
    });
    state = { snapshot, effects, ignored: [] };
    played.set(prefix, state);
  }
  for (const key of opts.keys) {
    prefix += `,${key}`;
    const known = played.get(prefix);
    if (known) {
      state = known;
      continue;
    }
    const node = currentNode(state.snapshot);
    if (node === null || state.stuck) {
      state = { ...state, ignored: [...state.ignored, key] };
    } else {
      const step = stepFlow(machine, state.snapshot, { type: 'KEY', node, key });
      if (!step.handled) {
        state = {
          ...state,
          ignored: [...state.ignored, key],
          stuck: `machine has no transition for key "${key}" at node "${node}"`,
        };
        played.set(prefix, state);
        continue;
      }
      state = {
        snapshot: step.snapshot,
        effects: [...state.effects, ...step.effects],
        ignored: state.ignored,
      };
    }
    played.set(prefix, state);
  }
  let snapshot = state.snapshot;
  const all = state.effects;
  const ignored = state.ignored;
  const side: SimulationSide & { effects: FlowEffect[] } = {
    path: [],
    outcome: null,
    sends: [],
    providerWebhooks: [],
    notifies: [],
    ended: snapshot.context.ended,
    waitingAt: currentNode(snapshot),
    effects: all,
  };
  for (const effect of all) {
    // the input as the machine recorded it, as a real call's path has it
    if (effect.type === 'step')
      side.path.push(simulatedStep(effect.node, effect.key, effect.input));
    if (effect.type === 'outcome') side.outcome = effect.name;
    if (effect.type === 'send') side.sends.push({ id: effect.id, message: effect.message });
    if (effect.type === 'notify' && effect.node !== null) {
      const { endpoint, node, data } = effect;
      side.notifies.push({ endpoint, node, ...(data ? { data } : {}) });
    }
    if (effect.type === 'providerWebhook') {
      const { type: _, ...hook } = effect;
      side.providerWebhooks.push(hook);
    }
  }
  const events: FlowEvent[] = [
    ...(opts.statuses ?? []).map((status): FlowEvent => ({ type: 'STATUS', status })),
    ...(opts.timers ?? []).map((timer): FlowEvent => ({ type: 'TIMER', timer })),
  ];
  const reactions: FlowEffect[] = [];
  for (const event of events) {
    const step = stepFlow(machine, snapshot, event);
    snapshot = step.snapshot;
    reactions.push(...step.effects);
  }
  return { side, ignored, reactions, outcome: snapshot.context.outcome, stuck: state.stuck };
}

function menuSide(
  compiled: CompiledFlow,
  menu: SpeechMenu,
  opts: SimulateOptions,
  vars: Record<string, unknown>,
  lang: string,
  differences: string[],
  verify: (token: unknown) => NodeToken | null,
): SimulationSide & { run: MenuRun } {
  const run = executeMenu(menu, opts.keys);
  const side: SimulationSide & { run: MenuRun } = {
    path: [],
    outcome: null,
    sends: [],
    providerWebhooks: [],
    notifies: [],
    ended: run.end === 'hangup',
    waitingAt: run.menu === null ? null : (compiled.nodes[run.menu]?.id ?? `#${run.menu}`),
    run,
  };
  const ctx = { vars, lang, to: opts.to ?? null, from: opts.from ?? null };
  run.steps.forEach((step, i) => {
    const [first, ...rest] = step.webhooks;
    const token = first?.url === SIM_HOOK ? verify(first.body?.token) : null;
    side.providerWebhooks.push(...(token ? rest : step.webhooks));
    if (!token) {
      differences.push(
        `menu step ${i + 1} (menu ${step.menu}, input ${step.input}): no tracking webhook with a valid token first`,
      );
      return;
    }
    const node = compiled.nodes[compiled.nodes.findIndex((n) => n.id === token.node)];
    if (!node || node.index !== step.menu || token.callId !== SIM_CALL) {
      differences.push(
        `menu step ${i + 1}: token names node "${token.node}" but was played in menu ${step.menu}`,
      );
      return;
    }
    // the input is what the token names: the menu must have told silence from a wrong key
    if (token.key !== step.input) {
      differences.push(
        `menu step ${i + 1} (menu ${step.menu}, input ${step.input}): its webhook's token names input "${token.key}"`,
      );
    }
    const key = entryFor(node, token.key);
    side.path.push(simulatedStep(token.node, key, token.key));
    (node.keys[key] ?? []).forEach((action, a) => {
      if (action.type === 'outcome') side.outcome = action.name;
      if (action.type === 'send') {
        side.sends.push({
          id: `${node.id}:${key}:${a}`,
          message: renderMessage(action.message, ctx),
        });
      }
      if (action.type === 'notify') {
        side.notifies.push({
          endpoint: action.endpoint,
          node: node.id,
          ...(action.data ? { data: renderDeep(action.data, vars) } : {}),
        });
      }
    });
  });
  return side;
}

/**
 * A simulator for one compiled flow: the machine is built once and the rendered menu is
 * kept per vars and language, so playing many key sequences stays cheap.
 *
 * @example
 * const play = createSimulator(compiled);
 * play({ keys: ['1'], vars }).agree // true
 */
export function createSimulator(compiled: CompiledFlow): (opts: SimulateOptions) => Simulation {
  const machine = createFlowMachine(compiled);
  const menus = new Map<string, SpeechMenu>();
  const played = new Map<string, Played>();
  const tokens = new Map<unknown, NodeToken | null>();
  const verify = (token: unknown): NodeToken | null => {
    let known = tokens.get(token);
    if (known === undefined) {
      known = verifyNodeToken(token, [SIM_SECRET]);
      tokens.set(token, known);
    }
    return known;
  };
  return (opts) => {
    const bad = opts.keys.findIndex((k) => !(CALLER_INPUTS as readonly string[]).includes(k));
    if (bad !== -1) {
      throw new AppError('VALIDATION_ERROR', `not a key: "${opts.keys[bad]}"`, [
        { path: `keys[${bad}]`, code: 'INVALID_KEY', message: 'keys are 0-9, *, # or timeout' },
      ]);
    }
    const checked = validateVars(compiled, opts.vars ?? {});
    if (!checked.ok) {
      throw new AppError('INVALID_VARS', `vars do not fit flow "${compiled.id}"`, checked.details);
    }
    const lang = resolveLanguage(compiled, opts.lang);
    const cacheKey = JSON.stringify([lang, checked.vars]);
    let menu = menus.get(cacheKey);
    if (!menu) {
      menu = renderMenu(compiled, {
        vars: checked.vars,
        lang,
        hookUrl: SIM_HOOK,
        tokenFor: (node, key) => signNodeToken({ callId: SIM_CALL, node, key }, SIM_SECRET),
      });
      menus.set(cacheKey, menu);
    }
    const differences: string[] = [];
    const m = machineSide(machine, opts, checked.vars, lang, played);
    if (m.stuck) differences.push(m.stuck);
    const menuRun = menuSide(compiled, menu, opts, checked.vars, lang, differences, verify);

    const compare = (what: string, a: unknown, b: unknown) => {
      const ja = JSON.stringify(a);
      const jb = JSON.stringify(b);
      if (ja !== jb) differences.push(`${what} differ: machine ${ja}, menu ${jb}`);
    };
    compare('paths', m.side.path, menuRun.path);
    compare('outcomes', m.side.outcome, menuRun.outcome);
    compare('follow-ups', m.side.sends, menuRun.sends);
    compare('provider webhooks', m.side.providerWebhooks, menuRun.providerWebhooks);
    compare('notifies', m.side.notifies, menuRun.notifies);
    compare('endings', m.side.ended, menuRun.ended);
    compare('waiting nodes', m.side.waitingAt, menuRun.waitingAt);
    compare('ignored keys', m.ignored, menuRun.run.ignored);

    return {
      lang,
      machine: m.side,
      menu: menuRun,
      ignored: m.ignored,
      reactions: m.reactions,
      outcome: m.outcome,
      agree: differences.length === 0,
      differences,
    };
  };
}

/**
 * Plays keys (and then statuses and timers) through both the machine and the menu.
 * Throws `INVALID_VARS` for bad vars, `INVALID_LANGUAGE` for a language the flow lacks and
 * `VALIDATION_ERROR` for a bad key.
 *
 * @example
 * simulateFlow(compiled, { keys: ['9', '1'], vars, statuses: ['delivered'] }).differences // []
 */
export function simulateFlow(compiled: CompiledFlow, opts: SimulateOptions): Simulation {
  return createSimulator(compiled)(opts);
}
