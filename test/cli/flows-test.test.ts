/**
 * `switchboard flows test`: the example flows' test files run here, so `npm test` and CI run
 * them; a broken case, a broken test file or a test file without its flow exit 1 with the
 * file and line; `--json` and `schema --tests` print what they say.
 */
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { flowTestJsonSchema } from '../../src/flows/index.ts';
import { EXAMPLES } from '../flows/helpers.ts';
import { runFlowsCli } from '../support/cli.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const tmp = mkdtempSync(join(tmpdir(), 'flows-test-cli-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const run = (argv: string[], cwd = ROOT) => runFlowsCli(argv, cwd);

/** A copy of the repository's flows/ in a fresh directory; returns that directory. */
function copyOfFlows(name: string): string {
  const dir = join(tmp, name);
  mkdirSync(join(dir, 'flows'), { recursive: true });
  for (const file of readdirSync(join(ROOT, 'flows'))) {
    copyFileSync(join(ROOT, 'flows', file), join(dir, 'flows', file));
  }
  return dir;
}

describe('switchboard flows test', () => {
  it('runs every example flow test file and passes', async () => {
    const { code, out, err } = await run(['test']);
    expect(err).toBe('');
    expect(code).toBe(0);
    for (const id of EXAMPLES) {
      expect(out).toContain(`flows/${id}.test.yaml (flow ${id})\n`);
    }
    expect(out).not.toContain('FAIL');
    expect(out).not.toContain('no tests');
    expect(out).not.toContain('not reached');
    expect(out).toMatch(/^ {2}ok {4}confirms with 1$/m);
    expect(out).toMatch(/^ {2}coverage: menus 2\/2, keys 7\/7, actions 8\/8, reactions 3\/3$/m);
    expect(out).toMatch(/^4 test files: \d+ passed, 0 failed, 0 errors\n$/m);
  });

  it('prints the reports as JSON with --json', async () => {
    const { code, out } = await run(['test', '--json']);
    expect(code).toBe(0);
    const result = JSON.parse(out) as {
      ok: boolean;
      failed: number;
      passed: number;
      reports: Array<{ flow: string; cases: Array<{ ok: boolean }> }>;
      untested: string[];
    };
    expect(result.ok).toBe(true);
    expect(result.failed).toBe(0);
    expect(result.untested).toEqual([]);
    expect(result.reports.map((r) => r.flow).sort()).toEqual([...EXAMPLES].sort());
    expect(result.passed).toBe(result.reports.reduce((n, r) => n + r.cases.length, 0));
  });

  it('runs only the flows named', async () => {
    const { code, out } = await run(['test', 'order-confirmation']);
    expect(code).toBe(0);
    expect(out).toContain('flows/order-confirmation.test.yaml (flow order-confirmation)');
    expect(out).not.toContain('appointment-reminder');
    expect(out).toMatch(/^1 test file: \d+ passed, 0 failed, 0 errors$/m);
    const unknown = await run(['test', 'nope']);
    expect(unknown.code).toBe(2);
    expect(unknown.err).toContain('no flow "nope"');
  });

  it('exits 1 on a broken case, with the file and line of the case and of the expectation', async () => {
    const dir = copyOfFlows('broken-case');
    const file = join(dir, 'flows', 'appointment-reminder.test.yaml');
    const source = readFileSync(file, 'utf8');
    const lines = source.split('\n');
    const caseLine = lines.findIndex((l) => l.includes('- name: confirms with 1')) + 1;
    const outcomeLine =
      lines.findIndex((l, i) => i >= caseLine && l.includes('outcome: confirmed')) + 1;
    expect(caseLine).toBeGreaterThan(0);
    expect(outcomeLine).toBeGreaterThan(caseLine);
    lines[outcomeLine - 1] = lines[outcomeLine - 1]!.replace('confirmed', 'no-input');
    writeFileSync(file, lines.join('\n'));

    const { code, out } = await run(['test'], dir);
    expect(code).toBe(1);
    expect(out).toContain(
      `  FAIL  confirms with 1  (flows/appointment-reminder.test.yaml:${caseLine}:5)\n`,
    );
    expect(out).toContain(
      `flows/appointment-reminder.test.yaml:${outcomeLine}:7  case "confirms with 1": outcome: expected no-input, got confirmed`,
    );
    expect(out).toMatch(/^4 test files: \d+ passed, 1 failed, 0 errors$/m);
    const json = await run(['test', '--json'], dir);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.out)).toMatchObject({ ok: false, failed: 1 });
  });

  it('exits 1 on a test file that does not parse, with file:line:column', async () => {
    const dir = copyOfFlows('broken-yaml');
    writeFileSync(
      join(dir, 'flows', 'satisfaction-survey.test.yaml'),
      'cases:\n  - name: a\n    keys: [1\n    expect: { outcome: score-1 }\n',
    );
    const { code, out } = await run(['test', 'satisfaction-survey'], dir);
    expect(code).toBe(1);
    expect(out).toMatch(/^ {2}flows\/satisfaction-survey\.test\.yaml:\d+:\d+ {2}\S/m);
    expect(out).toMatch(/^1 test file: 0 passed, 0 failed, [1-9]\d* errors?$/m);
  });

  it('exits 1 on a test file with an unknown field, at its line', async () => {
    const dir = copyOfFlows('unknown-field');
    writeFileSync(
      join(dir, 'flows', 'satisfaction-survey.test.yaml'),
      'vars: { name: Olena, ticketId: T-77 }\ncases:\n  - name: a\n    keys: [5]\n    expect: { outcome: score-5, sent: [] }\n',
    );
    const { code, out } = await run(['test', 'satisfaction-survey'], dir);
    expect(code).toBe(1);
    expect(out).toContain(
      'flows/satisfaction-survey.test.yaml:5:33  unknown field "sent" (in cases[0].expect)',
    );
  });

  it('exits 1 on a test file whose flow is missing or does not compile', async () => {
    const dir = copyOfFlows('no-flow');
    writeFileSync(
      join(dir, 'flows', 'gone.test.yaml'),
      'cases:\n  - { name: a, keys: [1], expect: { outcome: x } }\n',
    );
    writeFileSync(
      join(dir, 'flows', 'bad.yaml'),
      'menus:\n  main: { intro: x, keys: { "1": [{ goto: nowhere }] } }\n',
    );
    writeFileSync(
      join(dir, 'flows', 'bad.test.yaml'),
      'cases:\n  - { name: a, keys: [1], expect: { ended: true } }\n',
    );
    const { code, out } = await run(['test'], dir);
    expect(code).toBe(1);
    expect(out).toContain('flows/gone.test.yaml:1:1  there is no flow "gone" in flows');
    expect(out).toMatch(
      /flows\/bad\.test\.yaml:1:1 {2}flow "bad" does not compile \(1 error\): flows\/bad\.yaml:2:\d+ /,
    );
  });

  it('lists a flow without tests, without failing', async () => {
    const dir = copyOfFlows('untested');
    rmSync(join(dir, 'flows', 'delivery-failure.test.yaml'));
    const { code, out } = await run(['test'], dir);
    expect(code).toBe(0);
    expect(out).toContain('delivery-failure: no tests\n');
    expect(out).toMatch(
      /^3 test files: \d+ passed, 0 failed, 0 errors; no tests: delivery-failure$/m,
    );
  });
});

describe('switchboard flows schema --tests', () => {
  it('prints the JSON Schema of test files, as committed in flows/test.schema.json', async () => {
    const { code, out } = await run(['schema', '--tests']);
    expect(code).toBe(0);
    expect(JSON.parse(out)).toEqual(flowTestJsonSchema());
    expect(JSON.parse(readFileSync(join(ROOT, 'flows', 'test.schema.json'), 'utf8'))).toEqual(
      JSON.parse(out),
    );
  });
});
