/**
 * `say:` prompts in the flow language: the forms the schema takes and refuses, what each
 * compiles to per language, that flows with recorded prompts only compile as they did before
 * `say:` existed, and the checks of spoken text (templates, languages, the engine's voices and
 * longest text), each found by the loader at its file, line and column. The compiled menu
 * template and `assert.promptLengths` name a spoken prompt `say: <text>`.
 */
import { describe, expect, it } from 'vitest';
import {
  type CheckOptions,
  FlowDefinition,
  type FlowLoadOptions,
  parseFlowSource,
  type SpeechCapabilities,
} from '../../src/flows/index.ts';
import { compileDef } from './helpers.ts';

/** A flow around one menu's intro (and reprompt), in the given languages. */
function flowWith(intro: unknown, extra: Record<string, unknown> = {}) {
  return {
    languages: ['en', 'uk'],
    params: { name: 'string' },
    menus: {
      main: { intro, keys: { '1': [{ outcome: 'yes' }, 'hangup'] }, wrong: [{ outcome: 'no' }] },
    },
    ...extra,
  };
}

const load = (source: string, opts: FlowLoadOptions = {}) =>
  parseFlowSource(source, 'flows/say.yaml', opts);

/** Each issue as `rule line:column path`, errors and warnings. */
const where = (source: string, opts: FlowLoadOptions = {}) => {
  const loaded = load(source, opts);
  return [...loaded.errors, ...loaded.warnings].map(
    (i) => `${i.rule} ${i.line}:${i.column} ${i.path}`,
  );
};

/** eSpeak NG as the checks see it: English and Ukrainian, a short text limit for the test. */
const SPEECH: SpeechCapabilities = {
  engine: 'espeak-ng',
  maxTextLength: 30,
  languages: ['en', 'en-us', 'uk'],
};

describe('the say: forms of the schema', () => {
  it.each([
    ['one text for every language', { say: 'Hello {{name}}' }],
    ['with voice and rate', { say: 'Hello {{name}}', voice: 'f2', rate: 0.9 }],
    ['one text per language', { say: { en: 'Hello', uk: 'Привіт' } }],
    ['per language, spoken and recorded', { en: { say: 'Hello' }, uk: 'https://x/a.wav' }],
    ['the slowest and fastest rate', { say: 'Hi', rate: 0.5 }],
  ])('takes %s', (_name, intro) => {
    expect(FlowDefinition.safeParse(flowWith(intro)).success).toBe(true);
  });

  it('takes say: as reprompt too', () => {
    const flow = flowWith('https://x/a.wav');
    const main = { ...flow.menus.main, retries: 1, reprompt: { say: 'Once more, {{name}}' } };
    expect(FlowDefinition.safeParse({ ...flow, menus: { main } }).success).toBe(true);
  });

  it.each([
    ['a rate over 2', { say: 'Hi', rate: 3 }],
    ['a rate under 0.5', { say: 'Hi', rate: 0.4 }],
    ['an unknown field', { say: 'Hi', speed: 1 }],
    ['an empty text', { say: '' }],
    ['an empty text in a language', { say: { en: 'Hi', uk: '' } }],
    ['a voice with spaces', { say: 'Hi', voice: 'not a voice' }],
    ['no say at all', { voice: 'f2' }],
  ])('refuses %s', (_name, intro) => {
    expect(FlowDefinition.safeParse(flowWith(intro)).success).toBe(false);
  });

  it('points at a bad say: prompt in the file', () => {
    const rate = `languages: [en]
menus:
  main:
    intro: { say: Hi, rate: 3 }
    wrong: [{ outcome: no }]
`;
    const [bad] = load(rate).errors;
    expect(bad).toMatchObject({ rule: 'SCHEMA', line: 4 });
    const field = `languages: [en]
menus:
  main:
    intro:
      say: Hi
      speed: 1
    wrong: [{ outcome: no }]
`;
    expect(load(field).errors.map((e) => `${e.rule} ${e.line}`)).toContain('UNKNOWN_FIELD 6');
  });
});

