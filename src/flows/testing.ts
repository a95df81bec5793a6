/**
 * Flow tests as files: `flows/<id>.test.yaml` lists calls (keys, then statuses of the call's
 * message, then timers) and what each must give. Every case is played by the simulator, so
 * through both the flow's machine and its rendered provider menu: a case passes when what it
 * states under `expect` holds and the two sides agree.
 *
 * Every problem names the test file's line: a case's failure points at the expectation that
 * failed, a bad test file (unknown field, bad key, vars the flow refuses) at the value. After
 * the cases, the report says what no case reached: menus, keys per menu, the actions of each
 * key (`main:1[1] send sms`, the action at `menus.main.keys.1[1]`) and `on:` reactions.
 *
 * @example
 * const flow = parseFlowSource(readFileSync('flows/appointment-reminder.yaml', 'utf8'), 'flows/appointment-reminder.yaml');
 * const file = 'flows/appointment-reminder.test.yaml';
 * const report = runFlowTests(flow.compiled!, readFileSync(file, 'utf8'), file);
 * console.log(formatFlowTestReport(report)); // ok / FAIL per case, coverage, totals
 */
import { isMap, isScalar, LineCounter, parseDocument, type Node as YamlNode } from 'yaml';
import type { z } from 'zod';
import { AppError, formatPath } from '../errors.ts';
import type { IssuePath } from './checks.ts';
import type { CompiledFlow } from './compile.ts';
import { flowIdOfTestFile, locate } from './loader.ts';
import type { FlowEffect } from './machine.ts';
import { parseDuration } from './schema.ts';
import { createSimulator, type SimulatedStep, type Simulation } from './simulate.ts';
import {
  FlowTestFile,
  PATH_STEP_PATTERN,
  type TestCase,
  type TestExpect,
  type TestNotify,
  type TestPathStep,
  type TestSend,
  type TestTimer,
  type TestWebhook,
} from './test-schema.ts';
import { type CompiledAction, type CompiledNode, NODE_KEYS, type NodeKey } from './unroll.ts';

export interface FlowTestFailure {
  /** 1-based line of the expectation that failed (the case's line for a disagreement). */
  line: number;
  column: number;
  /** Like `outcome: expected confirmed, got no-input`. */
  message: string;
}

export interface FlowTestCaseResult {
  name: string;
  /** 1-based line of the case in the test file. */
  line: number;
  column: number;
  ok: boolean;
  failures: FlowTestFailure[];
}

export interface FlowTestReport {
  file: string;
  /** The flow the file tests (its `flow:`, or the file name without `.test.yaml`). */
  flow: string;
  /** problems with the test file itself (file:line), e.g. an unknown field */
  errors: Array<{ file: string; line: number; column: number; message: string }>;
  cases: FlowTestCaseResult[];
  passed: number;
  failed: number;
  /** What no case reached: source menus, `menu:key`, `menu:key[index] action`, `on.<status>`. */
  coverage: { menus: string[]; keys: string[]; actions: string[]; reactions: string[] };
  /** How many of each the flow has, reached or not (for "keys 5/6"). */
  coverageTotals: { menus: number; keys: number; actions: number; reactions: number };
}

/**
 * Which flow a test file tests, and where it says so: its `flow:` when it is a string, else
 * the file's name. Read without checking the rest, so a caller can find the flow to compile
 * before `runFlowTests`.
 *
 * @example
 * flowTestTarget('flow: survey\ncases: []', 'flows/x.test.yaml') // { flow: 'survey', line: 1, column: 7 }
 */
export function flowTestTarget(
  source: string,
  file: string,
): { flow: string; line: number; column: number } {
  const lineCounter = new LineCounter();
  const doc = parseDocument(source, { lineCounter, prettyErrors: false });
  const root = doc.contents;
  if (isMap(root)) {
    const pair = root.items.find((p) => isScalar(p.key) && p.key.value === 'flow');
    if (pair && isScalar(pair.value) && typeof pair.value.value === 'string') {
      const pos = lineCounter.linePos(pair.value.range?.[0] ?? 0);
      return { flow: pair.value.value, line: pos.line, column: pos.col };
    }
  }
  return { flow: flowIdOfTestFile(file), line: 1, column: 1 };
}

