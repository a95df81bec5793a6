/**
 * Calling windows (src/campaigns/windows.ts): parsing and validating a window, the holiday
 * files, and `nextAllowed` across DST changes, weekdays, holidays and numbers spanning zones;
 * a property test checks it against a minute-by-minute scan written with Intl alone.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type CallingWindow,
  CallingWindowSchema,
  isAllowed,
  loadHolidays,
  NO_HOLIDAYS,
  nextAllowed,
  parseWindowSetting,
  WEEKDAYS,
  type Weekday,
} from '../../src/campaigns/windows.ts';

const HOLIDAYS_DIR = fileURLToPath(new URL('../../holidays', import.meta.url));
const KYIV = ['Europe/Kyiv'];
const DAYTIME: CallingWindow = { from: '09:00', to: '20:00' };

/** nextAllowed as an ISO string (or null), for readable expectations. */
function next(at: string, zones: readonly string[], window: CallingWindow, country?: string) {
  const holidays = country ? loadHolidays(HOLIDAYS_DIR) : NO_HOLIDAYS;
  return nextAllowed(new Date(at), zones, window, holidays, country)?.toISOString() ?? null;
}

describe('parseWindowSetting', () => {
  it('reads hours alone, a day range, a day list and a mix', () => {
    expect(parseWindowSetting('09:00-20:00')).toEqual({ from: '09:00', to: '20:00' });
    expect(parseWindowSetting(' 09:00 - 20:00  mon-sat ')).toEqual({
      from: '09:00',
      to: '20:00',
      days: ['mon', 'tue', 'wed', 'thu', 'fri', 'sat'],
    });
    expect(parseWindowSetting('09:00-20:00 mon,tue,fri').days).toEqual(['mon', 'tue', 'fri']);
    expect(parseWindowSetting('08:30-24:00 Fri-Mon,wed,mon').days).toEqual([
      'mon',
      'wed',
      'fri',
      'sat',
      'sun',
    ]);
  });

  it.each([
    ['', /not understood/],
    ['09:00', /not understood/],
    ['9:00-20:00', /from must be a time of day written HH:MM/],
    ['09:00-25:00', /to must be a time of day/],
    ['20:00-09:00', /to must be later than from/],
    ['09:00-09:00', /to must be later than from/],
    ['09:00-20:00 mon-fri extra', /not understood/],
    ['09:00-20:00 monday', /"monday" is not a day/],
    ['09:00-20:00 mon-tue-wed', /"mon-tue-wed" is not a day range/],
    ['09:00-20:00 mon,,fri', /"" is not a day/],
  ])('rejects %j', (input, message) => {
    expect(() => parseWindowSetting(input)).toThrow(message);
  });
});

describe('CallingWindowSchema', () => {
  it('accepts a window, with or without days', () => {
    expect(CallingWindowSchema.parse({ from: '00:00', to: '24:00' })).toEqual({
      from: '00:00',
      to: '24:00',
    });
    expect(CallingWindowSchema.safeParse({ ...DAYTIME, days: ['sat', 'sun'] }).success).toBe(true);
  });

  it.each([
    [{ from: '20:00', to: '09:00' }, 'to', /later than from/],
    [{ from: '09:00', to: '09:00' }, 'to', /later than from/],
    [{ from: '24:00', to: '24:00' }, 'from', /HH:MM/],
    [{ from: '9:00', to: '20:00' }, 'from', /HH:MM/],
    [{ from: '09:00', to: '20:60' }, 'to', /HH:MM/],
    [{ ...DAYTIME, days: ['mon', 'funday'] }, 'days.1', /must be one of mon, tue/],
    [{ ...DAYTIME, days: [] }, 'days', /at least one day/],
    [{ ...DAYTIME, timezone: 'UTC' }, '', /./],
  ])('rejects %j at %s', (input, path, message) => {
    const result = CallingWindowSchema.safeParse(input);
    expect(result.success).toBe(false);
    const issue = result.error!.issues[0]!;
    expect(issue.path.join('.')).toBe(path);
    expect(issue.message).toMatch(message);
  });
});

