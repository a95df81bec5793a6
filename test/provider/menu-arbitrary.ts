/**
 * Speechcall menus for property tests: most near a valid menu (what a server renders), some
 * at a rule's edge, some with one part replaced by anything at all.
 */
import fc from 'fast-check';
import { DTMF_KEYS } from '../../src/provider/menu.ts';

const odd = fc.oneof(
  fc.anything(),
  fc.constantFrom(undefined, null, '', 0, -0, -1, 1.5, 2 ** 53, '5', '01', Number.NaN, [], {}),
);

const url = fc.oneof(
  {
    weight: 20,
    arbitrary: fc.constantFrom(
      'https://switchboard.example.com/hooks/speechcall',
      'http://127.0.0.1:3000/hooks/speechcall',
      'https://crm.example.com/reschedule?id=1',
    ),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      'ftp://example.com/hook',
      '/hooks/speechcall',
      'https://',
      'http:example.com',
      '',
    ),
  },
);

const record = (value: fc.Arbitrary<unknown>) =>
  fc.oneof(
    {
      weight: 4,
      arbitrary: fc.dictionary(fc.constantFrom('token', 'call', 'x-id'), value, {
        noNullPrototype: true,
      }),
    },
    { weight: 1, arbitrary: fc.constantFrom(null, [], 'body') },
    // an own `__proto__` key, as JSON.parse makes one
    { weight: 1, arbitrary: fc.constant(JSON.parse('{"__proto__":{"token":"t"},"a":"b"}')) },
    {
      weight: 1,
      arbitrary: fc.constant(Object.assign(Object.create({ inherited: 1 }), { token: 't' })),
    },
    { weight: 1, arbitrary: fc.constant({ [Symbol('s')]: 'x', token: 't' }) },
  );

const webhook = fc.record(
  {
    action: fc.constant('webhook'),
    url: fc.oneof({ weight: 30, arbitrary: url }, { weight: 1, arbitrary: odd }),
    body: fc.oneof(
      {
        weight: 30,
        arbitrary: fc.dictionary(fc.constantFrom('token', 'call'), fc.string(), {
          noNullPrototype: true,
        }),
      },
      { weight: 1, arbitrary: record(odd) },
    ),
    headers: fc.oneof(
      {
        weight: 30,
        arbitrary: fc.dictionary(fc.constantFrom('X-Secret', 'x-id'), fc.string(), {
          noNullPrototype: true,
        }),
      },
      { weight: 1, arbitrary: record(odd) },
    ),
  },
  { requiredKeys: ['action', 'url'], noNullPrototype: true },
);

const gotoMenu = (menus: number) =>
  fc.record(
    {
      action: fc.constant('gotoMenu'),
      menu: fc.oneof(
        { weight: 12, arbitrary: fc.nat({ max: menus - 1 }) },
        { weight: 6, arbitrary: fc.nat({ max: menus - 1 }).map(String) },
        // one past the last menu
        { weight: 1, arbitrary: fc.constantFrom(menus, String(menus)) },
      ),
    },
    { noNullPrototype: true },
  );

/** Webhooks, then a hangup or a gotoMenu, as a rendered menu has them; or some other list. */
const actions = (menus: number) =>
  fc.oneof(
    {
      weight: 8,
      arbitrary: fc
        .tuple(
          fc.array(webhook, { minLength: 1, maxLength: 3 }),
          fc.oneof(
            fc.constant([{ action: 'hangup' }]),
            gotoMenu(menus).map((g) => [g]),
          ),
        )
        .map(([a, b]) => [...a, ...b]),
    },
    {
      weight: 1,
      arbitrary: fc.array(
        fc.oneof(
          webhook,
          gotoMenu(menus),
          fc.constantFrom({ action: 'hangup' }, { action: 'dial' }, { action: 'hangup', x: 1 }),
        ),
        { maxLength: 4 },
      ),
    },
  );

const key = fc.oneof(
  { weight: 12, arbitrary: fc.constantFrom(...DTMF_KEYS) },
  { weight: 1, arbitrary: fc.constantFrom('d10', '1', 'D1', 'timeout', '__proto__', 'toString') },
);

const item = (menus: number) =>
  fc.record(
    {
      introUrl: fc.oneof(
        { weight: 8, arbitrary: fc.constantFrom('https://cdn.example.com/a.mp3', 'ivr_651854') },
        { weight: 1, arbitrary: fc.constantFrom('', ' ') },
      ),
      idleTimeoutMsec: fc.constantFrom(8000, 1, 2 ** 53 - 1),
      dtmfActions: fc.dictionary(key, actions(menus), { maxKeys: 4, noNullPrototype: true }),
    },
    { requiredKeys: ['introUrl', 'dtmfActions'], noNullPrototype: true },
  );

/** A deep copy of arrays and plain objects (symbol keys too); anything else is kept. */
function copy(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(copy);
  if (value === null || typeof value !== 'object') return value;
  if (Object.getPrototypeOf(value) !== Object.prototype) return value;
  const out: Record<PropertyKey, unknown> = {};
  for (const k of Reflect.ownKeys(value)) {
    Object.defineProperty(out, k, {
      value: copy((value as Record<PropertyKey, unknown>)[k]),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return out;
}

/** Every (container, key) inside a value, the value itself aside. */
function places(value: unknown, out: Array<[Record<PropertyKey, unknown>, PropertyKey]> = []) {
  if (value !== null && typeof value === 'object') {
    for (const k of Reflect.ownKeys(value)) {
      if (Array.isArray(value) && k === 'length') continue;
      out.push([value as Record<PropertyKey, unknown>, k]);
      places((value as Record<PropertyKey, unknown>)[k], out);
    }
  }
  return out;
}

const mutation = fc.tuple(
  fc.nat(),
  fc.oneof(
    { weight: 3, arbitrary: fc.constant<'replace'>('replace') },
    { weight: 1, arbitrary: fc.constantFrom<'delete' | 'add'>('delete', 'add') },
  ),
  odd,
);

/** A menu of 1-4 items, mostly valid. */
const validish = fc
  .integer({ min: 1, max: 4 })
  .chain((n) => fc.array(item(n), { minLength: n, maxLength: n }));

/**
 * Menus near a valid one: as generated (mostly valid), through JSON as the API receives one
 * (no undefined, `__proto__` as an own key), or with one part replaced, removed or added.
 */
export const menuArb: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 6, arbitrary: validish },
  { weight: 1, arbitrary: validish.map((m) => JSON.parse(JSON.stringify(m)) as unknown) },
  {
    weight: 4,
    arbitrary: fc.tuple(validish, mutation).map(([menu, [at, how, value]]) => {
      const out = copy(menu);
      const all = places(out);
      const [container, k] = all[at % all.length]!;
      if (how === 'delete') delete container[k];
      else if (how === 'add' && !Array.isArray(container)) container[`x${at % 3}`] = value;
      else container[k] = value;
      return out;
    }),
  },
  { weight: 1, arbitrary: fc.constantFrom([], null, {}, 'menu') },
  { weight: 1, arbitrary: odd },
);
