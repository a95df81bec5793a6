/**
 * `switchboard flows ...`: validate, compile, graph, simulate, test and the JSON Schema.
 * Flows are read from `<cwd>/flows` unless `--dir` says otherwise.
 *
 * Exit codes: 0 fine, 1 a flow (or its vars, or a simulation) is wrong, 2 a usage error.
 *
 * @example
 * await runFlows(['simulate', 'appointment-reminder', '--keys', '1', '--var', 'name=Ann', '--var', 'date=2025-03-01'], io);
 */
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join, relative, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { LineCounter, parseDocument } from 'yaml';
import { EnvSchema, loadConfig } from '../config.ts';
import { AppError, type DetailCode } from '../errors.ts';
import { checkAudioRefs, createAudioChecker, flowAudioRefs } from '../flows/audio-check.ts';
import {
  type CompiledFlow,
  type CompileOptions,
  type FlowIssue,
  type FlowTestReport,
  flowJsonSchema,
  flowTestFileFailure,
  flowTestJsonSchema,
  flowTestTarget,
  flowToMermaid,
  formatFlowTestReport,
  isFlowTestFile,
  type LoadedFlow,
  loadFlowFile,
  loadFlows,
  locate,
  readTextVars,
  renderMenu,
  runFlowTests,
  type Simulation,
  type SpeechCapabilities,
  signNodeToken,
  simulateFlow,
  validateVars,
} from '../flows/index.ts';
import { createOutboundPolicy } from '../http/outbound.ts';
import { speechEngineFor } from '../speech/prompts.ts';
import { speechCapabilities } from '../speech/spoken.ts';

/** The rule `--check-audio` prints for a URL that does not answer with audio (docs/errors.md). */
const AUDIO_RULE: DetailCode = 'AUDIO_NOT_AUDIO';

export interface FlowsIo {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  cwd: string;
  /** where `flows replay` finds the server and its token (default: the process's) */
  env?: Record<string, string | undefined>;
}

const USAGE = `Usage: switchboard flows <command> [options]

Commands:
  validate [files...]            check flows (all of --dir when no file is named); exit 1 on any error
      --check-audio              also fetch every static audio URL, as the provider would
                                 (through the outbound policy: OUTBOUND_ALLOW_PRIVATE, PUBLIC_URL);
                                 exit 1 when one does not answer with audio
  compile <id>                   print the provider menu JSON of one call
      --var name=value           a param of the flow (repeat)
      --lang xx                  prompt language (default: the flow's first)
      --hook-url url             tracking webhook URL (default http://localhost:3000/hooks/speechcall)
      --call-id id --secret s    what the preview tokens are signed for and with
      --template                 print the menu template instead (no vars, token placeholders)
  graph <id> [--folded]          print a Mermaid flowchart (--folded: one box per menu)
  simulate <id> --keys 1,timeout,2
                                 walk the keys through the machine and through the menu JSON,
                                 print path, outcome and follow-ups; exit 1 if the two differ
                                 (timeout: silence; a key the menu does not handle runs wrong)
      --var, --lang              as for compile: the flow's params, required as for a real
                                 call (nothing is made up for them)
      --status failed            then feed a call status (repeat)
      --timer noResponse         then fire a timer (repeat)
      --json                     print the whole simulation as JSON
  test [ids...]                  run the flows' test files (<id>.test.yaml in --dir; all when
                                 no id is named): a line per case, what no case reached, a
                                 total; exit 1 when a case fails or a test file is invalid
      --json                     print the reports as JSON
  replay <id> --file f [--since 7d]  replay stored calls through a changed flow on the server
                                 (switchboard flows replay --help); exit 1 when some differ
  schema [--out file]            print (or write) the JSON Schema of the flow language
      --tests                    ... of flow test files instead (flows/test.schema.json)

Options for every command:
  --dir path                     where the flows are (default ./flows)
  --max-menus n --max-visits n   unrolling limits (default 200 and 3)
`;

class UsageError extends Error {}

type Values = ReturnType<typeof parse>['values'];

