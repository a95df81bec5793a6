import { describe, expect, it } from 'vitest';
import { issuesToDetails } from '../../src/provider/issues.ts';
import { type MenuItem, menuIndex, SpeechMenu } from '../../src/provider/menu.ts';

const hook = {
  action: 'webhook',
  url: 'https://switchboard.example.com/hooks/speechcall',
} as const;
const item = (dtmfActions: Record<string, unknown>, extra: object = {}) => ({
  introUrl: 'https://cdn.example.com/intro.mp3',
  dtmfActions,
  ...extra,
});
const details = (input: unknown) => {
  const r = SpeechMenu.safeParse(input);
  return r.success ? [] : issuesToDetails(r.error.issues);
};

describe('SpeechMenu', () => {
  it('accepts every key, every action and both index spellings', () => {
    const keys = ['d0', 'd1', 'd2', 'd3', 'd4', 'd5', 'd6', 'd7', 'd8', 'd9', 'd*', 'd#', 'wrong'];
    const menu = [
      item(Object.fromEntries(keys.map((k) => [k, [hook, { action: 'gotoMenu', menu: 1 }]])), {
        idleTimeoutMsec: 8000,
      }),
      item({
        d1: [{ ...hook, body: { call: 'c1' }, headers: { 'X-Secret': 's' } }, { action: 'hangup' }],
        d2: [{ action: 'gotoMenu', menu: '0' }],
      }),
    ];
    const parsed = SpeechMenu.parse(menu);
    expect(parsed).toEqual(menu);
    expect(Object.keys(parsed[0]?.dtmfActions ?? {})).toHaveLength(13);
  });

  it.each(['d10', '1', 'd', 'D1', 'timeout', 'd*#'])('refuses the key %s, naming it', (key) => {
    expect(details([item({ [key]: [hook] })])).toEqual([
      expect.objectContaining({ path: `[0].dtmfActions.${key}`, code: 'UNKNOWN_FIELD' }),
    ]);
  });

  it('refuses a gotoMenu index that names no menu, as integer or string', () => {
    const d = details([
      item({ d1: [{ action: 'gotoMenu', menu: 2 }], d2: [{ action: 'gotoMenu', menu: '1' }] }),
      item({ d1: [{ action: 'gotoMenu', menu: '0' }] }),
    ]);
    expect(d).toEqual([
      expect.objectContaining({ path: '[0].dtmfActions.d1[0].menu', code: 'UNKNOWN_MENU' }),
    ]);
  });

  it.each([-1, 1.5, '01', 'one', '', null])('refuses the malformed index %j', (menu) => {
    const d = details([item({ d1: [{ action: 'gotoMenu', menu }] })]);
    expect(d.length).toBeGreaterThan(0);
    expect(d[0]?.path).toBe('[0].dtmfActions.d1[0].menu');
  });

  it('flags actions after a hangup', () => {
    const d = details([item({ d1: [hook, { action: 'hangup' }, hook, { action: 'hangup' }] })]);
    expect(d).toEqual([
      expect.objectContaining({ path: '[0].dtmfActions.d1[2]', code: 'ACTION_AFTER_HANGUP' }),
    ]);
  });

  it('reports a broken reference and a malformed menu in one answer', () => {
    const d = details([
      item({ d1: [{ action: 'gotoMenu', menu: 5 }], d2: [] }),
      { dtmfActions: {} },
    ]);
    expect(d.map((x) => x.path).sort()).toEqual([
      '[0].dtmfActions.d1[0].menu',
      '[0].dtmfActions.d2',
      '[1].introUrl',
    ]);
  });

  it.each([
    'ftp://example.com/hook',
    '/hooks/speechcall',
    'example.com/hook',
    'https://',
    'javascript:alert(1)',
  ])('refuses the webhook url %s', (url) => {
    expect(details([item({ d1: [{ action: 'webhook', url }] })])).toEqual([
      expect.objectContaining({ path: '[0].dtmfActions.d1[0].url', code: 'INVALID_URL' }),
    ]);
  });

  it('accepts http and https webhook urls with ports and queries', () => {
    for (const url of ['http://127.0.0.1:3000/hooks/speechcall', 'https://a.example/h?x=1']) {
      expect(details([item({ d1: [{ action: 'webhook', url }] })])).toEqual([]);
    }
  });

  it('refuses unknown actions, unknown fields, empty action lists and an empty menu', () => {
    expect(details([item({ d1: [{ action: 'transfer' }] })])[0]?.path).toBe(
      '[0].dtmfActions.d1[0].action',
    );
    expect(details([item({ d1: [{ action: 'hangup', after: 1 }] })])[0]?.path).toBe(
      '[0].dtmfActions.d1[0].after',
    );
    expect(details([item({ d1: [] })])[0]?.path).toBe('[0].dtmfActions.d1');
    expect(details([item({ d1: [hook] }, { idleTimeoutMsec: 0 })])[0]?.path).toBe(
      '[0].idleTimeoutMsec',
    );
    expect(details([])[0]?.code).toBe('TOO_SMALL');
  });

  it('types an item so compilers can build one', () => {
    const m: MenuItem = { introUrl: 'ivr_651854', dtmfActions: { 'd#': [{ action: 'hangup' }] } };
    expect(SpeechMenu.safeParse([m]).success).toBe(true);
    expect(menuIndex('12')).toBe(12);
    expect(menuIndex(3)).toBe(3);
  });
});
