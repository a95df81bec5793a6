import { describe, expect, it } from 'vitest';
import { flowToMermaid, simulateFlow } from '../../src/flows/index.ts';
import { compileDef, loadExample, SAMPLE_VARS } from './helpers.ts';

describe('flowToMermaid', () => {
  const compiled = loadExample('appointment-reminder');
  const text = flowToMermaid(compiled);
  const lines = text.trim().split('\n');

  it('draws every node, every key, dashed timeout/wrong edges and one hangup node', () => {
    expect(lines[0]).toBe('flowchart TD');
    for (const node of compiled.nodes)
      expect(text).toContain(`  n${node.index}["${node.index}: ${node.menu}`);
    const edges = lines.filter((l) => l.includes('-->') || l.includes('-.->'));
    const keyCount = compiled.nodes.reduce((n, node) => n + Object.keys(node.keys).length, 0);
    expect(edges).toHaveLength(keyCount);
    const wrong = lines.filter((l) => l.includes('-.->'));
    expect(wrong).toHaveLength(compiled.nodes.length);
    expect(wrong.every((l) => l.includes('"timeout / wrong'))).toBe(true);
    expect(text).toContain('  n0 -.->|"timeout / wrong"| n3');
    expect(text).toContain('  n0 -->|"1: outcome confirmed, send sms"| hangup');
    expect(lines.filter((l) => l.includes('hangup((('))).toHaveLength(1);
  });

  it('escapes what Mermaid would read as syntax, and lists the reactions', () => {
    // a bare # starts an entity in Mermaid labels
    const hash = flowToMermaid(
      compileDef({ menus: { main: { intro: 'x', keys: { '#': [{ outcome: 'a' }] } } } }),
    );
    expect(hash).toContain('n0 -->|"#35;: outcome a"| hangup');
    expect(text).toContain('r0[/"on failed: send sms"/]');
    expect(text).toContain('no response after 30m: outcome no-response');
    expect(text).toContain('|"*: back to main"|'); // * is fine inside quotes
  });

  it('folds copies into one box per menu', () => {
    const folded = flowToMermaid(compiled, { folded: true });
    const boxes = folded.split('\n').filter((l) => /^ {2}m\d+\["/.test(l));
    expect(boxes).toEqual(['  m0["main"]', '  m1["reschedule"]']);
    expect(folded).toContain('  m0 -.->|"timeout / wrong: retry"| m0');
    expect(folded).toContain('  m0 -->|"9"| m0');
  });

  it('names each node as the API and simulate do (its id), never as a paraphrase', () => {
    for (const node of compiled.nodes) {
      expect(lines).toContain(`  n${node.index}["${node.index}: ${node.id}"]`);
    }
    expect(text).not.toContain('(round');
    const sim = simulateFlow(compiled, {
      keys: ['9', 'timeout', '1'],
      vars: SAMPLE_VARS['appointment-reminder'],
    });
    const drawn = sim.machine.path.map((s) => s.node);
    expect(drawn).toEqual(['main', 'main/v2', 'main/v2/r1']);
    for (const node of drawn) expect(text).toMatch(new RegExp(`\\d+: ${node}"`));
  });

  it('draws the loop as a loop and the round limit as the limit, not as a key that ends the call', () => {
    const v3 = compiled.nodes.find((n) => n.id === 'main/v3')!;
    // unrolled: 9 goes back to main (its next round), and in the last round runs the limit
    expect(text).toContain('  n0 -->|"9: back to main"| n');
    expect(text).toContain(`  n${v3.index} -->|"after 3 rounds, 9: outcome no-input"| hangup`);
    expect(text).not.toContain('|"9: outcome no-input"|');
    // folded: the loop into the same box, and the limit to the hang-up
    const folded = flowToMermaid(compiled, { folded: true });
    expect(folded).toContain('  m0 -->|"9"| m0');
    expect(folded).toContain('  m0 -->|"after 3 rounds, 9: outcome no-input"| hangup');
    expect(folded).toContain('  m1 -->|"after 3 rounds, *"| hangup');
    expect(folded).not.toContain('|"9: outcome no-input"|');
  });

  it('hangs the on: box under the hang-up, after every edge (geometry: test/ui/diagram-geometry)', () => {
    const links = lines.filter((l) => l.includes('~~~'));
    expect(links).toEqual(['  hangup ~~~ r0', '  hangup ~~~ r1', '  hangup ~~~ r2']);
    const lastEdge = lines.findLastIndex((l) => / (-->|-\.->)\|/.test(l));
    expect(lines.indexOf(links[0]!)).toBeGreaterThan(lastEdge);
  });
});