/**
 * The report of a test file that could not run at all (its flow is missing or does not
 * compile): one error, no cases.
 *
 * @example
 * flowTestFileFailure('flows/x.test.yaml', 'x', 'there is no flow "x"')
 */
export function flowTestFileFailure(
  file: string,
  flow: string,
  message: string,
  at: { line: number; column: number } = { line: 1, column: 1 },
): FlowTestReport {
  return {
    file,
    flow,
    errors: [{ file, line: at.line, column: at.column, message }],
    cases: [],
    passed: 0,
    failed: 0,
    coverage: { menus: [], keys: [], actions: [], reactions: [] },
    coverageTotals: { menus: 0, keys: 0, actions: 0, reactions: 0 },
  };
}

/** A problem found while reading the file, before positions are known. */
interface Located {
  path: IssuePath;
  atKey?: boolean;
  message: string;
}

/**
 * Runs a test file's cases against a compiled flow. Never throws for a bad test file: its
 * problems come back in `errors`, with file:line, and then no case runs (except for vars or
 * a language the flow refuses, which stop only their own case).
 *
 * @example
 * const report = runFlowTests(compiled, source, 'flows/appointment-reminder.test.yaml');
 * report.failed // 0
 * report.coverage.keys // ['reschedule:wrong'] when no case is silent at reschedule
 */
export function runFlowTests(compiled: CompiledFlow, source: string, file: string): FlowTestReport {
  const lineCounter = new LineCounter();
  const doc = parseDocument(source, { lineCounter, prettyErrors: false });
  const root = doc.contents as YamlNode | null;
  const at = (path: IssuePath, atKey = false) => {
    const pos = lineCounter.linePos(locate(root, path, atKey));
    return { line: pos.line, column: pos.col };
  };
  const report: FlowTestReport = {
    ...flowTestFileFailure(file, compiled.id, ''),
    errors: [],
  };
  const error = (problem: Located) =>
    report.errors.push({ file, ...at(problem.path, problem.atKey), message: problem.message });

  for (const e of [...doc.errors, ...doc.warnings]) {
    const pos = lineCounter.linePos(e.pos[0]);
    report.errors.push({
      file,
      line: pos.line,
      column: pos.col,
      message: e.message.split('\n')[0]!,
    });
  }
  if (doc.errors.length > 0) return report;

  const parsed = FlowTestFile.safeParse(doc.toJS({ maxAliasCount: 1000 }) ?? {});
  if (!parsed.success) {
    for (const problem of describeTestIssues(parsed.error.issues)) error(problem);
    return report;
  }
  const tests = parsed.data;
  const target = tests.flow ?? flowIdOfTestFile(file);
  report.flow = target;
  if (target !== compiled.id) {
    error({
      path: tests.flow !== undefined ? ['flow'] : [],
      message: `this file tests flow "${target}", but was run against flow "${compiled.id}"`,
    });
  }
  const names = new Map<string, number>();
  tests.cases.forEach((c, i) => {
    const first = names.get(c.name);
    if (first !== undefined) {
      error({
        path: ['cases', i, 'name'],
        message: `case "${c.name}" is named twice (first at line ${at(['cases', first]).line}): names must be unique`,
      });
    } else names.set(c.name, i);
    if (Object.values(c.expect).every((v) => v === undefined)) {
      error({
        path: ['cases', i, 'expect'],
        atKey: true,
        message: `case "${c.name}" expects nothing: state at least one of path, outcome, sends, webhooks, notifies, timers, ended, waitingAt`,
      });
    }
  });
  if (report.errors.length > 0) return report;

  const play = createSimulator(compiled);
  const reach = new Reach(compiled);
  tests.cases.forEach((c, i) => {
    const casePath: IssuePath = ['cases', i];
    const sim = playCase(play, tests, c, casePath, error);
    if (!sim) return;
    reach.record(sim, c);
    const failures: FlowTestFailure[] = [];
    const fail = (path: IssuePath, message: string, atKey = false) =>
      failures.push({ ...at(path, atKey), message });
    for (const d of sim.differences) fail(casePath, `machine and menu differ: ${d}`);
    checkExpect(sim, c.expect, [...casePath, 'expect'], fail);
    report.cases.push({ name: c.name, ...at(casePath), ok: failures.length === 0, failures });
  });
  report.passed = report.cases.filter((c) => c.ok).length;
  report.failed = report.cases.length - report.passed;
  const { uncovered, totals } = reach.coverage();
  report.coverage = uncovered;
  report.coverageTotals = totals;
  return report;
}

