import { describe, expect, it } from 'vitest';
import { compileFlow, type FlowDefinition, validateVars } from '../../src/flows/index.ts';

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
        count: '3',
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
      ['vars.amount', 'invalid_type'],
      ['vars.count', 'invalid_type'],
      ['vars.date', 'invalid_type'],
      ['vars.link', 'invalid_type'],
      ['vars.name', 'required'],
      ['vars.phone', 'invalid_type'],
      ['vars.vip', 'invalid_type'],
      ['vars.nmae', 'unknown_param'],
    ]);
  });

  it('refuses vars that are not an object', () => {
    expect(validateVars(compiled, ['x'])).toEqual({
      ok: false,
      details: [{ path: 'vars', code: 'invalid_type', message: 'vars must be an object' }],
    });
  });
});
