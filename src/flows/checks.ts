/**
 * Static checks of a flow that the schema cannot state: references between menus, what can
 * be reached and ended, templates against params, languages, and the unrolled size.
 *
 * Each issue carries a rule name (UPPER_SNAKE_CASE, one of src/errors.ts DETAIL_CODES: the API
 * answers an invalid flow with them as detail codes) and a path into the flow (`['menus', 'main', 'keys', '1',
 * 0, 'goto']`); the loader turns the path into a file, line and column.
 *
 * @example
 * checkFlow(flow).filter((i) => i.severity === 'error') // [] for a good flow
 */
import type { DetailCode } from '../errors.ts';
import { gotoOf, menuLists, reachableMenus, startMenu } from './graph.ts';
import {
  type Action,
  ATTEMPT_RESULTS,
  type FlowDefinition,
  type Localized,
  type ParamSpec,
  type Prompt,
  type PromptValue,
  parseDuration,
  type ReactionAction,
  type SayPrompt,
} from './schema.ts';
import { malformedTemplate, templateNames, walkStrings } from './template.ts';
import { unroll } from './unroll.ts';

export const FLOW_RULES = [
  'YAML_SYNTAX',
  'DUPLICATE_KEY',
  'INVALID_ID',
  'DUPLICATE_ID',
  'SCHEMA',
  'UNKNOWN_FIELD',
  'INVALID_KEY',
  'INVALID_ACTION',
  'UNKNOWN_MENU',
  'UNREACHABLE_MENU',
  'UNREACHABLE_ACTION',
  'NO_END',
  'TEMPLATE_SYNTAX',
  'UNDECLARED_PARAM',
  'UNUSED_PARAM',
  'PARAM_DEFAULT',
  'UNKNOWN_LANGUAGE',
  'MISSING_LANGUAGE',
  'DUPLICATE_LANGUAGE',
  'INVALID_DURATION',
  'SEND_TEXT',
  'SEND_CASCADE',
  'MENU_LIMIT',
  'PROVIDER_MENU',
  'ASSERT_OUTCOME',
  'ASSERT_MAX_MESSAGES',
  'ASSERT_MAX_DURATION',
  'ASSERT_PROMPT_LENGTH',
  'ASSERT_TIMEOUT',
  'ASSERT_PATH',
  'ASSERT_REACHABLE',
  'ASSERT_UNREACHABLE',
  'TEXT_TOO_LONG',
  'NO_VOICE',
  'RETRY_OUTCOME',
] as const satisfies readonly DetailCode[];
export type FlowRule = (typeof FLOW_RULES)[number];

export type IssuePath = Array<string | number>;

export interface FlowCheckIssue {
  severity: 'error' | 'warning';
  rule: FlowRule;
  message: string;
  path: IssuePath;
}

export interface CheckOptions {
  /** Refuse flows that unroll to more menus than this (default 200). */
  maxMenus?: number;
  /** Copies of a menu a call may play through cycles (default 3). */
  maxVisits?: number;
  /** Leave the unrolled size to the caller (the compiler counts while it unrolls). */
  skipMenuLimit?: boolean;
  /**
   * What the speech engine can say (src/speech/engine.ts): `say:` prompts are checked against
   * its longest text and its languages. Unset: only the flow's own rules apply.
   */
  speech?: SpeechCapabilities;
}

/** What a speech engine can say, for the checks of `say:` prompts. */
export interface SpeechCapabilities {
  /** the engine's name, for messages */
  engine: string;
  maxTextLength: number;
  /** languages it speaks, lower case (`en`, `en-us`, `uk`) */
  languages: readonly string[];
}

export const DEFAULT_MAX_MENUS = 200;
export const DEFAULT_MAX_VISITS = 3;

/** How far past the limit unrolling goes: a useful count, and a huge flow stays cheap. */
export function menuCountCap(limit: number): number {
  return limit * 4;
}

/** The languages of a flow; the first is the default. */
export function flowLanguages(flow: FlowDefinition): string[] {
  return flow.languages ?? ['en'];
}

