/**
 * A `say:` text split at its params (src/speech/compose.ts): the flow's words are pieces
 * shared by every call, the filled-in params pieces of the call's own. Params next to each
 * other are one piece, text with nothing to say is dropped, and a param with no value leaves
 * no piece behind, in any script.
 */
import { describe, expect, it } from 'vitest';
import { type PromptPiece, promptPieces } from '../../src/speech/compose.ts';

/** Pieces as `+personal` / `shared` strings, easier to read in a failure. */
const pieces = (template: string, vars: Record<string, unknown> = {}) =>
  promptPieces(template, vars).map((p: PromptPiece) => (p.personal ? `+${p.text}` : p.text));

describe('promptPieces', () => {
  it('keeps a text without params as one shared piece', () => {
    expect(promptPieces('Press 1 to confirm, or 2 to cancel.', {})).toEqual([
      { text: 'Press 1 to confirm, or 2 to cancel.', personal: false },
    ]);
    // a var the text does not name changes nothing
    expect(pieces('Press 1 to confirm.', { name: 'Maria' })).toEqual(['Press 1 to confirm.']);
  });

  it('splits at a param at the start, in the middle and at the end', () => {
    expect(pieces('{{name}}, your order is ready', { name: 'Maria' })).toEqual([
      '+Maria',
      ', your order is ready',
    ]);
    expect(pieces('Hello {{name}}, your order is ready', { name: 'Maria' })).toEqual([
      'Hello',
      '+Maria',
      ', your order is ready',
    ]);
    expect(pieces('Your code is {{code}}', { code: '4821' })).toEqual(['Your code is', '+4821']);
    expect(pieces('{{name}}', { name: 'Maria' })).toEqual(['+Maria']);
  });

  it('reads a template with spaces inside the braces', () => {
    expect(pieces('Hello {{ name }}!', { name: 'Maria' })).toEqual(['Hello', '+Maria']);
  });

  it('speaks any value as text: numbers, including 0', () => {
    expect(pieces('You have {{n}} new messages', { n: 0 })).toEqual([
      'You have',
      '+0',
      'new messages',
    ]);
    expect(pieces('Total {{sum}} hryvnias', { sum: 1250.5 })).toEqual([
      'Total',
      '+1250.5',
      'hryvnias',
    ]);
  });

  it('joins params next to each other into one piece, with what stands between them', () => {
    expect(pieces('{{first}} {{last}}', { first: 'Maria', last: 'Petrenko' })).toEqual([
      '+Maria Petrenko',
    ]);
    expect(pieces('Hello {{last}}, {{first}}! Bye.', { first: 'Maria', last: 'Petrenko' })).toEqual(
      ['Hello', '+Petrenko, Maria', '! Bye.'],
    );
    expect(pieces('{{a}}{{b}}', { a: 'A', b: '7' })).toEqual(['+A7']);
  });

  it('keeps params apart when words stand between them', () => {
    expect(pieces('{{first}} and {{second}}', { first: 'Maria', second: 'Ivan' })).toEqual([
      '+Maria',
      'and',
      '+Ivan',
    ]);
  });

  it('drops text with nothing to say: punctuation before, after or around the params', () => {
    expect(pieces('Your code is {{code}}.', { code: '4821' })).toEqual(['Your code is', '+4821']);
    expect(pieces('... {{name}} ...', { name: 'Maria' })).toEqual(['+Maria']);
    expect(pieces('“{{name}}”!', { name: 'Maria' })).toEqual(['+Maria']);
    // punctuation with words is what the flow says: kept with them
    expect(pieces('{{name}} - call us back', { name: 'Maria' })).toEqual([
      '+Maria',
      '- call us back',
    ]);
  });

  it('drops a param that is missing, null, empty or has nothing to say, and its joiner', () => {
    const template = 'Hello {{name}}, your order is ready';
    const without = ['Hello', ', your order is ready'];
    expect(pieces(template, {})).toEqual(without);
    expect(pieces(template, { name: null })).toEqual(without);
    expect(pieces(template, { name: undefined })).toEqual(without);
    expect(pieces(template, { name: '' })).toEqual(without);
    expect(pieces(template, { name: ' - ' })).toEqual(without);
    expect(pieces('{{first}} {{last}}!', { first: 'Maria' })).toEqual(['+Maria']);
    expect(pieces('{{first}} {{last}}', { last: 'Petrenko' })).toEqual(['+Petrenko']);
    // nothing at all to say: no pieces (the planner refuses such a prompt)
    expect(pieces('{{name}}.', {})).toEqual([]);
  });

  it('trims each piece, never leaving one empty', () => {
    const all = promptPieces('  Hello   {{name}}   bye  ', { name: '  Maria  ' });
    expect(all).toEqual([
      { text: 'Hello', personal: false },
      { text: 'Maria', personal: true },
      { text: 'bye', personal: false },
    ]);
  });

  it('reads Ukrainian: letters and punctuation of any script', () => {
    expect(
      pieces('Привіт, {{name}}! Ваше замовлення {{order}} готове.', {
        name: 'Олена',
        order: 'А-17',
      }),
    ).toEqual(['Привіт,', '+Олена', '! Ваше замовлення', '+А-17', 'готове.']);
    // a dash and guillemets between two params are no words: one piece
    expect(pieces('«{{name}} — {{surname}}»', { name: 'Олена', surname: 'Коваль' })).toEqual([
      '+Олена — Коваль',
    ]);
    // an apostrophe inside a word belongs to it
    expect(pieces("{{name}}, п'ятниця", { name: 'Ігор' })).toEqual(['+Ігор', ", п'ятниця"]);
  });
});
