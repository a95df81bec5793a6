import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import {
  canonicalJson,
  compileFlow,
  FLOW_KEYS,
  FlowCompileError,
  type FlowDefinition,
  renderMenu,
  renderTemplate,
} from '../../src/flows/index.ts';
import { SpeechMenu } from '../../src/provider/menu.ts';
import { compileDef, EXAMPLES, exampleSource, loadExample, SAMPLE_VARS } from './helpers.ts';

describe('unrolling the appointment reminder', () => {
  const compiled = loadExample('appointment-reminder');
  const node = (id: string) => compiled.nodes.find((n) => n.id === id)!;

  it('copies main for its retries and for each round of the 9 and * cycles', () => {
    expect(compiled.nodes.map((n) => n.id)).toEqual([
      'main',
      'reschedule',
      'main/v2',
      'main/r1',
      'reschedule/v2',
      'main/v3',
      'main/v2/r1',
      'main/r2',
      'reschedule/v3',
      'main/v3/r1',
      'main/v2/r2',
      'main/v3/r2',
    ]);
    expect(compiled.nodes.map((n) => n.index)).toEqual(compiled.nodes.map((_, i) => i));
    expect(compiled.menuCount).toBe(12);
    expect(compiled.sourceMenus).toEqual(['main', 'reschedule']);
  });

  it('plays the reprompt on retries and keeps the per-language intro otherwise', () => {
    expect(node('main').intro).toEqual({
      en: {
        say: 'Hello {{name}}. This is a reminder of your appointment on {{date}}. Press 1 to confirm, or 2 to change it.',
      },
      uk: {
        say: 'Добрий день, {{name}}. Нагадуємо про ваш запис на {{date}}. Натисніть 1, щоб підтвердити, або 2, щоб перенести.',
      },
    });
    expect(node('main/v2').intro).toEqual(node('main').intro);
    expect(node('main/r1').intro).toEqual({
      en: {
        say: 'Sorry, I did not catch that. Press 1 to confirm, or 2 to change the appointment.',
        rate: 0.9,
      },
      uk: {
        say: 'Вибачте, я не розчув. Натисніть 1, щоб підтвердити, або 2, щоб перенести запис.',
        rate: 0.9,
      },
    });
    expect(node('reschedule').intro).toEqual({ en: 'ivr_651854', uk: 'ivr_651854' });
    expect(node('main').timeoutMs).toBe(8000);
    expect(node('reschedule').timeoutMs).toBeUndefined();
  });

  it('sends wrong to the next attempt, then to the menu wrong actions', () => {
    expect(node('main').keys.wrong).toEqual([{ type: 'goto', node: 'main/r1' }]);
    expect(node('main/r1').keys.wrong).toEqual([{ type: 'goto', node: 'main/r2' }]);
    expect(node('main/r2').keys.wrong).toEqual([
      { type: 'outcome', name: 'no-input' },
      { type: 'hangup' },
    ]);
    // reschedule has no wrong: the provider would hang up, we say so explicitly
    expect(node('reschedule').keys.wrong).toEqual([{ type: 'hangup' }]);
  });

  it('takes a cycle-closing goto into the next round, and past maxVisits runs wrong instead', () => {
    expect(node('main').keys['9']).toEqual([{ type: 'goto', node: 'main/v2' }]);
    expect(node('main/r2').keys['9']).toEqual([{ type: 'goto', node: 'main/v2' }]);
    expect(node('reschedule').keys['*']).toEqual([{ type: 'goto', node: 'main/v2' }]);
    expect(node('main').keys['2']).toEqual([{ type: 'goto', node: 'reschedule' }]);
    expect(node('main/v3').keys['9']).toEqual([
      { type: 'outcome', name: 'no-input' },
      { type: 'hangup' },
    ]);
    expect(node('reschedule/v3').keys['*']).toEqual([{ type: 'hangup' }]);
  });

  it('keeps effects in order and passes webhooks through', () => {
    expect(node('reschedule').keys['1']).toEqual([
      { type: 'outcome', name: 'reschedule-requested' },
      { type: 'webhook', url: 'https://crm.example.com/reschedule' },
      { type: 'hangup' },
    ]);
  });

  it('plays each menu at most maxVisits times, and fewer copies with a lower maxVisits', () => {
    const def = parse(exampleSource('appointment-reminder')) as FlowDefinition;
    const once = compileFlow({ id: 'r', definition: def }, { maxVisits: 1 });
    expect(once.nodes.map((n) => n.id)).toEqual(['main', 'reschedule', 'main/r1', 'main/r2']);
    expect(once.nodes[0]!.keys['9']).toEqual([
      { type: 'outcome', name: 'no-input' },
      { type: 'hangup' },
    ]);
    expect(Math.max(...compiled.nodes.map((n) => n.visit))).toBe(3);
  });
});