describe('loadHolidays', () => {
  it('reads the shipped Ukrainian holidays', () => {
    const holidays = loadHolidays(HOLIDAYS_DIR);
    expect(holidays.isHoliday('UA', '2026-08-24')).toBe(true);
    expect(holidays.isHoliday('ua', '2027-05-02')).toBe(true);
    expect(holidays.isHoliday('UA', '2026-08-25')).toBe(false);
    expect(holidays.isHoliday('DE', '2026-08-24')).toBe(false);
    expect(holidays.isHoliday(undefined, '2026-08-24')).toBe(false);
  });

  it('is empty for a missing directory', () => {
    const holidays = loadHolidays(join(tmpdir(), 'no-such-holidays-dir-26'));
    expect(holidays.isHoliday('UA', '2026-08-24')).toBe(false);
  });

  it('names file and line of a bad line, and ignores other files', () => {
    const dir = mkdtempSync(join(tmpdir(), 'holidays-'));
    writeFileSync(join(dir, 'notes.md'), 'anything');
    writeFileSync(join(dir, 'PL.txt'), '# comment\n\n2026-11-11 Independence Day\n');
    expect(loadHolidays(dir).isHoliday('PL', '2026-11-11')).toBe(true);
    writeFileSync(join(dir, 'XX.txt'), '2026-01-01 ok\n2026-02-30 no such day\n');
    expect(() => loadHolidays(dir)).toThrow(`${join(dir, 'XX.txt')}:2: expected "YYYY-MM-DD name"`);
    writeFileSync(join(dir, 'XX.txt'), '1 January\n');
    expect(() => loadHolidays(dir)).toThrow(`${join(dir, 'XX.txt')}:1:`);
  });
});

describe('nextAllowed in Europe/Kyiv', () => {
  it('maps 09:00-20:00 to UTC+2 before the spring change and UTC+3 after it', () => {
    // Saturday 2026-03-28 is +02:00, Sunday 2026-03-29 is +03:00 from 03:00 local on
    expect(next('2026-03-28T06:59:00Z', KYIV, DAYTIME)).toBe('2026-03-28T07:00:00.000Z');
    expect(isAllowed(new Date('2026-03-28T17:59:59Z'), KYIV, DAYTIME, NO_HOLIDAYS)).toBe(true);
    expect(next('2026-03-28T18:00:00Z', KYIV, DAYTIME)).toBe('2026-03-29T06:00:00.000Z');
    expect(next('2026-03-29T16:59:00Z', KYIV, DAYTIME)).toBe('2026-03-29T16:59:00.000Z');
    expect(next('2026-03-29T17:00:00Z', KYIV, DAYTIME)).toBe('2026-03-30T06:00:00.000Z');
  });

  it('maps 09:00-20:00 to UTC+3 before the autumn change and UTC+2 after it', () => {
    expect(next('2026-10-24T05:00:00Z', KYIV, DAYTIME)).toBe('2026-10-24T06:00:00.000Z');
    expect(next('2026-10-24T17:00:00Z', KYIV, DAYTIME)).toBe('2026-10-25T07:00:00.000Z');
    expect(isAllowed(new Date('2026-10-25T17:59:00Z'), KYIV, DAYTIME, NO_HOLIDAYS)).toBe(true);
    expect(next('2026-10-25T18:00:00Z', KYIV, DAYTIME)).toBe('2026-10-26T07:00:00.000Z');
  });

  it('opens a window starting inside the spring gap when the clock jumps past its start', () => {
    // 03:00-03:59 do not exist on 2026-03-29: the first local time >= 03:30 is 04:00 (01:00Z)
    const window = { from: '03:30', to: '05:00' };
    expect(next('2026-03-28T23:00:00Z', KYIV, window)).toBe('2026-03-29T01:00:00.000Z');
  });

  it('opens a window in the repeated autumn hour both times the hour occurs', () => {
    // 03:00-03:59 happen twice on 2026-10-25: first at +03:00 (00:00Z), then at +02:00 (01:00Z)
    const window = { from: '03:30', to: '03:45' };
    expect(next('2026-10-24T22:00:00Z', KYIV, window)).toBe('2026-10-25T00:30:00.000Z');
    expect(next('2026-10-25T00:45:00Z', KYIV, window)).toBe('2026-10-25T01:30:00.000Z');
    expect(next('2026-10-25T01:45:00Z', KYIV, window)).toBe('2026-10-26T01:30:00.000Z');
  });

  it('moves an instant after `to` to the next day at `from`', () => {
    expect(next('2026-11-25T19:30:00Z', KYIV, DAYTIME)).toBe('2026-11-26T07:00:00.000Z');
  });

  it('skips days not listed: Saturday with mon-fri goes to Monday 09:00', () => {
    const weekdays = parseWindowSetting('09:00-20:00 mon-fri');
    expect(next('2026-11-28T12:00:00Z', KYIV, weekdays)).toBe('2026-11-30T07:00:00.000Z');
  });

  it("skips the recipient country's holidays in local time", () => {
    const weekdays = parseWindowSetting('09:00-20:00 mon-fri');
    // Saturday 2026-08-22; Monday 08-24 is Independence Day
    expect(next('2026-08-22T12:00:00Z', KYIV, weekdays, 'UA')).toBe('2026-08-25T06:00:00.000Z');
    expect(next('2026-08-22T12:00:00Z', KYIV, weekdays)).toBe('2026-08-24T06:00:00.000Z');
    expect(next('2026-08-22T12:00:00Z', KYIV, weekdays, 'PL')).toBe('2026-08-24T06:00:00.000Z');
  });
});

