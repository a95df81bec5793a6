import { describe, expect, it } from 'vitest';
import type { FlowStats } from '../../src/calls/read.ts';
import {
  type CompiledFlow,
  compileFlow,
  FlowDefinition,
  flowToMermaid,
  loadFlowFile,
} from '../../src/flows/index.ts';
import { flowDiagram, nodeCounts } from '../../src/ui/diagram.ts';

/** Mermaid source without the boxes' spoken-prompt lines (as test/flows/mermaid.test.ts). */
const withoutSpoken = (source: string) => source.replace(/<br\/>🔊 #quot;.*?#quot;/g, '');

const compiled = async (): Promise<CompiledFlow> =>
  (await loadFlowFile('flows/appointment-reminder.yaml')).compiled!;

const stats = (over: Partial<FlowStats>): FlowStats => ({
  flow: 'appointment-reminder',
  started: 0,
  nodes: {},
  failures: {},
  outcomes: {},
  ...over,
});

describe('nodeCounts', () => {
  it('a node is visited by the calls that arrived there; those with no key back dropped off', async () => {
    const counts = nodeCounts(
      await compiled(),
      stats({
        started: 10,
        failures: { failed: 1 },
        nodes: {
          main: { visits: 7, keys: { '1': 4, '2': 2, wrong: 1 }, hangups: 4 },
          reschedule: { visits: 1, keys: { '1': 1 }, hangups: 1 },
          'main/r1': { visits: 1, keys: { '2': 1 }, hangups: 0 },
        },
      }),
    );
    // 10 started, 1 never answered: 9 reached the first menu, 7 pressed or timed out there
    expect(counts.get('main')).toEqual({
      visits: 9,
      dropped: 2,
      keys: { '1': 4, '2': 2, wrong: 1 },
    });
    // from main (2) and from main/r1 (1); one pressed 1, two hung up there
    expect(counts.get('reschedule')).toMatchObject({ visits: 3, dropped: 2 });
    expect(counts.get('main/r1')).toMatchObject({ visits: 1, dropped: 0 });
    expect(counts.get('main/v2')).toMatchObject({ visits: 0, dropped: 0 });
  });

  it('never shows fewer visits than keys handled (a start counted before its failure)', async () => {
    const counts = nodeCounts(
      await compiled(),
      stats({
        started: 1,
        failures: { failed: 1 },
        nodes: { main: { visits: 1, keys: { '1': 1 }, hangups: 1 } },
      }),
    );
    expect(counts.get('main')).toMatchObject({ visits: 1, dropped: 0 });
  });
});

describe('flowDiagram', () => {
  it('draws the unrolled nodes, keys as edges and the reactions, with an accessible title', async () => {
    const { source } = flowDiagram(await compiled());
    const lines = withoutSpoken(source).split('\n');
    expect(lines[0]).toBe('flowchart TD');
    expect(lines).toContain('  accTitle: Flow Appointment reminder');
    expect(lines).toContain('  n0["0: main"]');
    expect(lines).toContain('  n0 -->|"1: outcome confirmed, send sms"| hangup');
    expect(lines).toContain('  n0 -.->|"timeout / wrong"| n3');
    expect(lines).toContain('    r0[/"on failed: send sms"/]');
    expect(source).not.toMatch(/class \S+ (visited|current|dropped)/);
  });

  it('escapes what Mermaid would read as syntax', async () => {
    const flow = await compiled();
    const { source } = flowDiagram({ ...flow, title: 'Say "hi" <b>#1</b>' });
    expect(source).toContain('accTitle: Flow Say #quot;hi#quot; #lt;b#gt;#35;1#lt;/b#gt;');
  });

  it('highlights a call: the menus and the keys it took, and where it waits', async () => {
    const flow = await compiled();
    const waiting = flowDiagram(flow, {
      call: { path: [{ node: 'main', key: 'wrong' }], node: 'main/r1', ended: false },
    }).source;
    expect(waiting).toContain('  class n0 visited');
    expect(waiting).toContain('  class n3 current');
    expect(waiting).toContain('  linkStyle 3 stroke:#b45309,stroke-width:4px');

    const ended = flowDiagram(flow, {
      call: {
        path: [
          { node: 'main', key: 'wrong' },
          { node: 'main/r1', key: '1' },
        ],
        node: null,
        ended: true,
      },
    }).source;
    expect(ended).toContain('  class n0,n3,hangup visited');
    expect(ended).not.toMatch(/class \S+ current/);
    // edge 3 is main's timeout; main/r1 (n3) has its keys from index 11 on
    expect(ended).toContain('  linkStyle 3,11 stroke:#b45309,stroke-width:4px');
  });

  it('folded: one box per menu as written, with the counts and edges of its copies added up', async () => {
    const flow = await compiled();
    const { source } = flowDiagram(flow, {
      folded: true,
      stats: stats({
        started: 3,
        nodes: {
          main: { visits: 2, keys: { '2': 1, wrong: 1 }, hangups: 0 },
          'main/r1': { visits: 1, keys: { '2': 1 }, hangups: 0 },
          reschedule: { visits: 2, keys: { '1': 2 }, hangups: 2 },
        },
      }),
      call: {
        path: [
          { node: 'main', key: 'wrong' },
          { node: 'main/r1', key: '2' },
        ],
        node: 'reschedule',
        ended: false,
      },
    });
    const lines = withoutSpoken(source).split('\n');
    expect(lines).toContain('  m0["main<br/>visits 4 · dropped 1"]');
    expect(lines).toContain('  m1["reschedule<br/>visits 2 · dropped 0"]');
    expect(lines.filter((l) => /^ {2}m\d\[/.test(l))).toHaveLength(2);
    expect(lines).toContain('  m0 -->|"2 (2)"| m1');
    expect(lines).toContain('  m0 -.->|"timeout / wrong: retry (1)"| m0');
    // the retry and then key 2 of the copy: both drawn on the folded edges
    expect(lines).toContain('  class m0 visited');
    expect(lines).toContain('  class m1 current');
    expect(lines).toContain('  linkStyle 3,1 stroke:#b45309,stroke-width:4px');
  });

  it('names and draws nodes, loops and the round limit exactly as the graph command does', async () => {
    const flow = await compiled();
    const boxesAndEdges = (source: string) =>
      source.split('\n').filter((l) => /^ {2}(n|m)\d+[[ ]/.test(l) || l.includes('~~~'));
    for (const folded of [false, true]) {
      expect(boxesAndEdges(flowDiagram(flow, { folded }).source)).toEqual(
        boxesAndEdges(flowToMermaid(flow, { folded })),
      );
    }
    const { source } = flowDiagram(flow);
    expect(withoutSpoken(source)).toContain('  n2["2: main/v2"]');
    expect(source).toContain('  n0 -->|"9: back to main"| n2');
    expect(source).not.toContain('|"9: outcome no-input"|');
    const folded = flowDiagram(flow, { folded: true }).source;
    expect(folded).toContain('  m0 -->|"9"| m0');
    expect(folded).toContain('  m0 -->|"after 3 rounds, 9: outcome no-input"| hangup');
  });

  it('shows a spoken prompt under the name, before the counts, as flowToMermaid does', () => {
    const flow = compileFlow({
      id: 'spoken',
      definition: FlowDefinition.parse({
        params: { name: 'string' },
        menus: {
          main: {
            intro: { say: 'Hello {{name}}, press 1 to confirm your appointment.' },
            retries: 1,
            reprompt: { say: 'Sorry?' },
            keys: { '1': [{ goto: 'done' }] },
            wrong: [{ outcome: 'no' }],
          },
          done: { intro: 'ivr_1', wrong: [{ outcome: 'yes' }] },
        },
      }),
    });
    const hello = '🔊 #quot;Hello {{name}}, press 1 to confirm your…#quot;';
    const unrolled = flowDiagram(flow).source.split('\n');
    expect(unrolled).toContain(`  n0["0: main<br/>${hello}"]`);
    expect(unrolled).toContain('  n1["1: done"]');
    expect(unrolled).toContain('  n2["2: main/r1<br/>🔊 #quot;Sorry?#quot;"]');
    const counted = flowDiagram(flow, {
      folded: true,
      stats: stats({
        flow: 'spoken',
        started: 2,
        nodes: { main: { visits: 2, keys: { '1': 1, wrong: 1 }, hangups: 0 } },
      }),
    }).source.split('\n');
    // folded: the intro, not the reprompt of the copy main/r1
    expect(counted).toContain(`  m0["main<br/>${hello}<br/>visits 3 · dropped 1"]`);
    expect(counted).toContain('  m1["done<br/>visits 1 · dropped 1"]');
  });
});
