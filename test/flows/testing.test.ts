/**
 * Flow tests as files (`flows/<id>.test.yaml`): `runFlowTests` passes a case whose
 * expectations hold, fails each kind of expectation with the line of the case and of the
 * expectation and what was expected against what happened, fails a case where the machine and
 * the menu disagree, reports what no case reached, and refuses a bad test file with
 * file:line:column. The example test files fit the schema, and the loader never takes one for
 * a flow.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  type CompiledFlow,
  FlowTestFile,
  flowIdOfTestFile,
  flowTestJsonSchema,
  flowTestTarget,
  formatFlowTestReport,
  isFlowFile,
  isFlowTestFile,
  loadFlows,
  runFlowTests,
} from '../../src/flows/index.ts';
import { compileDef, EXAMPLES, FLOWS_DIR, loadExample } from './helpers.ts';

const FILE = 'flows/appointment-reminder.test.yaml';
const fresh = (): CompiledFlow => structuredClone(loadExample('appointment-reminder'));

/** The 1-based line of the first line of `source` containing `text`. */
function lineOf(source: string, text: string): number {
  const i = source.split('\n').findIndex((l) => l.includes(text));
  if (i === -1) throw new Error(`no line with ${text}`);
  return i + 1;
}

/** A test file of appointment-reminder: the shared vars, then `cases` as written. */
const tests = (cases: string) => `vars: { name: Ann, date: Monday }\ncases:\n${cases}`;

describe('runFlowTests: passing cases', () => {
  it('passes a case whose every expectation holds', () => {
    const source = tests(`  - name: confirms
    keys: [1]
    expect:
      path: [main:1]
      outcome: confirmed
      sends: [{ id: "main:1:1", type: sms, text: "Thanks Ann, see you on Monday." }]
      webhooks: []
      notifies: []
      timers: [{ start: noResponse, after: 30m }, cancel noResponse]
      ended: true
      waitingAt: null
`);
    const report = runFlowTests(fresh(), source, FILE);
    expect(report.errors).toEqual([]);
    expect(report.cases).toEqual([
      { name: 'confirms', line: 3, column: 5, ok: true, failures: [] },
    ]);
    expect([report.passed, report.failed]).toEqual([1, 0]);
    expect(formatFlowTestReport(report)).toContain('  ok    confirms\n');
  });

  it('runs every example flow test file green, reaching everything', () => {
    for (const id of EXAMPLES) {
      const file = `flows/${id}.test.yaml`;
      const report = runFlowTests(
        loadExample(id),
        readFileSync(join(FLOWS_DIR, `${id}.test.yaml`), 'utf8'),
        file,
      );
      expect(report.errors, id).toEqual([]);
      expect(report.failed, id).toBe(0);
      expect(report.passed, id).toBeGreaterThan(0);
      expect(report.coverage, id).toEqual({ menus: [], keys: [], actions: [], reactions: [] });
    }
  });

  it('matches a wrong step by its input, or by either input when none is given', () => {
    const source = tests(`  - name: silent then 1
    keys: [timeout, 1]
    expect: { path: [main:wrong, main/r1:1] }
  - name: silent, told as silence
    keys: [timeout, 1]
    expect: { path: ["main:wrong(timeout)", { node: main/r1, key: "1" }] }
`);
    const report = runFlowTests(fresh(), source, FILE);
    expect(report.errors).toEqual([]);
    expect(report.cases.map((c) => c.ok)).toEqual([true, true]);
  });

  it('merges a case’s vars over the file’s, null taking a default away', () => {
    const source = tests(`  - name: another name
    vars: { name: Bo, clinicPhone: null }
    keys: [1]
    expect:
      sends: [{ text: "Thanks Bo, see you on Monday." }]
`);
    const report = runFlowTests(fresh(), source, FILE);
    expect(report.cases[0]).toMatchObject({ ok: true });
  });
});

