/**
 * The `assert:` section: each property holding and failing, with the counterexample keys
 * checked exactly and played through the simulator (machine and provider menu) to show they
 * do what the message says; file:line of the failing assertion; the flow's version untouched
 * by its assertions; the example flows' assertions checked against every path, listed one by
 * one through the simulator.
 */
import { describe, expect, it } from 'vitest';
import {
  type AssertionIssue,
  assertionInputs,
  checkFlowAssertions,
  spokenDuration,
} from '../../src/flows/assertions.ts';
import {
  type CompiledFlow,
  type CompiledNode,
  entryFor,
  type FlowAssertions,
  type FlowDefinition,
  parseFlowSource,
  simulateFlow,
} from '../../src/flows/index.ts';
import {
  compileDef,
  EXAMPLES,
  exampleSource,
  loadExample,
  parseYaml,
  SAMPLE_VARS,
} from './helpers.ts';

/** Compiles a flow (without `assert:`) and checks the assertions given apart. */
function check(definition: FlowDefinition, assert: FlowAssertions, opts = {}): AssertionIssue[] {
  return checkFlowAssertions(compileDef(definition), assert, opts);
}

/** A flow file parsed as `flows simulate` and `flows test` do: its assertions unchecked. */
const unchecked = (text: string, file = 'flows/test.yaml') =>
  parseFlowSource(text, file, { assertions: false });

const errorsOf = (issues: AssertionIssue[]) => issues.filter((i) => i.severity === 'error');

/** Plays keys on both sides of the simulator; they must agree. */
function play(compiled: CompiledFlow, keys: readonly string[], vars: Record<string, unknown> = {}) {
  const sim = simulateFlow(compiled, { keys, vars });
  expect(sim.differences).toEqual([]);
  return sim;
}

// main: 1 says yes; 2 goes on to `more`, where 1 says later and anything else hangs up with
// no outcome; silence at main (no retries) records none.
const twoMenus: FlowDefinition = {
  menus: {
    main: {
      intro: 'main.mp3',
      timeout: '5s',
      keys: { '1': [{ outcome: 'yes' }, 'hangup'], '2': [{ goto: 'more' }] },
      wrong: [{ outcome: 'none' }, 'hangup'],
    },
    more: {
      intro: 'more.mp3',
      timeout: '5s',
      keys: { '1': [{ outcome: 'later' }, 'hangup'] },
    },
  },
};

describe('assert: outcomeOnEveryPath', () => {
  it('is on by default and names the shortest path that ends with no outcome', () => {
    const issues = check(twoMenus, {});
    expect(issues).toEqual([
      {
        severity: 'error',
        rule: 'ASSERT_OUTCOME',
        path: ['menus', 'more'],
        keys: ['2', 'timeout'],
        message:
          'keys 2,timeout end the call without an outcome (it hangs up at more); every path needs one (on by default): record an outcome there, or set assert: { outcomeOnEveryPath: false }',
      },
    ]);
    const sim = play(compileDef(twoMenus), ['2', 'timeout']);
    expect(sim.machine.ended).toBe(true);
    expect(sim.outcome).toBeNull();
  });

  it('points at outcomeOnEveryPath when the flow sets it to true', () => {
    const [issue] = check(twoMenus, { outcomeOnEveryPath: true });
    expect(issue).toMatchObject({ path: ['assert', 'outcomeOnEveryPath'], keys: ['2', 'timeout'] });
    expect(issue!.message).toBe(
      'keys 2,timeout end the call without an outcome (it hangs up at more)',
    );
  });

  it('is off with outcomeOnEveryPath: false', () => {
    expect(check(twoMenus, { outcomeOnEveryPath: false })).toEqual([]);
  });

  it('holds when every path records one, earlier on the path counting', () => {
    const flow = structuredClone(twoMenus);
    flow.menus.main!.keys!['2'] = [{ outcome: 'maybe' }, { goto: 'more' }];
    expect(check(flow, {})).toEqual([]);
    expect(play(compileDef(flow), ['2', 'timeout']).outcome).toBe('maybe');
  });

  it('takes an unhandled key as the counterexample when silence has an outcome and it has none', () => {
    // silence records one through the retry; a wrong key too: then the shortest is via 7 at more
    const flow = structuredClone(twoMenus);
    flow.menus.more!.wrong = [{ outcome: 'quiet' }, 'hangup'];
    flow.menus.more!.keys!['3'] = ['hangup'];
    const [issue] = check(flow, {});
    expect(issue).toMatchObject({ rule: 'ASSERT_OUTCOME', keys: ['2', '3'] });
    expect(play(compileDef(flow), ['2', '3']).outcome).toBeNull();
  });
});

