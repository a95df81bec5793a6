/**
 * JSON values that stress a road from JavaScript to jsonb: unicode, quotes, backslashes that
 * are not escapes, control characters, big and fractional numbers, nulls, nesting. Tests that
 * hold a JSON-parameter insert to drizzle's plain one store these through both.
 */
export const ODD_JSON_VALUES: readonly unknown[] = [
  'Ann',
  'Олена',
  '日本語 🎉',
  'quote " and \' apostrophe',
  'back\\slash \\u0041 not an escape',
  'line\nbreak\ttab',
  '',
  0,
  -1.5,
  1e21,
  Number.MAX_SAFE_INTEGER,
  true,
  null,
  { nested: { deeper: ['a', 1, null] } },
  [],
];
