/**
 * Model-based agreement: every simple path of each example machine (xstate's graph
 * utilities, silence as an explicit `timeout` key) played through the reference executor of
 * the rendered menu JSON, and through the oracle that reads the flow as written.
 */
import { getSimplePaths } from '@xstate/graph';
import { describe, expect, it } from 'vitest';
import {
  type CompiledFlow,
  createFlowMachine,
  createSimulator,
  currentNode,
  type FlowEvent,
  type FlowSnapshot,
  NODE_KEYS,
  unhandledKeys,
  validateVars,
} from '../../src/flows/index.ts';
import { EXAMPLES, exampleDefinition, loadExample, oracle, SAMPLE_VARS } from './helpers.ts';

/** The key events a node can receive: its keys, and silence. */
function keyEvents(compiled: CompiledFlow, snapshot: FlowSnapshot): FlowEvent[] {
  const node = currentNode(snapshot);
  if (node === null) return [];
  const keys = compiled.nodes.find((n) => n.id === node)!.keys;
  const defined = NODE_KEYS.filter((k) => k !== 'wrong' && keys[k]);
  return [...defined, 'timeout'].map((key) => ({ type: 'KEY', node, key }));
}

function simplePaths(compiled: CompiledFlow, lang: string) {
  const machine = createFlowMachine(compiled);
  return getSimplePaths(machine, {
    input: { vars: SAMPLE_VARS[compiled.id as keyof typeof SAMPLE_VARS], lang },
    events: (snapshot) => keyEvents(compiled, snapshot as FlowSnapshot),
    // The node is the state: the DAG has no cycles, so every path in it is simple.
    serializeState: (snapshot) => String((snapshot as FlowSnapshot).value),
  });
}

describe.each(EXAMPLES)('%s: every simple path of the machine', (id) => {
  const compiled = loadExample(id);
  const definition = exampleDefinition(id);

  const checked = validateVars(compiled, SAMPLE_VARS[id]);
  if (!checked.ok) throw new Error('sample vars do not fit');
  const vars = checked.vars;

  it.each(compiled.languages)('agrees with the menu executor and the oracle (%s)', (lang) => {
    const paths = simplePaths(compiled, lang);
    const simulate = createSimulator(compiled);
    // every node, and the end, is the last state of some path
    const reached = new Set(paths.map((p) => String(p.state.value)));
    expect([...reached].sort()).toEqual([...compiled.nodes.map((n) => n.id), '$end'].sort());

    let ended = 0;
    for (const path of paths) {
      // the first step is xstate's init event
      const keys = path.steps.flatMap((s) => (s.event.type === 'KEY' ? [s.event.key] : []));
      expect(keys).toHaveLength(path.steps.length - 1);
      const sim = simulate({ keys, vars: SAMPLE_VARS[id], lang });
      expect(sim.differences, `keys ${keys.join(',')}`).toEqual([]);
      // the graph walked the real machine: its last state is where both sides stopped
      expect(sim.machine.waitingAt ?? '$end').toBe(String(path.state.value));
      expect(sim.menu.run.menu === null ? '$end' : compiled.nodes[sim.menu.run.menu]!.id).toBe(
        String(path.state.value),
      );
      expect(sim.machine.path).toHaveLength(keys.length);

      const o = oracle(definition, keys, vars, lang);
      const node = (p: { menu: string; visit: number; attempt: number }) =>
        compiled.nodes.find(
          (n) => n.menu === p.menu && n.visit === p.visit && n.attempt === p.attempt,
        )?.id;
      expect(sim.machine.path.map((p) => p.node)).toEqual(o.path.map(node));
      expect(sim.machine.path.map((p) => p.key)).toEqual(o.path.map((p) => p.key));
      // what the caller did, as the machine and the menu's tokens record it
      expect(sim.machine.path.map((p) => p.input ?? p.key)).toEqual(keys);
      expect(sim.menu.path).toEqual(sim.machine.path);
      expect(sim.machine.outcome).toBe(o.outcome);
      expect(sim.machine.sends.map((s) => s.message)).toEqual(o.sends);
      expect(sim.machine.providerWebhooks).toEqual(o.webhooks);
      expect(sim.machine.ended).toBe(o.ended);
      if (sim.machine.ended) ended++;
    }
    expect(ended).toBeGreaterThan(0);
  });

  it('takes silence and every key a node does not handle the same way, recorded apart', () => {
    const simulate = createSimulator(compiled);
    // one way to each node: the keys of the first simple path that ends there
    const ways = new Map<string, string[]>();
    for (const path of simplePaths(compiled, compiled.languages[0]!)) {
      const at = String(path.state.value);
      const keys = path.steps.flatMap((s) => (s.event.type === 'KEY' ? [s.event.key] : []));
      if (at !== '$end' && !ways.has(at)) ways.set(at, keys);
    }
    expect([...ways.keys()].sort()).toEqual(compiled.nodes.map((n) => n.id).sort());
    let compared = 0;
    for (const node of compiled.nodes) {
      const prefix = ways.get(node.id)!;
      const play = (input: string) => {
        const sim = simulate({ keys: [...prefix, input], vars: SAMPLE_VARS[id] });
        expect(sim.differences, `${node.id}: ${input}`).toEqual([]);
        const { path, ...rest } = sim.machine;
        const { effects: _, ...side } = rest;
        return { last: path.at(-1), side, menuAt: sim.menu.run.menu };
      };
      const silence = play('timeout');
      expect(silence.last).toEqual({ node: node.id, key: 'wrong', input: 'timeout' });
      for (const key of unhandledKeys(node)) {
        const pressed = play(key);
        expect(pressed.last).toEqual({ node: node.id, key: 'wrong', input: key });
        expect(pressed.side).toEqual(silence.side);
        expect(pressed.menuAt).toBe(silence.menuAt);
        compared++;
      }
    }
    expect(compared).toBeGreaterThan(0);
  });
});
