import { describe, expect, it } from 'vitest';
import { checkFlow, type FlowDefinition, FlowDefinition as Schema } from '../../src/flows/index.ts';
import { EXAMPLES, exampleDefinition } from './helpers.ts';

const rules = (flow: FlowDefinition, opts = {}) =>
  checkFlow(Schema.parse(flow), opts).map((i) => [i.severity, i.rule, i.path.join('.')]);

const menu = (extra: Partial<FlowDefinition['menus'][string]> = {}) => ({ intro: 'x', ...extra });

describe('checkFlow', () => {
  it.each(EXAMPLES)('finds no error in %s', (id) => {
    expect(
      checkFlow(Schema.parse(exampleDefinition(id))).filter((i) => i.severity === 'error'),
    ).toEqual([]);
  });

  it('refuses a goto to an unknown menu and an unknown start', () => {
    expect(
      rules({ start: 'nope', menus: { main: menu({ keys: { '1': [{ goto: 'gone' }] } }) } }),
    ).toEqual([
      ['error', 'UNKNOWN_MENU', 'start'],
      ['error', 'UNKNOWN_MENU', 'menus.main.keys.1.0.goto'],
    ]);
  });

  it('refuses an unreachable menu, even one reachable only from another unreachable menu', () => {
    expect(
      rules({
        menus: { main: menu(), a: menu({ keys: { '1': [{ goto: 'b' }] } }), b: menu() },
      }),
    ).toEqual([
      ['error', 'UNREACHABLE_MENU', 'menus.a'],
      ['error', 'UNREACHABLE_MENU', 'menus.b'],
    ]);
  });

  it('refuses menus that can only go round, but not a menu whose wrong is left to the provider', () => {
    const loop = {
      menus: {
        main: menu({ keys: { '1': [{ goto: 'other' }] }, wrong: [{ goto: 'main' }] }),
        other: menu({
          keys: { '1': [{ goto: 'main' }] },
          wrong: [{ outcome: 'x' }, { goto: 'other' }],
        }),
      },
    };
    expect(rules(loop)).toEqual([
      ['error', 'NO_END', 'menus.main'],
      ['error', 'NO_END', 'menus.other'],
    ]);
    // without `wrong`, silence hangs up: that is a way to end
    const { wrong: _, ...other } = loop.menus.other;
    expect(rules({ menus: { ...loop.menus, other } })).toEqual([]);
    // an action list that just stops ends the call too
    expect(
      rules({
        menus: {
          ...loop.menus,
          other: { ...other, keys: { '1': [{ outcome: 'done' }] }, wrong: [{ goto: 'main' }] },
        },
      }),
    ).toEqual([]);
  });

  it('refuses actions after a goto or a hangup', () => {
    expect(
      rules({
        menus: {
          main: menu({
            keys: { '1': ['hangup', { outcome: 'late' }], '2': [{ goto: 'main' }, 'hangup'] },
          }),
        },
      }),
    ).toEqual([
      ['error', 'UNREACHABLE_ACTION', 'menus.main.keys.1.1'],
      ['error', 'UNREACHABLE_ACTION', 'menus.main.keys.2.1'],
    ]);
  });

  it('refuses undeclared and malformed templates, and warns of unused params', () => {
    expect(
      rules({
        params: { name: 'string', spare: { type: 'string', optional: true } },
        menus: {
          main: menu({
            intro: 'https://tts.example.com/{{name}}.mp3',
            keys: {
              '1': [
                {
                  webhook: {
                    url: 'https://crm.example.com/{{id}}',
                    headers: { 'X-Name': '{{name}}' },
                  },
                },
              ],
              '2': [{ send: { type: 'sms', text: 'Hi {{ name }} {{bad name}}' } }],
            },
          }),
        },
        on: { failed: [{ send: { type: 'sms', text: '{{who}}' } }] },
      }),
    ).toEqual([
      ['error', 'UNDECLARED_PARAM', 'menus.main.keys.1.0.webhook.url'],
      ['error', 'TEMPLATE_SYNTAX', 'menus.main.keys.2.0.send.text'],
      ['error', 'UNDECLARED_PARAM', 'on.failed.0.send.text'],
      ['warning', 'UNUSED_PARAM', 'params.spare'],
    ]);
  });

  it('checks every localized value against the languages', () => {
    expect(
      rules({
        languages: ['en', 'uk', 'en'],
        menus: {
          main: menu({
            intro: { en: 'a', uk: 'b' },
            reprompt: { en: 'a', de: 'c' },
            keys: { '1': [{ send: { type: 'sms', text: { en: 'hi' } } }] },
          }),
        },
      }),
    ).toEqual([
      ['error', 'DUPLICATE_LANGUAGE', 'languages.2'],
      ['error', 'UNKNOWN_LANGUAGE', 'menus.main.reprompt.de'],
      ['error', 'MISSING_LANGUAGE', 'menus.main.reprompt'],
      ['error', 'MISSING_LANGUAGE', 'menus.main.keys.1.0.send'.concat('.text')],
    ]);
  });

  it('refuses a default that does not fit its type, an sms without text and a zero timeout', () => {
    expect(
      rules({
        params: { n: { type: 'integer', default: 1.5 } },
        menus: {
          main: menu({
            timeout: '0s',
            keys: {
              '1': [{ send: { type: 'sms' } }, { webhook: 'https://crm.example.com/{{n}}' }],
            },
          }),
        },
      }),
    ).toEqual([
      ['error', 'INVALID_DURATION', 'menus.main.timeout'],
      ['error', 'PARAM_DEFAULT', 'params.n.default'],
      ['error', 'SEND_TEXT', 'menus.main.keys.1.0.send'],
    ]);
  });

  it('refuses a tree over the menu limit, counting retries and cycles', () => {
    const flow: FlowDefinition = {
      menus: {
        main: menu({ retries: 3, keys: { '1': [{ goto: 'main' }], '0': ['hangup'] } }),
      },
    };
    // 4 attempts x 3 rounds
    expect(rules(flow, { maxMenus: 12 })).toEqual([]);
    const over = checkFlow(Schema.parse(flow), { maxMenus: 11 });
    expect(over.map((i) => i.rule)).toEqual(['MENU_LIMIT']);
    expect(over[0]!.message).toBe(
      'the flow unrolls to 12 provider menus (retries and cycles copied), over the limit of 11',
    );
    expect(rules(flow, { maxMenus: 11, maxVisits: 2 })).toEqual([]);
  });
});
