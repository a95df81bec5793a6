import { describe, expect, it } from 'vitest';
import { executeMenu } from '../../src/flows/index.ts';
import type { SpeechMenu } from '../../src/provider/menu.ts';

const hook = (n: string) => ({ action: 'webhook' as const, url: `https://h.example.com/${n}` });
const menu: SpeechMenu = [
  {
    introUrl: 'a',
    dtmfActions: {
      d1: [hook('a1'), hook('crm'), { action: 'gotoMenu', menu: 1 }],
      'd#': [hook('a#'), { action: 'hangup' }],
      wrong: [hook('aw'), { action: 'gotoMenu', menu: '2' }],
    },
  },
  { introUrl: 'b', dtmfActions: { d2: [hook('b2')] } },
  { introUrl: 'c', dtmfActions: { d0: [{ action: 'hangup' }, hook('never')] } },
];

describe('the reference menu executor', () => {
  it('runs d<key>, posts webhooks in order and follows gotoMenu', () => {
    const run = executeMenu(menu, ['1']);
    expect(run).toEqual({
      steps: [
        {
          menu: 0,
          input: '1',
          entry: 'd1',
          webhooks: [{ url: 'https://h.example.com/a1' }, { url: 'https://h.example.com/crm' }],
          next: 1,
        },
      ],
      end: 'waiting',
      menu: 1,
      ignored: [],
    });
  });

  it('runs wrong for an undefined key and for silence; a string index works', () => {
    expect(executeMenu(menu, ['7']).steps[0]).toMatchObject({ entry: 'wrong', next: 2 });
    expect(executeMenu(menu, ['timeout']).steps[0]).toMatchObject({ entry: 'wrong', next: 2 });
  });

  it('hangs up on wrong when there is no wrong, and stops at hangup', () => {
    const run = executeMenu(menu, ['1', 'timeout', '5']);
    expect(run.steps[1]).toEqual({
      menu: 1,
      input: 'timeout',
      entry: null,
      webhooks: [],
      next: 'hangup',
    });
    expect(run).toMatchObject({ end: 'hangup', menu: null, ignored: ['5'] });
    expect(executeMenu(menu, ['timeout', '0']).steps[1]).toMatchObject({
      webhooks: [],
      next: 'hangup',
    });
  });

  it('reports a list that neither hangs up nor goes on', () => {
    expect(executeMenu(menu, ['1', '2'])).toMatchObject({ end: 'ran-out', menu: null });
  });

  it('refuses an input a caller cannot give', () => {
    expect(() => executeMenu(menu, ['d1'])).toThrow(/not a caller input/);
  });
});
