import { afterEach, describe, expect, test, vi } from 'vitest';
import { createManualClock, createRealClock, Scheduler } from '../../src/sandbox/clock.ts';

// The real-clock tests run on vitest's fake timers: the clock's subject is which setTimeouts it
// arms and what it does when they fire, and a fake timer fires exactly when the test says so.
afterEach(() => {
  vi.useRealTimers();
});

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
      // real asynchronous work in the task (the subject: advance awaits it, however long)
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
    vi.useFakeTimers();
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
    expect(vi.getTimerCount()).toBe(2);
    // both group timers fire; the async task is still at work (its own 5 ms timer)
    await vi.advanceTimersByTimeAsync(at + 1 - clock.now());
    expect(seen).toEqual(['a', 'b', 'c']);
    expect(settled).toBe(false);
    // settled() waits for it
    const done = clock.settled();
    await vi.advanceTimersByTimeAsync(5);
    await done;
    expect(settled).toBe(true);
    expect(vi.getTimerCount()).toBe(0);
  });

  test('on the real clock, cancelAll drops grouped tasks, and later ones group anew', async () => {
    vi.useFakeTimers();
    const scheduler = new Scheduler(createRealClock());
    const at = scheduler.now() + 5;
    const seen: string[] = [];
    scheduler.at(at, () => void seen.push('old'));
    scheduler.cancelAll();
    scheduler.at(at, () => void seen.push('new'));
    // the old group's timer is cleared, the new group's is the only one armed
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(at - scheduler.now());
    expect(seen).toEqual(['new']);
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe('real clock', () => {
  test('runs a task scheduled in the past soon, and settled() waits for it', async () => {
    vi.useFakeTimers();
    const clock = createRealClock();
    let started = false;
    let done = false;
    clock.schedule(clock.now() - 1000, async () => {
      started = true;
      await new Promise((r) => setTimeout(r, 1));
      done = true;
    });
    expect(started).toBe(false);
    // "soon": on a timer of no delay, not at once
    await vi.advanceTimersByTimeAsync(0);
    expect(started).toBe(true);
    expect(done).toBe(false);
    const settled = clock.settled();
    await vi.advanceTimersByTimeAsync(1);
    await settled;
    expect(done).toBe(true);
  });

  test('a cancelled task does not run', async () => {
    vi.useFakeTimers();
    const clock = createRealClock();
    let ran = false;
    const handle = clock.schedule(clock.now() + 5, () => {
      ran = true;
    });
    clock.cancel(handle);
    expect(vi.getTimerCount()).toBe(0);
    await vi.advanceTimersByTimeAsync(20);
    expect(ran).toBe(false);
  });
});