/** One case through the simulator; null (with an error) when the flow refuses its vars or lang. */
function playCase(
  play: ReturnType<typeof createSimulator>,
  tests: FlowTestFile,
  c: TestCase,
  casePath: IssuePath,
  error: (problem: Located) => void,
): Simulation | null {
  const vars: Record<string, unknown> = {};
  for (const [name, value] of Object.entries({ ...tests.vars, ...c.vars })) {
    if (value !== null) vars[name] = value;
  }
  const lang = c.lang ?? tests.lang;
  const to = c.to ?? tests.to;
  const from = c.from ?? tests.from;
  try {
    return play({
      keys: (c.keys ?? []).map(String),
      vars,
      ...(lang !== undefined ? { lang } : {}),
      ...(to !== undefined ? { to } : {}),
      ...(from !== undefined ? { from } : {}),
      statuses: c.status ?? [],
      timers: c.timers ?? [],
    });
  } catch (e) {
    if (!(e instanceof AppError)) throw e;
    // point at the var given (the case's, else the file's) or the language given; a var
    // missing from both, at the case that lacks it
    const where = (field: 'vars' | 'lang', name: string | undefined): IssuePath => {
      if (name !== undefined && c.vars && name in c.vars) return [...casePath, 'vars', name];
      if (name !== undefined && tests.vars && name in tests.vars) return ['vars', name];
      if (field === 'lang' && c.lang !== undefined) return [...casePath, 'lang'];
      if (field === 'lang' && tests.lang !== undefined) return ['lang'];
      return casePath;
    };
    const details = e.details.length > 0 ? e.details : [{ path: '', message: e.message }];
    for (const d of details) {
      const field = d.path === 'lang' ? 'lang' : 'vars';
      const name = d.path.startsWith('vars.') ? d.path.slice(5) : undefined;
      error({
        path: where(field, name),
        message: `case "${c.name}": ${e.message}${d.path ? `: ${d.path} ${d.message}` : ''}`,
      });
    }
    return null;
  }
}

// ---- expectations ------------------------------------------------------------------------

type Fail = (path: IssuePath, message: string, atKey?: boolean) => void;

/** A step as the test file writes it: `main:1`, `main/r1:wrong(timeout)`. */
function stepText(step: { node: string; key: string; input?: string | undefined }): string {
  return `${step.node}:${step.key}${step.key === 'wrong' && step.input !== undefined ? `(${step.input})` : ''}`;
}

function expectedStep(step: TestPathStep): { node: string; key: string; input?: string } {
  if (typeof step !== 'string') return step;
  const m = PATH_STEP_PATTERN.exec(step)!;
  return { node: m[1]!, key: m[2]!, ...(m[3] !== undefined ? { input: m[3] } : {}) };
}

function stepMatches(want: { node: string; key: string; input?: string }, got: SimulatedStep) {
  return (
    want.node === got.node &&
    want.key === got.key &&
    (want.input === undefined || want.input === got.input)
  );
}

const list = (items: string[]) => (items.length === 0 ? '(none)' : items.join(', '));

/** Deep equality of JSON values (key order ignored). */
function same(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  return (
    ka.length === kb.length &&
    ka.every((k) => same((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]))
  );
}

const show = (v: unknown) => (v === undefined ? '(absent)' : JSON.stringify(v));

/**
 * Compares two lists item by item: a count that differs fails at the list, an item that
 * differs fails at that item. `fields` gives the differing fields of an item (empty: equal).
 */