function parse(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      dir: { type: 'string' },
      var: { type: 'string', multiple: true },
      lang: { type: 'string' },
      keys: { type: 'string' },
      out: { type: 'string' },
      'hook-url': { type: 'string' },
      'call-id': { type: 'string' },
      secret: { type: 'string' },
      status: { type: 'string', multiple: true },
      timer: { type: 'string', multiple: true },
      json: { type: 'boolean' },
      folded: { type: 'boolean' },
      template: { type: 'boolean' },
      tests: { type: 'boolean' },
      'check-audio': { type: 'boolean' },
      'max-menus': { type: 'string' },
      'max-visits': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
}

/**
 * Runs one `flows` command; `argv[0]` is the command (`['validate']`).
 *
 * @example
 * const code = await runFlows(['validate'], { stdout: process.stdout, stderr: process.stderr, cwd: process.cwd() });
 */
export async function runFlows(argv: string[], io: FlowsIo): Promise<number> {
  if (argv[0] === 'replay') {
    // talks to a running server, with options of its own (src/cli/flows-replay.ts)
    const { runFlowsReplay } = await import('./flows-replay.ts');
    return runFlowsReplay(argv.slice(1), io);
  }
  const out = (text: string) => io.stdout.write(text);
  const err = (text: string) => io.stderr.write(text);
  try {
    const { values, positionals } = parse(argv);
    const [command, ...args] = positionals;
    if (values.help || command === 'help' || command === undefined) {
      out(USAGE);
      return command === undefined && !values.help ? 2 : 0;
    }
    const ctx = { io, values, out, err, opts: compileOptions(values) };
    switch (command) {
      case 'validate':
        return await validate(ctx, args);
      case 'compile':
        return await compile(ctx, one(args, 'compile'));
      case 'graph':
        return await graph(ctx, one(args, 'graph'));
      case 'simulate':
        return await simulate(ctx, one(args, 'simulate'));
      case 'test':
        return await test(ctx, args);
      case 'schema':
        return await schema(ctx);
      default:
        throw new UsageError(`unknown command "${command}"`);
    }
  } catch (e) {
    if (e instanceof UsageError || (e as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      err(`switchboard flows: ${(e as Error).message}\n\n${USAGE}`);
      return 2;
    }
    if (e instanceof AppError) {
      err(`switchboard flows: ${e.message}\n`);
      for (const d of e.details) err(`  ${d.path}: ${d.message} (${d.code})\n`);
      return 1;
    }
    throw e;
  }
}

interface Ctx {
  io: FlowsIo;
  values: Values;
  out: (text: string) => void;
  err: (text: string) => void;
  opts: CompileOptions;
}

function one(args: string[], command: string): string {
  if (args.length !== 1) throw new UsageError(`${command} takes one flow id`);
  return args[0]!;
}

function compileOptions(values: Values): CompileOptions {
  const num = (name: 'max-menus' | 'max-visits'): number | undefined => {
    const raw = values[name];
    if (raw === undefined) return undefined;
    if (!/^[1-9]\d*$/.test(raw)) throw new UsageError(`--${name} must be a positive whole number`);
    return Number(raw);
  };
  const maxMenus = num('max-menus');
  const maxVisits = num('max-visits');
  return {
    ...(maxMenus !== undefined ? { maxMenus } : {}),
    ...(maxVisits !== undefined ? { maxVisits } : {}),
  };
}

function flowsDir(ctx: Ctx): string {
  return resolve(ctx.io.cwd, ctx.values.dir ?? 'flows');
}

function formatIssue(io: FlowsIo, issue: FlowIssue): string {
  const where = `${relative(io.cwd, issue.file) || issue.file}:${issue.line}:${issue.column}`;
  const path = issue.path ? ` (at ${issue.path})` : '';
  return `${where}: ${issue.severity} [${issue.rule}] ${issue.message}${path}\n`;
}

/**
 * What the configured speech engine says (SPEECH_ENGINE, as the server would use it), so
 * `say:` prompts are checked against its voices and its longest text; undefined when the
 * settings are wrong or the engine does not start (the flows are then checked without it).
 */
async function speechOf(ctx: Ctx): Promise<SpeechCapabilities | undefined> {
  try {
    const env = ctx.io.env ?? process.env;
    return await speechCapabilities(speechEngineFor(loadConfig(env).speech));
  } catch {
    return undefined;
  }
}

async function validate(ctx: Ctx, files: string[]): Promise<number> {
  const speech = await speechOf(ctx);
  const opts = { ...ctx.opts, ...(speech && { speech }) };
  const flows =
    files.length > 0
      ? await Promise.all(files.map((f) => loadFlowFile(resolve(ctx.io.cwd, f), opts)))
      : await loadFlows(flowsDir(ctx), opts);
  if (flows.length === 0) {
    ctx.err(`switchboard flows: no flow files (*.yaml) in ${flowsDir(ctx)}\n`);
    return 1;
  }
  let errors = 0;
  let warnings = 0;
  for (const flow of flows) {
    for (const issue of [...flow.errors, ...flow.warnings].sort(
      (a, b) => a.line - b.line || a.column - b.column,
    )) {
      ctx.out(formatIssue(ctx.io, issue));
    }
    errors += flow.errors.length;
    warnings += flow.warnings.length;
    if (flow.compiled) {
      ctx.out(
        `ok ${flow.id}: ${flow.compiled.menuCount} provider menus from ${flow.compiled.sourceMenus.length}, version ${flow.compiled.version}\n`,
      );
    } else {
      ctx.out(
        `FAIL ${flow.id}: ${flow.errors.length} error${flow.errors.length === 1 ? '' : 's'}\n`,
      );
    }
  }
  ctx.out(
    `${flows.length} flow${flows.length === 1 ? '' : 's'}, ${errors} error${errors === 1 ? '' : 's'}, ${warnings} warning${warnings === 1 ? '' : 's'}\n`,
  );
  const audio = ctx.values['check-audio'] ? await checkFlowAudio(ctx, flows) : 0;
  return errors > 0 || audio > 0 ? 1 : 0;
}

/**
 * `validate --check-audio`: fetches every static audio URL of `flows` once (src/flows/
 * audio-check.ts), prints a line per prompt, and returns how many URLs are not audio. Ids,
 * templates and spoken text are not fetched, and a URL the outbound policy refuses is not
 * checked: each is a note.
 */
async function checkFlowAudio(ctx: Ctx, flows: readonly LoadedFlow[]): Promise<number> {
  const env = EnvSchema.pick({ OUTBOUND_ALLOW_PRIVATE: true, PUBLIC_URL: true }).safeParse(
    ctx.io.env ?? process.env,
  );
  if (!env.success) {
    throw new UsageError(
      `${String(env.error.issues[0]?.path[0])}: ${env.error.issues[0]?.message}`,
    );
  }
  const outbound = createOutboundPolicy({
    allowPrivate: env.data.OUTBOUND_ALLOW_PRIVATE,
    ownOrigins: [env.data.PUBLIC_URL],
  });
  try {
    const found = flows.flatMap((flow) => {
      const refs = flowAudioRefs(flow.definition);
      if (refs.length === 0) return [];
      const lines = new LineCounter();
      const doc = parseDocument(flow.source, { lineCounter: lines });
      return refs.map((ref) => {
        const pos = lines.linePos(locate(doc.contents as never, ref.path, false));
        const file = relative(ctx.io.cwd, flow.file) || flow.file;
        return { ref, where: `${file}:${pos.line}:${pos.col}`, at: ref.path.join('.') };
      });
    });
    const check = createAudioChecker({ outbound });
    const results = new Map(
      (
        await checkAudioRefs(
          check,
          found.filter((f) => f.ref.kind === 'url').map((f) => f.ref.value),
        )
      ).map((r) => [r.url, r]),
    );
    const bad = new Set<string>();
    for (const { ref, where, at } of found) {
      const result = ref.kind === 'url' ? results.get(ref.value) : undefined;
      if (ref.kind === 'id') {
        ctx.out(`${where}: note: ${ref.value} is a provider audio id: not fetched\n`);
      } else if (ref.kind === 'template') {
        ctx.out(`${where}: note: ${ref.value} is a template: not fetched\n`);
      } else if (ref.kind === 'say') {
        ctx.out(`${where}: note: spoken text, rendered by Switchboard: not fetched\n`);
      } else if (result?.result === 'audio') {
        ctx.out(`audio ok: ${ref.value} (${result.detail})\n`);
      } else if (result?.result === 'not-audio') {
        bad.add(ref.value);
        ctx.out(`${where}: error [${AUDIO_RULE}] ${ref.value} ${result.detail} (at ${at})\n`);
      } else {
        ctx.out(`${where}: note: ${ref.value} not checked: ${result?.detail ?? 'no result'}\n`);
      }
    }
    const fetched = [...results.values()];
    const count = (what: string) => fetched.filter((r) => r.result === what).length;
    ctx.out(
      `audio: ${fetched.length} URL${fetched.length === 1 ? '' : 's'}: ${count('audio')} audio, ${bad.size} not audio, ${count('not-checked')} not checked\n`,
    );
    return bad.size;
  } finally {
    await outbound.close();
  }
}

/** One compiled flow by id, or exit 1 with its errors. */
async function compiledFlow(ctx: Ctx, id: string): Promise<CompiledFlow | null> {
  // assert: is validate's: a counterexample it prints can be simulated here
  const flows = await loadFlows(flowsDir(ctx), { ...ctx.opts, assertions: false });
  const flow: LoadedFlow | undefined = flows.find((f) => f.id === id);
  if (!flow) {
    const known = flows.map((f) => f.id).join(', ') || 'none';
    ctx.err(`switchboard flows: no flow "${id}" in ${flowsDir(ctx)} (flows: ${known})\n`);
    return null;
  }
  if (!flow.compiled) {
    for (const issue of flow.errors) ctx.err(formatIssue(ctx.io, issue));
    ctx.err(`switchboard flows: flow "${id}" has errors\n`);
    return null;
  }
  return flow.compiled;
}

function parseVars(ctx: Ctx): Record<string, string> {
  const vars: Record<string, string> = {};
  for (const pair of ctx.values.var ?? []) {
    const eq = pair.indexOf('=');
    if (eq < 1) throw new UsageError(`--var takes name=value, got "${pair}"`);
    vars[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  return vars;
}

async function compile(ctx: Ctx, id: string): Promise<number> {
  const compiled = await compiledFlow(ctx, id);
  if (!compiled) return 1;
  if (ctx.values.template) {
    ctx.out(`${JSON.stringify(compiled.menuTemplate, null, 2)}\n`);
    return 0;
  }
  // --var values are text: each is read by its param's type
  const checked = validateVars(compiled, readTextVars(compiled.params, parseVars(ctx)));
  if (!checked.ok)
    throw new AppError('INVALID_VARS', `vars do not fit flow "${id}"`, checked.details);
  const secret = { id: 'preview', key: ctx.values.secret ?? 'preview' };
  const callId = ctx.values['call-id'] ?? 'preview';
  const menu = renderMenu(compiled, {
    vars: checked.vars,
    ...(ctx.values.lang !== undefined ? { lang: ctx.values.lang } : {}),
    hookUrl: ctx.values['hook-url'] ?? 'http://localhost:3000/hooks/speechcall',
    tokenFor: (node, key) => signNodeToken({ callId, node, key }, secret),
  });
  ctx.out(`${JSON.stringify(menu, null, 2)}\n`);
  return 0;
}

async function graph(ctx: Ctx, id: string): Promise<number> {
  const compiled = await compiledFlow(ctx, id);
  if (!compiled) return 1;
  ctx.out(flowToMermaid(compiled, { folded: ctx.values.folded === true }));
  return 0;
}

async function simulate(ctx: Ctx, id: string): Promise<number> {
  if (ctx.values.keys === undefined)
    throw new UsageError('simulate needs --keys, e.g. --keys 1,timeout,2');
  const compiled = await compiledFlow(ctx, id);
  if (!compiled) return 1;
  const keys = ctx.values.keys
    .split(',')
    .map((k) => k.trim())
    .filter((k) => k !== '');
  const sim = simulateFlow(compiled, {
    keys,
    vars: readTextVars(compiled.params, parseVars(ctx)),
    ...(ctx.values.lang !== undefined ? { lang: ctx.values.lang } : {}),
    statuses: ctx.values.status ?? [],
    timers: ctx.values.timer ?? [],
  });
  return reportSimulation(compiled, sim, ctx.io, ctx.values.json === true);
}

/**
 * Prints a simulation (text, or JSON with `json`) and returns the exit code: 1, with the
 * differences on stderr, when the machine and the menu JSON disagree.
 *
 * @example
 * process.exitCode = reportSimulation(compiled, simulateFlow(compiled, { keys }), io, false);
 */
export function reportSimulation(
  compiled: CompiledFlow,
  sim: Simulation,
  io: FlowsIo,
  json: boolean,
): number {
  io.stdout.write(json ? `${JSON.stringify(sim, null, 2)}\n` : describeSimulation(compiled, sim));
  if (!sim.agree) {
    io.stderr.write(
      'switchboard flows: MISMATCH between the machine and the provider menu JSON:\n',
    );
    for (const d of sim.differences) io.stderr.write(`  ${d}\n`);
    io.stderr.write(
      'This is a compiler bug: the provider would not follow the call the way Switchboard does.\n',
    );
    return 1;
  }
  return 0;
}

function describeSimulation(compiled: CompiledFlow, sim: Simulation): string {
  const lines = [
    `flow ${compiled.id} (version ${compiled.version}, language ${sim.lang})`,
    'path:',
  ];
  const m = sim.machine;
  m.path.forEach((step, i) => {
    const next =
      m.path[i + 1]?.node ?? (i === m.path.length - 1 && m.ended ? 'hang up' : m.waitingAt);
    lines.push(`  ${i + 1}. ${step.node}  ${describeInput(step)}  -> ${next}`);
  });
  if (m.path.length === 0) lines.push('  (no key)');
  lines.push(m.ended ? 'ended: hung up' : `waiting at: ${m.waitingAt}`);
  if (sim.ignored.length > 0) lines.push(`ignored after the call ended: ${sim.ignored.join(',')}`);
  lines.push(`outcome: ${sim.outcome ?? '(none)'}`);
  const sends = [
    ...m.sends,
    ...sim.reactions.flatMap((e) => (e.type === 'send' ? [{ id: e.id, message: e.message }] : [])),
  ];
  lines.push(sends.length > 0 ? 'follow-ups:' : 'follow-ups: (none)');
  for (const s of sends) {
    lines.push(
      `  ${s.id}  ${s.message.type}${s.message.to ? ` to ${s.message.to}` : ''}: ${JSON.stringify(s.message.text ?? '')}`,
    );
  }
  if (m.providerWebhooks.length > 0) {
    lines.push('webhooks the provider calls:');
    for (const w of m.providerWebhooks) lines.push(`  POST ${w.url}`);
  }
  if (m.notifies.length > 0) {
    lines.push('endpoints notified (flow.notify):');
    for (const n of m.notifies) lines.push(`  ${n.endpoint}  at ${n.node}`);
  }
  const other = sim.reactions.filter((e) => e.type !== 'send');
  if (other.length > 0) {
    lines.push('reactions to statuses and timers:');
    for (const e of other) lines.push(`  ${JSON.stringify(e)}`);
  }
  lines.push(
    sim.agree
      ? 'machine and menu JSON agree on path, outcome, follow-ups, webhooks and ending'
      : 'machine and menu JSON DIFFER (see stderr)',
  );
  return `${lines.join('\n')}\n`;
}

/** `key 1`, `silence (wrong)`, `key 7, not handled here (wrong)`. */
function describeInput(step: Simulation['machine']['path'][number]): string {
  if (step.key !== 'wrong' || step.input === undefined) return `key ${step.key}`;
  return step.input === 'timeout'
    ? 'silence (wrong)'
    : `key ${step.input}, not handled here (wrong)`;
}

async function schema(ctx: Ctx): Promise<number> {
  const text = `${JSON.stringify(ctx.values.tests ? flowTestJsonSchema() : flowJsonSchema(), null, 2)}\n`;
  if (ctx.values.out === undefined) {
    ctx.out(text);
    return 0;
  }
  const path = resolve(ctx.io.cwd, ctx.values.out);
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, text);
  ctx.out(`wrote ${relative(ctx.io.cwd, path) || path}\n`);
  return 0;
}

/**
 * `flows test [ids...]`: every test file of --dir (or those of the flows named), each run
 * against the flow it names. A flow without tests is listed, not failed; a test file whose
 * flow is missing or does not compile fails with that.
 */
async function test(ctx: Ctx, ids: string[]): Promise<number> {
  const dir = flowsDir(ctx);
  const shown = (path: string) => relative(ctx.io.cwd, path) || path;
  let names: string[];
  try {
    names = (await readdir(dir)).filter(isFlowTestFile).sort();
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    names = [];
  }
  // a failing assert: is validate's to report; the cases still run
  const flows = await loadFlows(dir, { ...ctx.opts, assertions: false });
  const byId = new Map(flows.map((f) => [f.id, f]));
  const files = await Promise.all(
    names.map(async (name) => {
      const path = join(dir, name);
      const source = await readFile(path, 'utf8');
      return { file: shown(path), source, target: flowTestTarget(source, path) };
    }),
  );
  for (const id of ids) {
    if (!byId.has(id) && !files.some((f) => f.target.flow === id)) {
      const known = flows.map((f) => f.id).join(', ') || 'none';
      throw new UsageError(`no flow "${id}" in ${dir} (flows: ${known})`);
    }
  }
  const chosen = ids.length > 0 ? files.filter((f) => ids.includes(f.target.flow)) : files;
  const reports: FlowTestReport[] = chosen.map(({ file, source, target }) => {
    const flow = byId.get(target.flow);
    if (!flow) {
      const known = flows.map((f) => f.id).join(', ') || 'none';
      return flowTestFileFailure(
        file,
        target.flow,
        `there is no flow "${target.flow}" in ${shown(dir) || '.'} (flows: ${known})`,
        target,
      );
    }
    if (!flow.compiled) {
      const first = flow.errors[0];
      const why = first
        ? `: ${shown(first.file)}:${first.line}:${first.column} ${first.message}`
        : '';
      return flowTestFileFailure(
        file,
        target.flow,
        `flow "${target.flow}" does not compile (${flow.errors.length} error${flow.errors.length === 1 ? '' : 's'})${why}`,
        target,
      );
    }
    return runFlowTests(flow.compiled, source, file);
  });
  const tested = new Set(files.map((f) => f.target.flow));
  const untested = (ids.length > 0 ? ids : flows.map((f) => f.id)).filter((id) => !tested.has(id));
  const passed = reports.reduce((n, r) => n + r.passed, 0);
  const failed = reports.reduce((n, r) => n + r.failed, 0);
  const errors = reports.reduce((n, r) => n + r.errors.length, 0);
  const ok = failed === 0 && errors === 0;
  if (ctx.values.json) {
    ctx.out(`${JSON.stringify({ ok, passed, failed, errors, reports, untested }, null, 2)}\n`);
    return ok ? 0 : 1;
  }
  for (const report of reports) ctx.out(formatFlowTestReport(report));
  for (const id of untested) ctx.out(`${id}: no tests\n`);
  const count = (n: number, one: string) => `${n} ${one}${n === 1 ? '' : 's'}`;
  ctx.out(
    `${count(reports.length, 'test file')}: ${passed} passed, ${failed} failed, ${count(errors, 'error')}${untested.length > 0 ? `; no tests: ${untested.join(', ')}` : ''}\n`,
  );
  return ok ? 0 : 1;
}
