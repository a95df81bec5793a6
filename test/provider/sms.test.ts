import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AppError } from '../../src/errors.ts';
import { gsmSeptets, isGsm7, SMS_LIMITS, smsSegments } from '../../src/provider/sms.ts';

const EXT = '|^€{}[]~\\';
const BASIC =
  '@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !"#¤%&\'()*+,-./0123456789:;<=>?' +
  '¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà';
const EMOJI = '😀'; // outside the BMP: a surrogate pair

describe('smsSegments: boundaries', () => {
  it.each([
    // [label, text, encoding, units, parts]
    ['empty', '', 'GSM7', 0, 0],
    ['1 GSM char', 'a', 'GSM7', 1, 1],
    ['160 GSM chars', 'a'.repeat(160), 'GSM7', 160, 1],
    ['161 GSM chars', 'a'.repeat(161), 'GSM7', 161, 2],
    ['306 GSM chars', 'a'.repeat(306), 'GSM7', 306, 2],
    ['307 GSM chars', 'a'.repeat(307), 'GSM7', 307, 3],
    ['459 GSM chars', 'a'.repeat(459), 'GSM7', 459, 3],
    ['460 GSM chars', 'a'.repeat(460), 'GSM7', 460, 4],
    ['80 extension chars (160 septets)', '€'.repeat(80), 'GSM7', 160, 1],
    ['81 extension chars (162 septets)', '€'.repeat(81), 'GSM7', 162, 2],
    ['159 chars + 1 extension (161 septets)', `${'a'.repeat(159)}{`, 'GSM7', 161, 2],
    ['158 chars + 1 extension (160 septets)', `${'a'.repeat(158)}{`, 'GSM7', 160, 1],
    ['70 UCS-2 chars', 'щ'.repeat(70), 'UCS2', 70, 1],
    ['71 UCS-2 chars', 'щ'.repeat(71), 'UCS2', 71, 2],
    ['134 UCS-2 chars', 'щ'.repeat(134), 'UCS2', 134, 2],
    ['135 UCS-2 chars', 'щ'.repeat(135), 'UCS2', 135, 3],
    ['35 emoji (70 units)', EMOJI.repeat(35), 'UCS2', 70, 1],
    ['36 emoji (72 units)', EMOJI.repeat(36), 'UCS2', 72, 2],
    ['one Cyrillic letter switches all of it', `${'a'.repeat(100)}ж`, 'UCS2', 101, 2],
    ['form feed is not in the seed alphabet', 'a\fb', 'UCS2', 3, 1],
    ['GSM basic table, all of it', BASIC, 'GSM7', BASIC.length, 1],
  ] as const)('%s', (_label, text, encoding, units, parts) => {
    const r = smsSegments(text);
    expect(r).toMatchObject({ encoding, units, parts });
    expect(r.segments).toHaveLength(parts);
    expect(r.segments.join('')).toBe(text);
  });

  it('never splits an escape pair: 152 septets + an extension char moves it whole', () => {
    const text = `${'a'.repeat(152)}€${'b'.repeat(10)}`; // 164 septets
    const r = smsSegments(text);
    expect(r.parts).toBe(2);
    expect(r.segments[0]).toBe('a'.repeat(152));
    expect(r.segments[1]).toBe(`€${'b'.repeat(10)}`);
  });

  it('can need more parts than units / 153 when escapes sit on the boundaries', () => {
    // each part fits 76 extension chars (152 septets) and wastes one septet
    const text = '€'.repeat(153); // 306 septets: ceil(306/153) = 2, but 3 parts are needed
    const r = smsSegments(text);
    expect(r.units).toBe(306);
    expect(r.parts).toBe(3);
    expect(r.segments.map((s) => s.length)).toEqual([76, 76, 1]);
  });

  it('never splits a surrogate pair: 66 units + an emoji moves it whole', () => {
    const text = `${'щ'.repeat(66)}${EMOJI}${'щ'.repeat(10)}`; // 78 units
    const r = smsSegments(text);
    expect(r.parts).toBe(2);
    expect(r.segments[0]).toBe('щ'.repeat(66));
    expect(r.segments[1]?.startsWith(EMOJI)).toBe(true);
  });

  it('counts every extension character of the seed as 2', () => {
    for (const c of EXT) expect(gsmSeptets(c)).toBe(2);
    expect(smsSegments(EXT).units).toBe(18);
    expect(gsmSeptets('a')).toBe(1);
    expect(gsmSeptets('ж')).toBeUndefined();
    expect(isGsm7('Hello, world!')).toBe(true);
    expect(isGsm7('Привіт')).toBe(false);
  });

  it('throws MESSAGE_TOO_LONG past maxParts, and not at it', () => {
    expect(smsSegments('a'.repeat(306), { maxParts: 2 }).parts).toBe(2);
    try {
      smsSegments('a'.repeat(307), { maxParts: 2 });
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(AppError);
      expect((e as AppError).code).toBe('MESSAGE_TOO_LONG');
      expect((e as AppError).details[0]?.path).toBe('text');
    }
    expect(() => smsSegments('щ'.repeat(71), { maxParts: 1 })).toThrow(/2 SMS parts/);
  });
});