// 1 at main sends an SMS and goes on; 1 at next sends an SMS and a Viber message whose
// fallback is an SMS: three SMS on keys 1,1.
const sender: FlowDefinition = {
  menus: {
    main: {
      intro: 'main.mp3',
      timeout: '5s',
      keys: {
        '1': [{ send: { type: 'sms', text: 'one' } }, { goto: 'next' }],
        '2': [{ outcome: 'two' }, 'hangup'],
      },
      wrong: [{ outcome: 'none' }],
    },
    next: {
      intro: 'next.mp3',
      timeout: '5s',
      keys: {
        '1': [
          { outcome: 'both' },
          { send: { type: 'sms', text: 'two' } },
          {
            send: {
              type: 'viber_service',
              text: 'three',
              fallback: { type: 'sms', text: 'three by sms' },
            },
          },
        ],
      },
      wrong: [{ outcome: 'only-one' }],
    },
  },
};

describe('assert: maxMessages', () => {
  it('holds at the most any path sends', () => {
    expect(check(sender, { maxMessages: { sms: 3, viber_trans: 1, total: 4 } })).toEqual([]);
  });

  it('fails over the limit with the keys of the path that sends the most', () => {
    const issues = check(sender, { maxMessages: { sms: 2 } });
    expect(issues).toEqual([
      {
        severity: 'error',
        rule: 'ASSERT_MAX_MESSAGES',
        path: ['assert', 'maxMessages', 'sms'],
        keys: ['1', '1'],
        message: 'up to 3 messages of type sms in one call, over 2: keys 1,1 send 3',
      },
    ]);
    // the path sends two SMS and the Viber message, whose fallback is the third
    const sim = play(compileDef(sender), ['1', '1']);
    expect(sim.machine.sends.map((s) => s.message.type)).toEqual(['sms', 'sms', 'viber_service']);
  });

  it('reads viber_service as viber_trans and counts every type under total', () => {
    expect(check(sender, { maxMessages: { viber_trans: 0 } })[0]).toMatchObject({
      keys: ['1', '1'],
      message: 'up to 1 messages of type viber_trans in one call, over 0: keys 1,1 send 1',
    });
    expect(check(sender, { maxMessages: { total: 3 } })[0]!.message).toBe(
      'up to 4 messages in one call, over 3: keys 1,1 send 4',
    );
  });

  it('adds the on: reactions that may come in the same call: one final status, the others, the timer', () => {
    const flow: FlowDefinition = {
      ...sender,
      on: {
        delivered: [{ send: { type: 'sms', text: 'delivered' } }],
        failed: [{ send: { type: 'sms', text: 'failed' } }],
        expired: [
          { send: { type: 'sms', text: 'expired 1' } },
          { send: { type: 'sms', text: 'expired 2' } },
        ],
        noResponse: { after: '10m', do: [{ send: { type: 'sms', text: 'no response' } }] },
      },
    };
    // 3 on the path, delivered 1, expired 2 (failed and expired never both), noResponse 1
    expect(check(flow, { maxMessages: { sms: 7 } })).toEqual([]);
    expect(check(flow, { maxMessages: { sms: 6 } })).toEqual([
      {
        severity: 'error',
        rule: 'ASSERT_MAX_MESSAGES',
        path: ['assert', 'maxMessages', 'sms'],
        keys: ['1', '1'],
        message:
          'up to 7 messages of type sms in one call, over 6: keys 1,1 send 3, and on: reactions may add 4 in the same call (delivered 1, expired 2, noResponse 1)',
      },
    ]);
  });

  it('has no keys to show when only the reactions send', () => {
    const flow: FlowDefinition = {
      menus: { main: { intro: 'x', keys: { '1': [{ outcome: 'a' }] }, wrong: [{ outcome: 'b' }] } },
      on: { failed: [{ send: { type: 'sms', text: 'failed' } }] },
    };
    const [issue] = check(flow, { maxMessages: { sms: 0 } });
    expect(issue!.keys).toBeUndefined();
    expect(issue!.message).toBe(
      'up to 1 messages of type sms in one call, over 0: no path sends one, and on: reactions may add 1 in the same call (failed 1)',
    );
  });
});

