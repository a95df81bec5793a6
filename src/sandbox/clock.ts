/**
 * The sandbox's sense of time. Every lifecycle step, callback retry, token expiry and
 * rate-limit refill reads this clock and schedules on it, so a test that drives a manual
 * clock sees in milliseconds what takes minutes (or days, for a TTL) at a real provider.
 *
 * @example
 * const clock = createManualClock(Date.parse('2030-01-01T00:00:00Z'));
 * clock.schedule(clock.now() + 1000, () => console.log('one second later'));
 * await clock.advance(1000); // runs it, and awaits what it started
 */

/** A task the clock runs when its time comes; a returned promise is awaited by `advance`. */
export type ClockTask = () => void | Promise<void>;

/** An opaque handle for `cancel`. */
export interface TimerHandle {
  readonly id: number;
}

export interface SandboxClock {
  /** Whether tests drive this clock (`advance`) instead of the wall clock. */
  readonly manual: boolean;
  /** Milliseconds since the epoch, on this clock. */
  now(): number;
  /** Runs `task` at time `at` (ms since the epoch on this clock); a past `at` runs soon. */
  schedule(at: number, task: ClockTask): TimerHandle;
  cancel(handle: TimerHandle): void;
  /** Keeps `promise` in the set that `settled()` (and a manual `advance`) waits for. */
  track(promise: Promise<unknown>): void;
  /** Resolves once every tracked promise has settled (new ones included). */
  settled(): Promise<void>;
}

export interface ManualClock extends SandboxClock {
  readonly manual: true;
  /**
   * Moves time forward by `ms`, running every task due on the way in time order (each at its
   * own time), and awaiting each task and whatever it tracked before the next one runs.
   */
  advance(ms: number): Promise<void>;
  /** Runs the tasks that are due now (at the current time), as `advance(0)`. */
  runDue(): Promise<void>;
  /** How many tasks are scheduled and not yet run. */
  pending(): number;
  /** The time of the next scheduled task, or undefined when none is. */
  nextAt(): number | undefined;
}

class Tracker {
  private readonly inFlight = new Set<Promise<unknown>>();

  track(promise: Promise<unknown>): void {
    const settled = promise.then(
      () => undefined,
      () => undefined,
    );
    this.inFlight.add(settled);
    void settled.then(() => this.inFlight.delete(settled));
  }

  async settled(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.all([...this.inFlight]);
  }
}

/**
 * A clock that tests drive: nothing happens until `advance` (or `runDue`) is awaited.
 *
 * @example
 * const clock = createManualClock();
 * await clock.advance(5_000);
 */
export function createManualClock(start: number = Date.now()): ManualClock {
  let now = start;
  let nextId = 1;
  // A binary min-heap on (at, id); cancelled timers are dropped when they surface.
  const heap: { at: number; id: number; task: ClockTask }[] = [];
  const live = new Set<number>();
  const tracker = new Tracker();

  const before = (a: { at: number; id: number }, b: { at: number; id: number }) =>
    a.at < b.at || (a.at === b.at && a.id < b.id);

  function push(timer: { at: number; id: number; task: ClockTask }): void {
    heap.push(timer);
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(heap[i]!, heap[parent]!)) break;
      [heap[i], heap[parent]] = [heap[parent]!, heap[i]!];
      i = parent;
    }
  }

  function pop(): { at: number; id: number; task: ClockTask } | undefined {
    const top = heap[0];
    const last = heap.pop();
    if (top === undefined || last === undefined || heap.length === 0) return top;
    heap[0] = last;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < heap.length && before(heap[l]!, heap[m]!)) m = l;
      if (r < heap.length && before(heap[r]!, heap[m]!)) m = r;
      if (m === i) break;
      [heap[i], heap[m]] = [heap[m]!, heap[i]!];
      i = m;
    }
    return top;
  }

  /** The earliest live timer, with cancelled ones cleared off the top. */
  function peek(): { at: number; id: number; task: ClockTask } | undefined {
    while (heap[0] !== undefined && !live.has(heap[0].id)) pop();
    return heap[0];
  }

  async function runUntil(target: number): Promise<void> {
    await tracker.settled();
    for (;;) {
      const next = peek();
      if (next === undefined || next.at > target) break;
      pop();
      live.delete(next.id);
      if (next.at > now) now = next.at;
      try {
        const result = next.task();
        if (result instanceof Promise) tracker.track(result);
      } catch {
        // A failing task must not stop time; the task logs its own failures.
      }
      await tracker.settled();
    }
    if (target > now) now = target;
  }

  return {
    manual: true,
    now: () => now,
    schedule(at, task) {
      const id = nextId++;
      live.add(id);
      push({ at, id, task });
      return { id };
    },
    cancel(handle) {
      live.delete(handle.id);
    },
    track: (promise) => tracker.track(promise),
    settled: () => tracker.settled(),
    advance(ms) {
      if (!(ms >= 0)) throw new RangeError(`advance needs a non-negative number of ms, got ${ms}`);
      return runUntil(now + ms);
    },
    runDue: () => runUntil(now),
    pending: () => live.size,
    nextAt: () => peek()?.at,
  };
}

