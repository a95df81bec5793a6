/**
 * 10 000 fuzzed bodies per hook and API route that takes one (every POST of /openapi.json, so
 * routes added later are fuzzed too), and 1000 fuzzed paths and queries per GET route,
 * in-process on real Postgres: JSON of every shape, near-valid messages and callbacks with
 * wrong types, huge and odd numbers, unicode (lone surrogates and U+0000 too), broken JSON,
 * wrong content types. None may get a 5xx, and the app must never throw.
 * FUZZ_RUNS and FUZZ_GET_RUNS change the counts.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import { buildTestApp } from '../support/app.ts';
import { availableEngines, createTestDatabase, type TestDatabase } from '../support/db.ts';

const onPostgres = availableEngines().includes('postgres');
const RUNS = Number(process.env.FUZZ_RUNS ?? 10_000);
const GET_RUNS = Number(process.env.FUZZ_GET_RUNS ?? 1000);
const BATCH = 50;

interface Route {
  method: 'get' | 'post';
  path: string;
}

const weird = fc.oneof(
  fc.constantFrom(
    0,
    -0,
    1e308,
    -1e308,
    5e-324,
    Number.MAX_SAFE_INTEGER + 2,
    2 ** 64,
    -1,
    0.5,
    '',
    ' ',
    'null',
    '\u0000',
    '\uD800',
    '🎉'.repeat(200),
    'Ω≈ç√∫',
    '+380501234567',
    '+0000',
    '2026-13-45T25:61:00Z',
    '1e999',
    'delivered',
    'DELIVRD',
    'x'.repeat(5000),
    true,
    false,
    null,
    [],
    {},
  ),
  fc.string({ unit: 'grapheme', maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 20 }),
  fc.integer(),
  fc.double(),
  fc.bigInt({ min: -(2n ** 80n), max: 2n ** 80n }).map((b) => b.toString()),
);

const value: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 3, arbitrary: weird },
  { weight: 1, arbitrary: fc.array(weird, { maxLength: 4 }) },
  { weight: 1, arbitrary: fc.dictionary(fc.string({ maxLength: 8 }), weird, { maxKeys: 4 }) },
);

/** objects with the field names Switchboard looks for, holding anything */
const shaped = (keys: string[]) =>
  fc.dictionary(fc.constantFrom(...keys), value, { maxKeys: keys.length });

const MESSAGE_KEYS = [
  'from',
  'to',
  'type',
  'text',
  'customerMessageId',
  'ttl',
  'dtSend',
  'dtExpire',
  'messageData',
  'fallbacks',
  'menu',
];
const CALLBACK_KEYS = [
  'customerMessageId',
  'cmid',
  'messageId',
  'msg_id',
  'mid',
  'status',
  'state',
  'dlr_status',
  'stat',
  'event',
  'timestamp',
  'time',
  'channel',
  'fallbackIndex',
  'error',
  'from',
  'sender',
  'text',
  'message',
  'action',
  'token',
];
const CALL_KEYS = ['flow', 'to', 'from', 'vars', 'lang', 'calls'];

const payload: fc.Arbitrary<unknown> = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }),
  shaped(MESSAGE_KEYS).map((m) => ({ messages: [m] })),
  fc.array(shaped(MESSAGE_KEYS), { maxLength: 5 }).map((messages) => ({ messages })),
  shaped(CALLBACK_KEYS),
  fc.array(shaped(CALLBACK_KEYS), { maxLength: 5 }),
  shaped(CALLBACK_KEYS).map((e) => ({ events: [e] })),
  shaped(CALL_KEYS),
  shaped(['from', 'to', 'mid', 'action']).map((b) => ({ ...b, action: { token: b.action } })),
  value,
);

function serialize(v: unknown): string {
  return JSON.stringify(v, (_k, x) => (typeof x === 'bigint' ? x.toString() : x)) ?? 'null';
}

const body: fc.Arbitrary<string> = fc.oneof(
  { weight: 6, arbitrary: payload.map(serialize) },
  // broken JSON: a valid body cut short, or any text at all
  {
    weight: 1,
    arbitrary: payload.map(serialize).chain((s) => fc.nat(s.length).map((n) => s.slice(0, n))),
  },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 200 }) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      '',
      '{',
      '[1,',
      '{"messages":',
      'a=1&b=%ZZ&status=delivered',
      '\u0000\u0001',
    ),
  },
);

