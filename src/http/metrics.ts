/**
 * Prometheus metrics, one registry per app (no process globals, so two apps in one test
 * process do not share counters). Domain parts register their own metrics on `registry`.
 */
import type { MiddlewareHandler } from 'hono';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { DEFAULT_ROWS_COUNTED, type PartitionHealth } from '../db/partitions.ts';
import type { AppEnv } from './env.ts';

export interface Metrics {
  registry: Registry;
  httpRequests: Counter<'method' | 'route' | 'status'>;
  httpDuration: Histogram<'method' | 'route'>;
  /** kind: delivery, viber, speechcall; outcome: stored, duplicate, unauthorized, invalid */
  callbacks: Counter<'kind' | 'outcome'>;
  /** result: accepted, rejected */
  dispatched: Counter<'result'>;
  /** the leading dispatcher's rounds; result: sent (found messages due), idle (none) */
  dispatchRounds: Counter<'result'>;
  provider429: Counter;
  /** status records asked of the provider (GET /bat/message/{id}) by the poller */
  statusPolls: Counter;
  /** messages marked expired because no final status came by the end of their life */
  expired: Counter;
  /** events delivered to the user's endpoints (a 2xx answer) */
  eventsDelivered: Counter;
  /** attempts to deliver an event that failed (retried on the schedule, or exhausted) */
  eventAttemptsFailed: Counter;
  /** outbox rows waiting, read from the database at scrape time */
  outboxDepth: Gauge;
  /** calls by state, read from the database at scrape time */
  calls: Gauge<'state'>;
}

/** Gauges of the database (not of this process), read at each scrape. */
export interface MetricReaders {
  outboxDepth(): Promise<number>;
  callsByState(): Promise<{ state: string; count: number }[]>;
  /** the day partitions of the append-only tables: days made ahead, rows in the default */
  partitions(): Promise<PartitionHealth[]>;
  /** false while the database is known down and requests that need it are refused (db/availability.ts) */
  databaseUp(): boolean;
}

export function createMetrics(readers?: MetricReaders): Metrics {
  const registry = new Registry();
  new Gauge({
    name: 'switchboard_database_up',
    help: 'Whether this instance lets requests through to the database (0: known down, refused with 503)',
    registers: [registry],
    collect() {
      if (readers) this.set(readers.databaseUp() ? 1 : 0);
    },
  });
  // both partition gauges from one read a scrape: prom-client collects the metrics at once
  let partitions: Promise<PartitionHealth[]> | undefined;
  const readPartitions = (r: MetricReaders) => {
    partitions ??= r.partitions().finally(() => {
      partitions = undefined;
    });
    return partitions;
  };
  const partitionGauge = (
    name: string,
    help: string,
    value: (h: PartitionHealth) => number,
  ): Gauge<'table'> =>
    new Gauge({
      name,
      help,
      labelNames: ['table'],
      registers: [registry],
      async collect() {
        if (!readers) return;
        try {
          const health = await readPartitions(readers);
          this.reset();
          for (const h of health) this.set({ table: h.table }, value(h));
        } catch {
          // the database is down: /readyz says so; the scrape still answers
        }
      },
    });
  partitionGauge(
    'switchboard_partition_days_ahead',
    "UTC days from today on whose day partition is made, in a row, per partitioned table (0: today's rows go to the default partition)",
    (h) => h.daysAhead,
  );
  partitionGauge(
    'switchboard_partition_default_rows',
    `Rows in the default partition of each partitioned table (a day that could not be made), counted up to ${DEFAULT_ROWS_COUNTED}`,
    (h) => h.defaultRows,
  );
  return {
    callbacks: new Counter({
      name: 'switchboard_callbacks_total',
      help: 'Callbacks received, by kind and outcome',
      labelNames: ['kind', 'outcome'],
      registers: [registry],
    }),
    calls: new Gauge({
      name: 'switchboard_calls',
      help: 'Calls by state',
      labelNames: ['state'],
      registers: [registry],
      async collect() {
        if (!readers) return;
        try {
          const rows = await readers.callsByState();
          this.reset();
          for (const r of rows) this.set({ state: r.state }, r.count);
        } catch {
          // the database is down: /readyz says so
        }
      },
    }),
    dispatched: new Counter({
      name: 'switchboard_messages_dispatched_total',
      help: 'Messages sent to the provider, by its answer',
      labelNames: ['result'],
      registers: [registry],
    }),
    dispatchRounds: new Counter({
      name: 'switchboard_dispatch_rounds_total',
      help: "The leading dispatcher's rounds: `sent` found messages due, `idle` none (it then sleeps until the next is due or one is queued)",
      labelNames: ['result'],
      registers: [registry],
    }),
    provider429: new Counter({
      name: 'switchboard_provider_rate_limited_total',
      help: '429 answers received from the provider',
      registers: [registry],
    }),
    statusPolls: new Counter({
      name: 'switchboard_status_polls_total',
      help: "Status records asked of the provider for messages with no news (or a fallback's channels)",
      registers: [registry],
    }),
    expired: new Counter({
      name: 'switchboard_messages_expired_total',
      help: 'Messages marked expired: no final status by the end of their life and the margin',
      registers: [registry],
    }),
    eventsDelivered: new Counter({
      name: 'switchboard_events_delivered_total',
      help: "Events delivered to the user's endpoints (answered 2xx)",
      registers: [registry],
    }),
    eventAttemptsFailed: new Counter({
      name: 'switchboard_event_delivery_attempts_failed_total',
      help: "Failed attempts to deliver an event to the user's endpoints",
      registers: [registry],
    }),
    outboxDepth: new Gauge({
      name: 'switchboard_outbox_depth',
      help: 'Messages waiting in the outbox',
      registers: [registry],
      async collect() {
        if (!readers) return;
        try {
          this.set(await readers.outboxDepth());
        } catch {
          // the database is down: /readyz says so; the scrape still answers
        }
      },
    }),
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