describe('compiled say: prompts', () => {
  const introOf = (intro: unknown, extra = {}) =>
    compileDef(FlowDefinition.parse(flowWith(intro, extra))).nodes[0]!.intro;

  it('shares one text with every language, voice and rate kept', () => {
    expect(introOf({ say: 'Hello {{name}}', voice: 'f2', rate: 0.9 })).toEqual({
      en: { say: 'Hello {{name}}', voice: 'f2', rate: 0.9 },
      uk: { say: 'Hello {{name}}', voice: 'f2', rate: 0.9 },
    });
  });

  it("picks each language's text from a say: map", () => {
    expect(introOf({ say: { en: 'Hello {{name}}', uk: 'Привіт, {{name}}' }, rate: 1.2 })).toEqual({
      en: { say: 'Hello {{name}}', rate: 1.2 },
      uk: { say: 'Привіт, {{name}}', rate: 1.2 },
    });
  });

  it('mixes spoken and recorded languages', () => {
    expect(introOf({ en: { say: 'Hello {{name}}' }, uk: 'https://x/a-uk.wav' })).toEqual({
      en: { say: 'Hello {{name}}' },
      uk: 'https://x/a-uk.wav',
    });
  });

  it('plays reprompt on a retry, spoken like the intro', () => {
    const flow = flowWith({ say: 'Hello {{name}}' });
    const main = { ...flow.menus.main, retries: 1, reprompt: { say: 'Once more, {{name}}' } };
    const compiled = compileDef(FlowDefinition.parse({ ...flow, menus: { main } }));
    expect(compiled.nodes.map((n) => [n.id, n.intro.uk])).toEqual([
      ['main', { say: 'Hello {{name}}' }],
      ['main/r1', { say: 'Once more, {{name}}' }],
    ]);
  });

  it('shows a spoken prompt in the menu template as say: <text>, in the default language', () => {
    const compiled = compileDef(
      FlowDefinition.parse(flowWith({ say: { en: 'Hello {{name}}', uk: 'Привіт, {{name}}' } })),
    );
    expect(compiled.menuTemplate[0]!.introUrl).toBe('say: Hello {{name}}');
    const loaded = load(`languages: [uk, en]
params: { name: string }
menus:
  main:
    intro: { say: { en: "Hello {{name}}", uk: "Привіт, {{name}}" } }
    wrong: [{ outcome: no }]
`);
    expect(loaded.errors).toEqual([]);
    expect(loaded.compiled!.menuTemplate[0]!.introUrl).toBe('say: Привіт, {{name}}');
  });

  it('compiles a flow of recorded prompts as it did before say: (the same version)', () => {
    // The version HEAD~1 (before say:) gave this flow; a recorded prompt compiles to its
    // string, so calls pinned to versions of such flows stay on them.
    const recorded = `languages: [en, uk]
menus:
  main:
    intro: { en: https://x/a-en.wav, uk: https://x/a-uk.wav }
    retries: 1
    reprompt: ivr_2
    keys:
      "1": [{ outcome: yes }, hangup]
    wrong: [{ outcome: no-answer }]
`;
    const compiled = load(recorded).compiled!;
    expect(compiled.nodes.map((n) => n.intro)).toEqual([
      { en: 'https://x/a-en.wav', uk: 'https://x/a-uk.wav' },
      { en: 'ivr_2', uk: 'ivr_2' },
    ]);
    expect(compiled.version).toBe('01de5e0ba170791a');
  });

  it('gives a new version when only the spoken text, voice or rate changes', () => {
    const versions = [
      { say: 'Hello {{name}}' },
      { say: 'Hello there {{name}}' },
      { say: 'Hello {{name}}', voice: 'f2' },
      { say: 'Hello {{name}}', rate: 1.1 },
      'say: Hello {{name}}',
    ].map((intro) => compileDef(FlowDefinition.parse(flowWith(intro))).version);
    expect(new Set(versions).size).toBe(versions.length);
  });
});

