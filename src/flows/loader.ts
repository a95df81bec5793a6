/**
 * Loading flows from YAML: parse with source positions, validate against the language
 * schema, run the static checks, compile. Every problem comes back as an issue with file,
 * line, column (1-based) and the rule broken; nothing is thrown for a bad flow.
 *
 * @example
 * const flows = await loadFlows('flows');
 * for (const f of flows) for (const e of f.errors) console.log(`${e.file}:${e.line}:${e.column} ${e.rule} ${e.message}`);
 */
import { readdir, readFile } from 'node:fs/promises';
import { basename, extname, join } from 'node:path';
import {
  isAlias,
  isMap,
  isPair,
  isScalar,
  isSeq,
  LineCounter,
  parseDocument,
  type Node as YamlNode,
} from 'yaml';
import type { z } from 'zod';
import { formatPath } from '../errors.ts';
import { issuesToDetails } from '../provider/issues.ts';
import { SpeechMenu } from '../provider/menu.ts';
import { checkFlowAssertions } from './assertions.ts';
import { checkFlow, type FlowRule, type IssuePath } from './checks.ts';
import { type CompiledFlow, type CompileOptions, compileFlow } from './compile.ts';
import { ACTION_KINDS, FlowDefinition } from './schema.ts';

export interface FlowIssue {
  file: string;
  /** 1-based. */
  line: number;
  /** 1-based. */
  column: number;
  rule: FlowRule;
  severity: 'error' | 'warning';
  message: string;
  /** Where in the flow, like `menus.main.keys.1[0].goto`; empty for the whole file. */
  path: string;
}

export interface LoadedFlow {
  /** The file name without its extension. */
  id: string;
  file: string;
  /** The file's text, as read (kept with each version a call runs on). */
  source: string;
  /** The parsed flow, when it fits the schema. */
  definition: FlowDefinition | null;
  /** The compiled flow, when there is no error. */
  compiled: CompiledFlow | null;
  errors: FlowIssue[];
  warnings: FlowIssue[];
}

const FLOW_ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
const FLOW_EXTENSIONS = ['.yaml', '.yml'];
/** A flow's tests (`<id>.test.yaml`) sit next to it and are not a flow. */
const TEST_FILE = /\.test\.ya?ml$/i;

/** Whether a file name in the flows directory is a flow: `*.yaml` / `*.yml`, not `*.test.yaml`. */
export function isFlowFile(name: string): boolean {
  return FLOW_EXTENSIONS.includes(extname(name).toLowerCase()) && !TEST_FILE.test(name);
}

/** Whether a file name is a flow's test file (`<id>.test.yaml` / `.test.yml`). */
export function isFlowTestFile(name: string): boolean {
  return TEST_FILE.test(name);
}

/** The flow a test file is named after: `flows/a.test.yaml` -> `a`. */
export function flowIdOfTestFile(file: string): string {
  return basename(file).replace(TEST_FILE, '');
}

/** The id of a flow file: its name without `.yaml` / `.yml`. */
export function flowIdOf(file: string): string {
  return basename(file, extname(file));
}

/**
 * How to load a flow: the compiler's limits and whether to check the flow's `assert:`
 * section (default: yes). Playing a flow (`flows simulate`, `flows test`) skips it, so that a
 * counterexample can be played and a flow's test cases still run while an assertion fails;
 * everything that runs or validates a flow checks it.
 */
export interface FlowLoadOptions extends CompileOptions {
  /** false: leave `assert:` unchecked (it is still parsed against the schema). */
  assertions?: boolean;
}

interface RawIssue {
  rule: FlowRule;
  severity: 'error' | 'warning';
  message: string;
  path: IssuePath;
  /** Point at the key of the last path segment instead of its value. */
  atKey?: boolean;
}

/**
 * Parses, checks and compiles one flow from its source text.
 *
 * @example
 * parseFlowSource('menus: { main: { intro: x, keys: { "5x": [hangup] } } }', 'flows/a.yaml').errors[0]
 * // { file: 'flows/a.yaml', line: 1, column: 33, rule: 'INVALID_KEY', ... }
 */
