/**
 * The workers' loop (src/workers.ts `loop`): a wake that comes while a step runs is kept, so
 * the next step runs at once instead of after the idle wait (a NOTIFY about new work that
 * arrived mid-round used to wait for the next poll). The idle wait here is an hour: a second
 * step can only come from the wake.
 */
import { expect, it } from 'vitest';
import { createLogger } from '../src/logger.ts';
import { loop } from '../src/workers.ts';

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
