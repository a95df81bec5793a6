/**
 * Calling windows: the hours and days a campaign may ring a recipient, counted in the
 * recipient's own local time, skipping public holidays of their country (issue 26). A number
 * can span several zones (a +7 7xx number is Almaty and Aqtobe), so a call is allowed only when
 * the window holds in EVERY zone of the number; `nextAllowed` finds the earliest such instant.
 *
 * Time zones are the IANA database of the Node runtime (Intl). DST: the window is checked
 * against the wall clock actually shown in each zone, so on a spring-forward day a window
 * opening inside the gap (02:30 where 02:00 jumps to 03:00) opens at the jump, the first
 * instant whose local time is past `from`; on a fall-back day the repeated hour is inside or
 * outside the window by its wall-clock time, both times it occurs. Empty zones (a number the
 * library does not place) are treated as UTC.
 *
 * Holidays are text files, `<dir>/<ISO2>.txt`, read once at start (`loadHolidays`); nothing
 * here reads files per call.
 *
 * @example
 * const w = parseWindowSetting('09:00-20:00 mon-fri');
 * nextAllowed(new Date('2026-08-22T12:00:00Z'), ['Europe/Kyiv'], w, holidays, 'UA');
 * // Tuesday 2026-08-25 06:00Z: Saturday and Sunday are not mon-fri, Monday is Independence Day
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { DateTime } from 'luxon';
import { z } from 'zod';

export const WEEKDAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'] as const;
export type Weekday = (typeof WEEKDAYS)[number];

/** 'HH:MM' 24h, from < to (no window across midnight; `to` may be '24:00'); days absent = every day. */
export interface CallingWindow {
  from: string;
  to: string;
  days?: Weekday[];
}

const TIME = /^([01]\d|2[0-3]):([0-5]\d)$/;
// '24:00' ends a window at midnight, which 'HH:MM' < 24 could not say
const END_TIME = /^(?:([01]\d|2[0-3]):([0-5]\d)|(24):(00))$/;

/** Minutes since local midnight of 'HH:MM' (already validated). */
function minutesOf(time: string): number {
  const m = END_TIME.exec(time);
  if (!m) throw new Error(`"${time}" is not a time of day written HH:MM (24-hour clock)`);
  return Number(m[1] ?? m[3]) * 60 + Number(m[2] ?? m[4]);
}

export const CallingWindowSchema: z.ZodType<CallingWindow> = z
  .strictObject({
    from: z.string().regex(TIME, { error: 'must be a time of day written HH:MM, like 09:00' }),
    to: z
      .string()
      .regex(END_TIME, { error: 'must be a time of day written HH:MM, like 20:00 (or 24:00)' }),
    days: z
      .array(z.enum(WEEKDAYS, { error: `must be one of ${WEEKDAYS.join(', ')}` }))
      .min(1, { error: 'must list at least one day (leave it out to mean every day)' })
      .optional(),
  })
  .refine(
    (w) => !TIME.test(w.from) || !END_TIME.test(w.to) || minutesOf(w.from) < minutesOf(w.to),
    {
      path: ['to'],
      error: 'must be later than from (a window cannot run past midnight: split it in two)',
    },
  );

/**
 * A window from a one-line setting: "09:00-20:00", "09:00-20:00 mon-sat",
 * "09:00-20:00 mon,tue,fri" (ranges and lists mix: "mon-wed,fri"; a range may wrap, "fri-mon").
 * Throws an Error saying what is wrong.
 */
export function parseWindowSetting(value: string): CallingWindow {
  const usage = 'write it like "09:00-20:00" or "09:00-20:00 mon-fri" or "09:00-20:00 mon,wed,fri"';
  const m = /^\s*(\S+?)\s*-\s*(\S+?)(?:\s+(\S+))?\s*$/.exec(value);
  if (!m) throw new Error(`calling window "${value}" is not understood: ${usage}`);
  const [, from = '', to = '', daysText] = m;
  const window: CallingWindow = { from, to };
  if (daysText !== undefined) window.days = parseDays(daysText, value, usage);
  const parsed = CallingWindowSchema.safeParse(window);
  if (!parsed.success) {
    const why = parsed.error.issues.map((i) => `${i.path.join('.')} ${i.message}`).join('; ');
    throw new Error(`calling window "${value}": ${why}`);
  }
  return parsed.data;
}

/** "mon-wed,fri" → ['mon','tue','wed','fri'], in week order, no repeats. */
function parseDays(text: string, value: string, usage: string): Weekday[] {
  const indexOf = (name: string): number => {
    const i = WEEKDAYS.indexOf(name.toLowerCase() as Weekday);
    if (i < 0) {
      throw new Error(
        `calling window "${value}": "${name}" is not a day (use ${WEEKDAYS.join(', ')}); ${usage}`,
      );
    }
    return i;
  };
  const chosen = new Set<number>();
  for (const part of text.split(',')) {
    const [first = '', last, extra] = part.split('-');
    if (extra !== undefined)
      throw new Error(`calling window "${value}": "${part}" is not a day range; ${usage}`);
    const a = indexOf(first);
    const b = last === undefined ? a : indexOf(last);
    // walks forward through the week, so "fri-mon" is fri, sat, sun, mon
    for (let i = a; ; i = (i + 1) % 7) {
      chosen.add(i);
      if (i === b) break;
    }
  }
  return [...chosen].sort((x, y) => x - y).map((i) => WEEKDAYS[i]!);
}