describe('runFlowTests: failing expectations', () => {
  /** Runs one case of `keys: [1]` (confirms) expecting `expect`, returns its one failure. */
  function failure(expectYaml: string, keys = '[1]', extra = '', count = 1) {
    const source = tests(`  - name: the case
    keys: ${keys}${extra}
    expect:
${expectYaml}`);
    const report = runFlowTests(fresh(), source, FILE);
    expect(report.errors).toEqual([]);
    expect(report.failed).toBe(1);
    const [c] = report.cases;
    expect(c!.line).toBe(3);
    expect(c!.failures).toHaveLength(count);
    return {
      source,
      failure: c!.failures[0]!,
      failures: c!.failures,
      text: formatFlowTestReport(report),
    };
  }

  it('fails a path that differs, at the first step that differs', () => {
    const { source, failure: f } = failure('      path: [main:1]\n', '[2, 1]');
    expect(f).toEqual({
      line: lineOf(source, 'path: [main:1]'),
      column: 14,
      message: 'path: expected main:1; got main:2, reschedule:1',
    });
  });

  it('fails a path that stops short, at the path', () => {
    const { source, failure: f } = failure('      path: [main:2]\n', '[2, 1]');
    expect(f.line).toBe(lineOf(source, 'path:'));
    expect(f.message).toBe('path: expected main:2; got main:2, reschedule:1');
  });

  it('fails a wrong step whose input differs', () => {
    const { failure: f } = failure('      path: ["main:wrong(7)", main/r1:1]\n', '[timeout, 1]');
    expect(f.message).toBe(
      'path: expected main:wrong(7), main/r1:1; got main:wrong(timeout), main/r1:1',
    );
  });

  it('fails an outcome, with file:line:column in the text', () => {
    const { source, failure: f, text } = failure('      outcome: no-input\n');
    const line = lineOf(source, 'outcome: no-input');
    expect(f).toEqual({ line, column: 7, message: 'outcome: expected no-input, got confirmed' });
    expect(text).toContain(`  FAIL  the case  (${FILE}:3:5)\n`);
    expect(text).toContain(
      `${FILE}:${line}:7  case "the case": outcome: expected no-input, got confirmed`,
    );
    expect(text).toContain('0 passed, 1 failed');
  });

  it('fails an outcome expected as none', () => {
    const { failure: f } = failure('      outcome: null\n');
    expect(f.message).toBe('outcome: expected (none), got confirmed');
  });

  it('fails a follow-up whose rendered text differs, at that message', () => {
    const { source, failure: f } = failure(
      '      sends:\n        - { type: sms, text: "Thanks Ann, see you on Tuesday." }\n',
    );
    expect(f).toEqual({
      line: lineOf(source, 'Tuesday'),
      column: 11,
      message:
        'sends[0]: text: expected "Thanks Ann, see you on Tuesday.", got "Thanks Ann, see you on Monday."',
    });
  });

  it('fails a follow-up id, type and a count of follow-ups', () => {
    expect(failure('      sends: [{ id: "main:1:0", type: viber_trans }]\n').failure.message).toBe(
      'sends[0]: id: expected main:1:0, got main:1:1; type: expected "viber_trans", got "sms"',
    );
    expect(failure('      sends: []\n').failure.message).toBe(
      'sends: expected 0, got 1: sms "Thanks Ann, see you on Monday."',
    );
  });

  it('fails webhooks: a missing one, and one whose URL differs', () => {
    expect(failure('      webhooks: [https://crm.example.com/reschedule]\n').failure.message).toBe(
      'webhooks: expected 1, got 0: (none)',
    );
    expect(
      failure('      webhooks: [https://crm.example.com/other]\n', '[2, 1]').failure.message,
    ).toBe(
      'webhooks[0]: url: expected "https://crm.example.com/other", got "https://crm.example.com/reschedule"',
    );
  });

  it('fails timers: an order, a missing one and a delay', () => {
    const swapped = failure('      timers: [cancel noResponse, start noResponse]\n', '[1]', '', 2);
    expect(swapped.failures.map((f) => f.message)).toEqual([
      'timers[0]: expected cancel noResponse, got start noResponse',
      'timers[1]: expected start noResponse, got cancel noResponse',
    ]);
    expect(failure('      timers: [start noResponse]\n').failure.message).toBe(
      'timers: expected 1, got 2: start noResponse, cancel noResponse',
    );
    expect(
      failure('      timers: [{ start: noResponse, after: 1h }, cancel noResponse]\n').failure
        .message,
    ).toBe('timers[0]: after: expected 3600000 ms, got 1800000 ms');
  });

  it('fails ended and waitingAt', () => {
    expect(failure('      ended: false\n').failure.message).toBe('ended: expected false, got true');
    expect(failure('      ended: true\n', '[2]').failure.message).toBe(
      'ended: expected true, got false (waiting at reschedule)',
    );
    expect(failure('      waitingAt: main\n', '[2]').failure.message).toBe(
      'waitingAt: expected main, got reschedule',
    );
    expect(failure('      waitingAt: main\n').failure.message).toBe(
      'waitingAt: expected main, got (none: the call ended)',
    );
  });

  it('fails what statuses and timers give after the keys', () => {
    const { failure: f } = failure('      outcome: confirmed\n', '[]', '\n    status: [expired]');
    expect(f.message).toBe('outcome: expected confirmed, got unreachable');
    const sms = failure(
      '      sends: [{ id: "on:failed:0", text: "We could not reach you." }]\n',
      '[]',
      '\n    status: [failed]',
    );
    expect(sms.failure.message).toBe(
      'sends[0]: text: expected "We could not reach you.", got "We could not reach you about Monday."',
    );
  });

  it('reports every failing expectation of a case, not only the first', () => {
    const source = tests(`  - name: two wrong
    keys: [1]
    expect:
      outcome: no-input
      ended: false
`);
    const report = runFlowTests(fresh(), source, FILE);
    expect(report.cases[0]!.failures.map((f) => [f.line, f.message])).toEqual([
      [6, 'outcome: expected no-input, got confirmed'],
      [7, 'ended: expected false, got true'],
    ]);
  });

  it('fails notifies: the endpoint, its data and a count', () => {
    const compiled = compileDef({
      params: { name: 'string' },
      menus: {
        main: {
          intro: 'ivr_1',
          keys: {
            '1': [{ notify: { endpoint: 'crm', data: { note: 'Hi {{name}}' } } }, 'hangup'],
          },
        },
      },
      on: { failed: [{ notify: 'ops-alerts' }] },
    });
    const source = `vars: { name: Ann }
cases:
  - name: notifies crm
    keys: [1]
    status: [failed]
    expect:
      notifies: [{ endpoint: crm, node: main, data: { note: Hi Ann } }, { endpoint: ops-alerts, node: null }]
  - name: wrong data
    keys: [1]
    expect:
      notifies: [{ endpoint: crm, data: { note: Hi Bo } }]
  - name: wrong endpoint
    keys: [1]
    expect:
      notifies: [ops]
  - name: one too many
    keys: [1]
    expect:
      notifies: [crm, ops-alerts]
`;
    const report = runFlowTests(compiled, source, 'flows/test.test.yaml');
    expect(report.errors).toEqual([]);
    expect(report.cases.map((c) => [c.name, c.ok, c.failures.map((f) => f.message)])).toEqual([
      ['notifies crm', true, []],
      [
        'wrong data',
        false,
        ['notifies[0]: data: expected {"note":"Hi Bo"}, got {"note":"Hi Ann"}'],
      ],
      ['wrong endpoint', false, ['notifies[0]: endpoint: expected "ops", got "crm"']],
      ['one too many', false, ['notifies: expected 2, got 1: crm']],
    ]);
  });

  it('compares fallbacks item by item, on the fields given', () => {
    const survey = loadExample('satisfaction-survey');
    const source = `vars: { name: Olena, ticketId: T-77 }
cases:
  - name: fallback text
    keys: [5]
    expect:
      sends: [{ fallbacks: [{ type: sms, text: "Thanks!" }] }]
  - name: fallback count
    keys: [5]
    expect:
      sends: [{ fallbacks: [] }]
`;
    const report = runFlowTests(survey, source, 'flows/satisfaction-survey.test.yaml');
    expect(report.cases.map((c) => c.failures.map((f) => f.message))).toEqual([
      ['sends[0]: fallbacks[0].text: expected "Thanks!", got "Thank you for your rating, Olena!"'],
      [expect.stringMatching(/^sends\[0\]: fallbacks: expected 0, got 1: \[\{"type":"sms"/)],
    ]);
  });
});

describe('runFlowTests: machine and menu', () => {
  it('fails a case where the machine and the menu disagree, at the case', () => {
    const compiled = fresh();
    // a compiler bug: the provider's menu sends key 2 elsewhere than the machine does
    compiled.nodes[0]!.keys['2'] = [{ type: 'goto', node: 'main/v2' }];
    const source = tests(`  - name: reschedules
    keys: [2, 1]
    expect:
      outcome: reschedule-requested
`);
    const report = runFlowTests(compiled, source, FILE);
    const [c] = report.cases;
    expect(c!.ok).toBe(false);
    expect(c!.failures[0]).toMatchObject({ line: 3, column: 5 });
    expect(c!.failures.map((f) => f.message).join('\n')).toMatch(
      /^machine and menu differ: paths differ/m,
    );
  });

  it('fails on a disagreement even when the stated expectations hold', () => {
    const compiled = fresh();
    const t = compiled.machineConfig.states.main!.on!.KEY[0]!;
    t.actions = t.actions.filter((a) => a.type !== 'send');
    const source = tests(`  - name: confirms
    keys: [1]
    expect: { outcome: confirmed }
`);
    const report = runFlowTests(compiled, source, FILE);
    expect(report.cases[0]!.failures.map((f) => f.message)).toEqual([
      expect.stringMatching(/^machine and menu differ: follow-ups differ/),
    ]);
  });
});

describe('runFlowTests: coverage', () => {
  it('lists the menus, keys, actions and reactions no case reached', () => {
    const source = tests(`  - name: confirms
    keys: [1]
    expect: { outcome: confirmed }
`);
    const report = runFlowTests(fresh(), source, FILE);
    expect(report.coverage).toEqual({
      menus: ['reschedule'],
      keys: ['main:2', 'main:9', 'main:wrong', 'reschedule:1', 'reschedule:*', 'reschedule:wrong'],
      actions: [
        'main:2[0] goto reschedule',
        'main:9[0] goto main',
        'main:wrong[0] outcome no-input',
        'reschedule:1[0] outcome reschedule-requested',
        'reschedule:1[1] webhook https://crm.example.com/reschedule',
        'reschedule:*[0] goto main',
      ],
      reactions: ['on.failed', 'on.expired', 'on.noResponse'],
    });
    expect(report.coverageTotals).toEqual({ menus: 2, keys: 7, actions: 8, reactions: 3 });
    const text = formatFlowTestReport(report);
    expect(text).toContain('coverage: menus 1/2, keys 1/7, actions 2/8, reactions 0/3');
    expect(text).toContain('not reached: menus reschedule');
    expect(text).toContain('not reached: reactions on.failed, on.expired, on.noResponse');
  });

  it('counts a wrong key only once the retries are used up, and a timer only if it ran', () => {
    const source = tests(`  - name: one silence, then 1
    keys: [timeout, 1]
    timers: [noResponse]
    expect: { outcome: confirmed }
`);
    const report = runFlowTests(fresh(), source, FILE);
    expect(report.coverage.keys).toContain('main:wrong');
    // the key cancelled the timer, so its reaction never ran
    expect(report.coverage.reactions).toContain('on.noResponse');
  });
});

describe('runFlowTests: a bad test file', () => {
  const errorsOf = (source: string, compiled = fresh(), file = FILE) => {
    const report = runFlowTests(compiled, source, file);
    expect(report.cases).toEqual([]);
    return report.errors.map((e) => `${e.file}:${e.line}:${e.column} ${e.message}`);
  };

  it('gives file:line:column for YAML that does not parse', () => {
    const [first] = errorsOf('cases:\n  - name: x\n    keys: [1\n    expect: {}\n');
    expect(first).toMatch(/^flows\/appointment-reminder\.test\.yaml:\d+:\d+ /);
    const report = runFlowTests(fresh(), 'cases:\n  - name: x\n    keys: [1\n', FILE);
    expect(formatFlowTestReport(report)).toMatch(/error in the test file/);
  });

  it('points at an unknown field, a bad key and a case that expects nothing', () => {
    const source = tests(`  - name: typo
    keys: [1]
    expect: { outcom: confirmed }
  - name: bad key
    keys: [12]
    expect: { outcome: confirmed }
`);
    expect(errorsOf(source)).toEqual([
      `${FILE}:5:15 unknown field "outcom" (in cases[0].expect)`,
      `${FILE}:7:12 cases[1].keys[0]: a key is 0-9, *, # or timeout (silence)`,
    ]);
    const empty = tests(`  - name: nothing
    keys: [1]
    expect: {}
`);
    expect(errorsOf(empty)).toEqual([
      `${FILE}:5:5 case "nothing" expects nothing: state at least one of path, outcome, sends, webhooks, notifies, timers, ended, waitingAt`,
    ]);
  });

  it('refuses a bad path step, a bad timer and a file without cases', () => {
    expect(errorsOf(tests('  - name: a\n    expect: { path: [main-1] }\n'))).toEqual([
      `${FILE}:4:22 cases[0].expect.path[0]: a path step is node:key, like main:1, or a wrong step with its input, like main/r1:wrong(timeout)`,
    ]);
    expect(errorsOf(tests('  - name: a\n    expect: { timers: [stop noResponse] }\n'))).toEqual([
      `${FILE}:4:24 cases[0].expect.timers[0]: a timer effect is "start <timer>" or "cancel <timer>", like start noResponse`,
    ]);
    expect(errorsOf('cases: []\n')).toEqual([
      `${FILE}:1:1 cases: a test file needs at least one case`,
    ]);
  });

  it('refuses two cases with one name', () => {
    const source = tests(`  - name: twice
    expect: { outcome: null }
  - name: twice
    expect: { outcome: null }
`);
    expect(errorsOf(source)).toEqual([
      `${FILE}:5:11 case "twice" is named twice (first at line 3): names must be unique`,
    ]);
  });

  it('points at a var the flow refuses, and a language it lacks', () => {
    const source = `vars: { name: Ann }
cases:
  - name: no date
    expect: { outcome: null }
  - name: french
    vars: { date: Monday }
    lang: fr
    expect: { outcome: null }
`;
    const errors = errorsOf(source);
    expect(errors).toHaveLength(2);
    expect(errors[0]).toMatch(
      new RegExp(
        `^${FILE}:3:5 case "no date": vars do not fit flow "appointment-reminder": vars\\.date `,
      ),
    );
    expect(errors[1]).toMatch(new RegExp(`^${FILE}:7:11 case "french": `));
  });

  it('refuses a file that names another flow', () => {
    expect(
      errorsOf('flow: order-confirmation\ncases:\n  - { name: a, expect: { outcome: null } }\n'),
    ).toEqual([
      `${FILE}:1:7 this file tests flow "order-confirmation", but was run against flow "appointment-reminder"`,
    ]);
  });
});

describe('docs/flows.md, "Tests"', () => {
  it('has an example that runs green against appointment-reminder', () => {
    const docs = readFileSync(join(FLOWS_DIR, '..', 'docs', 'flows.md'), 'utf8');
    const section = docs.slice(docs.indexOf('### An example'));
    const example = /```yaml\n([\s\S]*?)```/.exec(section)![1]!;
    const report = runFlowTests(fresh(), example, FILE);
    expect(report.errors).toEqual([]);
    expect(report.cases.length).toBeGreaterThan(3);
    expect(report.failed).toBe(0);
  });
});

describe('test files and flow files', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'flow-tests-'));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  it('tells a test file from a flow file by its name, the loader and the runner alike', () => {
    const names = [
      'a.yaml',
      'a.yml',
      'a.test.yaml',
      'a.test.yml',
      'A.TEST.YAML',
      'a.json',
      'test.yaml',
      'a.test',
    ];
    expect(names.filter(isFlowTestFile)).toEqual(['a.test.yaml', 'a.test.yml', 'A.TEST.YAML']);
    expect(names.filter(isFlowFile)).toEqual(['a.yaml', 'a.yml', 'test.yaml']);
    expect(names.filter((n) => isFlowFile(n) && isFlowTestFile(n))).toEqual([]);
    expect(flowIdOfTestFile('flows/appointment-reminder.test.yaml')).toBe('appointment-reminder');
  });

  it('never loads a test file as a flow', async () => {
    writeFileSync(
      join(tmp, 'a.yaml'),
      'menus:\n  main: { intro: x, keys: { "1": [hangup] } }\nassert: { outcomeOnEveryPath: false }\n',
    );
    writeFileSync(
      join(tmp, 'a.test.yaml'),
      'cases:\n  - { name: one, keys: [1], expect: { ended: true } }\n',
    );
    const flows = await loadFlows(tmp);
    expect(flows.map((f) => [f.id, f.errors])).toEqual([['a', []]]);
  });

  it('finds the flow a file tests: its flow:, else its name', () => {
    expect(flowTestTarget('flow: survey\ncases: []\n', 'flows/x.test.yaml')).toEqual({
      flow: 'survey',
      line: 1,
      column: 7,
    });
    expect(flowTestTarget('cases: [', 'flows/x.test.yaml')).toEqual({
      flow: 'x',
      line: 1,
      column: 1,
    });
  });

  it('has a test file for every example flow, fitting the schema, with the editor hint', () => {
    const files = readdirSync(FLOWS_DIR).filter(isFlowTestFile).sort();
    expect(files).toEqual([...EXAMPLES].sort().map((id) => `${id}.test.yaml`));
    for (const name of files) {
      const source = readFileSync(join(FLOWS_DIR, name), 'utf8');
      expect(source.split('\n')[0], name).toBe(
        '# yaml-language-server: $schema=./test.schema.json',
      );
    }
  });

  it('is exported as the JSON Schema in flows/test.schema.json (flows schema --tests)', () => {
    const committed = JSON.parse(readFileSync(join(FLOWS_DIR, 'test.schema.json'), 'utf8'));
    expect(committed).toEqual(flowTestJsonSchema());
    const schema = flowTestJsonSchema() as {
      $defs: Record<string, unknown>;
      additionalProperties: boolean;
    };
    expect(Object.keys(schema.$defs)).toEqual(
      expect.arrayContaining([
        'TestCase',
        'TestExpect',
        'TestKey',
        'TestPathStep',
        'TestSend',
        'TestTimer',
      ]),
    );
    expect(schema.additionalProperties).toBe(false);
    expect(
      FlowTestFile.safeParse({
        cases: [{ name: 'a', keys: [1, '#', 'timeout'], expect: { outcome: 'x' } }],
      }).success,
    ).toBe(true);
  });
});