/**
 * Every static problem of a schema-valid flow, errors and warnings.
 *
 * @example
 * checkFlow({ menus: { main: { intro: 'x', keys: { '1': [{ goto: 'nowhere' }] } } } })
 * // [{ severity: 'error', rule: 'UNKNOWN_MENU', path: ['menus','main','keys','1',0,'goto'], ... }]
 */
export function checkFlow(flow: FlowDefinition, opts: CheckOptions = {}): FlowCheckIssue[] {
  const issues: FlowCheckIssue[] = [];
  const error = (rule: FlowRule, path: IssuePath, message: string) =>
    issues.push({ severity: 'error', rule, path, message });
  const warn = (rule: FlowRule, path: IssuePath, message: string) =>
    issues.push({ severity: 'warning', rule, path, message });

  const menus = Object.keys(flow.menus);
  const start = startMenu(flow);
  if (!flow.menus[start]) {
    error('UNKNOWN_MENU', ['start'], `start names menu "${start}", which is not defined`);
  }

  for (const menu of menus) {
    for (const list of menuLists(flow, menu)) checkActionList(flow, list.actions, list.path, error);
  }

  if (flow.menus[start]) {
    const reachable = new Set(reachableMenus(flow));
    for (const menu of menus) {
      if (!reachable.has(menu)) {
        error(
          'UNREACHABLE_MENU',
          ['menus', menu],
          `menu "${menu}" is never reached from the start menu "${start}"`,
        );
      }
    }
    const canEnd = endingMenus(flow);
    for (const menu of menus) {
      if (reachable.has(menu) && !canEnd.has(menu)) {
        error(
          'NO_END',
          ['menus', menu],
          `menu "${menu}" has no way to end: every key and its wrong actions go to menus that never hang up`,
        );
      }
    }
  }

  checkDurations(flow, error);
  checkLanguages(flow, error);
  checkTemplates(flow, error, warn);
  checkParams(flow, error);
  checkSends(flow, error);
  checkCampaignRetry(flow, error);
  if (opts.speech) checkSpeech(flow, opts.speech, error);

  if (!opts.skipMenuLimit && !issues.some((i) => i.severity === 'error')) {
    const maxMenus = opts.maxMenus ?? DEFAULT_MAX_MENUS;
    const { count, complete } = countMenus(flow, opts.maxVisits ?? DEFAULT_MAX_VISITS, maxMenus);
    const over = menuLimitIssue(count, complete, maxMenus);
    if (over) issues.push(over);
  }
  return issues;
}

/** The `MENU_LIMIT` error for an unrolled count, or null when it fits. */
export function menuLimitIssue(
  count: number,
  complete: boolean,
  maxMenus: number,
): FlowCheckIssue | null {
  if (count <= maxMenus) return null;
  return {
    severity: 'error',
    rule: 'MENU_LIMIT',
    path: ['menus'],
    message: `the flow unrolls to ${complete ? count : `more than ${count - 1}`} provider menus (retries and cycles copied), over the limit of ${maxMenus}`,
  };
}

/** The unrolled menu count; `complete` is false when counting stopped well past `limit`. */
export function countMenus(
  flow: FlowDefinition,
  maxVisits: number,
  limit: number,
): { count: number; complete: boolean } {
  const { nodes, complete } = unroll(flow, flowLanguages(flow), {
    maxVisits,
    stopAfter: menuCountCap(limit),
  });
  return { count: nodes.length, complete };
}

type Report = (rule: FlowRule, path: IssuePath, message: string) => void;

function checkActionList(
  flow: FlowDefinition,
  actions: readonly Action[],
  path: IssuePath,
  error: Report,
): void {
  actions.forEach((action, i) => {
    if (typeof action === 'object' && 'goto' in action && !flow.menus[action.goto]) {
      error(
        'UNKNOWN_MENU',
        [...path, i, 'goto'],
        `goto names menu "${action.goto}", which is not defined`,
      );
    }
    const ends = action === 'hangup' || (typeof action === 'object' && 'goto' in action);
    if (ends && i < actions.length - 1) {
      error(
        'UNREACHABLE_ACTION',
        [...path, i + 1],
        `this action follows a ${action === 'hangup' ? 'hangup' : 'goto'} and would never run`,
      );
    }
  });
}