export interface HolidayCalendar {
  isHoliday(country: string | undefined, localDate: string /* YYYY-MM-DD */): boolean;
}

export const NO_HOLIDAYS: HolidayCalendar = { isHoliday: () => false };

const HOLIDAY_FILE = /^([A-Za-z]{2})\.txt$/;
const HOLIDAY_LINE = /^(\d{4}-\d{2}-\d{2})(?:\s+.*)?$/;

/**
 * The holidays of `<dir>/<ISO2>.txt` files (other files are ignored): one "YYYY-MM-DD name" a
 * line, '#' starts a comment line, blank lines are skipped. A missing directory means no
 * holidays; a bad line is an Error naming file:line.
 */
export function loadHolidays(dir: string): HolidayCalendar {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return NO_HOLIDAYS;
    throw err;
  }
  const byCountry = new Map<string, Set<string>>();
  for (const name of names.sort()) {
    const country = HOLIDAY_FILE.exec(name)?.[1]?.toUpperCase();
    const file = join(dir, name);
    if (!country || !statSync(file).isFile()) continue;
    const dates = new Set<string>();
    readFileSync(file, 'utf8')
      .split(/\r?\n/)
      .forEach((raw, i) => {
        const line = raw.trim();
        if (line === '' || line.startsWith('#')) return;
        const date = HOLIDAY_LINE.exec(line)?.[1];
        if (!date || !DateTime.fromISO(date, { zone: 'UTC' }).isValid) {
          throw new Error(
            `${file}:${i + 1}: expected "YYYY-MM-DD name" with a real date, got "${line}"`,
          );
        }
        dates.add(date);
      });
    byCountry.set(country, dates);
  }
  return {
    isHoliday: (country, localDate) =>
      country !== undefined && (byCountry.get(country.toUpperCase())?.has(localDate) ?? false),
  };
}

/** How far ahead `nextAllowed` looks. */
const SEARCH_DAYS = 14;
const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;
const MAX_OFFSET = 14 * 60 * MINUTE; // Pacific/Kiritimati, UTC+14

/** A window in numbers, checked once per call rather than per candidate. */
interface Rule {
  from: number;
  to: number;
  days: ReadonlySet<number> | undefined; // 0 = Monday, as WEEKDAYS
  holidays: HolidayCalendar;
  country: string | undefined;
}

function ruleOf(window: CallingWindow, holidays: HolidayCalendar, country?: string): Rule {
  const from = minutesOf(window.from);
  const to = minutesOf(window.to);
  if (from >= to)
    throw new Error(`calling window ${window.from}-${window.to}: from must be before to`);
  const days = window.days && new Set(window.days.map((d) => WEEKDAYS.indexOf(d)));
  return { from, to, days, holidays, country };
}

/** UTC offsets of one IANA zone. */
interface Zone {
  name: string;
  /** Offset in minutes at instant `ms`. */
  offset(ms: number): number;
}

const zoneCache = new Map<string, Zone>();

/**
 * A zone whose offsets come from one cached Intl formatter: what luxon's IANAZone.offset does,
 * at a quarter of its cost, which counts as nextAllowed runs for every recipient.
 */
