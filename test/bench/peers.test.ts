import { afterEach, describe, expect, it } from 'vitest';
import { median, medianRun, peerRounds } from '../../bench/peers.ts';

describe('the peers comparison: medians of alternating runs', () => {
  afterEach(() => {
    delete process.env.BENCH_ROUNDS;
  });

  it('takes the middle of an odd count and the mean of the two middles of an even one', () => {
    expect(median([5, 1, 3])).toBe(3);
    expect(median([4, 1, 3, 10])).toBe(3.5);
    expect(median([])).toBeNaN();
  });

  it('picks the run whose figure is the median, the lower middle of an even count', () => {
    const runs = [{ rps: 900 }, { rps: 1200 }, { rps: 1000 }];
    expect(medianRun(runs, (r) => r.rps)).toBe(runs[2]);
    expect(medianRun([...runs, { rps: 1100 }], (r) => r.rps)).toBe(runs[2]);
  });

  it('runs BENCH_ROUNDS rounds, at least one, three by default or when unreadable', () => {
    expect(peerRounds()).toBe(3);
    process.env.BENCH_ROUNDS = '5';
    expect(peerRounds()).toBe(5);
    process.env.BENCH_ROUNDS = '0';
    expect(peerRounds()).toBe(1);
    process.env.BENCH_ROUNDS = 'many';
    expect(peerRounds()).toBe(3);
  });
});
