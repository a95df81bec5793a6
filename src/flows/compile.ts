/**
 * The flow compiler: a checked flow to its unrolled nodes, the provider menu template, the
 * xstate machine config, and a version hash of the canonical compiled form.
 *
 * Everything in a `CompiledFlow` is plain JSON, so a compiled version can be stored next to
 * the calls pinned to it and turned back into a machine with `createFlowMachine`.
 *
 * @example
 * const compiled = compileFlow({ id: 'appointment-reminder', definition });
 * compiled.menuCount // 12
 */
import { createHash } from 'node:crypto';
import { AppError, type ErrorDetail, formatPath } from '../errors.ts';
import type { SpeechMenu } from '../provider/menu.ts';
import {
  type CheckOptions,
  checkFlow,
  DEFAULT_MAX_MENUS,
  DEFAULT_MAX_VISITS,
  type FlowCheckIssue,
  flowLanguages,
  menuCountCap,
  menuLimitIssue,
} from './checks.ts';
import { buildMachineConfig, type FlowMachineConfig } from './machine-config.ts';
import { buildMenu, TEMPLATE_HOOK_URL } from './render.ts';
import {
  type Action,
  CALL_MESSAGE_STATUSES,
  type CallMessageStatus,
  type FlowDefinition,
  type FlowKey,
  type Menu,
  type ParamType,
  parseDuration,
  type ReactionAction,
} from './schema.ts';
import { type CompiledAction, type CompiledNode, compileEffect, unroll } from './unroll.ts';

export interface CompiledParam {
  type: ParamType;
  optional: boolean;
  default?: string | number | boolean;
  description?: string;
}

export interface CompiledReactions {
  /** Actions per status of the call's own message. */
  statuses: Partial<Record<CallMessageStatus, CompiledAction[]>>;
  /** A durable timer started with the call, cancelled by the first key. */
  noResponse?: { afterMs: number; actions: CompiledAction[] };
}

export interface CompiledFlow {
  id: string;
  title?: string;
  /** Hash of the canonical compiled form: calls pin it, and a new file gives a new one. */
  version: string;
  params: Record<string, CompiledParam>;
  /** The first is the default. */
  languages: string[];
  /** Node ids in provider menu order; `nodes[0]` is where a call starts. */
  nodes: CompiledNode[];
  on: CompiledReactions;
  /** Provider menus after unrolling (`nodes.length`). */
  menuCount: number;
  /** Menus as written in the file. */
  sourceMenus: string[];
  maxVisits: number;
  /**
   * The provider menu in the default language, with `{{param}}` templates kept, the hook
   * URL as `TEMPLATE_HOOK_URL` and each token as `{{token:<node>:<key>}}`: what a call's
   * menu looks like before `renderMenu` fills it in.
   */
  menuTemplate: SpeechMenu;
  /** JSON config of the call machine; `createFlowMachine` adds the implementations. */
  machineConfig: FlowMachineConfig;
}

export interface CompileOptions extends CheckOptions {}

/** An invalid flow, with every problem as a detail (`path` into the flow, `code` the rule). */
export class FlowCompileError extends AppError {
  readonly issues: FlowCheckIssue[];
  constructor(id: string, issues: FlowCheckIssue[]) {
    const errors = issues.filter((i) => i.severity === 'error');
    super(
      'INVALID_FLOW',
      `flow "${id}" has ${errors.length} error${errors.length === 1 ? '' : 's'}: ${errors[0]?.message ?? ''}`,
      errors.map(
        (i): ErrorDetail => ({ path: formatPath(i.path), code: i.rule, message: i.message }),
      ),
    );
    this.name = 'FlowCompileError';
    this.issues = issues;
  }
}

/**
 * Checks and compiles a flow; throws `FlowCompileError` when any check fails.
 *
 * @example
 * compileFlow({ id: 'survey', definition }, { maxMenus: 50 }).nodes[0].id // 'main'
 */