/** Menus from which some path ends the call (a hangup, explicit, implicit or the provider's). */
function endingMenus(flow: FlowDefinition): Set<string> {
  const ends = new Set<string>();
  let changed = true;
  while (changed) {
    changed = false;
    for (const [name, menu] of Object.entries(flow.menus)) {
      if (ends.has(name)) continue;
      const lists = menuLists(flow, name).map((l) => l.actions);
      const ending =
        menu.wrong === undefined ||
        lists.some((actions) => {
          const to = gotoOf(actions);
          return to === undefined || ends.has(to);
        });
      if (ending) {
        ends.add(name);
        changed = true;
      }
    }
  }
  return ends;
}

function checkDurations(flow: FlowDefinition, error: Report): void {
  for (const [name, menu] of Object.entries(flow.menus)) {
    if (menu.timeout !== undefined && parseDuration(menu.timeout) < 1) {
      error('INVALID_DURATION', ['menus', name, 'timeout'], 'timeout must be at least 1ms');
    }
  }
  const after = flow.on?.noResponse?.after;
  if (after !== undefined && parseDuration(after) < 1) {
    error('INVALID_DURATION', ['on', 'noResponse', 'after'], 'after must be at least 1ms');
  }
}

/** Every prompt of a flow (intro and reprompt of each menu), with its path. */
function prompts(flow: FlowDefinition): Array<{ path: IssuePath; value: Prompt }> {
  const out: Array<{ path: IssuePath; value: Prompt }> = [];
  for (const [name, menu] of Object.entries(flow.menus)) {
    out.push({ path: ['menus', name, 'intro'], value: menu.intro });
    if (menu.reprompt !== undefined)
      out.push({ path: ['menus', name, 'reprompt'], value: menu.reprompt });
  }
  return out;
}

/**
 * Every `say:` of a flow with its path and the languages it is spoken in: a per-language
 * map's entries each speak their own language, a shared one every language of the flow.
 */
export function spokenPrompts(
  flow: FlowDefinition,
): Array<{ path: IssuePath; prompt: SayPrompt; languages: string[] }> {
  const languages = flowLanguages(flow);
  const out: Array<{ path: IssuePath; prompt: SayPrompt; languages: string[] }> = [];
  for (const { path, value } of prompts(flow)) {
    if (typeof value === 'string') continue;
    if ('say' in value && !isPromptMap(value)) {
      out.push({ path, prompt: value as SayPrompt, languages });
      continue;
    }
    for (const [lang, v] of Object.entries(value as Record<string, PromptValue>)) {
      if (typeof v !== 'string') out.push({ path: [...path, lang], prompt: v, languages: [lang] });
    }
  }
  return out;
}

/** A per-language map of prompts (not one `{ say }` prompt). */
function isPromptMap(value: Exclude<Prompt, string>): value is Record<string, PromptValue> {
  return !('say' in value && (typeof value.say === 'string' || typeof value.say === 'object'));
}

/** Every localizable value of a flow, with its path. */
function localizedValues(flow: FlowDefinition): Array<{ path: IssuePath; value: Localized }> {
  const out: Array<{ path: IssuePath; value: Localized }> = [];
  for (const { path, value } of prompts(flow)) {
    if (typeof value === 'string') continue;
    if (!isPromptMap(value)) {
      out.push({ path: [...path, 'say'], value: (value as SayPrompt).say });
      continue;
    }
    // the map's languages, whatever each entry is
    out.push({ path, value: Object.fromEntries(Object.keys(value).map((k) => [k, k])) });
    for (const [lang, v] of Object.entries(value)) {
      if (typeof v !== 'string' && typeof v.say !== 'string') {
        out.push({ path: [...path, lang, 'say'], value: v.say });
      }
    }
  }
  for (const { path, action } of allActions(flow)) {
    if (typeof action !== 'object' || !('send' in action)) continue;
    if (action.send.text !== undefined)
      out.push({ path: [...path, 'send', 'text'], value: action.send.text });
    action.send.fallbacks?.forEach((fb, i) => {
      if (fb.text !== undefined) {
        out.push({ path: [...path, 'send', 'fallbacks', i, 'text'], value: fb.text });
      }
    });
    if (action.send.fallback?.text !== undefined) {
      out.push({ path: [...path, 'send', 'fallback', 'text'], value: action.send.fallback.text });
    }
  }
  return out;
}

