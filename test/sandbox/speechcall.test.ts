import { describe, expect, test } from 'vitest';
import type { SpeechMenu } from '../../src/provider/menu.ts';
import { CallTimings, planCall, ScriptKey } from '../../src/sandbox/speechcall.ts';

const T = CallTimings.parse({
  keyPressMs: 100,
  defaultIdleTimeoutMs: 5000,
  maxIdleTimeoutMs: 60_000,
  maxMenuVisits: 10,
});
const hook = (name: string) => ({
  action: 'webhook' as const,
  url: `https://h.example/${name}`,
  body: { name },
});

const menu: SpeechMenu = [
  {
    introUrl: 'main.mp3',
    idleTimeoutMsec: 3000,
    dtmfActions: {
      d1: [hook('m0-d1'), { action: 'hangup' }],
      d2: [hook('m0-d2'), { action: 'gotoMenu', menu: 1 }],
      wrong: [hook('m0-wrong'), { action: 'gotoMenu', menu: '0' }],
    },
  },
  {
    introUrl: 'second.mp3',
    dtmfActions: {
      'd#': [hook('m1-hash'), hook('m1-hash-2')],
    },
  },
];

const webhooks = (keys: string[]) =>
  planCall(
    menu,
    keys.map((k) => ScriptKey.parse(k)),
    T,
  )
    .events.filter((e) => e.type === 'webhook')
    .map((e) => (e.type === 'webhook' ? e.body.name : ''));

describe('planCall (seed 2.5)', () => {
  test("starts in menu 0 and runs the pressed key's actions in order; hangup ends it", () => {
    const plan = planCall(menu, ['1'], T);
    expect(plan.events).toEqual([
      { at: 0, type: 'menu', menu: 0, visit: 1 },
      { at: 100, type: 'input', menu: 0, input: '1', runs: 'd1' },
      {
        at: 100,
        type: 'webhook',
        menu: 0,
        key: 'd1',
        index: 0,
        url: 'https://h.example/m0-d1',
        body: { name: 'm0-d1' },
        headers: {},
      },
      { at: 100, type: 'hangup', reason: 'hangup-action' },
    ]);
    expect(plan.endReason).toBe('hangup-action');
  });

  test('gotoMenu continues in the named menu (string or integer index)', () => {
    expect(webhooks(['2', '#'])).toEqual(['m0-d2', 'm1-hash', 'm1-hash-2']);
    const plan = planCall(menu, ['2', '#'], T);
    expect(
      plan.events.filter((e) => e.type === 'menu').map((e) => (e.type === 'menu' ? e.menu : -1)),
    ).toEqual([0, 1]);
    expect(plan.endReason).toBe('actions-ended');
  });

  test('an undefined key runs wrong', () => {
    expect(webhooks(['7', '1'])).toEqual(['m0-wrong', 'm0-d1']);
  });

  test("a timeout runs wrong after the menu's idleTimeoutMsec", () => {
    const plan = planCall(menu, ['timeout', '1'], T);
    expect(plan.events[1]).toEqual({
      at: 3000,
      type: 'input',
      menu: 0,
      input: 'timeout',
      runs: 'wrong',
    });
    expect(webhooks(['timeout', '1'])).toEqual(['m0-wrong', 'm0-d1']);
  });

  test('with no wrong, an undefined key or a timeout hangs up, and nothing runs', () => {
    expect(planCall(menu, ['2', '5'], T).endReason).toBe('no-wrong');
    expect(webhooks(['2', '5'])).toEqual(['m0-d2']);
    const timedOut = planCall(menu, ['2', 'timeout'], T);
    expect(timedOut.endReason).toBe('no-wrong');
    // menu 1 sets no idleTimeoutMsec: the default applies
    expect(timedOut.durationMs).toBe(100 + 5000);
  });

  test('when the scripted keys run out the callee is silent: a timeout', () => {
    const plan = planCall(menu, ['2'], T);
    expect(plan.events.at(-2)).toMatchObject({ type: 'input', input: 'timeout', runs: null });
    expect(plan.endReason).toBe('no-wrong');
  });

  test('nothing after a hangup runs', () => {
    const m: SpeechMenu = [{ introUrl: 'x', dtmfActions: { d1: [{ action: 'hangup' }] } }];
    // the schema refuses an action after hangup; the planner stops there anyway
    const unsafe = [
      { introUrl: 'x', dtmfActions: { d1: [{ action: 'hangup' }, hook('never')] } },
    ] as SpeechMenu;
    expect(planCall(m, ['1'], T).events.some((e) => e.type === 'webhook')).toBe(false);
    expect(planCall(unsafe, ['1'], T).events.some((e) => e.type === 'webhook')).toBe(false);
  });

  test('actions after a gotoMenu still run before the call moves on', () => {
    const m: SpeechMenu = [
      { introUrl: 'a', dtmfActions: { d1: [{ action: 'gotoMenu', menu: 1 }, hook('after-goto')] } },
      { introUrl: 'b', dtmfActions: { d2: [hook('in-1'), { action: 'hangup' }] } },
    ];
    const plan = planCall(m, ['1', '2'], T);
    expect(
      plan.events
        .filter((e) => e.type === 'webhook')
        .map((e) => (e.type === 'webhook' ? e.body.name : '')),
    ).toEqual(['after-goto', 'in-1']);
  });

  test('the callee can hang up', () => {
    const plan = planCall(menu, ['hangup', '1'], T);
    expect(plan.endReason).toBe('callee-hangup');
    expect(plan.events.some((e) => e.type === 'webhook')).toBe(false);
  });

  test('a loop ends after maxMenuVisits menus', () => {
    const plan = planCall(menu, [], T); // silence forever: wrong -> menu 0 -> wrong ...
    expect(plan.endReason).toBe('max-visits');
    expect(plan.events.filter((e) => e.type === 'menu')).toHaveLength(10);
  });

  test('the idle wait is capped by maxIdleTimeoutMs', () => {
    const capped = CallTimings.parse({ maxIdleTimeoutMs: 250 });
    expect(planCall(menu, ['timeout', '1'], capped).events[1]).toMatchObject({ at: 250 });
  });

  test('script keys accept the d-prefixed spelling and refuse others', () => {
    expect(ScriptKey.parse('d#')).toBe('#');
    expect(ScriptKey.parse(' 5 ')).toBe('5');
    expect(ScriptKey.safeParse('wrong').success).toBe(false);
    expect(ScriptKey.safeParse('12').success).toBe(false);
  });
});