export function compileFlow(
  flow: { id: string; definition: FlowDefinition },
  opts: CompileOptions = {},
): CompiledFlow {
  const { id } = flow;
  const definition = canonicalSources(flow.definition);
  const issues = checkFlow(definition, { ...opts, skipMenuLimit: true });
  if (issues.some((i) => i.severity === 'error')) throw new FlowCompileError(id, issues);

  const maxVisits = opts.maxVisits ?? DEFAULT_MAX_VISITS;
  const maxMenus = opts.maxMenus ?? DEFAULT_MAX_MENUS;
  const languages = flowLanguages(definition);
  const { nodes, complete } = unroll(definition, languages, {
    maxVisits,
    stopAfter: menuCountCap(maxMenus),
  });
  const over = menuLimitIssue(nodes.length, complete, maxMenus);
  if (over) throw new FlowCompileError(id, [...issues, over]);
  const core = {
    ...(definition.title !== undefined ? { title: definition.title } : {}),
    params: compileParams(definition),
    languages,
    nodes,
    on: compileReactions(definition),
    maxVisits,
  };
  // Canonical by construction: our objects have a fixed key order, params are sorted and
  // what the author wrote (messages, webhook bodies) was key-sorted by canonicalSources.
  const version = createHash('sha256').update(JSON.stringify(core)).digest('hex').slice(0, 16);
  return {
    id,
    ...core,
    version,
    menuCount: nodes.length,
    sourceMenus: Object.keys(definition.menus),
    menuTemplate: buildMenu(nodes, {
      lang: languages[0]!,
      render: (text) => text,
      hookUrl: TEMPLATE_HOOK_URL,
      tokenFor: (node, key) => `{{token:${node}:${key}}}`,
    }),
    machineConfig: buildMachineConfig(id, nodes, core.on),
  };
}

function compileParams(flow: FlowDefinition): Record<string, CompiledParam> {
  const out: Record<string, CompiledParam> = {};
  const params = flow.params ?? {};
  for (const name of Object.keys(params).sort()) {
    const spec = params[name]!;
    if (typeof spec === 'string') {
      out[name] = { type: spec, optional: false };
      continue;
    }
    out[name] = {
      type: spec.type,
      optional: spec.optional === true || spec.default !== undefined,
      ...(spec.default !== undefined ? { default: spec.default } : {}),
      ...(spec.description !== undefined ? { description: spec.description } : {}),
    };
  }
  return out;
}

function compileReactions(flow: FlowDefinition): CompiledReactions {
  const on = flow.on ?? {};
  const statuses: Partial<Record<CallMessageStatus, CompiledAction[]>> = {};
  const list = (actions: readonly ReactionAction[]) => actions.map((a) => compileEffect(a));
  for (const status of CALL_MESSAGE_STATUSES) {
    const actions = on[status];
    if (actions) statuses[status] = list(actions);
  }
  return {
    statuses,
    ...(on.noResponse
      ? {
          noResponse: {
            afterMs: parseDuration(on.noResponse.after),
            actions: list(on.noResponse.do),
          },
        }
      : {}),
  };
}

/** A copy of a value with every object's keys sorted. */
export function sortKeysDeep<T>(value: T): T {
  if (Array.isArray(value)) return value.map(sortKeysDeep) as T;
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(value).sort())
    out[k] = sortKeysDeep((value as Record<string, unknown>)[k]);
  return out as T;
}

/** The flow with what its author wrote freely (messages, webhooks, notify data) key-sorted. */
function canonicalSources(flow: FlowDefinition): FlowDefinition {
  const action = <A extends Action | ReactionAction>(a: A): A =>
    typeof a === 'object' && ('send' in a || 'webhook' in a || 'notify' in a) ? sortKeysDeep(a) : a;
  const menus: FlowDefinition['menus'] = {};
  for (const [name, menu] of Object.entries(flow.menus)) {
    const keys: NonNullable<Menu['keys']> = {};
    for (const [key, list] of Object.entries(menu.keys ?? {})) {
      keys[key as FlowKey] = list.map(action);
    }
    menus[name] = {
      ...menu,
      ...(menu.keys ? { keys } : {}),
      ...(menu.wrong ? { wrong: menu.wrong.map(action) } : {}),
    };
  }
  let on: FlowDefinition['on'];
  if (flow.on) {
    on = {};
    for (const [name, value] of Object.entries(flow.on)) {
      if (value === undefined) continue;
      if (Array.isArray(value)) (on as Record<string, unknown>)[name] = value.map(action);
      else on.noResponse = { ...value, do: value.do.map(action) };
    }
  }
  return { ...flow, menus, ...(on ? { on } : {}) };
}

/**
 * JSON with object keys sorted, so equal values always give equal text.
 *
 * @example
 * canonicalJson({ b: 1, a: [2] }) // '{"a":[2],"b":1}'
 */
export function canonicalJson(value: unknown): string {
  return (
    JSON.stringify(value, (_key, v: unknown) => {
      if (v === null || typeof v !== 'object' || Array.isArray(v)) return v;
      const sorted: Record<string, unknown> = {};
      for (const k of Object.keys(v).sort()) sorted[k] = (v as Record<string, unknown>)[k];
      return sorted;
    }) ?? 'null'
  );
}