export function parseFlowSource(
  source: string,
  file: string,
  opts: FlowLoadOptions & { id?: string } = {},
): LoadedFlow {
  const id = opts.id ?? flowIdOf(file);
  const result: LoadedFlow = {
    id,
    file,
    source,
    definition: null,
    compiled: null,
    errors: [],
    warnings: [],
  };
  const lineCounter = new LineCounter();
  const doc = parseDocument(source, { lineCounter, prettyErrors: false });

  const at = (offset: number) => {
    const pos = lineCounter.linePos(offset);
    return { line: pos.line, column: pos.col };
  };
  const add = (issue: RawIssue, offset: number) => {
    const full: FlowIssue = {
      file,
      ...at(offset),
      rule: issue.rule,
      severity: issue.severity,
      message: issue.message,
      path: formatPath(issue.path),
    };
    (issue.severity === 'error' ? result.errors : result.warnings).push(full);
  };
  const addAtPath = (issue: RawIssue) =>
    add(issue, locate(doc.contents as YamlNode | null, issue.path, issue.atKey === true));

  if (!FLOW_ID.test(id)) {
    add(
      {
        rule: 'INVALID_ID',
        severity: 'error',
        path: [],
        message: `the file name "${id}" is the flow id: use letters, digits, _ or - (at most 64)`,
      },
      0,
    );
  }
  for (const e of doc.errors) {
    add(
      {
        rule: e.code === 'DUPLICATE_KEY' ? 'DUPLICATE_KEY' : 'YAML_SYNTAX',
        severity: 'error',
        path: [],
        message: e.message.split('\n')[0]!,
      },
      e.pos[0],
    );
  }
  for (const w of doc.warnings) {
    add(
      { rule: 'YAML_SYNTAX', severity: 'warning', path: [], message: w.message.split('\n')[0]! },
      w.pos[0],
    );
  }
  if (doc.errors.length > 0) return result;

  for (const dup of duplicateKeys(doc.contents as YamlNode | null)) {
    add(
      {
        rule: 'DUPLICATE_KEY',
        severity: 'error',
        path: [],
        message: `key "${dup.key}" is given twice (as written, ${dup.first} and ${dup.second})`,
      },
      dup.offset,
    );
  }

  const value: unknown = doc.toJS({ maxAliasCount: 1000 });
  const parsed = FlowDefinition.safeParse(value ?? {});
  if (!parsed.success) {
    for (const issue of describeIssues(parsed.error.issues, value)) addAtPath(issue);
    return result;
  }
  if (result.errors.length > 0) return result;
  result.definition = parsed.data;

  const issues = checkFlow(parsed.data, opts);
  for (const issue of issues) addAtPath(issue);
  if (result.errors.length > 0) return result;
  const compiled = compileFlow({ id, definition: parsed.data }, opts);
  // The compiler's output must be what the provider accepts; checked once per load, so a
  // compiler bug stops the flow here rather than at the provider.
  const menu = SpeechMenu.safeParse(compiled.menuTemplate);
  if (!menu.success) {
    for (const detail of issuesToDetails(menu.error.issues)) {
      add(
        {
          rule: 'PROVIDER_MENU',
          severity: 'error',
          path: [],
          message: `compiled menu refused by the provider model at ${detail.path}: ${detail.message}`,
        },
        0,
      );
    }
    return result;
  }
  // The flow's own proven properties: a failing one makes the flow invalid, like any check.
  if (opts.assertions !== false) {
    for (const issue of checkFlowAssertions(compiled, parsed.data.assert ?? {})) addAtPath(issue);
    if (result.errors.length > 0) return result;
  }
  result.compiled = compiled;
  return result;
}

/**
 * Loads one flow file.
 *
 * @example
 * const flow = await loadFlowFile('flows/appointment-reminder.yaml');
 * flow.compiled?.version // 'a3f1...'
 */