const contentType = fc.constantFrom(
  'application/json',
  'application/json',
  'application/json; charset=utf-8',
  'application/x-www-form-urlencoded',
  'text/plain',
  'multipart/form-data; boundary=xyz',
  'application/xml',
  '',
);

const segment = fc.oneof(
  fc.uuid(),
  fc.string({ unit: 'grapheme', minLength: 1, maxLength: 60 }),
  fc.constantFrom('..', '%', '%00', 'null', ' ', 'x'.repeat(2000), 'a/b'),
);

const query = fc
  .dictionary(
    fc.constantFrom(
      'to',
      'status',
      'type',
      'callId',
      'since',
      'until',
      'limit',
      'cursor',
      'from',
      'flow',
      'x',
    ),
    fc.oneof(
      fc.string({ maxLength: 30 }),
      fc.constantFrom('-1', '0', '1e9', '999999999999', 'NaN', '2026-01-01', 'not-a-date'),
    ),
    { maxKeys: 4 },
  )
  .map((q) => new URLSearchParams(q).toString());

function pathFor(template: string, params: string[]): string {
  let i = 0;
  return template.replace(/\{[^}]+\}/g, () => encodeURIComponent(params[i++] ?? 'x'));
}

describe('fuzzed requests', () => {
  let db: TestDatabase | undefined;
  let app: App;
  let routes: Route[] = [];
  beforeAll(async () => {
    if (!onPostgres) return;
    db = await createTestDatabase('postgres');
    app = buildTestApp(db.database).app;
    const doc = (await (await app.request('/openapi.json')).json()) as {
      paths: Record<string, Record<string, unknown>>;
    };
    routes = Object.entries(doc.paths).flatMap(([path, methods]) =>
      (['get', 'post'] as const).filter((m) => m in methods).map((method) => ({ method, path })),
    );
  });
  afterAll(async () => {
    await db?.drop();
  });

  it.runIf(onPostgres)('covers the hooks and the API', () => {
    const paths = routes.map((r) => `${r.method} ${r.path}`);
    expect(paths).toEqual(
      expect.arrayContaining([
        'post /hooks/delivery',
        'post /hooks/viber',
        'post /v1/messages',
        'get /v1/messages/{ref}',
      ]),
    );
  });

  it.runIf(onPostgres)(
    'answers every request with something other than a 5xx, and never throws',
    async () => {
      const failures: string[] = [];
      for (const route of routes) {
        if (route.path === '/openapi.json' || route.path === '/docs') continue;
        const request = fc.record({
          body,
          contentType,
          params: fc.array(segment, { minLength: 2, maxLength: 2 }),
          query,
        });
        const runs = route.method === 'post' ? RUNS : GET_RUNS;
        await fc
          .assert(
            fc.asyncProperty(
              fc.array(request, { minLength: BATCH, maxLength: BATCH }),
              async (batch) => {
                const answers = await Promise.all(
                  batch.map(async (r) => {
                    const url = `${pathFor(route.path, r.params)}${r.query ? `?${r.query}` : ''}`;
                    const res =
                      route.method === 'post'
                        ? await app.request(url, {
                            method: 'POST',
                            body: r.body,
                            headers: r.contentType ? { 'content-type': r.contentType } : {},
                          })
                        : await app.request(url);
                    const text = await res.text();
                    return { status: res.status, text, r };
                  }),
                );
                const bad = answers.find((a) => a.status >= 500);
                if (bad) {
                  failures.push(
                    `${route.method} ${route.path} -> ${bad.status} ${bad.text.slice(0, 300)} for ${JSON.stringify(bad.r).slice(0, 500)}`,
                  );
                  return false;
                }
                return true;
              },
            ),
            { numRuns: Math.ceil(runs / BATCH), endOnFailure: true },
          )
          .catch((err: unknown) => {
            failures.push(String(err).slice(0, 2000));
          });
      }
      expect(failures).toEqual([]);
    },
    600_000,
  );
});