describe('nextAllowed across zones', () => {
  const ALASKA = ['America/Adak', 'America/Anchorage']; // +1907 200…: UTC-10 and UTC-9 in winter

  it('holds the window in both zones of a number', () => {
    // 06:00Z is 21:00 Anchorage, 20:00 Adak; Anchorage opens 18:00Z, Adak 19:00Z; Anchorage closes 05:00Z
    expect(next('2026-12-01T06:00:00Z', ALASKA, DAYTIME)).toBe('2026-12-01T19:00:00.000Z');
    expect(isAllowed(new Date('2026-12-02T04:59:00Z'), ALASKA, DAYTIME, NO_HOLIDAYS)).toBe(true);
    expect(next('2026-12-02T05:00:00Z', ALASKA, DAYTIME)).toBe('2026-12-02T19:00:00.000Z');
  });

  it('checks the weekday in each zone', () => {
    // UTC-10 and UTC+14: the same wall clock a day apart, so Adak's Friday is Kiritimati's
    // Saturday and only Monday to Thursday in Adak are weekdays in both
    const zones = ['America/Adak', 'Pacific/Kiritimati'];
    const window = parseWindowSetting('09:00-20:00 mon-fri');
    // Friday 2026-12-04 07:00Z is Thursday 21:00 in Adak: next is Monday 09:00 Adak
    expect(next('2026-12-04T07:00:00Z', zones, window)).toBe('2026-12-07T19:00:00.000Z');
  });

  it('is null when the zones are too far apart for the window', () => {
    const zones = ['Pacific/Honolulu', 'Asia/Tokyo'];
    expect(next('2026-12-01T00:00:00Z', zones, { from: '09:00', to: '12:00' })).toBeNull();
    // with a longer window they overlap: Tokyo 09:00 is Honolulu 14:00
    expect(next('2026-12-01T00:00:00Z', zones, DAYTIME)).toBe('2026-12-01T00:00:00.000Z');
  });

  it('treats no zones as UTC', () => {
    expect(next('2026-12-01T21:00:00Z', [], DAYTIME)).toBe('2026-12-02T09:00:00.000Z');
  });

  it('refuses an unknown zone and a malformed window', () => {
    const at = new Date('2026-12-01T00:00:00Z');
    expect(() => nextAllowed(at, ['Mars/Olympus'], DAYTIME, NO_HOLIDAYS)).toThrow(/Mars\/Olympus/);
    expect(() => nextAllowed(at, KYIV, { from: '20:00', to: '09:00' }, NO_HOLIDAYS)).toThrow(
      /from must be before to/,
    );
  });
});