// main plays 20s (uk 25s), waits 10s, once more with a 2s reprompt; 1 goes to b (4s, 5s wait).
const timed: FlowDefinition = {
  languages: ['en', 'uk'],
  menus: {
    main: {
      intro: { en: 'a-en.mp3', uk: 'a-uk.mp3' },
      reprompt: 'again.mp3',
      timeout: '10s',
      retries: 1,
      keys: { '1': [{ goto: 'b' }] },
      wrong: [{ outcome: 'none' }],
    },
    b: { intro: 'b.mp3', timeout: '5s', wrong: [{ outcome: 'b-done' }] },
  },
};
const lengths = { 'a-en.mp3': '20s', 'a-uk.mp3': '25s', 'again.mp3': '2s', 'b.mp3': '4s' };

describe('assert: maxDuration', () => {
  // main 25+10, main/r1 2+10, b 4+5: 56s on timeout,1,timeout
  it('holds at exactly the longest call', () => {
    expect(check(timed, { maxDuration: '56s', promptLengths: lengths })).toEqual([]);
  });

  it('fails with the longest path: each menu its longest prompt over the languages, then its timeout', () => {
    expect(check(timed, { maxDuration: '55s', promptLengths: lengths })).toEqual([
      {
        severity: 'error',
        rule: 'ASSERT_MAX_DURATION',
        path: ['assert', 'maxDuration'],
        keys: ['timeout', '1', 'timeout'],
        message:
          'the longest call lasts 56s, over 55s: keys timeout,1,timeout play 3 menus, each its longest prompt and then its whole timeout',
      },
    ]);
    const sim = play(compileDef(timed), ['timeout', '1', 'timeout']);
    expect(sim.machine.path.map((s) => s.node)).toEqual(['main', 'main/r1', 'b']);
    expect(sim.outcome).toBe('b-done');
  });

  it('counts every retry and every repeat of a menu', () => {
    const loop = structuredClone(timed);
    loop.menus.b!.keys = { '9': [{ goto: 'main' }] };
    // rounds 1..3 of main (35+12 each) and b (9) in the first two: 3*47 + 2*9 + the last b
    const [issue] = check(loop, { maxDuration: '1m', promptLengths: lengths });
    // three rounds of main (25+10), main/r1 (2+10) and b (4+5): 3 * 56s; b's 9 in the last
    // round passes maxVisits and runs b's wrong actions
    expect(issue!.keys).toEqual(['timeout', '1', '9', 'timeout', '1', '9', 'timeout', '1', '9']);
    expect(issue!.message).toBe(
      'the longest call lasts 2m 48s, over 1m: keys timeout,1,9,timeout,1,9,timeout,1,9 play 9 menus, each its longest prompt and then its whole timeout',
    );
  });

  it('asks for the length of a prompt it does not know, and for a wait where a menu has none', () => {
    const noWait = structuredClone(timed);
    delete noWait.menus.b!.timeout;
    const issues = check(noWait, { maxDuration: '1m', promptLengths: { 'a-en.mp3': '20s' } });
    expect(issues.map((i) => [i.rule, i.message])).toEqual([
      [
        'ASSERT_PROMPT_LENGTH',
        'prompt "a-uk.mp3" (played by main) has no declared length: list it in assert.promptLengths or set assert.defaultPromptLength',
      ],
      [
        'ASSERT_PROMPT_LENGTH',
        'prompt "b.mp3" (played by b) has no declared length: list it in assert.promptLengths or set assert.defaultPromptLength',
      ],
      [
        'ASSERT_PROMPT_LENGTH',
        'prompt "again.mp3" (played by main/r1) has no declared length: list it in assert.promptLengths or set assert.defaultPromptLength',
      ],
      [
        'ASSERT_TIMEOUT',
        'menu b has no timeout and the provider documents no default wait for a key: give the menu a timeout, or state the wait to assume as assert.defaultTimeout',
      ],
    ]);
    // defaults fill the gaps: main 20 (uk 3)+10, r1 3+10, b 3+7 = 53s
    const filled = {
      maxDuration: '50s',
      promptLengths: { 'a-en.mp3': '20s' },
      defaultPromptLength: '3s',
      defaultTimeout: '7s',
    };
    expect(check(noWait, filled)[0]!.message).toMatch(/^the longest call lasts 53s, over 50s/);
  });

  it('asks the measuring hook for prompts without a declared length, after the declared ones', () => {
    const measured: string[] = [];
    const issues = check(
      timed,
      { maxDuration: '1s', promptLengths: { 'a-en.mp3': '20s' } },
      {
        measurePrompt: (p: { prompt: string; lang: string }) => {
          measured.push(`${p.prompt}:${p.lang}`);
          return 1000;
        },
      },
    );
    expect(measured.sort()).toEqual([
      'a-uk.mp3:uk',
      'again.mp3:en',
      'again.mp3:uk',
      'b.mp3:en',
      'b.mp3:uk',
    ]);
    // main 20+10, r1 1+10, b 1+5
    expect(issues[0]!.message).toMatch(/^the longest call lasts 47s, over 1s/);
  });

  it('warns about a declared length no menu plays', () => {
    const issues = check(timed, {
      maxDuration: '1h',
      promptLengths: { ...lengths, 'old.mp3': '3s' },
    });
    expect(issues).toEqual([
      {
        severity: 'warning',
        rule: 'ASSERT_PROMPT_LENGTH',
        path: ['assert', 'promptLengths', 'old.mp3'],
        message:
          'no menu plays prompt "old.mp3" (a prompt is named as its intro or reprompt is written)',
      },
    ]);
  });

  it('says durations as people do', () => {
    expect(spokenDuration(210_000)).toBe('3m 30s');
    expect(spokenDuration(3_900_000)).toBe('1h 5m');
    expect(spokenDuration(750)).toBe('750ms');
    expect(spokenDuration(60_000)).toBe('1m');
  });
});

