/**
 * The hand check of speechcall menus (`parseSpeechMenuFast`) against the schema it stands in
 * for: it may leave a menu to the schema, but never accepts one the schema refuses or would
 * return changed.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { renderMenu, signNodeToken } from '../../src/flows/index.ts';
import { parseSpeechMenuFast, SpeechMenu } from '../../src/provider/menu.ts';
import { EXAMPLES, loadExample, SAMPLE_VARS } from '../flows/helpers.ts';
import { menuArb } from './menu-arbitrary.ts';

describe('parseSpeechMenuFast', () => {
  it('accepts only what SpeechMenu accepts, and SpeechMenu returns it unchanged', () => {
    let accepted = 0;
    let runs = 0;
    fc.assert(
      fc.property(menuArb, (menu) => {
        runs++;
        const fast = parseSpeechMenuFast(menu);
        if (fast === undefined) return;
        accepted++;
        expect(fast).toBe(menu);
        const full = SpeechMenu.safeParse(menu);
        expect(full.error?.issues).toBeUndefined();
        // what the server stores and sends is the menu itself rather than zod's copy
        expect(full.data).toStrictEqual(menu);
        expect(JSON.stringify(full.data)).toBe(JSON.stringify(menu));
      }),
      { numRuns: 5000 },
    );
    // the property says nothing unless the hand check takes a fair share of the menus
    expect(accepted / runs).toBeGreaterThan(0.1);
  });

  it('takes every menu an example flow renders, in each language', () => {
    const secret = { id: 'k1', key: 'secret' };
    for (const id of EXAMPLES) {
      const compiled = loadExample(id);
      for (const lang of compiled.languages) {
        const menu = renderMenu(compiled, {
          vars: SAMPLE_VARS[id],
          lang,
          hookUrl: 'http://127.0.0.1:3000/hooks/speechcall',
          hookHeaders: { 'X-Secret': 's' },
          tokenFor: (node, key) => signNodeToken({ callId: 'c1', node, key }, secret),
        });
        expect(parseSpeechMenuFast(menu), `${id} ${lang}`).toBe(menu);
        expect(SpeechMenu.parse(menu)).toStrictEqual(menu);
      }
    }
  });

  it.each([
    ['an empty intro', [{ introUrl: '', dtmfActions: {} }]],
    ['a key outside the set', [{ introUrl: 'a', dtmfActions: { d10: [{ action: 'hangup' }] } }]],
    ['an empty action list', [{ introUrl: 'a', dtmfActions: { d1: [] } }]],
    [
      'an action after a hangup',
      [{ introUrl: 'a', dtmfActions: { d1: [{ action: 'hangup' }, { action: 'hangup' }] } }],
    ],
    [
      'a gotoMenu past the end',
      [{ introUrl: 'a', dtmfActions: { d1: [{ action: 'gotoMenu', menu: 1 }] } }],
    ],
    [
      'a relative webhook URL',
      [{ introUrl: 'a', dtmfActions: { d1: [{ action: 'webhook', url: '/hooks' }] } }],
    ],
    [
      'a header that is not a string',
      [
        {
          introUrl: 'a',
          dtmfActions: { d1: [{ action: 'webhook', url: 'https://a.example', headers: { a: 1 } }] },
        },
      ],
    ],
    ['a zero timeout', [{ introUrl: 'a', idleTimeoutMsec: 0, dtmfActions: {} }]],
    ['an unknown field', [{ introUrl: 'a', dtmfActions: {}, x: 1 }]],
    ['no menu', []],
  ])('leaves %s to the schema', (_label, menu) => {
    expect(parseSpeechMenuFast(menu)).toBeUndefined();
    expect(SpeechMenu.safeParse(menu).success).toBe(false);
  });
});