describe('checks of say: prompts, with their place in the file', () => {
  it('checks the templates of spoken text: undeclared params and malformed templates', () => {
    const source = `languages: [en, uk]
params: { name: string }
menus:
  main:
    intro:
      say: { en: "Hello {{nmae}}", uk: "Привіт, {{name}" }
    wrong: [{ outcome: no }]
`;
    expect(where(source)).toEqual([
      'UNDECLARED_PARAM 6:18 menus.main.intro.say.en',
      'TEMPLATE_SYNTAX 6:40 menus.main.intro.say.uk',
      // {{nmae}} is not name, and {{name} is not a template
      'UNUSED_PARAM 2:17 params.name',
    ]);
  });

  it('counts a param used only in spoken text, also under a language of a prompt map', () => {
    const source = `languages: [en, uk]
params: { name: string }
menus:
  main:
    intro: { en: https://x/a.wav, uk: { say: "Привіт, {{name}}" } }
    wrong: [{ outcome: no }]
`;
    expect(where(source)).toEqual([]);
  });

  it("refuses a say: map's missing and unknown languages", () => {
    const source = `languages: [en, uk]
menus:
  main:
    intro:
      say: { en: Hello, de: Hallo }
    reprompt:
      en: { say: Again }
    retries: 1
    wrong: [{ outcome: no }]
`;
    expect(where(source)).toEqual([
      'UNKNOWN_LANGUAGE 5:29 menus.main.intro.say.de',
      'MISSING_LANGUAGE 5:7 menus.main.intro.say',
      'MISSING_LANGUAGE 6:5 menus.main.reprompt',
    ]);
  });

  it('refuses an empty say: map for every language it lacks (a map is pointed at by its key)', () => {
    const source = `languages: [en, uk]
menus:
  main:
    intro: { say: {} }
    wrong: [{ outcome: no }]
`;
    expect(where(source)).toEqual([
      'MISSING_LANGUAGE 4:14 menus.main.intro.say',
      'MISSING_LANGUAGE 4:14 menus.main.intro.say',
    ]);
  });

  it('finds no voice for a spoken language the engine lacks, once per prompt and language', () => {
    const source = `languages: [en, de]
menus:
  main:
    intro: { say: Hello }
    reprompt:
      en: { say: Again }
      de: { say: Nochmal }
    retries: 1
    wrong: [{ outcome: no }]
`;
    const issues = load(source, { speech: SPEECH }).errors;
    expect(issues.map((i) => `${i.rule} ${i.line}:${i.column} ${i.path}`)).toEqual([
      'NO_VOICE 4:19 menus.main.intro.say',
      'NO_VOICE 7:18 menus.main.reprompt.de.say',
    ]);
    expect(issues[0]!.message).toBe('the speech engine (espeak-ng) has no voice for language "de"');
    // a recorded prompt in that language needs no voice
    const recordedDe = source.replace('de: { say: Nochmal }', 'de: https://x/de.wav');
    expect(
      where(recordedDe.replace('{ say: Hello }', '{ en: { say: Hello }, de: ivr_1 }'), {
        speech: SPEECH,
      }),
    ).toEqual([]);
    // without the engine's capabilities, nothing is checked against it
    expect(where(source)).toEqual([]);
  });

  it('finds a voice for a regional language by its base language (uk-UA by uk)', () => {
    const source = `languages: [en-US, uk-UA]
menus:
  main:
    intro: { say: { en-US: Hello, uk-UA: Привіт } }
    wrong: [{ outcome: no }]
`;
    expect(where(source, { speech: SPEECH })).toEqual([]);
    expect(where(source, { speech: { ...SPEECH, languages: ['en'] } })).toEqual([
      'NO_VOICE 4:42 menus.main.intro.say.uk-UA',
    ]);
  });

  it('refuses text longer than the engine speaks at once, counting the words as written', () => {
    const long = 'This sentence is longer than thirty characters';
    const source = `languages: [en, uk]
params: { name: string }
menus:
  main:
    intro: { say: { en: "${long}", uk: "Привіт, {{name}}" } }
    reprompt: { say: "Hi {{name}}, a short one {{name}}" }
    retries: 1
    wrong: [{ outcome: no }]
`;
    const issues = load(source, { speech: SPEECH }).errors;
    // the params are not counted: "Hi , a short one " fits however long a name is
    expect(issues.map((i) => `${i.rule} ${i.line}:${i.column} ${i.path}`)).toEqual([
      'TEXT_TOO_LONG 5:25 menus.main.intro.say.en',
    ]);
    expect(issues[0]!.message).toContain(`is ${long.length} characters long`);
    expect(issues[0]!.message).toContain('at most 30');
    // exactly at the limit is fine
    const exact = { ...SPEECH, maxTextLength: long.length };
    expect(where(source, { speech: exact })).toEqual([]);
  });

  it('takes the speech capabilities as check options of the compiler too', () => {
    const opts: CheckOptions = { speech: { ...SPEECH, languages: ['uk'] } };
    expect(() => compileDef(FlowDefinition.parse(flowWith({ say: 'Hello' })), opts)).toThrow(
      /no voice for language "en"/,
    );
  });
});

describe('assert: spoken prompts are named say: <text>', () => {
  const flow = (lengths: string, maxDuration: string) => `languages: [en, uk]
params: { name: string }
menus:
  main:
    intro: { say: { en: "Hello {{name}}", uk: "Привіт, {{name}}" } }
    timeout: 5s
    keys:
      "1": [{ outcome: yes }]
    wrong: [{ outcome: no }]
assert:
  maxDuration: ${maxDuration}
  promptLengths: ${lengths}
`;
  const both = '{ "say: Hello {{name}}": 3s, "say: Привіт, {{name}}": 4s }';

  it('takes the longest declared spoken prompt into maxDuration', () => {
    // the Ukrainian prompt (4s) and the whole timeout (5s)
    expect(where(flow(both, '9s'))).toEqual([]);
    const over = load(flow(both, '8s')).errors;
    expect(over.map((e) => e.rule)).toEqual(['ASSERT_MAX_DURATION']);
    expect(over[0]!.message).toContain('the longest call lasts 9s, over 8s');
  });

  it('asks for the length of a spoken prompt not declared, by its say: name', () => {
    const errors = load(flow('{ "say: Hello {{name}}": 3s }', '1m')).errors;
    expect(errors.map((e) => [e.rule, e.message])).toEqual([
      [
        'ASSERT_PROMPT_LENGTH',
        'prompt "say: Привіт, {{name}}" (played by main) has no declared length: list it in assert.promptLengths or set assert.defaultPromptLength',
      ],
    ]);
  });

  it('warns of a declared length no menu plays (the text as written, not filled in)', () => {
    const loaded = load(flow(`{ "say: Hello Maria": 1s, ${both.slice(2)}`, '1m'));
    expect(loaded.errors).toEqual([]);
    expect(loaded.warnings.map((w) => [w.rule, w.path])).toEqual([
      ['ASSERT_PROMPT_LENGTH', 'assert.promptLengths.say: Hello Maria'],
    ]);
  });
});