describe('assert: reachable and unreachable', () => {
  const withReactions: FlowDefinition = {
    ...twoMenus,
    on: { expired: [{ outcome: 'expired' }] },
  };

  it('holds for outcomes a path or an on: reaction ends a call with', () => {
    const assert = { outcomeOnEveryPath: false, reachable: ['yes', 'later', 'none', 'expired'] };
    expect(check(withReactions, assert)).toEqual([]);
  });

  it('fails reachable for an outcome nothing records, listing those that can', () => {
    expect(check(withReactions, { outcomeOnEveryPath: false, reachable: ['maybe'] })).toEqual([
      {
        severity: 'error',
        rule: 'ASSERT_REACHABLE',
        path: ['assert', 'reachable', 0],
        message:
          'no path and no on: reaction ends a call with outcome maybe (those that can: yes, later, none, expired)',
      },
    ]);
  });

  it('fails reachable for an outcome a later one always overwrites', () => {
    const flow = structuredClone(twoMenus);
    flow.menus.main!.keys!['1'] = [{ outcome: 'first' }, { outcome: 'yes' }, 'hangup'];
    expect(errorsOf(check(flow, { outcomeOnEveryPath: false, reachable: ['first'] }))).toHaveLength(
      1,
    );
  });

  it('fails unreachable with the shortest keys that reach the outcome', () => {
    expect(check(twoMenus, { outcomeOnEveryPath: false, unreachable: ['no', 'later'] })).toEqual([
      {
        severity: 'error',
        rule: 'ASSERT_UNREACHABLE',
        path: ['assert', 'unreachable', 1],
        keys: ['2', '1'],
        message: 'keys 2,1 end the call with outcome later (it hangs up at more)',
      },
    ]);
    expect(play(compileDef(twoMenus), ['2', '1']).outcome).toBe('later');
  });

  it('fails unreachable for an outcome an on: reaction records', () => {
    expect(check(withReactions, { outcomeOnEveryPath: false, unreachable: ['expired'] })).toEqual([
      {
        severity: 'error',
        rule: 'ASSERT_UNREACHABLE',
        path: ['assert', 'unreachable', 0],
        message: 'on: expired records outcome expired, and may come last in a call',
      },
    ]);
  });
});

