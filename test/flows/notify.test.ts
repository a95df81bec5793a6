/**
 * The `notify:` action in the flow language: the schema and its JSON Schema, the loader's
 * errors, compiling (ours: never in the provider's menu), the machine's effect and its data,
 * the checks (templates in `data`; an endpoint the database may not have is no error), the
 * diagram and the simulation.
 */
import { describe, expect, it } from 'vitest';
import {
  Action,
  checkFlow,
  createFlowMachine,
  type FlowDefinition,
  flowJsonSchema,
  flowToMermaid,
  FlowDefinition as Schema,
  simulateFlow,
  startFlow,
  stepFlow,
} from '../../src/flows/index.ts';
import { compileDef, parseYaml } from './helpers.ts';

const FLOW = {
  params: { name: 'string', order: 'string' },
  menus: {
    main: {
      intro: 'ivr_1',
      keys: {
        '1': [
          { notify: { endpoint: 'crm', data: { note: 'Hi {{name}}', order: '{{order}}' } } },
          { outcome: 'confirmed' },
          'hangup',
        ],
        '2': [{ goto: 'other' }],
      },
    },
    other: { intro: 'ivr_2', keys: { '3': [{ notify: 'crm' }] } },
  },
  on: { failed: [{ notify: 'ops-alerts' }] },
} as const satisfies FlowDefinition;

describe('notify: in the schema', () => {
  it('takes an endpoint name, or { endpoint, data }, in keys, wrong and on: reactions', () => {
    expect(Action.safeParse({ notify: 'crm' }).success).toBe(true);
    expect(Action.safeParse({ notify: { endpoint: 'crm-2', data: { a: 1 } } }).success).toBe(true);
    expect(Schema.safeParse(FLOW).success).toBe(true);
    const wrong = { menus: { main: { intro: 'x', wrong: [{ notify: 'crm' }] } } };
    expect(Schema.safeParse(wrong).success).toBe(true);
  });

  it.each([
    ['an upper-case name', { notify: 'CRM' }],
    ['a name with a space', { notify: 'my crm' }],
    ['a name ending in -', { notify: 'crm-' }],
    ['a name over 64 characters', { notify: 'a'.repeat(65) }],
    ['an empty name', { notify: '' }],
    ['an unknown field', { notify: { endpoint: 'crm', url: 'https://x' } }],
    ['no endpoint', { notify: { data: { a: 1 } } }],
  ])('refuses %s', (_, action) => {
    expect(Action.safeParse(action).success).toBe(false);
  });

  it('is in the JSON Schema of flows/schema.json, wherever actions go', () => {
    const schema = flowJsonSchema() as { $defs: Record<string, Record<string, unknown>> };
    const { $defs } = schema;
    expect($defs.EndpointName).toMatchObject({ type: 'string', pattern: expect.any(String) });
    const pattern = new RegExp(String($defs.EndpointName!.pattern));
    expect(['crm', 'ops-alerts', 'a1'].every((n) => pattern.test(n))).toBe(true);
    expect(['CRM', 'crm_', '-crm'].some((n) => pattern.test(n))).toBe(false);
    const refs = (def: unknown) => JSON.stringify(def).split('#/$defs/NotifySpec').length - 1;
    expect(refs($defs.Action)).toBe(1);
    expect(refs($defs.ReactionList)).toBe(1);
  });

  it('the loader points at a bad name with file, line and rule', () => {
    const loaded = parseYaml(
      ['menus:', '  main:', '    intro: x', "    keys: { '1': [{ notify: Bad Name }] }", ''].join(
        '\n',
      ),
    );
    expect(loaded.compiled).toBeNull();
    expect(loaded.errors).toEqual([
      expect.objectContaining({
        line: 4,
        column: 29,
        rule: 'SCHEMA',
        path: 'menus.main.keys.1[0].notify',
        message: expect.stringContaining('an endpoint name is a slug'),
      }),
    ]);
  });

  it('the loader names notify among the actions a reaction may use, and refuses hangup there', () => {
    const loaded = parseYaml('menus: { main: { intro: x } }\non: { failed: [hangup] }\n');
    expect(loaded.errors[0]!.message).toContain('notifies an endpoint');
  });
});