describe('the compiler', () => {
  it('appends a hangup where a list just stops, and never runs what follows a goto', () => {
    const compiled = compileDef({
      menus: {
        main: { intro: 'x', keys: { '1': [{ outcome: 'ok' }] }, wrong: [{ outcome: 'quiet' }] },
      },
    });
    expect(compiled.nodes[0]!.keys).toEqual({
      '1': [{ type: 'outcome', name: 'ok' }, { type: 'hangup' }],
      wrong: [{ type: 'outcome', name: 'quiet' }, { type: 'hangup' }],
    });
  });

  it('throws FlowCompileError with every error as a detail', () => {
    const bad: FlowDefinition = {
      menus: { main: { intro: 'x', keys: { '1': [{ goto: 'a' }], '2': [{ goto: 'b' }] } } },
    };
    expect(() => compileDef(bad)).toThrow(FlowCompileError);
    try {
      compileDef(bad);
    } catch (e) {
      expect((e as FlowCompileError).code).toBe('INVALID_FLOW');
      expect((e as FlowCompileError).details.map((d) => [d.path, d.code])).toEqual([
        ['menus.main.keys.1[0].goto', 'UNKNOWN_MENU'],
        ['menus.main.keys.2[0].goto', 'UNKNOWN_MENU'],
      ]);
    }
  });

  it('refuses a flow over the limit with the count in the message', () => {
    const wide: FlowDefinition = { menus: {} };
    for (let i = 0; i < 70; i++) {
      wide.menus[`m${i}`] = {
        intro: 'x',
        retries: 2,
        keys: i < 69 ? { '1': [{ goto: `m${i + 1}` }] } : { '1': ['hangup'] },
      };
    }
    expect(() => compileDef(wide)).toThrow(/unrolls to 210 provider menus .* limit of 200/);
    expect(compileDef(wide, { maxMenus: 210 }).menuCount).toBe(210);
  });
});

describe('the version hash', () => {
  const def = () => parse(exampleSource('appointment-reminder')) as FlowDefinition;

  it('is the same for the same flow however it is written', () => {
    const a = compileFlow({ id: 'x', definition: def() });
    const reordered = Object.fromEntries(Object.entries(def()).reverse()) as FlowDefinition;
    const b = compileFlow({ id: 'y', definition: reordered });
    expect(b.version).toBe(a.version);
    expect(a.version).toMatch(/^[0-9a-f]{16}$/);
  });

  it('changes with anything a call would notice', () => {
    const base = compileFlow({ id: 'x', definition: def() }).version;
    const prompt = def();
    prompt.menus.reschedule!.intro = 'ivr_651855';
    const outcome = def();
    outcome.menus.main!.wrong = [{ outcome: 'silent' }, 'hangup'];
    const visits = compileFlow({ id: 'x', definition: def() }, { maxVisits: 2 }).version;
    const versions = [
      base,
      compileFlow({ id: 'x', definition: prompt }).version,
      compileFlow({ id: 'x', definition: outcome }).version,
      visits,
    ];
    expect(new Set(versions).size).toBe(4);
  });

  it('hashes canonical JSON', () => {
    expect(canonicalJson({ b: 1, a: [2, { d: null, c: undefined }] })).toBe(
      '{"a":[2,{"d":null}],"b":1}',
    );
  });
});

describe.each(EXAMPLES)('%s compiled', (id) => {
  const compiled = loadExample(id);

  it('has a menu template and rendered menus that pass the provider models', () => {
    expect(SpeechMenu.safeParse(compiled.menuTemplate).error).toBeUndefined();
    for (const lang of compiled.languages) {
      const menu = renderMenu(compiled, {
        vars: SAMPLE_VARS[id],
        lang,
        hookUrl: 'https://sb.example.com/hooks/speechcall',
        tokenFor: (node, key) => `t:${node}:${key}`,
      });
      expect(SpeechMenu.safeParse(menu).error).toBeUndefined();
      expect(menu).toHaveLength(compiled.menuCount);
      // every action list starts with the tracking webhook, and ends the list or the call;
      // its token names the input: the key, or `timeout` for the provider's `wrong` entry
      menu.forEach((item, i) => {
        for (const [key, actions] of Object.entries(item.dtmfActions)) {
          const name = key === 'wrong' ? 'timeout' : key.slice(1);
          expect(actions[0]).toEqual({
            action: 'webhook',
            url: 'https://sb.example.com/hooks/speechcall',
            body: { token: `t:${compiled.nodes[i]!.id}:${name}` },
          });
          expect(['gotoMenu', 'hangup']).toContain(actions.at(-1)!.action);
        }
        expect(item.dtmfActions.wrong).toBeDefined();
        // every key has an entry, so the provider runs `wrong` on silence alone; a key the
        // node does not handle runs exactly what `wrong` runs, under its own token
        expect(Object.keys(item.dtmfActions)).toEqual([...FLOW_KEYS.map((k) => `d${k}`), 'wrong']);
        for (const key of FLOW_KEYS) {
          if (compiled.nodes[i]!.keys[key]) continue;
          expect(item.dtmfActions[`d${key}`]!.slice(1)).toEqual(item.dtmfActions.wrong!.slice(1));
        }
        const intro = compiled.nodes[i]!.intro[lang]!;
        // without a prompt service, a spoken prompt is the words the call would hear
        expect(item.introUrl).toBe(
          typeof intro === 'string'
            ? renderTemplate(intro, SAMPLE_VARS[id])
            : `say: ${renderTemplate(intro.say, SAMPLE_VARS[id])}`,
        );
      });
    }
  });

  it('matches the snapshot of its compiled form', () => {
    const { menuTemplate, machineConfig, ...rest } = compiled;
    expect(rest).toMatchSnapshot();
    expect(machineConfig).toMatchSnapshot();
  });

  it('matches the file snapshot of its menu template', async () => {
    await expect(`${JSON.stringify(compiled.menuTemplate, null, 2)}\n`).toMatchFileSnapshot(
      `./__snapshots__/${id}.menu.json`,
    );
  });
});
