/**
 * Test helpers: a Hono app served over real HTTP on 127.0.0.1, port 0, and a server-side
 * rate meter that judges arrivals by the provider's own token-bucket rule.
 */
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import type { Hono } from 'hono';

export interface LocalServer {
  url: string;
  close(): Promise<void>;
}

/** Serves `app` on an ephemeral loopback port. */
export function listen(app: Hono): Promise<LocalServer> {
  return new Promise((resolve) => {
    const server = serve(
      { fetch: app.fetch, port: 0, hostname: '127.0.0.1' },
      (info: AddressInfo) => {
        resolve({
          url: `http://127.0.0.1:${info.port}`,
          close: () =>
            new Promise<void>((done) => {
              if ('closeAllConnections' in server) server.closeAllConnections();
              server.close(() => done());
            }),
        });
      },
    );
  });
}

/**
 * Judges each arrival as the provider would: a GCRA token bucket of `ratePerSecond` with
 * `burst`. `toleranceMs` absorbs scheduling jitter between the client's send and the
 * server's receipt on a busy machine (10 ms is one token at 100/s).
 */
export function createRateMeter(limit: {
  ratePerSecond: number;
  burst: number;
  toleranceMs?: number;
}) {
  const interval = 1000 / limit.ratePerSecond;
  const tolerance = (limit.burst - 1) * interval + (limit.toleranceMs ?? 0);
  let tat = Number.NEGATIVE_INFINITY;
  let violations = 0;
  let worstEarlyMs = 0;
  const arrivals: number[] = [];
  return {
    /** Records an arrival; false when it breaks the limit. */
    hit(now = performance.now()): boolean {
      arrivals.push(now);
      const allowedAt = tat - tolerance;
      if (now < allowedAt) {
        violations++;
        worstEarlyMs = Math.max(worstEarlyMs, allowedAt - now);
        return false;
      }
      tat = Math.max(tat, now) + interval;
      return true;
    },
    get violations() {
      return violations;
    },
    get worstEarlyMs() {
      return worstEarlyMs;
    },
    /** Most arrivals within any window of `windowMs`. */
    maxInWindow(windowMs: number): number {
      let best = 0;
      let lo = 0;
      for (let hi = 0; hi < arrivals.length; hi++) {
        while ((arrivals[hi] ?? 0) - (arrivals[lo] ?? 0) >= windowMs) lo++;
        best = Math.max(best, hi - lo + 1);
      }
      return best;
    },
    get count() {
      return arrivals.length;
    },
  };
}
