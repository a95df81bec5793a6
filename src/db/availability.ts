/**
 * A breaker in front of the Postgres pool. While Postgres is down, postgres.js queues every
 * query for a connection it keeps trying to make (each attempt up to connect_timeout, one
 * queued query failed per attempt), so under load a request waited many seconds for its 503.
 * After a query fails because the database is not answering (isDatabaseUnavailable) the
 * database is "down": the routes that need it answer 503 at once (src/app.ts), without
 * touching the pool. While down, one probe at a time asks `select 1`; the first that answers
 * makes it "up" again. While up it costs a boolean read and sends nothing.
 *
 * @example
 * const availability = createAvailability((timeoutMs) => database.ping(timeoutMs));
 * if (!availability.up) throw databaseDown();
 */
import { DATABASE_DOWN, isDatabaseUnavailable } from './errors.ts';

/** How often a down database is asked again: recovery is seen within about this long. */
const PROBE_EVERY_MS = 250;
/** A probe slower than /readyz's own limit is no sign the database can take traffic again. */
const PROBE_TIMEOUT_MS = 1000;

export interface DatabaseAvailability {
  /** false from an outage seen until a probe answers: requests that need the database wait on nothing */
  readonly up: boolean;
  /** told of a failed query: an outage marks the database down and starts probing; other errors do nothing */
  failed(err: unknown): void;
  /** stops probing for good (the database is closing) */
  stop(): void;
}

/** The breaker; `probe` runs `select 1`, failing when it has no answer within `timeoutMs`. */
export function createAvailability(
  probe: (timeoutMs: number) => Promise<void>,
): DatabaseAvailability {
  let up = true;
  let stopped = false;
  // set from the moment a probe is scheduled until it has settled: never two at once
  let pending: NodeJS.Timeout | undefined;
  const schedule = (delayMs: number) => {
    if (up || stopped || pending) return;
    pending = setTimeout(async () => {
      try {
        await probe(PROBE_TIMEOUT_MS);
        up = true;
      } catch {
        // still down: the next probe asks again
      } finally {
        pending = undefined;
        schedule(PROBE_EVERY_MS);
      }
    }, delayMs);
    // probing never keeps the process alive
    pending.unref();
  };
  return {
    get up() {
      return up;
    },
    failed(err) {
      if (!isDatabaseUnavailable(err)) return;
      up = false;
      // the first probe at once: an error that was no outage (one connection ended, say)
      // closes it again within a round trip instead of refusing requests for PROBE_EVERY_MS
      schedule(0);
    },
    stop() {
      stopped = true;
      clearTimeout(pending);
      pending = undefined;
    },
  };
}

/** For the embedded engine: in-process, no pool to queue on, so never down. */
export const ALWAYS_UP: DatabaseAvailability = { up: true, failed() {}, stop() {} };

/** What a request that needs the database throws while it is down: onError answers 503. */
export function databaseDown(): Error {
  return Object.assign(new Error('the database is down (a probe is waiting for it)'), {
    code: DATABASE_DOWN,
  });
}