describe('assert: paths', () => {
  const off = { outcomeOnEveryPath: false };

  it('holds when each key sequence ends as stated (numbers or strings, silence, a wrong key)', () => {
    const assert: FlowAssertions = {
      ...off,
      paths: [
        { keys: [1], outcome: 'yes' },
        { keys: ['2', 1], outcome: 'later', not: ['yes', 'none'] },
        { keys: ['timeout'], outcome: 'none' },
        { keys: [7], outcome: 'none' },
        { keys: [2, '#'], not: 'later' },
      ],
    };
    expect(check(twoMenus, assert)).toEqual([]);
  });

  it('fails a path that ends with another outcome, naming it and its keys', () => {
    const issues = check(twoMenus, {
      ...off,
      paths: [{ name: 'two then one says yes', keys: [2, 1], outcome: 'yes' }],
    });
    expect(issues).toEqual([
      {
        severity: 'error',
        rule: 'ASSERT_PATH',
        path: ['assert', 'paths', 0, 'outcome'],
        keys: ['2', '1'],
        message: '"two then one says yes": keys 2,1 end the call with outcome later, not yes',
      },
    ]);
  });

  it('fails a path that ends with an outcome it must not, or with none', () => {
    expect(
      check(twoMenus, {
        ...off,
        paths: [
          { keys: [2, 1], not: ['no', 'later'] },
          { keys: [2, 'timeout'], outcome: 'later' },
        ],
      }),
    ).toEqual([
      {
        severity: 'error',
        rule: 'ASSERT_PATH',
        path: ['assert', 'paths', 0, 'not'],
        keys: ['2', '1'],
        message: 'keys 2,1 end the call with outcome later',
      },
      {
        severity: 'error',
        rule: 'ASSERT_PATH',
        path: ['assert', 'paths', 1, 'outcome'],
        keys: ['2', 'timeout'],
        message: 'keys 2,timeout end the call without an outcome, not later',
      },
    ]);
  });

  it('fails a path whose keys outlast the call, or stop while it still waits', () => {
    expect(
      check(twoMenus, {
        ...off,
        paths: [
          { keys: [1, 2], outcome: 'yes' },
          { keys: [2], outcome: 'later' },
        ],
      }),
    ).toEqual([
      {
        severity: 'error',
        rule: 'ASSERT_PATH',
        path: ['assert', 'paths', 0, 'keys', 1],
        keys: ['1'],
        message: 'the call hangs up at main after keys 1: 2 is never heard',
      },
      {
        severity: 'error',
        rule: 'ASSERT_PATH',
        path: ['assert', 'paths', 1, 'keys'],
        keys: ['2'],
        message: 'after keys 2 the call still waits at more: give the keys until it hangs up',
      },
    ]);
  });
});

describe('a flow with more paths than could be listed', () => {
  // 20 menus in a row, each with keys 1, 2, 3 to the next (1 also sends an SMS), silence
  // ending the call: 4^20 paths, worked out once per menu
  const menus: FlowDefinition['menus'] = {};
  for (let i = 0; i < 20; i++) {
    const next = i < 19 ? [{ goto: `m${i + 1}` }] : [{ outcome: 'done' }, 'hangup' as const];
    menus[`m${i}`] = {
      intro: `m${i}.mp3`,
      timeout: '5s',
      keys: {
        '1': [{ send: { type: 'sms', text: `at ${i}` } }, ...next],
        '2': next,
        '3': next,
      },
      wrong: [{ outcome: `quiet-${i}` }, 'hangup'],
    };
  }
  const chain: FlowDefinition = { menus };

  it('finds the path with the most messages and the longest call', () => {
    const started = performance.now();
    const issues = check(chain, {
      maxMessages: { sms: 19 },
      maxDuration: '1m',
      defaultPromptLength: '1s',
      unreachable: ['quiet-19'],
      reachable: ['done'],
    });
    expect(performance.now() - started).toBeLessThan(2000);
    const ones = Array.from({ length: 20 }, () => '1');
    expect(issues.map((i) => [i.rule, i.keys])).toEqual([
      ['ASSERT_MAX_MESSAGES', ones],
      ['ASSERT_MAX_DURATION', ones],
      ['ASSERT_UNREACHABLE', [...ones.slice(1), 'timeout']],
    ]);
    expect(issues[1]!.message).toMatch(/^the longest call lasts 2m, over 1m: /);
  });
});

