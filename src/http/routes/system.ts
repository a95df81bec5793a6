/**
 * Operational routes: liveness, readiness, metrics. Open to everyone (they carry no personal
 * data), and documented in the OpenAPI document like the rest.
 */
import { createRoute, z } from '@hono/zod-openapi';
import type { Database } from '../../db/client.ts';
import { migrationsApplied } from '../../db/migrate.ts';
import type { Metrics } from '../metrics.ts';
import { newRouter } from '../router.ts';

const Status = z.object({ status: z.string() }).meta({ id: 'Status' });
const Readiness = z
  .object({
    status: z.enum(['ok', 'unavailable']),
    database: z.enum(['ok', 'down', 'migrating']),
    engine: z.enum(['pglite', 'postgres']),
  })
  .meta({ id: 'Readiness' });

const healthz = createRoute({
  method: 'get',
  path: '/healthz',
  operationId: 'getHealth',
  tags: ['system'],
  security: [],
  summary: 'Liveness: 200 while the process is up',
  responses: {
    200: { description: 'up', content: { 'application/json': { schema: Status } } },
  },
});

const readyz = createRoute({
  method: 'get',
  path: '/readyz',
  operationId: 'getReadiness',
  tags: ['system'],
  security: [],
  summary: 'Readiness: 200 when the database answers and the migrations are applied',
  responses: {
    200: { description: 'ready', content: { 'application/json': { schema: Readiness } } },
    503: { description: 'not ready', content: { 'application/json': { schema: Readiness } } },
  },
});

const metricsRoute = createRoute({
  method: 'get',
  path: '/metrics',
  operationId: 'getMetrics',
  tags: ['system'],
  security: [],
  summary: 'Prometheus metrics (text exposition format)',
  responses: {
    200: { description: 'metrics', content: { 'text/plain': { schema: z.string() } } },
  },
});

export function systemRoutes(deps: { database: Database; metrics: Metrics }) {
  const app = newRouter();
  app.openapi(healthz, (c) => c.json({ status: 'ok' }, 200));
  app.openapi(readyz, async (c) => {
    const { kind: engine, availability } = deps.database;
    const down = () => c.json({ status: 'unavailable', database: 'down', engine } as const, 503);
    // known down: at once, as the routes that need it (its probe says when it is back)
    if (!availability.up) return down();
    try {
      await deps.database.ping(1000);
      const migrated = await migrationsApplied(deps.database.db);
      if (!migrated) return c.json({ status: 'unavailable', database: 'migrating', engine }, 503);
      return c.json({ status: 'ok', database: 'ok', engine }, 200);
    } catch (err) {
      availability.failed(err);
      return down();
    }
  });
  app.openapi(metricsRoute, async (c) => {
    const body = await deps.metrics.registry.metrics();
    return c.text(body, 200, { 'Content-Type': deps.metrics.registry.contentType });
  });
  return app;
}
