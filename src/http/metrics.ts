/**
 * Prometheus metrics, one registry per app (no process globals, so two apps in one test
 * process do not share counters). Domain parts register their own metrics on `registry`.
 */
import type { MiddlewareHandler } from 'hono';
import { Counter, Histogram, Registry } from 'prom-client';
import type { AppEnv } from './env.ts';

export interface Metrics {
  registry: Registry;
  httpRequests: Counter<'method' | 'route' | 'status'>;
  httpDuration: Histogram<'method' | 'route'>;
}

export function createMetrics(): Metrics {
  const registry = new Registry();
  return {
    registry,
    httpRequests: new Counter({
      name: 'http_requests_total',
      help: 'HTTP requests by method, route pattern and status',
      labelNames: ['method', 'route', 'status'],
      registers: [registry],
    }),
    httpDuration: new Histogram({
      name: 'http_request_duration_seconds',
      help: 'HTTP request duration by method and route pattern',
      labelNames: ['method', 'route'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers: [registry],
    }),
  };
}

/** Counts every request by its route pattern (never the raw path: ids would explode labels). */
export function metricsMiddleware(metrics: Metrics): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const start = performance.now();
    try {
      await next();
    } finally {
      const route =
        c.res.status === 404 && c.req.routePath === '/*' ? 'unmatched' : c.req.routePath;
      metrics.httpRequests.inc({ method: c.req.method, route, status: String(c.res.status) });
      metrics.httpDuration.observe(
        { method: c.req.method, route },
        (performance.now() - start) / 1000,
      );
    }
  };
}
