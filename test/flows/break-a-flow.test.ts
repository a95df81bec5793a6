/**
 * Tested as a user would (issue 24, point 6): copy flows/ (the flows and their test files),
 * change the appointment reminder the way a person might (key 1 now records `booked` and no
 * longer sends the confirmation SMS), and run the CLI as they would: `flows test` fails the
 * cases that pressed 1 and `flows validate` fails the `assert:` path for key 1, each exit 1
 * with the file and line to look at; the counterexample keys validate prints play in
 * `flows simulate` to the outcome it names.
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isMap, isScalar, isSeq, LineCounter, parseDocument } from 'yaml';
import { runFlowsCli } from '../support/cli.ts';
import { FLOWS_DIR } from './helpers.ts';

const ID = 'appointment-reminder';
const root = mkdtempSync(join(tmpdir(), 'break-a-flow-'));
const dir = join(root, 'flows');
afterAll(() => rmSync(root, { recursive: true, force: true }));

const run = (argv: string[]) => runFlowsCli(argv, root);

const escapeRe = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** 1-based line and column of a position in a text. */
function lineCol(text: string, offset: number) {
  const lines = new LineCounter();
  parseDocument(text, { lineCounter: lines });
  const { line, col } = lines.linePos(offset);
  return `${line}:${col}`;
}

// what a person changes: key 1 no longer confirms by SMS, it records `booked`
const BEFORE =
  '"1": [ { outcome: confirmed }, { send: { type: sms, text: "Thanks {{name}}, see you on {{date}}." } }, hangup ]';
const AFTER = '"1": [ { outcome: booked }, hangup ]';

describe('an example flow broken the way a person would break it', () => {
  beforeAll(() => {
    cpSync(FLOWS_DIR, dir, { recursive: true });
    const flowFile = join(dir, `${ID}.yaml`);
    const source = readFileSync(flowFile, 'utf8');
    expect(source).toContain(BEFORE);
    writeFileSync(flowFile, source.replace(BEFORE, AFTER));
  });

  it('passes before the change: the copies are the examples', async () => {
    cpSync(FLOWS_DIR, join(root, 'pristine'), { recursive: true });
    const validate = await run(['validate', '--dir', join(root, 'pristine')]);
    const test = await run(['test', '--dir', join(root, 'pristine')]);
    expect([validate.code, test.code], validate.out + test.out).toEqual([0, 0]);
  });

  it('flows test fails the case that pressed 1, at the line of each broken expectation', async () => {
    const file = `${ID}.test.yaml`;
    const text = readFileSync(join(dir, file), 'utf8');
    // the case file is the tests' own: find the case that presses 1 alone and what it expects
    const doc = parseDocument(text);
    const cases = doc.get('cases');
    expect(isSeq(cases)).toBe(true);
    const pressOne = (isSeq(cases) ? cases.items : []).find((c) => {
      if (!isMap(c)) return false;
      const keys = c.get('keys');
      return (
        isSeq(keys) &&
        keys.items.length === 1 &&
        String((keys.items[0] as { value: unknown }).value) === '1'
      );
    });
    expect(isMap(pressOne)).toBe(true);
    if (!isMap(pressOne)) return;
    const name = String(pressOne.get('name'));
    const expectMap = pressOne.get('expect');
    if (!isMap(expectMap)) throw new Error('the case has no expect');
    const outcome = expectMap.items.find((p) => isScalar(p.key) && p.key.value === 'outcome');
    expect(isScalar(outcome?.value) && outcome.value.value).toBe('confirmed');
    const outcomeAt = lineCol(text, (outcome!.key as { range: [number] }).range[0]);
    const sends = expectMap.items.find((p) => isScalar(p.key) && p.key.value === 'sends');
    const sendsAt = lineCol(text, (sends!.key as { range: [number] }).range[0]);

    const { code, out } = await run(['test', '--dir', dir]);
    expect(code).toBe(1);
    const where = (at: string) => `flows/${escapeRe(file)}:${at.split(':')[0]}:\\d+`;
    expect(out).toMatch(new RegExp(`FAIL +${escapeRe(name)}`));
    expect(out).toMatch(
      new RegExp(
        `${where(outcomeAt)} +case "${escapeRe(name)}": outcome: expected confirmed, got booked`,
      ),
    );
    expect(out).toMatch(
      new RegExp(`${where(sendsAt)} +case "${escapeRe(name)}": sends: expected 1, got 0`),
    );
    // the other flows' tests still pass
    expect(out).toMatch(/order-confirmation\.test\.yaml[^\n]*\n(?: {2}ok[^\n]*\n)+/);
    expect(out).toMatch(/\d+ test files?: \d+ passed, [1-9]\d* failed/);
  });

  it('flows validate fails the asserted path for key 1, at the assertion, with the keys', async () => {
    const text = readFileSync(join(dir, `${ID}.yaml`), 'utf8');
    // the asserted path `{ keys: [1], outcome: confirmed }` under assert:
    const asserted = text.indexOf('keys: [1], outcome: confirmed', text.indexOf('\nassert:'));
    expect(asserted).toBeGreaterThan(0);
    const at = lineCol(text, text.indexOf('confirmed', asserted));

    const { code, out } = await run(['validate', '--dir', dir]);
    expect(code).toBe(1);
    expect(out).toContain(
      `flows/${ID}.yaml:${at}: error [ASSERT_PATH] keys 1 end the call with outcome booked, not confirmed (at assert.paths[0].outcome)`,
    );
    expect(out).toContain(`FAIL ${ID}: 1 error`);
    expect(out).toMatch(/^ok order-confirmation: /m);
    expect(out).toContain('4 flows, 1 error');

    // the keys it names play to that outcome, without the SMS
    const keys = /keys (\S+) end the call/.exec(out)![1]!;
    const sim = await run([
      'simulate',
      ID,
      '--dir',
      dir,
      '--keys',
      keys,
      '--var',
      'name=Ann',
      '--var',
      'date=Monday',
      '--json',
    ]);
    expect(sim.code, sim.err).toBe(0);
    const played = JSON.parse(sim.out) as { outcome: string; machine: { sends: unknown[] } };
    expect(played.outcome).toBe('booked');
    expect(played.machine.sends).toEqual([]);
  });
});
