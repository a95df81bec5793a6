import { describe, expect, it } from 'vitest';
import {
  FlowDefinition,
  flowToMermaid,
  SPOKEN_LABEL_LENGTH,
  simulateFlow,
  spokenLine,
} from '../../src/flows/index.ts';
import { compileDef, loadExample, SAMPLE_VARS } from './helpers.ts';

/** Mermaid source without the boxes' spoken-prompt lines (tested on their own below). */
const withoutSpoken = (source: string) => source.replace(/<br\/>🔊 #quot;.*?#quot;/g, '');

describe('flowToMermaid', () => {
  const compiled = loadExample('appointment-reminder');
  // whether the example's prompts are recorded or spoken, its boxes are named the same
  const text = withoutSpoken(flowToMermaid(compiled));
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
    const folded = withoutSpoken(flowToMermaid(compiled, { folded: true }));
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

describe('flowToMermaid: spoken prompts', () => {
  const flow = (extra: Record<string, unknown> = {}) =>
    compileDef(
      FlowDefinition.parse({
        params: { name: 'string' },
        languages: ['en', 'uk'],
        menus: {
          main: {
            intro: { say: { en: 'Hello {{name}}', uk: 'Привіт, {{name}}' }, voice: 'f2' },
            retries: 1,
            reprompt: { say: 'Sorry, I did not get that. Press 1 to confirm your visit.' },
            keys: { '1': [{ goto: 'recorded' }] },
            wrong: [{ outcome: 'no' }],
          },
          recorded: { intro: 'https://cdn.example.com/a.mp3', wrong: [{ outcome: 'yes' }] },
        },
        ...extra,
      }),
    );

  it('shows the text under the name, in the default language; a recorded prompt shows nothing', () => {
    const text = flowToMermaid(flow());
    expect(text).toContain('  n0["0: main<br/>🔊 #quot;Hello {{name}}#quot;"]');
    expect(text).toContain('  n1["1: recorded"]');
    // a retry plays the reprompt, cut short
    expect(text).toContain(
      '  n2["2: main/r1<br/>🔊 #quot;Sorry, I did not get that. Press 1 to c…#quot;"]',
    );
    const uk = flowToMermaid(flow({ languages: ['uk', 'en'] }));
    expect(uk).toContain('  n0["0: main<br/>🔊 #quot;Привіт, {{name}}#quot;"]');
  });

  it('shows the intro on a folded box, not the reprompt', () => {
    const folded = flowToMermaid(flow(), { folded: true });
    expect(folded.split('\n').filter((l) => /^ {2}m\d+\["/.test(l))).toEqual([
      '  m0["main<br/>🔊 #quot;Hello {{name}}#quot;"]',
      '  m1["recorded"]',
    ]);
  });

  it('cuts at SPOKEN_LABEL_LENGTH characters, whitespace collapsed, never splitting a letter', () => {
    const node = (say: string) => ({ intro: { en: { say } } });
    const exact = 'x'.repeat(SPOKEN_LABEL_LENGTH);
    expect(spokenLine(node(exact), 'en')).toBe(`🔊 "${exact}"`);
    expect(spokenLine(node(`${exact}y`), 'en')).toBe(`🔊 "${exact.slice(1)}…"`);
    expect(spokenLine(node('Hello\n   {{name}},\tbye'), 'en')).toBe('🔊 "Hello {{name}}, bye"');
    // the cut does not end in a space before the ellipsis
    const spaced = `${'a'.repeat(SPOKEN_LABEL_LENGTH - 2)} bcd`;
    expect(spokenLine(node(spaced), 'en')).toBe(`🔊 "${'a'.repeat(SPOKEN_LABEL_LENGTH - 2)}…"`);
    // characters outside the BMP count as one, and are kept whole
    const emoji = '😀'.repeat(SPOKEN_LABEL_LENGTH + 5);
    expect(spokenLine(node(emoji), 'en')).toBe(`🔊 "${'😀'.repeat(SPOKEN_LABEL_LENGTH - 1)}…"`);
    expect(spokenLine({ intro: { en: 'https://x/a.wav' } }, 'en')).toBeUndefined();
    // a language the node lacks: its first one
    expect(spokenLine(node('Hi'), 'uk')).toBe('🔊 "Hi"');
  });

  it('escapes what Mermaid would read as syntax in the text', () => {
    const text = flowToMermaid(
      compileDef(
        FlowDefinition.parse({
          menus: {
            main: { intro: { say: 'Press "#" or <1>, then ]' }, wrong: [{ outcome: 'x' }] },
          },
        }),
      ),
    );
    expect(text).toContain(
      '  n0["0: main<br/>🔊 #quot;Press #quot;#35;#quot; or #lt;1#gt;, then ]#quot;"]',
    );
  });
});
