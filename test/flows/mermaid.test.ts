import { describe, expect, it } from 'vitest';
import { flowToMermaid } from '../../src/flows/index.ts';
import { compileDef, loadExample } from './helpers.ts';

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
    expect(text).toContain('|"*"|'); // * is fine inside quotes
  });

  it('folds copies into one box per menu', () => {
    const folded = flowToMermaid(compiled, { folded: true });
    const boxes = folded.split('\n').filter((l) => /^ {2}m\d+\["/.test(l));
    expect(boxes).toEqual(['  m0["main"]', '  m1["reschedule"]']);
    expect(folded).toContain('  m0 -.->|"timeout / wrong: retry"| m0');
    expect(folded).toContain('  m0 -->|"9"| m0');
  });
});