describe('a flow file with assert:', () => {
  const source = `menus:
  main:
    intro: main.mp3
    timeout: 5s
    keys:
      "1": [ { outcome: yes }, { send: { type: sms, text: hi } }, hangup ]
      "2": [ { goto: more } ]
    wrong: [ { outcome: none }, hangup ]
  more:
    intro: more.mp3
    timeout: 5s
    keys:
      "1": [ { outcome: later }, hangup ]
`;

  it('is refused at the line and column of each failing assertion', () => {
    const flow = parseYaml(
      `${source}assert:
  maxMessages: { sms: 0 }
  unreachable: [later]
`,
    );
    expect(flow.compiled).toBeNull();
    expect(flow.errors.map((e) => [e.line, e.column, e.rule, e.path, e.message])).toEqual([
      [
        9,
        3,
        'ASSERT_OUTCOME',
        'menus.more',
        'keys 2,timeout end the call without an outcome (it hangs up at more); every path needs one (on by default): record an outcome there, or set assert: { outcomeOnEveryPath: false }',
      ],
      [
        15,
        23,
        'ASSERT_MAX_MESSAGES',
        'assert.maxMessages.sms',
        'up to 1 messages of type sms in one call, over 0: keys 1 send 1',
      ],
      [
        16,
        17,
        'ASSERT_UNREACHABLE',
        'assert.unreachable[0]',
        'keys 2,1 end the call with outcome later (it hangs up at more)',
      ],
    ]);
  });

  it('is refused by the schema for an unknown property or a path with nothing to check', () => {
    const flow = parseYaml(`${source}assert:
  maxMessage: { sms: 1 }
  paths: [ { keys: [1] } ]
`);
    expect(flow.errors.map((e) => [e.line, e.rule, e.path]).sort()).toEqual([
      [15, 'UNKNOWN_FIELD', 'assert.maxMessage'],
      [16, 'SCHEMA', 'assert.paths[0]'],
    ]);
  });

  it('compiles, unchecked, for playing: simulate and test load with assertions: false', () => {
    const broken = `${source}assert:\n  unreachable: [later]\n`;
    const played = parseFlowSource(broken, 'flows/test.yaml', { assertions: false });
    expect(played.errors).toEqual([]);
    expect(played.compiled?.version).toBe(unchecked(source).compiled!.version);
    // the schema still holds the section to its shape
    const bad = parseFlowSource(`${source}assert:\n  unreachable: later\n`, 'flows/test.yaml', {
      assertions: false,
    });
    expect(bad.errors.map((e) => [e.line, e.rule])).toEqual([[15, 'SCHEMA']]);
  });

  it('keeps its compiled version whatever assert: says', () => {
    const plain = unchecked(source).compiled!;
    const asserted = parseYaml(
      `${source}assert:\n  outcomeOnEveryPath: false\n  maxMessages: { sms: 1 }\n`,
    ).compiled!;
    const changed = parseYaml(
      `${source}assert:\n  outcomeOnEveryPath: false\n  maxMessages: { sms: 5, total: 9 }\n  reachable: [yes]\n`,
    ).compiled!;
    expect(asserted.version).toBe(plain.version);
    expect(changed.version).toBe(plain.version);
    expect(JSON.stringify(changed)).toBe(JSON.stringify(plain));
  });

  it('keeps each example flow at the version it has without its assert: section', () => {
    for (const id of EXAMPLES) {
      const text = exampleSource(id);
      const at = text.search(/^assert:/m);
      expect(at, id).toBeGreaterThan(0);
      const without = unchecked(text.slice(0, at), `flows/${id}.yaml`);
      expect(without.compiled?.version, id).toBe(loadExample(id).version);
    }
  });
});

/**
 * Every path of a compiled flow, listed one by one: at each node the inputs that tell its
 * paths apart (assertionInputs), following the node's actions until the call hangs up. A
 * plain listing, independent of the dynamic programming of checkFlowAssertions (which never
 * lists paths); the counterexamples are then played through the simulator.
 */