/** Wall clock of `ms` in `zone` by Intl alone: [weekday, 'YYYY-MM-DD', minutes of day]. */
const formats = new Map<string, Intl.DateTimeFormat>();
function wallClock(ms: number, zone: string): [Weekday, string, number] {
  let format = formats.get(zone);
  if (!format) {
    format = new Intl.DateTimeFormat('en-US', {
      timeZone: zone,
      hourCycle: 'h23',
      weekday: 'short',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
    });
    formats.set(zone, format);
  }
  const part = Object.fromEntries(format.formatToParts(ms).map((p) => [p.type, p.value]));
  const weekday = part.weekday!.toLowerCase() as Weekday;
  return [weekday, `${part.year}-${part.month}-${part.day}`, +part.hour! * 60 + +part.minute!];
}

describe('nextAllowed against a minute-by-minute scan', () => {
  const ZONES = [
    'Europe/Kyiv',
    'America/New_York',
    'Asia/Tokyo',
    'Australia/Lord_Howe', // a 30-minute DST shift
    'Asia/Kathmandu', // UTC+05:45
  ];
  const time = (m: number) =>
    `${String(Math.floor(m / 60)).padStart(2, '0')}:${String(m % 60).padStart(2, '0')}`;
  const holidays = {
    isHoliday: (c: string | undefined, d: string) => c === 'ZZ' && d.endsWith('-05'),
  };

  it('finds the first allowed minute, or null when the scan finds none', () => {
    fc.assert(
      fc.property(
        fc.date({
          min: new Date('2026-01-01Z'),
          max: new Date('2027-12-01Z'),
          noInvalidDate: true,
        }),
        fc.subarray(ZONES, { minLength: 1, maxLength: 3 }),
        fc.integer({ min: 0, max: 1439 }),
        fc.integer({ min: 1, max: 1440 }),
        fc.option(fc.subarray([...WEEKDAYS], { minLength: 1 })),
        (at, zones, fromMinutes, length, days) => {
          const window: CallingWindow = {
            from: time(fromMinutes),
            to: time(Math.min(1440, fromMinutes + length)),
            ...(days ? { days } : {}),
          };
          const ok = (ms: number) =>
            zones.every((zone) => {
              const [weekday, date, minutes] = wallClock(ms, zone);
              return (
                (!days || days.includes(weekday)) &&
                !holidays.isHoliday('ZZ', date) &&
                fromMinutes <= minutes &&
                minutes < Math.min(1440, fromMinutes + length)
              );
            });
          let expected: number | null = null;
          if (ok(at.getTime())) expected = at.getTime();
          else {
            const end = at.getTime() + 14 * 86_400_000;
            for (let ms = Math.ceil(at.getTime() / 60_000) * 60_000; ms <= end; ms += 60_000) {
              if (ok(ms)) {
                expected = ms;
                break;
              }
            }
          }
          const actual = nextAllowed(at, zones, window, holidays, 'ZZ');
          expect(actual?.getTime() ?? null).toBe(expected);
          expect(isAllowed(at, zones, window, holidays, 'ZZ')).toBe(expected === at.getTime());
        },
      ),
      { numRuns: 25, seed: 26 },
    );
  });
});
