/**
 * The workers' loop (src/workers.ts `loop`): a wake that comes while a step runs is kept, so
 * the next step runs at once instead of after the idle wait (a NOTIFY about new work that
 * arrived mid-round used to wait for the next poll). The idle wait here is an hour: a second
 * step can only come from the wake.
 */
import { expect, it, vi } from 'vitest';
import { createLogger } from '../src/logger.ts';
import {
  loop,
  renderBeforeDispatch,
  SPOKEN_WAIT_MS,
  STEP_REPORT_MS,
  STOP_REPORT_MS,
} from '../src/workers.ts';
import { captureLog } from './support/log-capture.ts';

it('keeps a wake that comes while a step runs, and runs the next step at once', async () => {
  let steps = 0;
  let release!: () => void;
  const inFirst = new Promise<void>((r) => {
    release = r;
  });
  let secondStep!: () => void;
  const second = new Promise<void>((r) => {
    secondStep = r;
  });
  let entered!: () => void;
  const firstEntered = new Promise<void>((r) => {
    entered = r;
  });
  const l = loop('test', createLogger('silent'), 3_600_000, async () => {
    steps++;
    if (steps === 1) {
      entered();
      await inFirst;
    }
    if (steps === 2) secondStep();
    return false;
  });
  await firstEntered;
  l.wake(); // while the first step runs
  release();
  await second;
  expect(steps).toBe(2);
  await l.stop();
});

it('sleeps the idle wait when nothing woke it', async () => {
  let steps = 0;
  let entered!: () => void;
  const firstEntered = new Promise<void>((r) => {
    entered = r;
  });
  const l = loop('test', createLogger('silent'), 3_600_000, async () => {
    steps++;
    entered();
    return false;
  });
  await firstEntered;
  // nothing woke it: after the step, the loop sleeps its hour (stop ends the sleep, no step)
  await new Promise((r) => setImmediate(r));
  expect(steps).toBe(1);
  await l.stop();
  expect(steps).toBe(1);
});

it('says which worker is stuck in its step and what it does, every STEP_REPORT_MS, until the step ends', async () => {
  vi.useFakeTimers({
    toFake: ['setInterval', 'clearInterval', 'setTimeout', 'clearTimeout', 'Date'],
  });
  try {
    const log = captureLog();
    let release!: () => void;
    const stuck = new Promise<void>((r) => {
      release = r;
    });
    let steps = 0;
    let next!: () => void;
    const secondPart = new Promise<void>((r) => {
      next = r;
    });
    const l = loop('stuck-worker', createLogger('warn', log.stream), 3_600_000, async (doing) => {
      steps++;
      doing('the first part');
      await secondPart;
      doing('the second part');
      await stuck;
      return false;
    });
    const reports = () =>
      log.lines
        .map((line) => JSON.parse(line))
        .filter((e) => e.msg === 'worker step still running');
    await vi.advanceTimersByTimeAsync(STEP_REPORT_MS - 1);
    expect(reports()).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(reports()).toEqual([
      expect.objectContaining({
        worker: 'stuck-worker',
        runningMs: STEP_REPORT_MS,
        doing: 'the first part',
      }),
    ]);
    next();
    await vi.advanceTimersByTimeAsync(STEP_REPORT_MS);
    expect(reports().map((e) => [e.runningMs, e.doing])).toEqual([
      [STEP_REPORT_MS, 'the first part'],
      [2 * STEP_REPORT_MS, 'the second part'],
    ]);
    release();
    await vi.advanceTimersByTimeAsync(0);
    // the step ended: the loop sleeps its hour, and says nothing more
    await vi.advanceTimersByTimeAsync(3 * STEP_REPORT_MS);
    expect(reports()).toHaveLength(2);
    expect(steps).toBe(1);
    await l.stop();
  } finally {
    vi.useRealTimers();
  }
});

it('says which worker step holds a stop after STOP_REPORT_MS, and nothing when the stop is quick', async () => {
  vi.useFakeTimers({
    toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'],
  });
  try {
    const log = captureLog();
    let release!: () => void;
    const stuck = new Promise<void>((r) => {
      release = r;
    });
    let entered!: () => void;
    const inStep = new Promise<void>((r) => {
      entered = r;
    });
    const l = loop('holding-worker', createLogger('warn', log.stream), 3_600_000, async (doing) => {
      doing('waiting on a lock');
      entered();
      await stuck;
      return false;
    });
    await inStep;
    let stopped = false;
    const stopping = l.stop().then(() => {
      stopped = true;
    });
    const held = () =>
      log.lines
        .map((line) => JSON.parse(line))
        .filter((e) => e.msg === 'stop waits for a worker step');
    await vi.advanceTimersByTimeAsync(STOP_REPORT_MS - 1);
    expect(held()).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(held()).toEqual([
      expect.objectContaining({
        worker: 'holding-worker',
        runningMs: STOP_REPORT_MS,
        doing: 'waiting on a lock',
      }),
    ]);
    expect(stopped).toBe(false);
    release();
    await stopping;
    // a loop stopped while it sleeps stops at once and says nothing
    const quiet = captureLog();
    const idle = loop(
      'idle-worker',
      createLogger('warn', quiet.stream),
      3_600_000,
      async () => false,
    );
    await vi.advanceTimersByTimeAsync(0);
    await idle.stop();
    await vi.advanceTimersByTimeAsync(STOP_REPORT_MS);
    expect(quiet.lines).toEqual([]);
  } finally {
    vi.useRealTimers();
  }
});

it('sends after SPOKEN_WAIT_MS when the spoken prompts render no further, and says so', async () => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
  try {
    const log = captureLog();
    // a render that never ends (a stuck speech engine)
    const never = { renderPending: () => new Promise<number>(() => {}) };
    let waited = false;
    const waiting = renderBeforeDispatch(never, createLogger('warn', log.stream)).then(() => {
      waited = true;
    });
    await vi.advanceTimersByTimeAsync(SPOKEN_WAIT_MS - 1);
    expect(waited).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    await waiting;
    const warned = log.lines.map((line) => JSON.parse(line));
    expect(warned).toEqual([
      expect.objectContaining({
        msg: 'spoken prompts not rendered before dispatch; they render when fetched',
        err: expect.objectContaining({
          message: `the spoken prompts' render did not answer within ${SPOKEN_WAIT_MS} ms`,
        }),
      }),
    ]);
    // a render that ends in time is waited for, and nothing is said
    const quiet = captureLog();
    await renderBeforeDispatch(
      { renderPending: async () => 3 },
      createLogger('warn', quiet.stream),
    );
    expect(quiet.lines).toEqual([]);
  } finally {
    vi.useRealTimers();
  }
});
