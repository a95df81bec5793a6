/** The example flows do what a business would want from them (issue 5, point 6). */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { simulateFlow } from '../../src/flows/index.ts';
import { EXAMPLES, exampleSource, loadExample, SAMPLE_VARS } from './helpers.ts';

// The README's example under "The flow language", verbatim: flows/appointment-reminder.yaml
// must be this flow.
const README_EXAMPLE = `
title: Appointment reminder
params:
  name: string
  date: string
  clinicPhone: { type: phone, optional: true }
languages: [en, uk]            # the call's \`lang\` picks prompts; the first is the default
start: main                    # default: the first menu
menus:
  main:
    intro:                     # text Switchboard speaks, with the caller's own details (docs/speech.md)
      say:
        en: "Hello {{name}}. This is a reminder of your appointment on {{date}}. Press 1 to confirm, or 2 to change it."
        uk: "Добрий день, {{name}}. Нагадуємо про ваш запис на {{date}}. Натисніть 1, щоб підтвердити, або 2, щоб перенести."
    timeout: 8s                # idleTimeoutMsec
    retries: 2                 # wrong key or silence replays the menu twice more
    reprompt: { say: { en: "Sorry, I did not catch that. Press 1 to confirm, or 2 to change the appointment.", uk: "Вибачте, я не розчув. Натисніть 1, щоб підтвердити, або 2, щоб перенести запис." }, rate: 0.9 }
    keys:
      "1": [ { outcome: confirmed }, { send: { type: sms, text: "Thanks {{name}}, see you on {{date}}." } }, hangup ]
      "2": [ { goto: reschedule } ]
      "9": [ { goto: main } ]
    wrong: [ { outcome: no-input }, hangup ]     # once the retries are used up
  reschedule:
    intro: "ivr_651854"        # or audio recorded and uploaded to the provider, as an audio id
    keys:
      "1": [ { outcome: reschedule-requested }, { webhook: "https://crm.example.com/reschedule" }, hangup ]
      "*": [ { goto: main } ]
on:                            # reactions outside the menus
  failed:  [ { send: { type: sms, text: "We could not reach you about {{date}}." } } ]
  expired: [ { outcome: unreachable } ]
  noResponse: { after: 30m, do: [ { outcome: no-response } ] }
assert:                        # proven on every path by flows validate (docs/flows.md)
  outcomeOnEveryPath: false    # 2, then silence: reschedule hangs up with no outcome
  maxMessages: { sms: 2 }      # key 1's SMS, and on: failed's in the same call
  paths: [ { keys: [1], outcome: confirmed }, { keys: [2, 1], outcome: reschedule-requested } ]
`;

const play = (
  id: (typeof EXAMPLES)[number],
  keys: string[],
  lang?: string,
  statuses: string[] = [],
) => {
  const sim = simulateFlow(loadExample(id), {
    keys,
    vars: SAMPLE_VARS[id],
    to: '+380501234567',
    ...(lang ? { lang } : {}),
    statuses,
  });
  expect(sim.differences).toEqual([]);
  return sim;
};

describe('the example flows', () => {
  it("include the README's appointment reminder as written, with the schema reference", () => {
    const source = exampleSource('appointment-reminder');
    expect(parse(source)).toEqual(parse(README_EXAMPLE));
    for (const line of README_EXAMPLE.trim().split('\n')) expect(source).toContain(line);
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    for (const line of README_EXAMPLE.trim().split('\n')) expect(readme).toContain(line);
  });

  it.each(EXAMPLES)('%s has params, two languages and the editor schema reference', (id) => {
    const compiled = loadExample(id);
    expect(Object.keys(compiled.params).length).toBeGreaterThan(0);
    expect(compiled.languages).toHaveLength(2);
    expect(exampleSource(id).split('\n')[0]).toBe('# yaml-language-server: $schema=./schema.json');
    // every prompt differs by language somewhere: the two languages are real
    expect(compiled.nodes.some((n) => new Set(Object.values(n.intro)).size === 2)).toBe(true);
  });

  it('order confirmation: 1 confirms with an SMS carrying the tracking link, in the call language', () => {
    const en = play('order-confirmation', ['1']);
    expect(en.outcome).toBe('confirmed');
    expect(en.machine.sends).toEqual([
      {
        id: 'confirm:1:1',
        message: {
          type: 'sms',
          text: 'Acme Shop: order A-1001 (1 250 UAH) is confirmed. Track it: https://shop.example.com/t/A-1001',
          to: '+380501234567',
        },
      },
    ]);
    expect(en.machine.providerWebhooks).toEqual([
      {
        url: 'https://shop.example.com/hooks/orders/A-1001/confirmed',
        body: { orderId: 'A-1001', channel: 'voice' },
      },
    ]);
    const uk = play('order-confirmation', ['2', '1'], 'uk');
    expect(uk.outcome).toBe('cancelled');
    expect(uk.machine.sends[0]!.message.text).toBe(
      'Acme Shop: замовлення A-1001 скасовано. Шкода, Taras.',
    );
  });

  it('satisfaction survey: each of 1-5 is its own outcome with a Viber thank-you (SMS fallback)', () => {
    const outcomes = ['1', '2', '3', '4', '5'].map((k) => {
      const sim = play('satisfaction-survey', [k]);
      expect(sim.machine.sends).toHaveLength(1);
      expect(sim.machine.sends[0]!.message).toEqual({
        type: 'viber_trans',
        from: 'AcmeSupport',
        to: '+380501234567',
        text: 'Thank you for your rating, Olena! Ticket T-77.',
        fallbacks: [
          {
            type: 'sms',
            text: 'Thank you for your rating, Olena!',
            to: '+380501234567',
            from: 'AcmeSupport',
          },
        ],
      });
      expect(sim.machine.ended).toBe(true);
      return sim.outcome;
    });
    expect(outcomes).toEqual(['score-1', 'score-2', 'score-3', 'score-4', 'score-5']);
    // low scores alert the support lead through the provider
    expect(play('satisfaction-survey', ['2']).machine.providerWebhooks).toHaveLength(1);
    expect(play('satisfaction-survey', ['4']).machine.providerWebhooks).toHaveLength(0);
    expect(play('satisfaction-survey', ['timeout', 'timeout', 'timeout']).outcome).toBe('no-score');
  });

  it('delivery failure: voice first, the same choices by SMS when the call fails or expires', () => {
    for (const status of ['failed', 'expired']) {
      const sim = play('delivery-failure', [], undefined, ['sent', status]);
      const sends = sim.reactions.filter((e) => e.type === 'send');
      expect(sends).toEqual([
        {
          type: 'send',
          id: `on:${status}:1`,
          message: {
            type: 'sms',
            text: 'Ivan, не вдалося доставити посилку P-5. Оберіть повторну доставку або самовивіз: https://logistics.example.com/p/P-5',
            to: '+380501234567',
          },
        },
      ]);
      expect(sim.outcome).toBe(`call-${status}`);
    }
    // delivered and answered: no SMS fallback, the choice is made by voice
    const answered = play('delivery-failure', ['2'], 'en', ['delivered']);
    expect(answered.outcome).toBe('pickup-chosen');
    expect(answered.machine.sends.map((s) => s.message.text)).toEqual([
      'Parcel P-5 is waiting for you at Kyiv, Khreshchatyk 1',
    ]);
    expect(answered.reactions).toEqual([]);
  });
});
