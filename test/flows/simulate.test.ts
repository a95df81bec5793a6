/**
 * The agreement check itself must be able to fail: each test breaks one part of a compiled
 * flow the way a compiler bug would, and expects `simulateFlow` to say where.
 */
import { describe, expect, it } from 'vitest';
import { type CompiledFlow, renderMenu, simulateFlow } from '../../src/flows/index.ts';
import { planCall } from '../../src/sandbox/speechcall.ts';
import { loadExample, SAMPLE_VARS } from './helpers.ts';

const vars = SAMPLE_VARS['appointment-reminder'];
const fresh = (): CompiledFlow => structuredClone(loadExample('appointment-reminder'));

describe('simulateFlow', () => {
  it("plays the README example's path the same both ways", () => {
    const sim = simulateFlow(fresh(), { keys: ['2', '*', '1'], vars, to: '+380501234567' });
    expect(sim.differences).toEqual([]);
    expect(sim.agree).toBe(true);
    expect(sim.machine.path).toEqual([
      { node: 'main', key: '2' },
      { node: 'reschedule', key: '*' },
      { node: 'main/v2', key: '1' },
    ]);
    expect(sim.menu.run.steps.map((s) => [s.menu, s.entry, s.next])).toEqual([
      [0, 'd2', 1],
      [1, 'd*', 2],
      [2, 'd1', 'hangup'],
    ]);
    expect(sim.outcome).toBe('confirmed');
    expect(sim.machine.sends).toEqual([
      {
        id: 'main/v2:1:1',
        message: { type: 'sms', text: 'Thanks Ann, see you on 2025-03-01.', to: '+380501234567' },
      },
    ]);
  });

  it('feeds statuses and timers to the machine after the keys', () => {
    const sim = simulateFlow(fresh(), {
      keys: [],
      vars,
      statuses: ['expired'],
      timers: ['noResponse'],
    });
    expect(sim.machine.waitingAt).toBe('main');
    expect(sim.reactions).toEqual([
      { type: 'cancelTimer', timer: 'noResponse' },
      { type: 'outcome', name: 'unreachable' },
    ]);
    expect(sim.outcome).toBe('unreachable');
  });

  it('catches a goto that points the provider elsewhere', () => {
    const compiled = fresh();
    compiled.nodes[0]!.keys['2'] = [{ type: 'goto', node: 'main/v2' }];
    const sim = simulateFlow(compiled, { keys: ['2', '1'], vars });
    expect(sim.agree).toBe(false);
    expect(sim.differences.join('\n')).toContain('paths differ');
  });

  it('catches a machine transition to the wrong node', () => {
    const compiled = fresh();
    const t = compiled.machineConfig.states.main!.on!.KEY.find((x) => x.guard.type === 'wrong')!;
    t.target = 'main/r2';
    const sim = simulateFlow(compiled, { keys: ['timeout', '1'], vars });
    expect(sim.differences.join('\n')).toMatch(/paths differ/);
  });

  it('catches an outcome or a follow-up the machine would not record', () => {
    const compiled = fresh();
    const t = compiled.machineConfig.states.main!.on!.KEY[0]!;
    t.actions = t.actions.filter((a) => a.type !== 'outcome' && a.type !== 'send');
    const sim = simulateFlow(compiled, { keys: ['1'], vars });
    expect(sim.differences).toEqual([
      'outcomes differ: machine null, menu "confirmed"',
      expect.stringContaining('follow-ups differ'),
    ]);
  });

  it('catches a lost hangup and a webhook only the provider would call', () => {
    const compiled = fresh();
    compiled.nodes[0]!.keys['1'] = [{ type: 'outcome', name: 'confirmed' }];
    const sim = simulateFlow(compiled, { keys: ['1'], vars });
    expect(sim.differences).toContain('endings differ: machine true, menu false');

    const extra = fresh();
    extra.nodes[1]!.keys['1']!.unshift({
      type: 'webhook',
      url: 'https://switchboard.invalid/hooks/speechcall',
    });
    const sim2 = simulateFlow(extra, { keys: ['2', '1'], vars });
    expect(sim2.differences.join('\n')).toContain('provider webhooks differ');
  });

  it('catches a key the machine has no transition for', () => {
    const compiled = fresh();
    const state = compiled.machineConfig.states.main!.on!;
    state.KEY = state.KEY.filter((t) => t.guard.type !== 'key' || t.guard.params.key !== '9');
    const sim = simulateFlow(compiled, { keys: ['9', '1'], vars });
    expect(sim.differences[0]).toBe('machine has no transition for key "9" at node "main"');
    expect(sim.agree).toBe(false);
  });

  it('refuses bad keys and vars', () => {
    expect(() => simulateFlow(fresh(), { keys: ['x'], vars })).toThrow(/not a key/);
    expect(() => simulateFlow(fresh(), { keys: ['1'], vars: {} })).toThrow(/vars do not fit/);
  });

  it('tells silence from a key the menu does not handle, on both sides', () => {
    const sim = simulateFlow(fresh(), { keys: ['timeout', '7', '1'], vars });
    expect(sim.agree).toBe(true);
    expect(sim.machine.path).toEqual([
      { node: 'main', key: 'wrong', input: 'timeout' },
      { node: 'main/r1', key: 'wrong', input: '7' },
      { node: 'main/r2', key: '1' },
    ]);
    expect(sim.menu.path).toEqual(sim.machine.path);
  });

  it("lets a real call tell them apart: the provider's webhook names silence or the key", () => {
    // The provider runs its `wrong` entry for silence and for a key without an entry (its
    // speech-call page, https://smsbat.com/help/api/smsbat/speechcall/: "custom behavior for
    // invalid/timeout inputs"), and its webhook is {from, to, mid, action} with `action` the
    // body we put in the entry that ran (docs/provider.md, "Callbacks"). So every key the node
    // does not handle has an entry of its own, running what `wrong` runs: played as the
    // provider plays it (the sandbox's planner), silence and 7 post different tokens and the
    // same provider-side actions.
    const compiled = fresh();
    const menu = renderMenu(compiled, {
      vars,
      hookUrl: 'https://sb.example.com/hooks/speechcall',
      tokenFor: (node, key) => `${node}|${key}`,
    });
    const plan = (input: 'timeout' | '7') => planCall(menu, [input, 'hangup']).events;
    const posted = (input: 'timeout' | '7') =>
      plan(input).flatMap((e) => (e.type === 'webhook' ? [e.body] : []));
    expect(posted('timeout')).toEqual([{ token: 'main|timeout' }]);
    expect(posted('7')).toEqual([{ token: 'main|7' }]);
    // the same next menu either way (main/r1, the retry)
    const retry = compiled.nodes.find((n) => n.id === 'main/r1')!.index;
    const next = (input: 'timeout' | '7') => plan(input).find((e) => e.type === 'goto');
    expect(next('7')).toMatchObject({ key: 'd7', to: retry });
    expect(next('timeout')).toMatchObject({ key: 'wrong', to: retry });
  });
});