const gsmChar = fc.constantFrom(...Array.from(BASIC + EXT));
const anyChar = fc.oneof(
  gsmChar,
  fc.constantFrom('ж', 'щ', 'є', '中', 'é', EMOJI, '👍🏽', '\u00a0', '\f'),
  fc.string({ unit: 'grapheme', minLength: 1, maxLength: 1 }),
);
const gsmText = fc.array(gsmChar, { maxLength: 800 }).map((a) => a.join(''));
const anyText = fc.array(anyChar, { maxLength: 500 }).map((a) => a.join(''));

describe('smsSegments: properties', () => {
  it('segments concatenate back to the text and each fits a part', () => {
    fc.assert(
      fc.property(fc.oneof(gsmText, anyText), (text) => {
        const r = smsSegments(text);
        expect(r.segments.join('')).toBe(text);
        expect(r.segments.length).toBe(r.parts);
        const limit = r.parts > 1 ? SMS_LIMITS[r.encoding].part : SMS_LIMITS[r.encoding].single;
        const size = (s: string) =>
          r.encoding === 'GSM7'
            ? Array.from(s).reduce((n, c) => n + (gsmSeptets(c) ?? 0), 0)
            : s.length;
        for (const seg of r.segments) {
          expect(size(seg)).toBeLessThanOrEqual(limit);
          expect(seg.length).toBeGreaterThan(0);
        }
        expect(r.segments.reduce((n, s) => n + size(s), 0)).toBe(r.units);
      }),
      { numRuns: 300 },
    );
  });

  it('no part ends inside a surrogate pair', () => {
    fc.assert(
      fc.property(anyText, (text) => {
        for (const seg of smsSegments(text).segments) {
          expect(/[\uD800-\uDBFF]$/.test(seg)).toBe(false);
          expect(/^[\uDC00-\uDFFF]/.test(seg)).toBe(false);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('GSM text is GSM7 and units count extension chars twice', () => {
    fc.assert(
      fc.property(gsmText, (text) => {
        const r = smsSegments(text);
        expect(r.encoding).toBe('GSM7');
        const ext = Array.from(text).filter((c) => EXT.includes(c)).length;
        expect(r.units).toBe(Array.from(text).length + ext);
      }),
    );
  });

  it('UCS-2 units are UTF-16 code units', () => {
    fc.assert(
      fc.property(anyText, (text) => {
        const r = smsSegments(text);
        if (r.encoding === 'UCS2') expect(r.units).toBe(text.length);
      }),
    );
  });

  it('parts grow with the text and match the simple formula when nothing straddles', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2000 }), (n) => {
        const { parts } = smsSegments('a'.repeat(n));
        const expected = n === 0 ? 0 : n <= 160 ? 1 : Math.ceil(n / 153);
        expect(parts).toBe(expected);
        expect(smsSegments('a'.repeat(n + 1)).parts).toBeGreaterThanOrEqual(parts);
      }),
    );
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 1000 }), (n) => {
        const { parts } = smsSegments('щ'.repeat(n));
        expect(parts).toBe(n === 0 ? 0 : n <= 70 ? 1 : Math.ceil(n / 67));
      }),
    );
  });

  it('maxParts throws exactly when parts exceed it', () => {
    fc.assert(
      fc.property(anyText, fc.integer({ min: 1, max: 6 }), (text, maxParts) => {
        const { parts } = smsSegments(text);
        if (parts > maxParts) expect(() => smsSegments(text, { maxParts })).toThrow(AppError);
        else expect(smsSegments(text, { maxParts }).parts).toBe(parts);
      }),
    );
  });
});