// setTimeout keeps delays in a signed 32-bit integer; longer ones fire at once.
const MAX_TIMEOUT = 2 ** 31 - 1;

/**
 * The wall clock, with `setTimeout` underneath. Timers are unref'd so a forgotten one never
 * keeps a process alive.
 *
 * @example
 * const clock = createRealClock();
 */
export function createRealClock(): SandboxClock {
  let nextId = 1;
  const timers = new Map<number, NodeJS.Timeout>();
  const tracker = new Tracker();

  function arm(id: number, at: number, task: ClockTask): void {
    const delay = Math.max(0, at - Date.now());
    const timeout = setTimeout(
      () => {
        if (delay > MAX_TIMEOUT) return arm(id, at, task);
        timers.delete(id);
        try {
          const result = task();
          if (result instanceof Promise) tracker.track(result);
        } catch {
          // as in the manual clock: the task logs its own failures
        }
      },
      Math.min(delay, MAX_TIMEOUT),
    );
    timeout.unref();
    timers.set(id, timeout);
  }

  return {
    manual: false,
    now: () => Date.now(),
    schedule(at, task) {
      const id = nextId++;
      arm(id, at, task);
      return { id };
    },
    cancel(handle) {
      const timeout = timers.get(handle.id);
      if (timeout !== undefined) clearTimeout(timeout);
      timers.delete(handle.id);
    },
    track: (promise) => tracker.track(promise),
    settled: () => tracker.settled(),
  };
}

/**
 * The sandbox's own timers on a shared clock, so that `reset` and `close` cancel exactly
 * what this sandbox scheduled (a test may share one manual clock between several parts).
 */
export class Scheduler {
  private readonly handles = new Set<TimerHandle>();
  private generation = 0;
  /**
   * On the real clock, the tasks due at one millisecond share one clock timer, run in the
   * order they came: every message of a messagelist has its steps at the same times, and a
   * timer each (a `setTimeout`, its handle, a closure) was a tenth of the sandbox's CPU on
   * lists of 5000, most of it the garbage collector's. A manual clock keeps a timer per task,
   * since `advance` awaits each task before the next.
   */
  private readonly groups = new Map<number, ClockTask[]>();

  constructor(readonly clock: SandboxClock) {}

  now(): number {
    return this.clock.now();
  }

  /** Runs `task` at `at`; a task scheduled before the last `cancelAll` never runs. */
  at(at: number, task: ClockTask): void {
    if (!this.clock.manual) {
      const group = this.groups.get(at);
      if (group !== undefined) group.push(task);
      else this.group(at, task);
      return;
    }
    const generation = this.generation;
    const handle = this.clock.schedule(at, () => {
      this.handles.delete(handle);
      if (generation !== this.generation) return;
      return task();
    });
    this.handles.add(handle);
  }

  private group(at: number, first: ClockTask): void {
    const tasks = [first];
    this.groups.set(at, tasks);
    const generation = this.generation;
    const handle = this.clock.schedule(at, () => {
      this.handles.delete(handle);
      // a task for this millisecond from here on starts a group of its own
      if (this.groups.get(at) === tasks) this.groups.delete(at);
      if (generation !== this.generation) return;
      for (const task of tasks) {
        try {
          const result = task();
          if (result instanceof Promise) this.clock.track(result);
        } catch {
          // as the clocks do: a failing task must not stop the others; it logs its own failures
        }
      }
    });
    this.handles.add(handle);
  }

  /** Runs `task` after `ms` on this clock. */
  after(ms: number, task: ClockTask): void {
    this.at(this.clock.now() + ms, task);
  }

  /** Runs `promise`'s follow-up in the clock's tracked set (awaited by a manual `advance`). */
  track(promise: Promise<unknown>): void {
    this.clock.track(promise);
  }

  /** Whether tasks of the current generation may still run (false after `cancelAll`). */
  isCurrent(generation: number): boolean {
    return generation === this.generation;
  }

  currentGeneration(): number {
    return this.generation;
  }

  cancelAll(): void {
    this.generation++;
    for (const handle of this.handles) this.clock.cancel(handle);
    this.handles.clear();
    this.groups.clear();
  }
}