function compareList<W, G>(
  what: string,
  path: IssuePath,
  wanted: readonly W[],
  got: readonly G[],
  describe: (g: G) => string,
  fields: (w: W, g: G) => string[],
  fail: Fail,
): void {
  if (wanted.length !== got.length) {
    fail(
      path,
      `${what}: expected ${wanted.length}, got ${got.length}: ${list(got.map(describe))}`,
      true,
    );
    return;
  }
  wanted.forEach((w, i) => {
    const diffs = fields(w, got[i]!);
    if (diffs.length > 0) fail([...path, i], `${what}[${i}]: ${diffs.join('; ')}`);
  });
}

/** Fields stated in `want` that differ in `got`: `text: expected "a", got "b"`. */
function fieldDiffs(want: Record<string, unknown>, got: Record<string, unknown>): string[] {
  const out: string[] = [];
  for (const [k, v] of Object.entries(want)) {
    if (v !== undefined && !same(v, got[k]))
      out.push(`${k}: expected ${show(v)}, got ${show(got[k])}`);
  }
  return out;
}

/** A send's fallbacks: as many as expected, each compared on the fields it states. */
function fallbackDiffs(want: ReadonlyArray<Record<string, unknown>>, got: unknown): string[] {
  const list = Array.isArray(got) ? (got as Array<Record<string, unknown>>) : [];
  if (want.length !== list.length) {
    return [`fallbacks: expected ${want.length}, got ${list.length}: ${show(got)}`];
  }
  return want.flatMap((w, i) => fieldDiffs(w, list[i]!).map((d) => `fallbacks[${i}].${d}`));
}

interface SentMessage {
  id: string;
  message: Record<string, unknown> & { type: string; text?: string };
}

function sentMessages(sim: Simulation): SentMessage[] {
  const fromReactions = sim.reactions.flatMap((e) =>
    e.type === 'send' ? [{ id: e.id, message: e.message }] : [],
  );
  return [...sim.machine.sends, ...fromReactions] as SentMessage[];
}

interface Notified {
  endpoint: string;
  node: string | null;
  data?: Record<string, unknown>;
}

function notified(sim: Simulation): Notified[] {
  const fromReactions = sim.reactions.flatMap((e): Notified[] =>
    e.type === 'notify'
      ? [{ endpoint: e.endpoint, node: e.node, ...(e.data ? { data: e.data } : {}) }]
      : [],
  );
  return [...sim.machine.notifies, ...fromReactions];
}

interface TimerEffect {
  kind: 'start' | 'cancel';
  timer: string;
  afterMs?: number;
}

function timerEffects(sim: Simulation): TimerEffect[] {
  return [...sim.machine.effects, ...sim.reactions].flatMap((e: FlowEffect): TimerEffect[] => {
    if (e.type === 'startTimer') return [{ kind: 'start', timer: e.timer, afterMs: e.afterMs }];
    if (e.type === 'cancelTimer') return [{ kind: 'cancel', timer: e.timer }];
    return [];
  });
}

const timerText = (t: TimerEffect) => `${t.kind} ${t.timer}`;

function expectedTimer(t: TestTimer): TimerEffect {
  if (typeof t === 'string') {
    const [kind, timer] = t.split(' ') as ['start' | 'cancel', string];
    return { kind, timer };
  }
  if ('cancel' in t) return { kind: 'cancel', timer: t.cancel };
  return {
    kind: 'start',
    timer: t.start,
    ...(t.after !== undefined ? { afterMs: parseDuration(t.after) } : {}),
  };
}

