import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { reportSimulation } from '../../src/cli/flows.ts';
import { flowJsonSchema, simulateFlow, verifyNodeToken } from '../../src/flows/index.ts';
import { SpeechMenu } from '../../src/provider/menu.ts';
import { loadExample, SAMPLE_VARS } from '../flows/helpers.ts';
import { runFlowsCli } from '../support/cli.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const tmp = mkdtempSync(join(tmpdir(), 'flows-cli-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const run = (argv: string[], cwd = ROOT) => runFlowsCli(argv, cwd);

const reminderVars = ['--var', 'name=Ann', '--var', 'date=2025-03-01'];

describe('switchboard flows validate', () => {
  it('passes the example flows, printing warnings and a line per flow', async () => {
    const { code, out } = await run(['validate']);
    expect(code).toBe(0);
    expect(out).toContain(
      'flows/appointment-reminder.yaml:7:3: warning [UNUSED_PARAM] param "clinicPhone" is never used (at params.clinicPhone)',
    );
    expect(out).toMatch(
      /^ok appointment-reminder: 12 provider menus from 2, version [0-9a-f]{16}$/m,
    );
    expect(out).toContain('4 flows, 0 errors, 1 warning');
  });

  it('exits 1 with file, line, column and rule for a broken flow', async () => {
    const dir = join(tmp, 'broken');
    mkdirSync(join(dir, 'flows'), { recursive: true });
    writeFileSync(
      join(dir, 'flows', 'bad.yaml'),
      'menus:\n  main:\n    intro: x\n    keys:\n      "1": [ { goto: nowhere } ]\n  lost: { intro: y }\n',
    );
    const all = await run(['validate'], dir);
    expect(all.code).toBe(1);
    expect(all.out).toContain(
      'flows/bad.yaml:5:22: error [UNKNOWN_MENU] goto names menu "nowhere", which is not defined (at menus.main.keys.1[0].goto)',
    );
    expect(all.out).toContain('flows/bad.yaml:6:3: error [UNREACHABLE_MENU]');
    expect(all.out).toContain('FAIL bad: 2 errors');
    // naming files validates just those
    const named = await run(['validate', join(ROOT, 'flows', 'satisfaction-survey.yaml')], dir);
    expect(named.code).toBe(0);
    expect(named.out).toContain('1 flow, 0 errors, 0 warnings');
  });

  it('exits 1 when there is nothing to validate', async () => {
    const { code, err } = await run(['validate', '--dir', join(tmp, 'none')]);
    expect(code).toBe(1);
    expect(err).toContain('no flow files');
  });
});

describe('switchboard flows compile', () => {
  it('prints the menu JSON for one call, in the chosen language, with signed tokens', async () => {
    const { code, out } = await run([
      'compile',
      'appointment-reminder',
      ...reminderVars,
      '--lang',
      'uk',
      '--hook-url',
      'https://sb.example.com/hooks/speechcall',
      '--call-id',
      'call-1',
      '--secret',
      's3cret',
    ]);
    expect(code).toBe(0);
    const menu = SpeechMenu.parse(JSON.parse(out));
    expect(menu).toHaveLength(12);
    // a spoken prompt, without a server to serve it: the words this call would hear
    expect(menu[0]!.introUrl).toBe(
      'say: Добрий день, Ann. Нагадуємо про ваш запис на 2025-03-01. Натисніть 1, щоб підтвердити, або 2, щоб перенести.',
    );
    const first = menu[0]!.dtmfActions.d1![0]!;
    expect(first).toMatchObject({
      action: 'webhook',
      url: 'https://sb.example.com/hooks/speechcall',
    });
    const token = first.action === 'webhook' ? first.body?.token : undefined;
    expect(verifyNodeToken(token, [{ id: 'preview', key: 's3cret' }])).toEqual({
      callId: 'call-1',
      node: 'main',
      key: '1',
    });
  });

  it('prints the template without vars', async () => {
    const { code, out } = await run(['compile', 'appointment-reminder', '--template']);
    expect(code).toBe(0);
    expect(JSON.parse(out)[0].dtmfActions.d1[0].body.token).toBe('{{token:main:1}}');
  });

  it('exits 1 naming a missing var, an unknown language or an unknown flow', async () => {
    const missing = await run(['compile', 'appointment-reminder', '--var', 'name=Ann']);
    expect(missing.code).toBe(1);
    expect(missing.err).toContain(
      'vars.date: required by flow "appointment-reminder" (string) (REQUIRED)',
    );
    const lang = await run(['compile', 'appointment-reminder', ...reminderVars, '--lang', 'de']);
    expect(lang.code).toBe(1);
    expect(lang.err).toContain('lang: must be one of en, uk');
    const unknown = await run(['compile', 'nope']);
    expect(unknown.code).toBe(1);
    expect(unknown.err).toContain('no flow "nope"');
  });
});

