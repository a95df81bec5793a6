/**
 * How many fallbacks a stored message has: `fallbackCountSql` (the timeline's lock,
 * message-lock.ts) must answer as the rule reads, written out plainly below (`fallbacksOf`),
 * for every payload, the docs' `fallback` object, the `fallbacks` list and a cascade's chain
 * included.
 */

import { sql } from 'drizzle-orm';
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { rowsOf } from '../../src/db/client.ts';
import { CASCADE_CHANNELS_AFTER_FIRST, fallbackCountSql } from '../../src/messages/timeline.ts';
import { describeEachEngine } from '../support/db.ts';

/** The rule as read: a cascade's chain, else a `fallbacks` list, else one `fallback` object. */
function fallbacksOf(payload: unknown, type: string): number {
  if (type === 'cascade') return CASCADE_CHANNELS_AFTER_FIRST;
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) return 0;
  const p = payload as { fallbacks?: unknown; fallback?: unknown };
  if (Array.isArray(p.fallbacks)) return p.fallbacks.length;
  const one = p.fallback;
  return typeof one === 'object' && one !== null && !Array.isArray(one) ? 1 : 0;
}

const payload = fc.record(
  {
    type: fc.constantFrom('viber_trans', 'sms', 'cascade'),
    fallback: fc.oneof(fc.record({ type: fc.constant('sms'), text: fc.string() }), fc.jsonValue()),
    fallbacks: fc.oneof(
      fc.array(fc.record({ type: fc.constant('sms') }), { maxLength: 4 }),
      fc.jsonValue(),
    ),
  },
  { requiredKeys: ['type'] },
);

describeEachEngine('the fallback count', (ctx) => {
  it('is the same in TypeScript and in SQL, for every payload', async () => {
    const samples = [
      { type: 'sms' },
      { type: 'sms', fallback: { type: 'sms', text: 'x' } },
      { type: 'sms', fallbacks: [{ type: 'sms' }, { type: 'sms' }] },
      { type: 'sms', fallback: null },
      { type: 'sms', fallback: [] },
      { type: 'sms', fallbacks: {} },
      // a cascade's chain: the channels after its first (cascade/index.md, "How It Works")
      { type: 'cascade', messageType: 'transaction' },
      [],
      'a string',
      ...fc.sample(payload, { numRuns: 300, seed: 19 }),
    ];
    // JSON round trip: what is stored is JSON, and -0 or undefined do not survive it
    const stored = samples.map((s) => JSON.parse(JSON.stringify(s)) as unknown);
    const rows = rowsOf<{ n: number }>(
      await ctx.database().db.execute(sql`
        select ${fallbackCountSql(sql`p.value`, sql`p.value->>'type'`)}::int as n
        from jsonb_array_elements(${JSON.stringify(stored)}::jsonb) with ordinality as p(value, i)
        order by p.i`),
    );
    // the type column holds the payload's type (submit writes both from one message)
    const typeOf = (s: unknown) => String((s as { type?: unknown } | null)?.type ?? '');
    expect(rows.map((r) => Number(r.n))).toEqual(stored.map((s) => fallbacksOf(s, typeOf(s))));
    // and the samples reach every answer: none, one, several
    expect(stored.map((s) => fallbacksOf(s, typeOf(s)))).toEqual(
      expect.arrayContaining([0, 1, 2, 3, 4]),
    );
  });
});