function everyPath(compiled: CompiledFlow) {
  const byId = new Map(compiled.nodes.map((n) => [n.id, n]));
  const ends: Array<{ keys: string[]; outcome: string | null; sms: number }> = [];
  const walk = (node: CompiledNode, keys: string[], outcome: string | null, sms: number) => {
    for (const input of assertionInputs(node)) {
      const actions = node.keys[entryFor(node, input)]!;
      let o = outcome;
      let n = sms;
      for (const a of actions) {
        if (a.type === 'outcome') o = a.name;
        if (a.type === 'send') {
          const { fallback, fallbacks = [] } = a.message;
          n += [a.message, ...(fallback ? [fallback] : []), ...fallbacks].filter(
            (m) => m.type === 'sms',
          ).length;
        }
      }
      const last = actions.at(-1)!;
      if (last.type === 'goto') walk(byId.get(last.node)!, [...keys, input], o, n);
      else ends.push({ keys: [...keys, input], outcome: o, sms: n });
    }
  };
  walk(compiled.nodes[0]!, [], null, 0);
  return ends;
}

describe('the example flows', () => {
  it.each(EXAMPLES)('%s: what the checker proves, every listed path confirms', (id) => {
    const compiled = loadExample(id);
    const vars = SAMPLE_VARS[id];
    const ends = everyPath(compiled);
    expect(ends.length).toBeGreaterThan(10);
    const base = { outcomeOnEveryPath: false };

    // a path without an outcome: the checker names one of the shortest, or there is none
    const withoutOutcome = ends.filter((e) => e.outcome === null);
    const outcomeIssue = checkFlowAssertions(compiled, {}).find((i) => i.rule === 'ASSERT_OUTCOME');
    if (withoutOutcome.length === 0) expect(outcomeIssue).toBeUndefined();
    else {
      expect(withoutOutcome.map((e) => e.keys)).toContainEqual(outcomeIssue!.keys);
      expect(outcomeIssue!.keys).toHaveLength(
        Math.min(...withoutOutcome.map((e) => e.keys.length)),
      );
      const sim = play(compiled, outcomeIssue!.keys!, vars);
      expect([sim.machine.ended, sim.outcome]).toEqual([true, null]);
    }

    // the most SMS any path sends (on: reactions left out): the limit that holds, and the one
    // below it that fails with the keys of such a path
    const pathsOnly: CompiledFlow = { ...compiled, on: { statuses: {} } };
    const most = Math.max(...ends.map((e) => e.sms));
    expect(checkFlowAssertions(pathsOnly, { ...base, maxMessages: { sms: most } })).toEqual([]);
    if (most > 0) {
      const [over] = checkFlowAssertions(pathsOnly, { ...base, maxMessages: { sms: most - 1 } });
      expect(ends.find((e) => e.keys.join() === over!.keys!.join())!.sms).toBe(most);
      const sim = play(compiled, over!.keys!, vars);
      const sent = sim.machine.sends.flatMap(({ message }) => [
        message,
        ...(message.fallbacks ?? []),
      ]);
      expect(sent.filter((m) => m.type === 'sms')).toHaveLength(most);
    }

    // an outcome some path ends with is reachable, and its counterexample really ends so;
    // every other outcome the flow names is reachable only by an on: reaction, if at all
    const byKeys = new Set(ends.map((e) => e.outcome).filter((o) => o !== null));
    for (const outcome of byKeys) {
      expect(checkFlowAssertions(pathsOnly, { ...base, reachable: [outcome!] })).toEqual([]);
      const [issue] = checkFlowAssertions(pathsOnly, { ...base, unreachable: [outcome!] });
      expect(ends.find((e) => e.keys.join() === issue!.keys!.join())?.outcome).toBe(outcome);
      expect(play(compiled, issue!.keys!, vars).outcome).toBe(outcome);
    }
    const named = [
      ...new Set(
        compiled.nodes.flatMap((n) =>
          Object.values(n.keys).flatMap((actions) =>
            actions.flatMap((a) => (a.type === 'outcome' ? [a.name] : [])),
          ),
        ),
      ),
    ];
    for (const outcome of named.filter((o) => !byKeys.has(o))) {
      expect(checkFlowAssertions(pathsOnly, { ...base, unreachable: [outcome] })).toEqual([]);
      expect(checkFlowAssertions(pathsOnly, { ...base, reachable: [outcome] })).toHaveLength(1);
    }
  });

  it('hold their own assertions, each with an assert: section', () => {
    for (const id of EXAMPLES) {
      const loaded = parseYaml(exampleSource(id), `flows/${id}.yaml`);
      expect(loaded.errors, id).toEqual([]);
      expect(loaded.definition?.assert, id).toBeDefined();
    }
  });
});