/**
 * `say:` prompts against the speech engine: each language spoken has a voice, and the text
 * (its words as written; a filled-in `{{param}}` can only add to it) fits in one request.
 */
function checkSpeech(flow: FlowDefinition, speech: SpeechCapabilities, error: Report): void {
  const spoken = new Set(speech.languages);
  const hasVoice = (lang: string) => {
    const wanted = lang.toLowerCase();
    return spoken.has(wanted) || spoken.has(wanted.split('-')[0]!);
  };
  const noVoice = new Set<string>();
  for (const { path, prompt, languages } of spokenPrompts(flow)) {
    for (const lang of languages) {
      const text = typeof prompt.say === 'string' ? prompt.say : prompt.say[lang];
      if (text === undefined) continue;
      const at = typeof prompt.say === 'string' ? [...path, 'say'] : [...path, 'say', lang];
      if (!hasVoice(lang) && !noVoice.has(`${path.join('.')}:${lang}`)) {
        noVoice.add(`${path.join('.')}:${lang}`);
        error(
          'NO_VOICE',
          at,
          `the speech engine (${speech.engine}) has no voice for language "${lang}"`,
        );
      }
      const written = [...text.replace(/\{\{[^}]*\}\}/g, '').trim()].length;
      if (written > speech.maxTextLength) {
        error(
          'TEXT_TOO_LONG',
          at,
          `the text is ${written} characters long before its params are filled in; ${speech.engine} speaks at most ${speech.maxTextLength} at once: split it over menus`,
        );
      }
    }
  }
}

function checkLanguages(flow: FlowDefinition, error: Report): void {
  const languages = flowLanguages(flow);
  languages.forEach((lang, i) => {
    if (languages.indexOf(lang) !== i) {
      error('DUPLICATE_LANGUAGE', ['languages', i], `language "${lang}" is listed twice`);
    }
  });
  for (const { path, value } of localizedValues(flow)) {
    if (typeof value === 'string') continue;
    for (const lang of Object.keys(value)) {
      if (!languages.includes(lang)) {
        error(
          'UNKNOWN_LANGUAGE',
          [...path, lang],
          `"${lang}" is not one of the flow's languages (${languages.join(', ')})`,
        );
      }
    }
    for (const lang of languages) {
      if (value[lang] === undefined) {
        error('MISSING_LANGUAGE', path, `no value for language "${lang}"`);
      }
    }
  }
}

/** Every action of a flow (menus and `on:`), with its path. */
export function allActions(
  flow: FlowDefinition,
): Array<{ path: IssuePath; action: Action | ReactionAction }> {
  const out: Array<{ path: IssuePath; action: Action | ReactionAction }> = [];
  for (const menu of Object.keys(flow.menus)) {
    for (const list of menuLists(flow, menu)) {
      list.actions.forEach((action, i) => {
        out.push({ path: [...list.path, i], action });
      });
    }
  }
  for (const [key, value] of Object.entries(flow.on ?? {})) {
    if (value === undefined) continue;
    const list: ReactionAction[] = Array.isArray(value) ? value : value.do;
    const base: IssuePath = Array.isArray(value) ? ['on', key] : ['on', key, 'do'];
    list.forEach((action, i) => {
      out.push({ path: [...base, i], action });
    });
  }
  return out;
}

/** Every string that may hold templates, with its path. */
function templatedStrings(flow: FlowDefinition): Array<{ path: IssuePath; text: string }> {
  const out: Array<{ path: IssuePath; text: string }> = [];
  for (const [name, menu] of Object.entries(flow.menus)) {
    out.push(...walkStrings(menu.intro, ['menus', name, 'intro']));
    if (menu.reprompt !== undefined)
      out.push(...walkStrings(menu.reprompt, ['menus', name, 'reprompt']));
  }
  for (const { path, action } of allActions(flow)) {
    if (typeof action !== 'object') continue;
    if ('send' in action) out.push(...walkStrings(action.send, [...path, 'send']));
    if ('webhook' in action) out.push(...walkStrings(action.webhook, [...path, 'webhook']));
    // the endpoint's name is a slug, never a template; only its extra data is rendered
    if ('notify' in action && typeof action.notify === 'object' && action.notify.data)
      out.push(...walkStrings(action.notify.data, [...path, 'notify', 'data']));
  }
  return out;
}