function checkExpect(sim: Simulation, expect: TestExpect, path: IssuePath, fail: Fail): void {
  const m = sim.machine;
  if (expect.path !== undefined) {
    const wanted = expect.path.map(expectedStep);
    const got = m.path;
    const bad = wanted.findIndex((w, i) => !got[i] || !stepMatches(w, got[i]!));
    if (bad !== -1 || wanted.length !== got.length) {
      const where =
        bad !== -1 && bad < expect.path.length ? [...path, 'path', bad] : [...path, 'path'];
      fail(
        where,
        `path: expected ${list(wanted.map(stepText))}; got ${list(got.map(stepText))}`,
        bad === -1,
      );
    }
  }
  if (expect.outcome !== undefined && expect.outcome !== sim.outcome) {
    fail(
      [...path, 'outcome'],
      `outcome: expected ${expect.outcome ?? '(none)'}, got ${sim.outcome ?? '(none)'}`,
      true,
    );
  }
  if (expect.sends !== undefined) {
    compareList<TestSend, SentMessage>(
      'sends',
      [...path, 'sends'],
      expect.sends,
      sentMessages(sim),
      (s) => `${s.message.type} ${JSON.stringify(s.message.text ?? '')}`,
      (w, g) => {
        const { id, fallbacks, ...fields } = w;
        return [
          ...(id !== undefined && id !== g.id ? [`id: expected ${id}, got ${g.id}`] : []),
          ...fieldDiffs(fields, g.message),
          ...(fallbacks !== undefined ? fallbackDiffs(fallbacks, g.message.fallbacks) : []),
        ];
      },
      fail,
    );
  }
  if (expect.webhooks !== undefined) {
    compareList<TestWebhook, (typeof m.providerWebhooks)[number]>(
      'webhooks',
      [...path, 'webhooks'],
      expect.webhooks,
      m.providerWebhooks,
      (h) => h.url,
      (w, g) => fieldDiffs(typeof w === 'string' ? { url: w } : w, { ...g }),
      fail,
    );
  }
  if (expect.notifies !== undefined) {
    compareList<TestNotify, Notified>(
      'notifies',
      [...path, 'notifies'],
      expect.notifies,
      notified(sim),
      (n) => n.endpoint,
      (w, g) => fieldDiffs(typeof w === 'string' ? { endpoint: w } : w, { ...g }),
      fail,
    );
  }
  if (expect.timers !== undefined) {
    compareList<TestTimer, TimerEffect>(
      'timers',
      [...path, 'timers'],
      expect.timers,
      timerEffects(sim),
      timerText,
      (w, g) => {
        const want = expectedTimer(w);
        if (want.kind !== g.kind || want.timer !== g.timer)
          return [`expected ${timerText(want)}, got ${timerText(g)}`];
        if (want.afterMs !== undefined && want.afterMs !== g.afterMs)
          return [`after: expected ${want.afterMs} ms, got ${g.afterMs} ms`];
        return [];
      },
      fail,
    );
  }
  if (expect.ended !== undefined && expect.ended !== m.ended) {
    fail(
      [...path, 'ended'],
      `ended: expected ${expect.ended}, got ${m.ended}${m.waitingAt ? ` (waiting at ${m.waitingAt})` : ''}`,
      true,
    );
  }
  if (expect.waitingAt !== undefined && expect.waitingAt !== m.waitingAt) {
    fail(
      [...path, 'waitingAt'],
      `waitingAt: expected ${expect.waitingAt ?? '(none)'}, got ${m.waitingAt ?? '(none: the call ended)'}`,
      true,
    );
  }
}

// ---- coverage ----------------------------------------------------------------------------

interface ActionRef {
  menu: string;
  key: NodeKey;
  index: number;
  action: CompiledAction;
}

/**
 * What the cases reached, in source terms. Node ids map to source menus (`CompiledNode.menu`);
 * the actions of an unrolled key map back to the source list by position, since the unroller
 * keeps a list's actions in order and only ends it (a hangup added, never listed here) or, for
 * a goto past the round limit, replaces the goto with the menu's `wrong` actions.
 */
class Reach {
  private readonly byId: Map<string, CompiledNode>;
  /** The last attempt of each menu: a wrong input there runs the menu's `wrong` actions. */
  private readonly lastAttempt = new Map<string, number>();
  private readonly menus = new Set<string>();
  private readonly keys = new Set<string>();
  private readonly actions = new Set<string>();
  private readonly reactions = new Set<string>();

  constructor(private readonly compiled: CompiledFlow) {
    this.byId = new Map(compiled.nodes.map((n) => [n.id, n]));
    for (const n of compiled.nodes) {
      this.lastAttempt.set(n.menu, Math.max(n.attempt, this.lastAttempt.get(n.menu) ?? 0));
    }
  }