describe('compiling notify:', () => {
  const compiled = compileDef(FLOW);

  it('keeps it in the node, rendered nowhere in the provider menu', () => {
    const main = compiled.nodes.find((n) => n.id === 'main')!;
    expect(main.keys['1']).toEqual([
      {
        type: 'notify',
        endpoint: 'crm',
        data: { note: 'Hi {{name}}', order: '{{order}}' },
      },
      { type: 'outcome', name: 'confirmed' },
      { type: 'hangup' },
    ]);
    // the provider's d1 is the tracking webhook, then the hangup: nothing of the notify
    expect(compiled.menuTemplate[0]!.dtmfActions.d1!.map((a) => a.action)).toEqual([
      'webhook',
      'hangup',
    ]);
    expect(JSON.stringify(compiled.menuTemplate)).not.toContain('crm');
    expect(compiled.on.statuses.failed).toEqual([{ type: 'notify', endpoint: 'ops-alerts' }]);
  });

  it('is part of the version: another endpoint or other data is another version', () => {
    const other = structuredClone(FLOW) as unknown as FlowDefinition;
    (other.menus.other!.keys!['3']![0] as { notify: string }).notify = 'erp';
    expect(compileDef(other).version).not.toBe(compiled.version);
    // the data's key order is not: the same data written in another order is the same flow
    const reordered = structuredClone(FLOW) as unknown as FlowDefinition;
    reordered.menus.main!.keys!['1']![0] = {
      notify: { data: { order: '{{order}}', note: 'Hi {{name}}' }, endpoint: 'crm' },
    };
    expect(compileDef(reordered).version).toBe(compiled.version);
  });

  it("the machine's effect carries the call: node, path with this step, outcome, vars, data rendered", () => {
    const machine = createFlowMachine(compiled);
    const vars = { name: 'Ann', order: 'A-1' };
    const start = startFlow(machine, { vars, to: '+380501234567' });
    const step = stepFlow(machine, start.snapshot, { type: 'KEY', node: 'main', key: '1' });
    expect(step.effects.map((e) => e.type)).toEqual(['step', 'notify', 'outcome', 'hangup']);
    expect(step.effects[1]).toEqual({
      type: 'notify',
      endpoint: 'crm',
      flow: 'test',
      flowVersion: compiled.version,
      node: 'main',
      data: { note: 'Hi Ann', order: 'A-1' },
      path: [{ node: 'main', menu: 'main', visit: 1, attempt: 0, key: '1' }],
      // the outcome as the key's list leaves it
      outcome: 'confirmed',
      to: '+380501234567',
      vars,
    });
    // a reaction names no node
    const failed = stepFlow(machine, step.snapshot, { type: 'STATUS', status: 'failed' });
    expect(failed.effects).toEqual([
      expect.objectContaining({ type: 'notify', endpoint: 'ops-alerts', node: null }),
    ]);
  });
});

describe('checks of notify:', () => {
  const issues = (flow: FlowDefinition) =>
    checkFlow(Schema.parse(flow)).map((i) => [i.severity, i.rule, i.path.join('.')]);

  it('an endpoint name is never a load error: endpoints live in the database', () => {
    expect(issues(FLOW)).toEqual([]);
  });

  it('checks the templates of data against the params, and counts them as uses', () => {
    const flow = {
      params: { name: 'string', unused: 'string' },
      menus: {
        main: {
          intro: 'x',
          keys: { '1': [{ notify: { endpoint: 'crm', data: { a: ['{{nme}}', '{{name}}'] } } }] },
        },
      },
    } satisfies FlowDefinition;
    expect(issues(flow)).toEqual([
      ['error', 'UNDECLARED_PARAM', 'menus.main.keys.1.0.notify.data.a.0'],
      ['warning', 'UNUSED_PARAM', 'params.unused'],
    ]);
  });
});

describe('notify: in the diagram and the simulation', () => {
  const compiled = compileDef(FLOW);

  it('labels the edge and the reaction like the other actions', () => {
    const text = flowToMermaid(compiled);
    expect(text).toContain('|"1: notify crm, outcome confirmed"| hangup');
    expect(text).toContain('on failed: notify ops-alerts');
  });

  it('machine and menu agree on which endpoints are notified, with data rendered', () => {
    const sim = simulateFlow(compiled, { keys: ['2', '3'], vars: { name: 'Ann', order: 'A-1' } });
    expect(sim.differences).toEqual([]);
    expect(sim.machine.notifies).toEqual([{ endpoint: 'crm', node: 'other' }]);
    const one = simulateFlow(compiled, { keys: ['1'], vars: { name: 'Ann', order: 'A-1' } });
    expect(one.agree).toBe(true);
    expect(one.menu.notifies).toEqual([
      { endpoint: 'crm', node: 'main', data: { note: 'Hi Ann', order: 'A-1' } },
    ]);
  });
});
