/**
 * Fast-check generators for fuzzing HTTP requests, shared by the fuzzers (test/faults/fuzz.test.ts
 * over /openapi.json, test/security/routes-fuzz.test.ts over the whole route table): odd
 * values, JSON shaped like messages, calls and callbacks, broken bodies, content types, path
 * segments and queries.
 */
import { createHash } from 'node:crypto';
import fc from 'fast-check';

// 4000 characters that do not compress, the same in every run: a repeated letter compresses
// into an index entry (at most 2704 bytes) where these do not (test/http/long-ids.test.ts)
const INCOMPRESSIBLE = Array.from({ length: 94 }, (_, i) =>
  createHash('sha256').update(String(i)).digest('base64'),
)
  .join('')
  .slice(0, 4000);

export const weird = fc.oneof(
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
    INCOMPRESSIBLE,
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

export const value: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 3, arbitrary: weird },
  { weight: 1, arbitrary: fc.array(weird, { maxLength: 4 }) },
  { weight: 1, arbitrary: fc.dictionary(fc.string({ maxLength: 8 }), weird, { maxKeys: 4 }) },
);

/** objects with the field names Switchboard looks for, holding anything */
export const shaped = (keys: string[]) =>
  fc.dictionary(fc.constantFrom(...keys), value, { maxKeys: keys.length });

export const MESSAGE_KEYS = [
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
export const CALLBACK_KEYS = [
  'customerMessageId',
  'cmid',
  'messageId',
  'parentMessageId',
  'idUuid',
  'phoneNumber',
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
export const CALL_KEYS = ['flow', 'to', 'from', 'vars', 'lang', 'calls'];

export const payload: fc.Arbitrary<unknown> = fc.oneof(
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

export function serialize(v: unknown): string {
  return JSON.stringify(v, (_k, x) => (typeof x === 'bigint' ? x.toString() : x)) ?? 'null';
}

export const body: fc.Arbitrary<string> = fc.oneof(
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

export const contentType = fc.constantFrom(
  'application/json',
  'application/json',
  'application/json; charset=utf-8',
  'application/x-www-form-urlencoded',
  'text/plain',
  'multipart/form-data; boundary=xyz',
  'application/xml',
  '',
);

export const segment = fc.oneof(
  fc.uuid(),
  fc.string({ unit: 'grapheme', minLength: 1, maxLength: 60 }),
  fc.constantFrom('..', '%', '%00', 'null', ' ', 'x'.repeat(2000), 'a/b'),
);

export const query = fc
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
      fc.constantFrom(
        '-1',
        '0',
        '1e9',
        '999999999999',
        'NaN',
        '2026-01-01',
        'not-a-date',
        '0000-06-01T00:00:00Z',
        '9999-12-31T23:00:00-05:00',
      ),
    ),
    { maxKeys: 4 },
  )
  .map((q) => new URLSearchParams(q).toString());

export function pathFor(template: string, params: string[]): string {
  let i = 0;
  return template.replace(/\{[^}]+\}/g, () => encodeURIComponent(params[i++] ?? 'x'));
}
