import { describe, expect, it } from 'vitest';
import {
  compileFlow,
  type FlowDefinition,
  readTextVars,
  validateVars,
} from '../../src/flows/index.ts';

const definition: FlowDefinition = {
  params: {
    name: 'string',
    count: 'integer',
    amount: 'number',
    vip: { type: 'boolean', default: false },
    phone: { type: 'phone', optional: true },
    date: 'date',
    link: { type: 'url', optional: true },
  },
  menus: {
    main: {
      intro:
        'https://x.example.com/{{name}}/{{count}}/{{amount}}/{{vip}}/{{phone}}/{{date}}/{{link}}',
    },
  },
};
const compiled = compileFlow({ id: 'vars', definition });

describe('validateVars', () => {
  it('accepts good vars, fills defaults and normalizes', () => {
    expect(
      validateVars(compiled, {
        name: 'Ann',
        count: 3,
        amount: 12.5,
        phone: '+380 50 123 45 67',
        date: '2025-02-28',
      }),
    ).toEqual({
      ok: true,
      vars: {
        name: 'Ann',
        count: 3,
        amount: 12.5,
        vip: false,
        phone: '+380501234567',
        date: '2025-02-28',
      },
    });
  });

  it('names every bad var by path', () => {
    const result = validateVars(compiled, {
      count: 1.5,
      amount: 'lots',
      vip: 'yes',
      phone: '12',
      date: '2025-02-30',
      link: 'ftp://x',
      nmae: 'typo',
    });
    expect(result.ok).toBe(false);
    if (result.ok) return;
    // params in name order, then what the flow does not declare
    expect(result.details.map((d) => [d.path, d.code])).toEqual([
      ['vars.amount', 'INVALID_TYPE'],
      ['vars.count', 'INVALID_VALUE'],
      ['vars.date', 'INVALID_FORMAT'],
      ['vars.link', 'INVALID_FORMAT'],
      ['vars.name', 'REQUIRED'],
      ['vars.phone', 'INVALID_FORMAT'],
      ['vars.vip', 'INVALID_TYPE'],
      ['vars.nmae', 'UNKNOWN_PARAM'],
    ]);
  });

  it('converts nothing: each var must already be of its JSON type', () => {
    const result = validateVars(compiled, {
      name: 5,
      count: '3',
      amount: '12.5',
      vip: 'true',
      date: 20250228,
    });
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.details).toEqual([
      {
        path: 'vars.amount',
        code: 'INVALID_TYPE',
        message: 'a number param takes a number as a JSON number, not a string',
      },
      {
        path: 'vars.count',
        code: 'INVALID_TYPE',
        message: 'an integer param takes an integer as a JSON number, not a string',
      },
      {
        path: 'vars.date',
        code: 'INVALID_TYPE',
        message: 'a date param takes a date as a string, not a number',
      },
      {
        path: 'vars.name',
        code: 'INVALID_TYPE',
        message: 'a string param takes a string, not a number',
      },
      {
        path: 'vars.vip',
        code: 'INVALID_TYPE',
        message: 'a boolean param takes true or false, not a string',
      },
    ]);
  });

  it("reads vars given as text by their params' types, and leaves the rest to be judged", () => {
    const text = { name: '5', count: '3', amount: ' 12.5 ', vip: 'true', date: '2025-02-28' };
    expect(readTextVars(compiled.params, { ...text, other: '1' })).toEqual({
      name: '5',
      count: 3,
      amount: 12.5,
      vip: true,
      date: '2025-02-28',
      other: '1',
    });
    expect(validateVars(compiled, readTextVars(compiled.params, text))).toMatchObject({
      ok: true,
      vars: { name: '5', count: 3, amount: 12.5, vip: true },
    });
    // text that is not a number stays text, and is refused as one
    expect(readTextVars(compiled.params, { count: 'three' })).toEqual({ count: 'three' });
  });

  it('refuses vars that are not an object', () => {
    expect(validateVars(compiled, ['x'])).toEqual({
      ok: false,
      details: [{ path: 'vars', code: 'INVALID_TYPE', message: 'vars must be an object' }],
    });
  });
});
