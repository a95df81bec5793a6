import { sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { type Measured, medianOfWindows } from '../../bench/growth/measure.ts';
import {
  diskNeeded,
  gcd,
  parseGrowthArgs,
  parseSizes,
  recentMessages,
  SPREAD_MS,
  SPREAD_STEP_MS,
  settingBytes,
  spreadOffsetMs,
  withinGoal,
} from '../../bench/growth/options.ts';
import { seededKeySql } from '../../bench/growth/seed.ts';
import {
  benchCustomerId,
  benchCustomerIdSql,
  benchIdInSet,
  benchIdPattern,
  benchProviderId,
  benchProviderIdSql,
} from '../../bench/lib/ids.ts';
import { diskReadKb } from '../../bench/lib/metrics.ts';
import { rowsOf } from '../../src/db/client.ts';
import { dedupKey } from '../../src/messages/inbox.ts';
import { describeEachEngine } from '../support/db.ts';

describe('the growth bench: flags, disk estimate, spread and goal', () => {
  it('reads sizes in millions, decimals allowed, sorted and deduplicated', () => {
    expect(parseSizes('5,1,20')).toEqual([1e6, 5e6, 20e6]);
    expect(parseSizes('0.05,0.2,0.05')).toEqual([50_000, 200_000]);
    expect(() => parseSizes('1,,5')).toThrow(/positive number/);
    expect(() => parseSizes('-1')).toThrow(/positive number/);
    expect(() => parseSizes('0.0001')).toThrow(/below 1000 messages/);
  });

  it('defaults to 1, 5 and 20 million, 10 s loads, the main bench rates, dropping the database', () => {
    expect(parseGrowthArgs([])).toEqual({
      sizes: [1e6, 5e6, 20e6],
      seconds: 10,
      windows: 3,
      ingestRate: 2000,
      readRate: 500,
      dispatch: 50_000,
      keep: false,
    });
    const o = parseGrowthArgs(['--sizes=0.02,0.1', '--seconds=5', '--keep', '--read-rate=200']);
    expect(o).toMatchObject({ sizes: [20_000, 100_000], seconds: 5, keep: true, readRate: 200 });
    expect(parseGrowthArgs(['--windows=1']).windows).toBe(1);
    expect(() => parseGrowthArgs(['--windows=0'])).toThrow(/--windows wants a positive number/);
  });

  it('refuses unknown flags and values it cannot read', () => {
    expect(() => parseGrowthArgs(['--size=1'])).toThrow(/unknown flag "--size"/);
    expect(() => parseGrowthArgs(['20'])).toThrow(/unknown argument/);
    expect(() => parseGrowthArgs(['--seconds=ten'])).toThrow(/positive number/);
    expect(() => parseGrowthArgs(['--keep=yes'])).toThrow(/unknown flag/);
  });

  it('needs the messages still to seed, a tenth more, and the WAL', () => {
    const walBytes = 2 ** 30;
    expect(
      diskNeeded({ targetMessages: 5e6, storedMessages: 1e6, bytesPerMessage: 3000, walBytes }),
    ).toBe(Math.ceil(4e6 * 3000 * 1.1) + walBytes);
    // nothing left to seed: only the WAL's room
    expect(
      diskNeeded({ targetMessages: 1e6, storedMessages: 1e6, bytesPerMessage: 3000, walBytes }),
    ).toBe(walBytes);
  });

  it("reads Postgres's size settings", () => {
    expect(settingBytes('1GB')).toBe(2 ** 30);
    expect(settingBytes('512MB')).toBe(512 * 2 ** 20);
    expect(settingBytes('80kB')).toBe(80 * 2 ** 10);
    expect(() => settingBytes('lots')).toThrow(/not a size/);
  });

  it('gives distinct messages distinct milliseconds across the 30 days', () => {
    // coprime step: i -> i * step mod window is one-to-one below the window's length
    expect(gcd(SPREAD_STEP_MS, SPREAD_MS)).toBe(1);
    const offsets = Array.from({ length: 30_000 }, (_, i) => spreadOffsetMs(i + 1));
    expect(new Set(offsets).size).toBe(offsets.length);
    // and any run of consecutive messages covers every day
    const days = new Set(offsets.slice(0, 3000).map((ms) => Math.floor(ms / 86_400_000)));
    expect(days.size).toBe(30);
  });

  it('draws recent messages from the last days of the history only', () => {
    const picked = recentMessages(1_000_000, 1, 5000);
    expect(picked).toHaveLength(5000);
    expect(new Set(picked).size).toBe(5000);
    for (const i of picked) {
      expect(i).toBeGreaterThanOrEqual(1);
      expect(i).toBeLessThanOrEqual(1_000_000);
      expect(spreadOffsetMs(i)).toBeGreaterThanOrEqual(SPREAD_MS - 86_400_000);
    }
    // a small history has fewer recent messages than asked for: it gives what there is
    const few = recentMessages(300, 1, 5000);
    const all = Array.from({ length: 300 }, (_, k) => k + 1).filter(
      (i) => spreadOffsetMs(i) >= SPREAD_MS - 86_400_000,
    );
    expect(few.sort((a, b) => a - b)).toEqual(all);
  });

  it('judges the goal: the largest size within 20 % above the smallest', () => {
    expect(withinGoal(100, 120)).toBe(true);
    expect(withinGoal(100, 121)).toBe(false);
    expect(withinGoal(100, 80)).toBe(true);
  });

  it("takes each figure's median over the windows, so one window's stall moves none", () => {
    const window = (p99: number, server: number, steal: number, waits: Record<string, number>) =>
      ({
        load: {
          rps: 2000,
          requests: 20_000,
          p50: p99 / 4,
          p90: p99 / 2,
          p99,
          max: p99 * 2,
          statuses: { 200: 20_000 },
          errors: 0,
          seconds: 10,
          offered: 2000,
        },
        cpu: {
          switchboardSeconds: server / 100,
          postgresSeconds: 2,
          switchboardUsPerRequest: server,
          postgresUsPerRequest: 200,
        },
        diskKbPerRequest: 0,
        machine: { busyPercent: 60, stealPercent: steal },
        waits: { samples: 200, activeByWait: waits },
      }) satisfies Measured;
    const windows = [
      window(30, 400, 0, { CPU: 0.5 }),
      window(950, 310, 7, { CPU: 0.3, 'IO:WALSync': 0.9 }),
      window(40, 380, 0, { CPU: 0.4, 'IO:WALSync': 0.1 }),
    ];
    const m = medianOfWindows(windows);
    // the stalled window's p99 (950) and low CPU (310) are not the step's
    expect(m.load.p99).toBe(40);
    expect(m.cpu.switchboardUsPerRequest).toBe(380);
    expect(m.machine.stealPercent).toBe(0);
    expect(m.waits.activeByWait).toEqual({ CPU: 0.4, 'IO:WALSync': 0.1 });
    // counts add up; every window is kept as measured
    expect(m.load.requests).toBe(60_000);
    expect(m.load.statuses).toEqual({ 200: 60_000 });
    expect(m.waits.samples).toBe(600);
    expect(m.windows).toEqual(windows);
  });

  it('reads the kilobytes paged in from disk out of /proc/vmstat, NaN without them', () => {
    expect(diskReadKb('pgpgin0 7\npgpgin 123456\npgpgout 42\n')).toBe(123456);
    expect(diskReadKb('pgpgout 42\npgpginx 5\n')).toBeNaN();
    expect(diskReadKb('')).toBeNaN();
  });
});

describeEachEngine("the growth bench's seeded dedup keys", (ctx) => {
  it('are the keys /hooks/delivery gives the same bodies, before and after the switch', async () => {
    const db = ctx.database().db;
    const times = [
      '2026-10-30T23:59:59.999Z',
      '2026-11-01T00:00:00.000Z',
      '2099-01-01T12:00:00.5Z',
    ];
    const since = Date.parse('2026-11-01T00:00:00Z') / 1000;
    for (const at of times) {
      const body = `{"customerMessageId":"g-1","status":"sent","timestamp":"${at}"}`;
      for (const switched of [since, Number.POSITIVE_INFINITY]) {
        const [row] = rowsOf<{ key: string }>(
          await db.execute(
            sql.raw(
              `select ${seededKeySql(`'${body}'`, `'${at}'::timestamptz`, switched === since ? String(since) : "'infinity'::float8")} as key`,
            ),
          ),
        );
        expect(row?.key).toBe(dedupKey('delivery', body, switched));
      }
    }
  });
});

describeEachEngine("the benches' message ids", (ctx) => {
  it('are the same made in SQL as in TypeScript, in random order, each naming its set', async () => {
    const db = ctx.database().db;
    const prefixes = ['a-', 'gi0-w1-', 'g-'];
    for (const prefix of prefixes) {
      const rows = rowsOf<{ i: number; cmid: string; pmid: string }>(
        await db.execute(
          sql.raw(
            `select i, ${benchCustomerIdSql(`'${prefix}'`, 'i')} as cmid, ${benchProviderIdSql(`'${prefix}'`, 'i')} as pmid
             from generate_series(1, 200) as i order by i`,
          ),
        ),
      );
      expect(rows).toHaveLength(200);
      for (const r of rows) {
        expect(r.cmid).toBe(benchCustomerId(prefix, r.i));
        expect(r.pmid).toBe(benchProviderId(prefix, r.i));
        for (const other of prefixes) expect(benchIdInSet(r.cmid, other)).toBe(other === prefix);
      }
      // in random order: sorted, consecutive messages are no longer neighbours
      const sorted = rows.map((r) => r.cmid).sort();
      const neighbours = sorted.filter(
        (id, k) => k > 0 && id.endsWith(`.${prefix}${Number(sorted[k - 1]!.split(prefix)[1]) + 1}`),
      );
      expect(neighbours.length).toBeLessThan(20);
    }
    const [like] = rowsOf<{ n: number }>(
      await db.execute(
        sql.raw(
          `select count(*)::int as n from (select ${benchCustomerIdSql("'g-'", 'i')} as id from generate_series(1, 50) as i
           union all select ${benchCustomerIdSql("'gi0-w1-'", 'i')} from generate_series(1, 50) as i) s
           where id like '${benchIdPattern('g-')}'`,
        ),
      ),
    );
    expect(like?.n).toBe(50);
  });
});
