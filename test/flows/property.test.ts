/**
 * Property: for random valid flows and random key sequences, the machine, the reference
 * executor of the menu JSON and the oracle reading the flow as written all agree.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type Action,
  CALLER_INPUTS,
  type CompiledNode,
  checkFlow,
  compileFlow,
  createSimulator,
  type FlowDefinition,
  type FlowKey,
  renderMenu,
  unhandledKeys,
} from '../../src/flows/index.ts';
import { SpeechMenu } from '../../src/provider/menu.ts';
import { oracle } from './helpers.ts';

/** True when following gotos can never come back to a node (Kahn's algorithm). */
function isAcyclic(nodes: readonly CompiledNode[]): boolean {
  const indegree = new Map(nodes.map((n) => [n.id, 0]));
  const targets = (n: CompiledNode) =>
    Object.values(n.keys).flatMap((list) => {
      const last = list.at(-1)!;
      return last.type === 'goto' ? [last.node] : [];
    });
  for (const n of nodes) for (const t of targets(n)) indegree.set(t, indegree.get(t)! + 1);
  const ready = nodes.filter((n) => indegree.get(n.id) === 0);
  let seen = 0;
  while (ready.length > 0) {
    const n = ready.pop()!;
    seen++;
    for (const t of targets(n)) {
      indegree.set(t, indegree.get(t)! - 1);
      if (indegree.get(t) === 0) ready.push(nodes.find((x) => x.id === t)!);
    }
  }
  return seen === nodes.length;
}

const LIST_KEYS: FlowKey[] = ['0', '1', '2', '3', '*', '#'];

function effectArb(): fc.Arbitrary<Action> {
  return fc.oneof(
    fc.constantFrom('won', 'lost', 'maybe').map((outcome): Action => ({ outcome })),
    fc
      .constantFrom('a', 'b')
      .map(
        (t): Action => ({ send: { type: 'sms', text: { en: `${t} {{p}}`, uk: `${t}-uk {{p}}` } } }),
      ),
    fc
      .constantFrom('x', 'y')
      .map(
        (t): Action => ({ webhook: { url: `https://crm.example.com/${t}`, body: { p: '{{p}}' } } }),
      ),
  );
}

/** An action list: some effects, then a goto, a hangup or nothing (an implicit hangup). */
function listArb(menuCount: number): fc.Arbitrary<Action[]> {
  return fc
    .tuple(
      fc.array(effectArb(), { maxLength: 2 }),
      fc.oneof(
        fc.constant<Action[]>(['hangup']),
        fc.constant<Action[]>([]),
        fc.nat({ max: menuCount - 1 }).map((i): Action[] => [{ goto: `m${i}` }]),
      ),
    )
    .map(([effects, end]) => [...effects, ...end])
    .filter((list) => list.length > 0);
}

function menuArb(menuCount: number) {
  return fc.record({
    retries: fc.nat({ max: 2 }),
    reprompt: fc.boolean(),
    timeout: fc.boolean(),
    keys: fc.uniqueArray(fc.constantFrom(...LIST_KEYS), { maxLength: 4 }),
    lists: fc.array(listArb(menuCount), { minLength: 4, maxLength: 4 }),
    wrong: fc.option(listArb(menuCount), { nil: undefined }),
  });
}

/**
 * Valid flows: menus m0..m(n-1), each reachable through a tree of links on keys 5-8
 * (parent < child), plus random lists that may go anywhere.
 */
const flowArb: fc.Arbitrary<FlowDefinition> = fc
  .integer({ min: 1, max: 5 })
  .chain((n) =>
    fc.tuple(
      fc.array(menuArb(n), { minLength: n, maxLength: n }),
      fc.array(fc.nat(), { minLength: n, maxLength: n }),
    ),
  )
  .map(([menus, parents]) => {
    const def: FlowDefinition = { params: { p: 'string' }, languages: ['en', 'uk'], menus: {} };
    menus.forEach((m, i) => {
      const keys: Partial<Record<FlowKey, Action[]>> = {};
      m.keys.forEach((k, j) => {
        keys[k] = m.lists[j]!;
      });
      def.menus[`m${i}`] = {
        intro: {
          en: `https://cdn.example.com/en/m${i}.mp3`,
          uk: `https://cdn.example.com/uk/m${i}.mp3`,
        },
        ...(m.retries > 0 ? { retries: m.retries } : {}),
        ...(m.reprompt ? { reprompt: `https://cdn.example.com/m${i}-again.mp3` } : {}),
        ...(m.timeout ? { timeout: '5s' } : {}),
        keys,
        ...(m.wrong ? { wrong: m.wrong } : {}),
      };
    });
    for (let i = 1; i < menus.length; i++) {
      const parent = def.menus[`m${parents[i]! % i}`]!;
      const key = String(4 + i) as FlowKey;
      parent.keys = { ...parent.keys, [key]: [{ goto: `m${i}` }] };
    }
    return def;
  });