describe('switchboard flows graph', () => {
  it('prints Mermaid', async () => {
    const { code, out } = await run(['graph', 'satisfaction-survey']);
    expect(code).toBe(0);
    expect(out.startsWith('flowchart TD\n')).toBe(true);
    expect(out).toContain('-.->|"timeout / wrong"|');
    const folded = await run(['graph', 'satisfaction-survey', '--folded']);
    expect(folded.out).toContain(
      'm0["rate<br/>🔊 #quot;Hello {{name}}. How did we do with your…#quot;"]',
    );
  });
});

describe('switchboard flows simulate', () => {
  it('prints path, outcome and follow-ups that both sides agree on', async () => {
    const { code, out, err } = await run([
      'simulate',
      'appointment-reminder',
      '--keys',
      '9,5,2,1',
      ...reminderVars,
      '--status',
      'delivered',
    ]);
    expect(err).toBe('');
    expect(code).toBe(0);
    expect(out).toContain('  1. main  key 9  -> main/v2');
    expect(out).toContain('  2. main/v2  key 5, not handled here (wrong)  -> main/v2/r1');
    expect(out).toContain('  4. reschedule/v2  key 1  -> hang up');
    expect(out).toContain('outcome: reschedule-requested');
    expect(out).toContain('POST https://crm.example.com/reschedule');
    expect(out).toContain('machine and menu JSON agree');
  });

  it('prints JSON with --json and reports keys after the hangup', async () => {
    const { code, out } = await run([
      'simulate',
      'appointment-reminder',
      '--keys',
      '1,2',
      ...reminderVars,
      '--json',
    ]);
    expect(code).toBe(0);
    const sim = JSON.parse(out);
    expect(sim.agree).toBe(true);
    expect(sim.ignored).toEqual(['2']);
    expect(sim.machine.sends[0].message.text).toBe('Thanks Ann, see you on 2025-03-01.');
  });

  it('fails loudly when the machine and the menu JSON differ', async () => {
    // the compiler cannot be made to disagree from a YAML file, so break a copy of its output
    const compiled = structuredClone(loadExample('appointment-reminder'));
    compiled.nodes[0]!.keys['2'] = [{ type: 'goto', node: 'main/v2' }];
    const sim = simulateFlow(compiled, {
      keys: ['2', '1'],
      vars: SAMPLE_VARS['appointment-reminder'],
    });
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    let err = '';
    stderr.on('data', (d: Buffer) => {
      err += d.toString();
    });
    expect(reportSimulation(compiled, sim, { stdout, stderr, cwd: ROOT }, false)).toBe(1);
    expect(err).toContain('MISMATCH between the machine and the provider menu JSON');
    expect(err).toContain('paths differ');
  });

  it('exits 1 on a key a caller cannot press', async () => {
    const { code, err } = await run([
      'simulate',
      'appointment-reminder',
      '--keys',
      '1,x',
      ...reminderVars,
    ]);
    expect(code).toBe(1);
    expect(err).toContain('keys[1]: keys are 0-9, *, # or timeout');
  });

  it('needs --keys', async () => {
    const { code, err } = await run(['simulate', 'appointment-reminder']);
    expect(code).toBe(2);
    expect(err).toContain('simulate needs --keys');
  });
});

describe('switchboard flows schema', () => {
  it('writes the JSON Schema where --out says', async () => {
    const { code, out } = await run(['schema', '--out', 'out/schema.json'], tmp);
    expect(code).toBe(0);
    expect(out).toBe('wrote out/schema.json\n');
    expect(JSON.parse(readFileSync(join(tmp, 'out', 'schema.json'), 'utf8'))).toEqual(
      flowJsonSchema(),
    );
  });
});

describe('usage', () => {
  it('exits 2 on an unknown command or option, 0 for help', async () => {
    expect((await run(['frobnicate'])).code).toBe(2);
    expect((await run(['validate', '--bogus'])).code).toBe(2);
    const help = await run(['--help']);
    expect(help.code).toBe(0);
    expect(help.out).toContain('Usage: switchboard flows <command>');
  });
});
