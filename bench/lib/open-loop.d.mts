/** Types of bench/lib/open-loop.mjs (plain JavaScript: it runs without the TypeScript loader). */
export interface OpenLoopRun {
  host: string;
  port: number;
  rate: number;
  connections: number;
  timeoutMs: number;
  requests: Buffer;
  offsets: Uint32Array;
}

export interface OpenLoopResult {
  latencies: Float64Array;
  statuses: Uint16Array;
  errors: number;
  seconds: number;
  /** when request 0 was due, in ms on CLOCK_MONOTONIC (the clock of perf and of V8's traces) */
  startMonotonicMs: number;
}

export function responseReader(onResponse: (status: number, close: boolean) => void): {
  push(chunk: Buffer): void;
};

export function runOpenLoop(run: OpenLoopRun): Promise<OpenLoopResult>;