const keysArb = fc.array(fc.constantFrom(...CALLER_INPUTS, '5', '6', '7', '8'), { maxLength: 14 });

describe('random flows and keys', () => {
  it('machine, menu executor and oracle agree', () => {
    fc.assert(
      fc.property(
        flowArb,
        fc.array(keysArb, { minLength: 1, maxLength: 6 }),
        fc.constantFrom('en', 'uk'),
        fc.integer({ min: 1, max: 3 }),
        (def, sequences, lang, maxVisits) => {
          // a random flow may have a menu that cannot end; those are refused, not compiled
          fc.pre(!checkFlow(def, { maxVisits }).some((i) => i.severity === 'error'));
          const compiled = compileFlow({ id: 'random', definition: def }, { maxVisits });
          expect(SpeechMenu.safeParse(compiled.menuTemplate).success).toBe(true);
          const rendered = renderMenu(compiled, {
            vars: { p: 'P' },
            lang,
            hookUrl: 'https://sb.example.com/hooks/speechcall',
            tokenFor: (node, key) => `${node}|${key}`,
          });
          expect(SpeechMenu.safeParse(rendered).success).toBe(true);
          // the DAG: no goto chain comes back to a node, and the start has no way in
          expect(isAcyclic(compiled.nodes)).toBe(true);
          const simulate = createSimulator(compiled);
          for (const keys of sequences) {
            const sim = simulate({ keys, vars: { p: 'P' }, lang });
            expect(sim.differences, `keys ${keys.join(',')}`).toEqual([]);
            const o = oracle(def, keys, { p: 'P' }, lang, maxVisits);
            const steps = sim.machine.path.map((p) => {
              const n = compiled.nodes.find((x) => x.id === p.node)!;
              return { menu: n.menu, visit: n.visit, attempt: n.attempt, key: p.key };
            });
            expect(steps).toEqual(o.path);
            // the recorded input is what the caller did: the key, or on a `wrong` step the
            // unhandled key or `timeout`, on the machine's side and as the menu's token says
            sim.machine.path.forEach((p, i) => {
              expect(p.key === 'wrong' ? p.input : p.key).toBe(keys[i]);
            });
            expect(sim.menu.path).toEqual(sim.machine.path);
            expect(sim.machine.outcome).toBe(o.outcome);
            expect(sim.machine.sends.map((s) => s.message)).toEqual(o.sends);
            expect(sim.machine.providerWebhooks).toEqual(o.webhooks);
            expect(sim.machine.ended).toBe(o.ended);
            // follow-up ids are unique within a call: the customerMessageId depends on it
            const ids = sim.machine.sends.map((s) => s.id);
            expect(new Set(ids).size).toBe(ids.length);
          }
        },
      ),
      { numRuns: 150 },
    );
  });
});

describe('silence and a key the node does not handle', () => {
  it('are recorded apart and lead to the same next state, on both sides', () => {
    fc.assert(
      fc.property(
        flowArb,
        keysArb,
        fc.nat(),
        fc.integer({ min: 1, max: 3 }),
        (def, prefix, pick, maxVisits) => {
          fc.pre(!checkFlow(def, { maxVisits }).some((i) => i.severity === 'error'));
          const compiled = compileFlow({ id: 'random', definition: def }, { maxVisits });
          const simulate = createSimulator(compiled);
          const before = simulate({ keys: prefix, vars: { p: 'P' } });
          fc.pre(before.machine.waitingAt !== null);
          const node = compiled.nodes.find((n) => n.id === before.machine.waitingAt)!;
          const unhandled = unhandledKeys(node);
          fc.pre(unhandled.length > 0);
          const digit = unhandled[pick % unhandled.length]!;
          const silent = simulate({ keys: [...prefix, 'timeout'], vars: { p: 'P' } });
          const wrongKey = simulate({ keys: [...prefix, digit], vars: { p: 'P' } });
          expect(silent.differences).toEqual([]);
          expect(wrongKey.differences).toEqual([]);
          const last = (sim: typeof silent) => sim.machine.path.at(-1);
          expect(last(silent)).toEqual({ node: node.id, key: 'wrong', input: 'timeout' });
          expect(last(wrongKey)).toEqual({ node: node.id, key: 'wrong', input: digit });
          // everything else is the same: where the call goes and what it does
          const rest = (sim: typeof silent) => ({
            waitingAt: sim.machine.waitingAt,
            ended: sim.machine.ended,
            outcome: sim.machine.outcome,
            sends: sim.machine.sends,
            providerWebhooks: sim.machine.providerWebhooks,
            menuAt: sim.menu.run.menu,
          });
          expect(rest(wrongKey)).toEqual(rest(silent));
        },
      ),
      { numRuns: 150 },
    );
  });
});
