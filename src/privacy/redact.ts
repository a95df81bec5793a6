/**
 * Cutting one person out of a raw callback body that also concerns others (a provider's
 * batch of delivery events, say): their phone number, in the spellings callbacks use, and
 * the ids of their messages become `[erased]`; everything else stays as received.
 *
 * @example
 * redactMentions('{"to":"+380501234567","cmid":"o-1"}', { phones: ['+380501234567'], ids: ['o-1'] })
 * // '{"to":"[erased]","cmid":"[erased]"}'
 */

export const ERASED = '[erased]';

export interface Mentions {
  /** E.164 numbers; matched with or without the `+` (also `%2B`), never inside longer digit runs */
  phones?: readonly string[];
  /** message ids, matched as whole JSON strings or whole form values */
  ids?: readonly string[];
}

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** The digits of an E.164 number (`+380501234567` -> `380501234567`). */
export function phoneDigits(phone: string): string {
  return phone.replace(/\D/g, '');
}

/**
 * A regular expression source matching the number as callbacks write it, for Postgres' `~`
 * as well as JavaScript (digits not preceded or followed by another digit).
 */
export function phonePatternSql(phone: string): string {
  return `(^|[^0-9])${phoneDigits(phone)}([^0-9]|$)`;
}

export function redactMentions(body: string, mentions: Mentions): string {
  let out = body;
  for (const phone of mentions.phones ?? []) {
    const digits = phoneDigits(phone);
    if (digits === '') continue;
    out = out.replace(new RegExp(`(?:\\+|%2B)?(?<!\\d)${digits}(?!\\d)`, 'gi'), ERASED);
  }
  for (const id of mentions.ids ?? []) {
    if (id === '') continue;
    // a whole JSON string ("o-1"), or a whole form value (cmid=o-1&...)
    out = out.split(JSON.stringify(id)).join(JSON.stringify(ERASED));
    out = out.replace(
      new RegExp(`(=)${escapeRegExp(encodeURIComponent(id))}(?=&|$)`, 'g'),
      `$1${encodeURIComponent(ERASED)}`,
    );
  }
  return out;
}
