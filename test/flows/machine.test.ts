import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AppError } from '../../src/errors.ts';
import {
  createFlowMachine,
  currentNode,
  type FlowEvent,
  type FlowSnapshot,
  keyEventDisposition,
  persistFlowSnapshot,
  restoreFlowSnapshot,
  startFlow,
  stepFlow,
} from '../../src/flows/index.ts';
import { loadExample, SAMPLE_VARS } from './helpers.ts';

const compiled = loadExample('appointment-reminder');
const machine = createFlowMachine(compiled);
const input = {
  vars: SAMPLE_VARS['appointment-reminder'],
  to: '+380501234567',
  from: '+380441234567',
};
const key = (node: string, k: string): FlowEvent => ({ type: 'KEY', node, key: k });

describe('the appointment reminder machine', () => {
  it('starts at node 0 with the no-response timer', () => {
    const { snapshot, effects } = startFlow(machine, input);
    expect(currentNode(snapshot)).toBe('main');
    expect(effects).toEqual([{ type: 'startTimer', timer: 'noResponse', afterMs: 30 * 60_000 }]);
    expect(snapshot.context).toMatchObject({
      lang: 'en',
      path: [],
      outcome: null,
      timers: ['noResponse'],
    });
  });

  it('on 1: records the step, stops the timer, confirms, sends the SMS, hangs up', () => {
    const { snapshot } = startFlow(machine, { ...input, lang: 'uk' });
    const next = stepFlow(machine, snapshot, key('main', '1'));
    expect(next.handled).toBe(true);
    expect(next.effects).toEqual([
      { type: 'step', node: 'main', menu: 'main', visit: 1, attempt: 0, key: '1' },
      { type: 'cancelTimer', timer: 'noResponse' },
      { type: 'outcome', name: 'confirmed' },
      {
        type: 'send',
        id: 'main:1:1',
        message: {
          type: 'sms',
          text: 'Thanks Ann, see you on 2025-03-01.',
          to: '+380501234567',
          from: '+380441234567',
        },
      },
      { type: 'hangup', node: 'main' },
    ]);
    expect(currentNode(next.snapshot)).toBeNull();
    expect(next.snapshot.context).toMatchObject({ outcome: 'confirmed', ended: true, timers: [] });
    // keys after the hangup change nothing
    expect(stepFlow(machine, next.snapshot, key('main', '1')).handled).toBe(false);
  });

  it('treats silence and undefined keys as wrong, walking the retries', () => {
    let { snapshot } = startFlow(machine, input);
    const nodes: string[] = [];
    for (const k of ['timeout', '7', 'wrong']) {
      const step = stepFlow(machine, snapshot, key(currentNode(snapshot)!, k));
      snapshot = step.snapshot;
      nodes.push(currentNode(snapshot) ?? 'end');
    }
    expect(nodes).toEqual(['main/r1', 'main/r2', 'end']);
    expect(snapshot.context.path.map((p) => [p.node, p.key])).toEqual([
      ['main', 'wrong'],
      ['main/r1', 'wrong'],
      ['main/r2', 'wrong'],
    ]);
    expect(snapshot.context.outcome).toBe('no-input');
  });

  it('records what ran wrong: silence, the unhandled key, or nothing for an older menu', () => {
    const { snapshot } = startFlow(machine, input);
    const step = (k: string) => stepFlow(machine, snapshot, key('main', k));
    const recorded = (k: string) => step(k).effects.find((e) => e.type === 'step');
    expect(recorded('timeout')).toEqual({
      type: 'step',
      node: 'main',
      menu: 'main',
      visit: 1,
      attempt: 0,
      key: 'wrong',
      input: 'timeout',
    });
    expect(recorded('7')).toMatchObject({ key: 'wrong', input: '7' });
    expect(step('7').snapshot.context.path).toEqual([
      { node: 'main', menu: 'main', visit: 1, attempt: 0, key: 'wrong', input: '7' },
    ]);
    // a token of a menu rendered before the two had entries of their own names `wrong`
    expect(recorded('wrong')).not.toHaveProperty('input');
    // the same transition either way, apart from the recorded input
    const rest = (k: string) =>
      step(k).effects.map((e) => (e.type === 'step' ? { ...e, input: undefined } : e));
    expect(rest('7')).toEqual(rest('timeout'));
    expect(rest('wrong')).toEqual(rest('timeout'));
    expect(currentNode(step('7').snapshot)).toBe(currentNode(step('timeout').snapshot));
    // a handled key records no input, and a key that is no caller input takes no transition
    expect(recorded('1')).not.toHaveProperty('input');
    expect(step('x').handled).toBe(false);
  });

  it('holds a key for a node it has not reached, and ignores one it has left', () => {
    const { snapshot } = startFlow(machine, input);
    const early = stepFlow(machine, snapshot, key('reschedule', '1'));
    expect(early).toMatchObject({ handled: false, effects: [] });
    expect(early.snapshot).toBe(snapshot);
    const moved = stepFlow(machine, snapshot, key('main', '2')).snapshot;
    expect(stepFlow(machine, moved, key('main', '2')).handled).toBe(false);
    const done = stepFlow(machine, moved, key('reschedule', '1'));
    expect(done.effects.map((e) => e.type)).toEqual([
      'step',
      'outcome',
      'providerWebhook',
      'hangup',
    ]);
  });

  it('reacts to each status once, cancelling the timer on a terminal one', () => {
    const { snapshot } = startFlow(machine, input);
    const delivered = stepFlow(machine, snapshot, { type: 'STATUS', status: 'delivered' });
    expect(delivered).toMatchObject({ handled: true, effects: [] });
    expect(delivered.snapshot.context.statuses).toEqual(['delivered']);
    const failed = stepFlow(machine, delivered.snapshot, { type: 'STATUS', status: 'failed' });
    expect(failed.effects).toEqual([
      { type: 'cancelTimer', timer: 'noResponse' },
      {
        type: 'send',
        id: 'on:failed:0',
        message: {
          type: 'sms',
          text: 'We could not reach you about 2025-03-01.',
          to: '+380501234567',
          from: '+380441234567',
        },
      },
    ]);
    expect(stepFlow(machine, failed.snapshot, { type: 'STATUS', status: 'failed' }).handled).toBe(
      false,
    );
    // the timer is gone: a late firing does nothing
    expect(stepFlow(machine, failed.snapshot, { type: 'TIMER', timer: 'noResponse' }).handled).toBe(
      false,
    );
    const expired = stepFlow(machine, failed.snapshot, { type: 'STATUS', status: 'expired' });
    expect(expired.effects).toEqual([{ type: 'outcome', name: 'unreachable' }]);
  });

  it('fires the no-response timer once, unless a key came first', () => {
    const { snapshot } = startFlow(machine, input);
    const fired = stepFlow(machine, snapshot, { type: 'TIMER', timer: 'noResponse' });
    expect(fired.effects).toEqual([{ type: 'outcome', name: 'no-response' }]);
    expect(stepFlow(machine, fired.snapshot, { type: 'TIMER', timer: 'noResponse' }).handled).toBe(
      false,
    );
    const pressed = stepFlow(machine, snapshot, key('main', '9')).snapshot;
    expect(stepFlow(machine, pressed, { type: 'TIMER', timer: 'noResponse' }).handled).toBe(false);
  });

  it('continues the same from a snapshot stored as JSON', () => {
    let { snapshot } = startFlow(machine, input);
    snapshot = stepFlow(machine, snapshot, key('main', '2')).snapshot;
    const stored = JSON.parse(JSON.stringify(persistFlowSnapshot(snapshot)));
    const restored = restoreFlowSnapshot(createFlowMachine(compiled), stored);
    const a = stepFlow(machine, snapshot, key('reschedule', '*'));
    const b = stepFlow(machine, restored, key('reschedule', '*'));
    expect(b.effects).toEqual(a.effects);
    expect(b.snapshot.value).toBe('main/v2');
    expect(b.snapshot.context).toEqual(a.snapshot.context);
  });

  it('tells the runtime to apply, hold, drop as duplicate or drop as stale', () => {
    const start = startFlow(machine, input).snapshot;
    expect(keyEventDisposition(compiled, start, { node: 'main' })).toBe('apply');
    expect(keyEventDisposition(compiled, start, { node: 'reschedule/v2' })).toBe('hold');
    const atReschedule = stepFlow(machine, start, key('main', '2')).snapshot;
    expect(keyEventDisposition(compiled, atReschedule, { node: 'main' })).toBe('duplicate');
    // main/r1 is only reached by a wrong key at main, which did not happen
    expect(keyEventDisposition(compiled, atReschedule, { node: 'main/r1' })).toBe('stale');
    const ended = stepFlow(machine, atReschedule, key('reschedule', '1')).snapshot;
    expect(keyEventDisposition(compiled, ended, { node: 'main/v2' })).toBe('stale');
    expect(keyEventDisposition(compiled, ended, { node: 'reschedule' })).toBe('duplicate');
  });

  it('refuses a language the flow does not have', () => {
    expect(() => startFlow(machine, { ...input, lang: 'de' })).toThrow(AppError);
  });

  it('comes out the same whatever order the webhooks arrive in', () => {
    // a path through four nodes; the runtime holds events the machine cannot take yet
    const path = [
      key('main', '9'),
      key('main/v2', 'wrong'),
      key('main/v2/r1', '2'),
      key('reschedule/v2', '1'),
    ];
    const inOrder = run(path);
    fc.assert(
      fc.property(
        fc.shuffledSubarray(path, { minLength: path.length, maxLength: path.length }),
        (arrival) => {
          const got = run(arrival);
          expect(got.path).toEqual(inOrder.path);
          expect(got.effects).toEqual(inOrder.effects);
        },
      ),
      { numRuns: 30 },
    );
    expect(inOrder.path).toEqual(['main', 'main/v2', 'main/v2/r1', 'reschedule/v2']);
  });
});

/** Feeds events as they arrive, holding each until the machine is at its node. */
function run(arrival: FlowEvent[]) {
  let { snapshot } = startFlow(machine, input) as { snapshot: FlowSnapshot };
  const held = [...arrival];
  const effects: unknown[] = [];
  let progress = true;
  while (progress) {
    progress = false;
    for (let i = 0; i < held.length; i++) {
      const step = stepFlow(machine, snapshot, held[i]!);
      if (step.handled) {
        snapshot = step.snapshot;
        effects.push(...step.effects);
        held.splice(i, 1);
        progress = true;
        break;
      }
    }
  }
  return { path: snapshot.context.path.map((p) => p.node), effects };
}
