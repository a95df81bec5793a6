/**
 * SMS encoding and splitting (docs/provider.md, "Message types"; `smsbat/sms.md`, "Character
 * Encoding").
 *
 * GSM 7-bit when every character is in the GSM 03.38 basic table or is one of the provider's
 * extended characters (| ^ € { } [ ] ~ \), which take two septets (escape + character):
 * 160 septets in a single message, 153 per part once split. Anything else switches the whole
 * text to UCS-2, counted in UTF-16 code units (an emoji outside the BMP is 2): 70 single,
 * 67 per part. A part never ends between the two septets of an extension character or
 * between the two halves of a surrogate pair; such a character moves whole to the next part,
 * which is why `parts` can exceed `ceil(units / 153)`.
 *
 * Only the nine extended characters the provider names count as GSM; the form feed of the
 * full 03.38 extension table is not among them, so it is "any other character" and switches
 * the text to UCS-2.
 */
import { AppError } from '../errors.ts';

export type SmsEncoding = 'GSM7' | 'UCS2';

export interface SmsSegments {
  encoding: SmsEncoding;
  /** Septets for GSM7 (extension characters count 2), UTF-16 code units for UCS2. */
  units: number;
  /** Number of parts; 0 for an empty text. */
  parts: number;
  /** The text of each part, in order; `segments.join('') === text`. */
  segments: string[];
}

export const SMS_LIMITS = {
  GSM7: { single: 160, part: 153 },
  UCS2: { single: 70, part: 67 },
} as const satisfies Record<SmsEncoding, { single: number; part: number }>;

/** Maximum parts accepted by `validateMessage` when the caller sets none. */
export const DEFAULT_MAX_SMS_PARTS = 10;

// GSM 03.38 basic character set, in table order (0x1B, the escape, left out).
const GSM_BASIC = new Set(
  '@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !"#¤%&\'()*+,-./0123456789:;<=>?' +
    '¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà',
);
const GSM_EXTENSION = new Set('|^€{}[]~\\');

/** Septets a character takes in GSM 7-bit, or undefined when it is not in the alphabet. */
export function gsmSeptets(char: string): 1 | 2 | undefined {
  if (GSM_BASIC.has(char)) return 1;
  if (GSM_EXTENSION.has(char)) return 2;
  return undefined;
}

/** True when the whole text can be sent in GSM 7-bit. */
export function isGsm7(text: string): boolean {
  for (const char of text) if (gsmSeptets(char) === undefined) return false;
  return true;
}

/**
 * Encoding, size and parts of an SMS text. With `maxParts`, a text needing more parts throws
 * an `AppError` with code MESSAGE_TOO_LONG (detail path `text`).
 *
 * @example
 * smsSegments('hello') // { encoding: 'GSM7', units: 5, parts: 1, segments: ['hello'] }
 * smsSegments('€'.repeat(81)).parts // 2: 162 septets
 * smsSegments('😀'.repeat(36)) // { encoding: 'UCS2', units: 72, parts: 2, ... }
 */
export function smsSegments(text: string, opts: { maxParts?: number } = {}): SmsSegments {
  const encoding: SmsEncoding = isGsm7(text) ? 'GSM7' : 'UCS2';
  // Iterating a string yields code points, so a surrogate pair stays one character (2 units).
  const chars = Array.from(text);
  const sizes = chars.map((c) => (encoding === 'GSM7' ? (gsmSeptets(c) ?? 1) : c.length));
  const units = sizes.reduce((a, b) => a + b, 0);
  const limits = SMS_LIMITS[encoding];
  let segments: string[];
  if (units === 0) segments = [];
  else if (units <= limits.single) segments = [text];
  else segments = split(chars, sizes, limits.part);
  const result = { encoding, units, parts: segments.length, segments };
  if (opts.maxParts !== undefined && result.parts > opts.maxParts) {
    const message = `text needs ${result.parts} SMS parts (${units} ${encoding === 'GSM7' ? 'GSM 7-bit septets' : 'UCS-2 units'}); the maximum is ${opts.maxParts}`;
    throw new AppError('MESSAGE_TOO_LONG', message, [
      { path: 'text', code: 'MESSAGE_TOO_LONG', message },
    ]);
  }
  return result;
}

function split(chars: string[], sizes: number[], perPart: number): string[] {
  const segments: string[] = [];
  let current = '';
  let used = 0;
  chars.forEach((char, i) => {
    const size = sizes[i] ?? 1;
    if (used + size > perPart) {
      segments.push(current);
      current = '';
      used = 0;
    }
    current += char;
    used += size;
  });
  segments.push(current);
  return segments;
}
