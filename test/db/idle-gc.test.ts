/**
 * The embedded server's collection when idle (src/db/idle-gc.ts): the rule over a scripted
 * event loop and heap, and the real collection it calls.
 */
import { describe, expect, it } from 'vitest';
import {
  createIdleGc,
  fullGc,
  IDLE_GC_BUSY_BELOW,
  IDLE_GC_GROWTH_BYTES,
} from '../../src/db/idle-gc.ts';

const MB = 2 ** 20;

/** A probe whose busy share and heap the test sets; counts collections, which shrink the heap. */
function scripted() {
  const state = { busy: 0, heap: 40 * MB, collections: 0 };
  const idle = createIdleGc({
    gc: () => {
      state.collections++;
      state.heap = 40 * MB;
    },
    busyShare: () => state.busy,
    heapUsed: () => state.heap,
  });
  return { state, idle };
}

describe('createIdleGc', () => {
  it('collects when the loop was idle and the heap grew since the last collection', () => {
    const { state, idle } = scripted();
    state.busy = 0.01;
    state.heap = 40 * MB + IDLE_GC_GROWTH_BYTES; // grown since the start (nothing collected yet)
    expect(idle.check()).toBe(true);
    expect(state.collections).toBe(1);
    // idle again, but the heap has not grown enough since: nothing to give back
    state.heap = 40 * MB + IDLE_GC_GROWTH_BYTES - 1;
    expect(idle.check()).toBe(false);
    state.heap = 40 * MB + IDLE_GC_GROWTH_BYTES;
    expect(idle.check()).toBe(true);
    expect(state.collections).toBe(2);
  });

  it('never collects a busy process, however much the heap grew', () => {
    const { state, idle } = scripted();
    state.heap = 400 * MB;
    for (const busy of [IDLE_GC_BUSY_BELOW, 0.5, 1]) {
      state.busy = busy;
      expect(idle.check()).toBe(false);
    }
    expect(state.collections).toBe(0);
    state.busy = IDLE_GC_BUSY_BELOW / 2; // the load is over
    expect(idle.check()).toBe(true);
  });
});

describe('fullGc', () => {
  it('is a real full collection: unreachable objects are gone after it', async () => {
    const gc = fullGc();
    const ref = new WeakRef({ payload: new Array(1000).fill('x') });
    // a WeakRef's target is held until the job that made it ends
    await new Promise((resolve) => setImmediate(resolve));
    gc();
    expect(ref.deref()).toBeUndefined();
  });
});
