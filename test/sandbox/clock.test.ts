import { describe, expect, test } from 'vitest';
import { createManualClock, createRealClock, Scheduler } from '../../src/sandbox/clock.ts';

describe('manual clock', () => {
  test('runs due tasks in time order, each at its own time, and stops at the target', async () => {
    const clock = createManualClock(1000);
    const seen: [string, number][] = [];
    clock.schedule(1300, () => {
      seen.push(['b', clock.now()]);
    });
    clock.schedule(1100, () => {
      seen.push(['a', clock.now()]);
    });
    clock.schedule(5000, () => {
      seen.push(['late', clock.now()]);
    });
    await clock.advance(500);
    expect(seen).toEqual([
      ['a', 1100],
      ['b', 1300],
    ]);
    expect(clock.now()).toBe(1500);
    expect(clock.pending()).toBe(1);
    expect(clock.nextAt()).toBe(5000);
  });

  test('tasks at the same time run in the order they were scheduled', async () => {
    const clock = createManualClock(0);
    const seen: number[] = [];
    for (const n of [1, 2, 3]) clock.schedule(10, () => void seen.push(n));
    await clock.advance(10);
    expect(seen).toEqual([1, 2, 3]);
  });

  test('advance awaits a task and what it schedules within the window', async () => {
    const clock = createManualClock(0);
    const seen: string[] = [];
    clock.schedule(10, async () => {
      await new Promise((r) => setTimeout(r, 5));
      seen.push('first');
      clock.schedule(clock.now() + 10, () => void seen.push('chained'));
    });
    await clock.advance(15);
    expect(seen).toEqual(['first']);
    await clock.advance(5);
    expect(seen).toEqual(['first', 'chained']);
  });

  test('a cancelled task never runs, and a throwing task does not stop time', async () => {
    const clock = createManualClock(0);
    const seen: string[] = [];
    const handle = clock.schedule(5, () => void seen.push('cancelled'));
    clock.schedule(6, () => {
      throw new Error('boom');
    });
    clock.schedule(7, () => void seen.push('after'));
    clock.cancel(handle);
    await clock.advance(10);
    expect(seen).toEqual(['after']);
  });

  test('advance refuses a negative duration', () => {
    expect(() => createManualClock(0).advance(-1)).toThrow(RangeError);
  });
});

describe('scheduler', () => {
  test('cancelAll drops what was scheduled before it, not what comes after', async () => {
    const clock = createManualClock(0);
    const scheduler = new Scheduler(clock);
    const seen: string[] = [];
    scheduler.after(10, () => void seen.push('old'));
    scheduler.cancelAll();
    scheduler.after(10, () => void seen.push('new'));
    await clock.advance(20);
    expect(seen).toEqual(['new']);
  });

  test('on the real clock, tasks due at one millisecond share a timer and run in order', async () => {
    const clock = createRealClock();
    const scheduled: number[] = [];
    const schedule = clock.schedule.bind(clock);
    clock.schedule = (at, task) => {
      scheduled.push(at);
      return schedule(at, task);
    };
    const scheduler = new Scheduler(clock);
    const at = clock.now() + 5;
    const seen: string[] = [];
    let settled = false;
    scheduler.at(at, () => void seen.push('a'));
    scheduler.at(at, () => {
      throw new Error('a failing task stops no other');
    });
    scheduler.at(at, async () => {
      await new Promise((r) => setTimeout(r, 5));
      settled = true;
    });
    scheduler.at(at + 1, () => void seen.push('c'));
    scheduler.at(at, () => void seen.push('b'));
    expect(scheduled).toEqual([at, at + 1]);
    await new Promise((r) => setTimeout(r, 30));
    await clock.settled();
    expect(seen).toEqual(['a', 'b', 'c']);
    expect(settled).toBe(true);
  });

  test('on the real clock, cancelAll drops grouped tasks, and later ones group anew', async () => {
    const scheduler = new Scheduler(createRealClock());
    const at = scheduler.now() + 5;
    const seen: string[] = [];
    scheduler.at(at, () => void seen.push('old'));
    scheduler.cancelAll();
    scheduler.at(at, () => void seen.push('new'));
    await new Promise((r) => setTimeout(r, 30));
    expect(seen).toEqual(['new']);
  });
});

describe('real clock', () => {
  test('runs a task scheduled in the past soon, and settled() waits for it', async () => {
    const clock = createRealClock();
    let done = false;
    clock.schedule(clock.now() - 1000, async () => {
      await new Promise((r) => setTimeout(r, 1));
      done = true;
    });
    await new Promise((r) => setTimeout(r, 10));
    await clock.settled();
    expect(done).toBe(true);
  });

  test('a cancelled task does not run', async () => {
    const clock = createRealClock();
    let ran = false;
    const handle = clock.schedule(clock.now() + 5, () => {
      ran = true;
    });
    clock.cancel(handle);
    await new Promise((r) => setTimeout(r, 20));
    expect(ran).toBe(false);
  });
});
