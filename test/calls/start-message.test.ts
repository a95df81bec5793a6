/**
 * A call's speechcall message is validated with its menu checked by hand when it can be
 * (`prepareCallMessage`); it must answer exactly as the provider models do on the whole
 * message (`prepareCallMessageWithSchemas`), accepted or refused.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { prepareCallMessage, prepareCallMessageWithSchemas } from '../../src/calls/start.ts';
import { renderMenu, signNodeToken } from '../../src/flows/index.ts';
import { EXAMPLES, loadExample, SAMPLE_VARS } from '../flows/helpers.ts';
import { menuArb } from '../provider/menu-arbitrary.ts';

const now = new Date('2026-11-22T00:00:00Z');

const rendered = EXAMPLES.flatMap((id) => {
  const compiled = loadExample(id);
  return compiled.languages.map((lang) =>
    renderMenu(compiled, {
      vars: SAMPLE_VARS[id],
      lang,
      hookUrl: 'http://127.0.0.1:3000/hooks/speechcall',
      tokenFor: (node, key) => signNodeToken({ callId: 'c1', node, key }, { id: 'k1', key: 's' }),
    }),
  );
});

/** The outcome without the fresh message id, which differs on every call. */
function withoutId(out: ReturnType<typeof prepareCallMessage>) {
  return {
    results: out.results,
    prepared: out.prepared.map(({ row: { id, ...row }, ...p }) => ({
      ...p,
      row,
      hasId: typeof id === 'string',
    })),
  };
}

describe('prepareCallMessage', () => {
  it('answers as the provider models do on the whole message', () => {
    const message = fc.record({
      from: fc.constantFrom('Clinic', '', 'ABCDEFGHIJKL', '+380501234567'),
      to: fc.constantFrom('+380501234567', '+447911123456', '0501234567', ''),
      customerMessageId: fc.constantFrom('call:c1', 'c'.repeat(257)),
      menu: fc.oneof(
        { weight: 1, arbitrary: fc.constantFrom(...rendered) },
        { weight: 3, arbitrary: menuArb },
      ),
    });
    fc.assert(
      fc.property(message, (m) => {
        const got = withoutId(prepareCallMessage(m, 'c1', now));
        const want = withoutId(prepareCallMessageWithSchemas(m, 'c1', now));
        expect(got).toStrictEqual(want);
        // stored as JSON: the same document
        expect(JSON.stringify(got)).toBe(JSON.stringify(want));
      }),
      { numRuns: 2000 },
    );
  });

  it('stores the rendered menu itself, not a copy', () => {
    const menu = rendered[0]!;
    const out = prepareCallMessage(
      { from: 'Clinic', to: '+380501234567', menu, customerMessageId: 'call:c1' },
      'c1',
      now,
    );
    expect((out.prepared[0]!.row.payload as { menu: unknown }).menu).toBe(menu);
  });
});