export async function loadFlowFile(path: string, opts: FlowLoadOptions = {}): Promise<LoadedFlow> {
  return parseFlowSource(await readFile(path, 'utf8'), path, opts);
}

/**
 * Loads every flow file in a directory (`isFlowFile`), sorted by id; a missing directory has no
 * flows. Two files with one id (`a.yaml`, `a.yml`) are both refused.
 *
 * @example
 * (await loadFlows('flows')).map((f) => f.id) // ['appointment-reminder', 'order-confirmation', ...]
 */
export async function loadFlows(dir: string, opts: FlowLoadOptions = {}): Promise<LoadedFlow[]> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw e;
  }
  const files = names.filter(isFlowFile).sort();
  const flows = await Promise.all(files.map((n) => loadFlowFile(join(dir, n), opts)));
  const byId = new Map<string, LoadedFlow[]>();
  for (const flow of flows) byId.set(flow.id, [...(byId.get(flow.id) ?? []), flow]);
  for (const same of byId.values()) {
    if (same.length < 2) continue;
    for (const flow of same) {
      flow.compiled = null;
      flow.errors.push({
        file: flow.file,
        line: 1,
        column: 1,
        rule: 'DUPLICATE_ID',
        severity: 'error',
        message: `flow id "${flow.id}" is also used by ${same
          .filter((f) => f !== flow)
          .map((f) => f.file)
          .join(', ')}`,
        path: '',
      });
    }
  }
  return flows.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

/** The source offset of a path into the document (as deep as it exists); also ENDPOINTS_FILE's. */
export function locate(root: YamlNode | null, path: IssuePath, atKey: boolean): number {
  let node: YamlNode | null = root;
  let offset = root?.range?.[0] ?? 0;
  for (let i = 0; i < path.length && node; i++) {
    const seg = path[i]!;
    const last = i === path.length - 1;
    if (isAlias(node)) break;
    if (isMap(node)) {
      const pair = node.items.find(
        (p) => isPair(p) && String(isScalar(p.key) ? p.key.value : p.key) === String(seg),
      );
      if (!pair) break;
      const key = pair.key as YamlNode | null;
      const value = pair.value as YamlNode | null;
      // A scalar is pointed at itself (`goto: nowhere`); a map or list at the key naming it.
      if (last && (atKey || !isScalar(value))) {
        offset = key?.range?.[0] ?? offset;
        break;
      }
      if (!value?.range) {
        offset = key?.range?.[0] ?? offset;
        break;
      }
      node = value;
      offset = value.range[0];
    } else if (isSeq(node) && typeof seg === 'number') {
      const item = node.items[seg] as YamlNode | undefined;
      if (!item?.range) break;
      node = item;
      offset = item.range[0];
    } else break;
  }
  return offset;
}

/** Keys of one map that are equal once read as strings (`1` and `"1"`). */
function duplicateKeys(
  root: YamlNode | null,
): Array<{ key: string; first: string; second: string; offset: number }> {
  const out: Array<{ key: string; first: string; second: string; offset: number }> = [];
  const walk = (node: unknown) => {
    if (isMap(node)) {
      const seen = new Map<string, string>();
      for (const pair of node.items) {
        const key = pair.key;
        const name = String(isScalar(key) ? key.value : key);
        const written = isScalar(key) ? (key.source ?? name) : name;
        const first = seen.get(name);
        if (first !== undefined && isScalar(key)) {
          out.push({ key: name, first, second: written, offset: key.range?.[0] ?? 0 });
        }
        seen.set(name, written);
        walk(pair.value);
      }
    } else if (isSeq(node)) {
      for (const item of node.items) walk(item);
    }
  };
  walk(root);
  return out;
}

function valueAt(root: unknown, path: readonly PropertyKey[]): unknown {
  let v = root;
  for (const seg of path) {
    if (v === null || typeof v !== 'object') return undefined;
    v = (v as Record<PropertyKey, unknown>)[seg as string];
  }
  return v;
}