  /** The source actions a step ran; none for a retry (a wrong input before the last attempt). */
  private ran(node: CompiledNode, key: NodeKey): ActionRef[] {
    const actions = node.keys[key] ?? [];
    if (key === 'wrong' && node.attempt < this.lastAttempt.get(node.menu)!) return [];
    const refs = (list: readonly CompiledAction[], k: NodeKey, from = 0) =>
      list.map((action, i) => ({ menu: node.menu, key: k, index: i + from, action }));
    let out: ActionRef[];
    if (key !== 'wrong' && node.limits?.[key] !== undefined) {
      // the goto is past the round limit: the key's actions before it, then the menu's wrong
      const last = this.compiled.nodes.find(
        (n) =>
          n.menu === node.menu &&
          n.visit === node.visit &&
          n.attempt === this.lastAttempt.get(node.menu),
      )!;
      const wrong = last.keys.wrong ?? [];
      const before = actions.length - wrong.length;
      out = [...refs(actions.slice(0, before), key), ...refs(wrong, 'wrong')];
    } else out = refs(actions, key);
    return out.filter((r) => r.action.type !== 'hangup');
  }

  private actionText(r: ActionRef): string {
    const a = r.action;
    const what =
      a.type === 'goto'
        ? `goto ${this.byId.get(a.node)?.menu ?? a.node}`
        : a.type === 'outcome'
          ? `outcome ${a.name}`
          : a.type === 'send'
            ? `send ${a.message.type}`
            : a.type === 'webhook'
              ? `webhook ${a.url}`
              : a.type === 'notify'
                ? `notify ${a.endpoint}`
                : a.type;
    return `${r.menu}:${r.key}[${r.index}] ${what}`;
  }

  record(sim: Simulation, c: TestCase): void {
    const m = sim.machine;
    for (const id of [...m.path.map((s) => s.node), m.waitingAt]) {
      const node = id === null ? undefined : this.byId.get(id);
      if (node) this.menus.add(node.menu);
    }
    for (const step of m.path) {
      const node = this.byId.get(step.node);
      if (!node) continue;
      const key = step.key as NodeKey;
      if (key !== 'wrong' || node.attempt === this.lastAttempt.get(node.menu)) {
        this.keys.add(`${node.menu}:${key}`);
      }
      for (const r of this.ran(node, key)) this.actions.add(this.actionText(r));
    }
    for (const status of c.status ?? []) this.reactions.add(`on.${status}`);
    // the timer's reaction ran if it was still pending: started, not cancelled by a key or
    // by a terminal status (statuses are fed before timers)
    const timers = timerEffects(sim);
    for (const timer of new Set(c.timers ?? [])) {
      const started = timers.some((t) => t.kind === 'start' && t.timer === timer);
      const cancelled = timers.some((t) => t.kind === 'cancel' && t.timer === timer);
      if (started && !cancelled) this.reactions.add(`on.${timer}`);
    }
  }

  coverage(): {
    uncovered: FlowTestReport['coverage'];
    totals: FlowTestReport['coverageTotals'];
  } {
    const order = (menu: string) => this.compiled.sourceMenus.indexOf(menu);
    const keys: string[] = [];
    const actions = new Map<string, ActionRef>();
    const nodes = [...this.compiled.nodes].sort(
      (a, b) => order(a.menu) - order(b.menu) || a.index - b.index,
    );
    for (const menu of this.compiled.sourceMenus) {
      const first = nodes.find((n) => n.menu === menu);
      if (!first) continue;
      for (const key of NODE_KEYS) if (first.keys[key]) keys.push(`${menu}:${key}`);
    }
    for (const node of nodes) {
      for (const key of NODE_KEYS) {
        if (!node.keys[key]) continue;
        for (const r of this.ran(node, key)) {
          const text = this.actionText(r);
          if (!actions.has(text)) actions.set(text, r);
        }
      }
    }
    const keyOrder = (k: NodeKey) => NODE_KEYS.indexOf(k);
    const actionList = [...actions.entries()]
      .sort(
        ([, a], [, b]) =>
          order(a.menu) - order(b.menu) || keyOrder(a.key) - keyOrder(b.key) || a.index - b.index,
      )
      .map(([text]) => text);
    const reactions = [
      ...Object.keys(this.compiled.on.statuses).map((s) => `on.${s}`),
      ...(this.compiled.on.noResponse ? ['on.noResponse'] : []),
    ];
    return {
      uncovered: {
        menus: this.compiled.sourceMenus.filter((m) => !this.menus.has(m)),
        keys: keys.filter((k) => !this.keys.has(k)),
        actions: actionList.filter((a) => !this.actions.has(a)),
        reactions: reactions.filter((r) => !this.reactions.has(r)),
      },
      totals: {
        menus: this.compiled.sourceMenus.length,
        keys: keys.length,
        actions: actionList.length,
        reactions: reactions.length,
      },
    };
  }
}