function zoneNamed(name: string): Zone {
  const cached = zoneCache.get(name);
  if (cached) return cached;
  let format: Intl.DateTimeFormat;
  try {
    format = new Intl.DateTimeFormat('en-US', {
      timeZone: name,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
  } catch {
    throw new Error(`"${name}" is not a known time zone`);
  }
  const offset = (ms: number): number => {
    const f: Record<string, number> = {};
    for (const part of format.formatToParts(ms)) f[part.type] = Number(part.value);
    const wall = Date.UTC(f.year!, f.month! - 1, f.day, f.hour, f.minute, f.second);
    return Math.round((wall - (ms - (((ms % 1000) + 1000) % 1000))) / MINUTE);
  };
  const zone = { name, offset };
  zoneCache.set(name, zone); // only valid names get here: a few hundred at most
  return zone;
}

/** The zones to check: UTC when the number's are unknown; throws on an unknown name. */
function zonesToUse(zones: readonly string[]): Zone[] {
  return (zones.length === 0 ? ['UTC'] : zones).map(zoneNamed);
}

// The wall clock is worked out by hand from the zone's offset rather than by a luxon DateTime
// per check: nextAllowed runs for every recipient, and that is several times cheaper.

/** The wall clock at `ms` in `zone`, as a Date whose UTC fields read that wall clock. */
function wallClock(ms: number, zone: Zone): Date {
  return new Date(ms + zone.offset(ms) * MINUTE);
}

/** Whether the wall clock at `ms` in `zone` is inside the window. */
function allowedIn(ms: number, zone: Zone, rule: Rule): boolean {
  const local = wallClock(ms, zone);
  if (rule.days && !rule.days.has((local.getUTCDay() + 6) % 7)) return false;
  const minutes = local.getUTCHours() * 60 + local.getUTCMinutes();
  if (minutes < rule.from || minutes >= rule.to) return false;
  return !rule.holidays.isHoliday(rule.country, local.toISOString().slice(0, 10));
}

function allowedEverywhere(ms: number, zones: readonly Zone[], rule: Rule): boolean {
  return zones.every((zone) => allowedIn(ms, zone, rule));
}

/**
 * Instants in [lo, hi) where a window of `zone` may open: every instant whose wall clock
 * reads `from` (none in a spring-forward gap, two in a repeated fall-back hour) and every
 * offset change (the end of a gap: the first instant past `from` when `from` falls inside it).
 * The window in all zones opens at one of these of some zone, or is already open at `start`.
 */
function openingsIn(zone: Zone, lo: number, hi: number, from: number): number[] {
  // lo - 1: a change exactly at lo belongs to this chunk; at most one change in a chunk
  const before = zone.offset(lo - 1);
  const after = zone.offset(hi - 1);
  const out: number[] = [];
  // wall-clock `from` on each local date, written as if it were UTC; from the day before lo's
  // date, as a fall-back at midnight repeats the evening of the day before
  const loDate = Math.floor((lo + before * MINUTE) / DAY) * DAY;
  // an instant is its wall time minus the offset, and offsets are at most +14 h
  for (let wall = loDate - DAY + from * MINUTE; wall < hi + MAX_OFFSET; wall += DAY) {
    if (before === after) {
      out.push(wall - before * MINUTE); // one offset all through the chunk: no lookup needed
      continue;
    }
    for (const offset of [before, after]) {
      const ms = wall - offset * MINUTE;
      if (zone.offset(ms) === offset) out.push(ms); // that offset is really in force then
    }
  }
  if (before !== after) out.push(offsetChange(zone, lo - 1, hi - 1));
  return out.filter((ms) => ms >= lo && ms < hi);
}

/** The first minute in (lo, hi] whose offset differs from lo's (one change in between). */
function offsetChange(zone: Zone, lo: number, hi: number): number {
  const before = zone.offset(lo);
  let a = Math.floor(lo / MINUTE);
  let b = Math.ceil(hi / MINUTE);
  while (b - a > 1) {
    const mid = Math.floor((a + b) / 2);
    if (zone.offset(mid * MINUTE) === before) a = mid;
    else b = mid;
  }
  return b * MINUTE;
}

/**
 * The earliest instant >= `at` at which local time is inside `window` in EVERY zone of
 * `zones` (a day in `days`, not a holiday of `country` in that zone's local date,
 * from <= local time < to), searching up to 14 days ahead; null when none (e.g. zones too far
 * apart for the window). Empty `zones`: treated as UTC. Throws on an unknown zone or a
 * malformed window (validate with CallingWindowSchema first).
 */
export function nextAllowed(
  at: Date,
  zones: readonly string[],
  window: CallingWindow,
  holidays: HolidayCalendar,
  country?: string,
): Date | null {
  const start = at.getTime();
  if (Number.isNaN(start)) throw new Error('nextAllowed: `at` is not a valid date');
  const rule = ruleOf(window, holidays, country);
  const used = zonesToUse(zones);
  if (allowedEverywhere(start, used, rule)) return new Date(start);
  const end = start + SEARCH_DAYS * DAY;
  // a day at a time, so the usual answer (later today, tomorrow) costs a few offset lookups
  for (let lo = start; lo <= end; lo += DAY) {
    const hi = Math.min(lo + DAY, end + 1);
    const candidates = new Set<number>();
    for (const zone of used) {
      for (const ms of openingsIn(zone, lo, hi, rule.from)) candidates.add(ms);
    }
    for (const ms of [...candidates].sort((x, y) => x - y)) {
      if (allowedEverywhere(ms, used, rule)) return new Date(ms);
    }
  }
  return null;
}

/** Whether `at` is inside the window in every zone (nextAllowed(at, ...) equals at). */
export function isAllowed(
  at: Date,
  zones: readonly string[],
  window: CallingWindow,
  holidays: HolidayCalendar,
  country?: string,
): boolean {
  const ms = at.getTime();
  if (Number.isNaN(ms)) throw new Error('isAllowed: `at` is not a valid date');
  return allowedEverywhere(ms, zonesToUse(zones), ruleOf(window, holidays, country));
}