function checkTemplates(flow: FlowDefinition, error: Report, warn: Report): void {
  const params = flow.params ?? {};
  const used = new Set<string>();
  for (const { path, text } of templatedStrings(flow)) {
    const bad = malformedTemplate(text);
    if (bad !== null) {
      error('TEMPLATE_SYNTAX', path, `malformed template near "${bad}": write {{name}}`);
      continue;
    }
    for (const name of templateNames(text)) {
      used.add(name);
      if (!(name in params)) {
        error('UNDECLARED_PARAM', path, `template {{${name}}} names no declared param`);
      }
    }
  }
  for (const name of Object.keys(params)) {
    if (!used.has(name)) warn('UNUSED_PARAM', ['params', name], `param "${name}" is never used`);
  }
}

function checkParams(flow: FlowDefinition, error: Report): void {
  for (const [name, spec] of Object.entries(flow.params ?? {})) {
    if (typeof spec === 'string' || spec.default === undefined) continue;
    if (!defaultFits(spec)) {
      error('PARAM_DEFAULT', ['params', name, 'default'], `default does not fit type ${spec.type}`);
    }
  }
}

function defaultFits(spec: Exclude<ParamSpec, string>): boolean {
  const v = spec.default;
  switch (spec.type) {
    case 'number':
      return typeof v === 'number';
    case 'integer':
      return typeof v === 'number' && Number.isInteger(v);
    case 'boolean':
      return typeof v === 'boolean';
    default:
      return typeof v === 'string';
  }
}

// text is required for sms, rcs and viber_session, and is the title of a viber_survey
// (docs/provider.md, "Message types")
const TEXT_REQUIRED = new Set(['sms', 'rcs', 'viber_session', 'viber_survey', 'cascade']);

const CASCADE_ONLY = ['messageType', 'surveyOptions', 'variables', 'endpoint'] as const;

/**
 * `campaign.retry.on`: besides `failed` and `no-outcome`, only outcomes some key or reaction
 * of the flow records (a retry on a name it never records would never happen).
 */
function checkCampaignRetry(flow: FlowDefinition, error: Report): void {
  const on = flow.campaign?.retry?.on;
  if (!on) return;
  const recorded = new Set<string>();
  for (const { action } of allActions(flow)) {
    if (typeof action === 'object' && 'outcome' in action) recorded.add(action.outcome);
  }
  on.forEach((name, i) => {
    if ((ATTEMPT_RESULTS as readonly string[]).includes(name) || recorded.has(name)) return;
    error(
      'RETRY_OUTCOME',
      ['campaign', 'retry', 'on', i],
      `retry on "${name}": no key or reaction of this flow records that outcome (it records ${[...recorded].join(', ') || 'none'}; besides, failed and no-outcome)`,
    );
  });
}

function checkSends(flow: FlowDefinition, error: Report): void {
  for (const { path, action } of allActions(flow)) {
    if (typeof action !== 'object' || !('send' in action)) continue;
    const send = action.send;
    if (send.type === 'cascade') {
      if (send.messageType === undefined)
        error('SEND_CASCADE', [...path, 'send'], 'a cascade message needs messageType');
      if (send.messageData !== undefined || send.fallbacks !== undefined)
        error(
          'SEND_CASCADE',
          [...path, 'send'],
          'a cascade message has no messageData or fallbacks (its fallback is {messageType, text})',
        );
    } else {
      for (const field of CASCADE_ONLY) {
        if (send[field] !== undefined)
          error('SEND_CASCADE', [...path, 'send', field], `${field} is for type: cascade only`);
      }
    }
    if (TEXT_REQUIRED.has(action.send.type) && action.send.text === undefined) {
      error('SEND_TEXT', [...path, 'send'], `a ${action.send.type} message needs text`);
    }
  }
}
