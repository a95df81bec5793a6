/**
 * A full garbage collection once the server has gone idle, for a server on the embedded
 * engine (src/db/embedded.ts). An idle server still polls its database (the dispatcher, the
 * timers, the deliveries, the campaigns: ~45 statements a second on PGlite), and what those
 * polls leave behind is promoted to V8's old generation, which only a full collection frees.
 * With the embedded engine nothing else triggers one while idle (V8's memory reducer waits
 * for an allocation rate the polls never fall to), so the heap crept up by ~12 MB a minute
 * until V8's own limit: the RSS measured after 60 s idle was wherever that sawtooth stood,
 * 172 to 200 MB. Every IDLE_GC_EVERY_MS, when the event loop was busy less than
 * IDLE_GC_BUSY_BELOW of that time and the heap grew by IDLE_GC_GROWTH_BYTES since the last
 * collection, one full collection runs (some tens of ms of CPU). The engine runs its
 * statements on the event loop, so an idle server's polls keep it 10-20 % busy (measured on a
 * loaded machine); a server under load, busy half the time or more, is left to V8.
 *
 * @example
 * startIdleGc(); // once per process; the timer never keeps it alive
 */
import { performance } from 'node:perf_hooks';
import { getHeapStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

export const IDLE_GC_EVERY_MS = 10_000;
/** below this share of the interval spent running, the process counts as idle */
export const IDLE_GC_BUSY_BELOW = 0.5;
/** heap growth since the last collection worth one more */
export const IDLE_GC_GROWTH_BYTES = 4 * 2 ** 20;

export interface IdleGcProbe {
  /** a full garbage collection */
  gc: () => void;
  /** the share of the time since the last call that the event loop was busy (0 to 1) */
  busyShare: () => number;
  /** the heap's bytes in use */
  heapUsed: () => number;
}

/** The rule, on its own: `check()` collects when it should, and says whether it did. */
export function createIdleGc(probe: IdleGcProbe): { check: () => boolean } {
  let afterLast = 0;
  return {
    check() {
      if (probe.busyShare() >= IDLE_GC_BUSY_BELOW) return false;
      if (probe.heapUsed() - afterLast < IDLE_GC_GROWTH_BYTES) return false;
      probe.gc();
      afterLast = probe.heapUsed();
      return true;
    },
  };
}

/**
 * V8's full collection, made callable without `--expose-gc` on the command line. Called with
 * no options: in Node 20's V8 an options object (`{ type: 'major' }`) left a dead object alive
 * and the heap as it was (test/db/idle-gc.test.ts holds the plain call to collecting).
 */
export function fullGc(): () => void {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  return () => gc();
}

let started: NodeJS.Timeout | undefined;

/** Starts the check for this process (once; later calls do nothing). */
export function startIdleGc(): void {
  if (started) return;
  let last = performance.eventLoopUtilization();
  const idle = createIdleGc({
    gc: fullGc(),
    busyShare: () => {
      const now = performance.eventLoopUtilization();
      const share = performance.eventLoopUtilization(now, last).utilization;
      last = now;
      return share;
    },
    heapUsed: () => getHeapStatistics().used_heap_size,
  });
  started = setInterval(() => idle.check(), IDLE_GC_EVERY_MS);
  started.unref(); // never what keeps the process alive
}