// ---- the test file's own problems --------------------------------------------------------

/**
 * zod's issues as located problems: one per unknown field (at the field's name), and for a
 * value that fits none of a union's forms, the form it was meant as (a map is read as the map
 * form), so `{ node: main, kye: 1 }` is told about `kye`, not that it is not a string.
 */
function describeTestIssues(
  issues: ReadonlyArray<z.core.$ZodIssue>,
  prefix: IssuePath = [],
): Located[] {
  const out: Located[] = [];
  for (const issue of issues) {
    const path: IssuePath = [...prefix, ...(issue.path as IssuePath)];
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) {
        out.push({
          path: [...path, key],
          atKey: true,
          message: `unknown field "${key}"${path.length > 0 ? ` (in ${formatPath(path)})` : ''}`,
        });
      }
      continue;
    }
    if (issue.code === 'invalid_union' && issue.errors.length > 0) {
      const fitting = issue.errors.filter(
        (branch) => !branch.some((i) => i.path.length === 0 && i.code === 'invalid_type'),
      );
      if (fitting.length > 0) {
        out.push(...describeTestIssues(fitting[0]!, path));
        continue;
      }
    }
    out.push({
      path,
      message: path.length > 0 ? `${formatPath(path)}: ${issue.message}` : issue.message,
    });
  }
  return out;
}

// ---- text --------------------------------------------------------------------------------

/**
 * One line per failure, as the CLI prints it:
 * `flows/a.test.yaml:14:5  case "confirms with 1": outcome: expected confirmed, got no-input`.
 */
export function formatFlowTestFailure(
  report: Pick<FlowTestReport, 'file'>,
  c: Pick<FlowTestCaseResult, 'name'>,
  failure: FlowTestFailure,
): string {
  return `${report.file}:${failure.line}:${failure.column}  case "${c.name}": ${failure.message}`;
}

/**
 * The CLI's text of one report: errors, a line per case (failures under it), what no case
 * reached, and the count.
 *
 * @example
 * process.stdout.write(formatFlowTestReport(runFlowTests(compiled, source, file)));
 */
export function formatFlowTestReport(report: FlowTestReport): string {
  const lines = [`${report.file} (flow ${report.flow})`];
  for (const e of report.errors) lines.push(`  ${e.file}:${e.line}:${e.column}  ${e.message}`);
  for (const c of report.cases) {
    lines.push(
      `  ${c.ok ? 'ok  ' : 'FAIL'}  ${c.name}${c.ok ? '' : `  (${report.file}:${c.line}:${c.column})`}`,
    );
    for (const f of c.failures) lines.push(`        ${formatFlowTestFailure(report, c, f)}`);
  }
  if (report.cases.length > 0) {
    const { coverage: u, coverageTotals: t } = report;
    const part = (what: keyof typeof u) => `${what} ${t[what] - u[what].length}/${t[what]}`;
    lines.push(
      `  coverage: ${part('menus')}, ${part('keys')}, ${part('actions')}, ${part('reactions')}`,
    );
    const missed: Array<[string, string[]]> = [
      ['menus', u.menus],
      ['keys', u.keys],
      ['actions', u.actions],
      ['reactions', u.reactions],
    ];
    for (const [what, items] of missed) {
      if (items.length > 0) lines.push(`    not reached: ${what} ${items.join(', ')}`);
    }
  }
  const errors =
    report.errors.length > 0
      ? `, ${report.errors.length} error${report.errors.length === 1 ? '' : 's'} in the test file`
      : '';
  lines.push(`  ${report.passed} passed, ${report.failed} failed${errors}`);
  return `${lines.join('\n')}\n`;
}