/** Is this path an action of a menu (`menus.x.keys.1[0]`, `menus.x.wrong[0]`) or of `on:`? */
function actionPlace(path: readonly PropertyKey[]): 'menu' | 'on' | null {
  const n = path.length;
  if (typeof path[n - 1] !== 'number') return null;
  if (path[0] === 'menus' && (path[2] === 'wrong' || path[2] === 'keys')) return 'menu';
  if (path[0] === 'on') return 'on';
  return null;
}

/** Zod issues as flow issues, naming the rule and the action kind the author meant. */
function describeIssues(
  issues: ReadonlyArray<z.core.$ZodIssue>,
  root: unknown,
  prefix: IssuePath = [],
): RawIssue[] {
  const out: RawIssue[] = [];
  for (const issue of issues) {
    const path: IssuePath = [...prefix, ...(issue.path as IssuePath)];
    if (issue.code === 'unrecognized_keys') {
      const inKeys = path.length === 3 && path[0] === 'menus' && path[2] === 'keys';
      for (const key of issue.keys) {
        out.push(
          inKeys
            ? {
                rule: 'INVALID_KEY',
                severity: 'error',
                path: [...path, key],
                atKey: true,
                message: `"${key}" is not a key: keys are 0-9, * and # (quote * and # in YAML)`,
              }
            : {
                rule: 'UNKNOWN_FIELD',
                severity: 'error',
                path: [...path, key],
                atKey: true,
                message: `unknown field "${key}"`,
              },
        );
      }
      continue;
    }
    if (issue.code === 'invalid_union') {
      const place = actionPlace(path);
      const value = valueAt(root, path);
      if (place) {
        out.push(...describeAction(place, value, path, root));
        continue;
      }
      const best = [...issue.errors].sort(
        (a, b) =>
          Math.max(0, ...b.map((i) => i.path.length)) - Math.max(0, ...a.map((i) => i.path.length)),
      )[0];
      if (best && best.length > 0) {
        out.push(...describeIssues(best, root, path));
        continue;
      }
    }
    out.push({ rule: 'SCHEMA', severity: 'error', path, message: issue.message });
  }
  return out;
}

function describeAction(
  place: 'menu' | 'on',
  value: unknown,
  path: IssuePath,
  root: unknown,
): RawIssue[] {
  const kinds =
    place === 'menu'
      ? ['hangup', 'opt-out', 'goto', 'outcome', 'send', 'webhook', 'notify']
      : ['opt-out', 'outcome', 'send', 'notify'];
  const allowed = `${place === 'on' ? 'a reaction records an outcome, sends a message, notifies an endpoint or opts the callee out (opt-out)' : 'an action is hangup or opt-out, or one of goto, outcome, send, webhook, notify'}`;
  const fail = (message: string): RawIssue[] => [
    { rule: 'INVALID_ACTION', severity: 'error', path, message },
  ];
  if (typeof value === 'string') {
    return fail(
      place === 'on' && value === 'hangup'
        ? `hangup cannot be used here: ${allowed}`
        : `unknown action "${value}": ${allowed}`,
    );
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return fail(`an action is a word or a map, not ${JSON.stringify(value)}: ${allowed}`);
  }
  const keys = Object.keys(value);
  const known = keys.filter((k) => k in ACTION_KINDS);
  if (keys.length !== 1 || known.length !== 1) {
    return fail(
      `an action has exactly one of ${kinds.filter((k) => k !== 'hangup' && k !== 'opt-out').join(', ')} (got ${keys.join(', ') || 'none'})`,
    );
  }
  const kind = known[0] as keyof typeof ACTION_KINDS;
  if (!kinds.includes(kind)) return fail(`${kind} cannot be used here: ${allowed}`);
  const parsed = ACTION_KINDS[kind].safeParse(value);
  if (parsed.success) return fail(`invalid action: ${allowed}`);
  return describeIssues(parsed.error.issues, root, path);
}
