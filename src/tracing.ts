/**
 * OpenTelemetry traces: a span per HTTP request (with `@hono/otel`), per database write
 * (a group commit's transaction, a dispatch round), and per request to the provider, joined
 * by W3C trace context: an incoming `traceparent` is the request span's parent, the provider
 * request carries one out, and a message's trace context is stored with its outbox row so
 * that the round that sends it later (another moment, maybe another instance) links back to
 * the API call that queued it.
 *
 * Off unless an OTLP endpoint is configured (`OTEL_EXPORTER_OTLP_ENDPOINT` or
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`; the exporter reads the standard OTEL_* variables
 * itself). Off, every helper here is one module-level check and a direct call: no span
 * objects, no context lookups, no middleware, so the bench's CPU per request is unchanged.
 *
 * @example
 * const tracing = await startTracing({ exporter: new InMemorySpanExporter() }); // tests
 * await inSpan('db.transaction ingest', { attributes: { 'db.batch.size': 3 } }, () => write());
 * await tracing.stop();
 */
import {
  type Attributes,
  context,
  type Link,
  propagation,
  type Span,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import type { SpanExporter } from '@opentelemetry/sdk-trace-base';
import type { MiddlewareHandler } from 'hono';

export const TRACER_NAME = 'switchboard';

/** Set while tracing is on; `undefined` is the fast path every helper checks first. */
let tracer: Tracer | undefined;
/** The request-span middleware (`@hono/otel`), made when tracing starts. */
let requestSpans: MiddlewareHandler | undefined;

/** The middleware that opens a server span per request; undefined while tracing is off. */
export function httpSpans(): MiddlewareHandler | undefined {
  return requestSpans;
}

/** Whether spans are being recorded (an OTLP endpoint or a test's exporter is configured). */
export function tracingEnabled(): boolean {
  return tracer !== undefined;
}

/** Whether the environment asks for traces: an OTLP endpoint, and the SDK not disabled. */
export function tracingConfigured(env: Record<string, string | undefined>): boolean {
  if ((env.OTEL_SDK_DISABLED ?? '').toLowerCase() === 'true') return false;
  if ((env.OTEL_TRACES_EXPORTER ?? '').toLowerCase() === 'none') return false;
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
}

export interface TracingOptions {
  /** where spans go: by default OTLP over HTTP, configured by the standard OTEL_* variables */
  exporter?: SpanExporter;
  /** export each span as it ends (tests) instead of in batches */
  immediate?: boolean;
  serviceName?: string;
  serviceVersion?: string;
}

export interface Tracing {
  /** exports what is buffered */
  flush(): Promise<void>;
  /** exports what is buffered and turns tracing off */
  stop(): Promise<void>;
}

/**
 * Turns tracing on for this process: registers the provider, context manager and propagator.
 * The SDK and the exporter are loaded here, not at start: off, they cost no memory (~17 MB).
 */
export async function startTracing(opts: TracingOptions = {}): Promise<Tracing> {
  const [{ AsyncLocalStorageContextManager }, { W3CTraceContextPropagator }, sdk, resources, sc] =
    await Promise.all([
      import('@opentelemetry/context-async-hooks'),
      import('@opentelemetry/core'),
      import('@opentelemetry/sdk-trace-base'),
      import('@opentelemetry/resources'),
      import('@opentelemetry/semantic-conventions'),
    ]);
  const { BasicTracerProvider, BatchSpanProcessor, SimpleSpanProcessor } = sdk;
  const serviceName = opts.serviceName ?? process.env.OTEL_SERVICE_NAME ?? 'switchboard';
  const { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } = sc;
  const exporter =
    opts.exporter ??
    new (await import('@opentelemetry/exporter-trace-otlp-http')).OTLPTraceExporter();
  const processor = opts.immediate
    ? new SimpleSpanProcessor(exporter)
    : new BatchSpanProcessor(exporter);
  const provider = new BasicTracerProvider({
    resource: resources.resourceFromAttributes({
      [ATTR_SERVICE_NAME]: serviceName,
      [ATTR_SERVICE_VERSION]: opts.serviceVersion ?? '0.1.0',
    }),
    spanProcessors: [processor],
  });
  const contextManager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(contextManager);
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(provider);
  tracer = provider.getTracer(TRACER_NAME);
  const { httpInstrumentationMiddleware } = await import('@hono/otel');
  requestSpans = httpInstrumentationMiddleware({ serviceName, tracerProvider: provider });
  return {
    flush: () => provider.forceFlush(),
    async stop() {
      tracer = undefined;
      requestSpans = undefined;
      await provider.shutdown();
      trace.disable();
      propagation.disable();
      context.disable();
    },
  };
}

export interface SpanOptions {
  kind?: SpanKind;
  attributes?: Attributes;
  links?: Link[];
}

/**
 * Runs `fn` inside a span named `name` (the active one while it runs), ended when `fn`
 * settles, marked as an error when it throws. Tracing off: just `fn()`.
 */
export function inSpan<T>(
  name: string,
  opts: SpanOptions,
  fn: (span: Span | undefined) => Promise<T>,
): Promise<T> {
  if (!tracer) return fn(undefined);
  return tracer.startActiveSpan(name, opts, async (span) => {
    try {
      return await fn(span);
    } catch (err) {
      span.recordException(err as Error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message });
      throw err;
    } finally {
      span.end();
    }
  });
}

/** The active span as a link, for work done later on its behalf (a batch, a queue). */
export function activeLink(): Link | undefined {
  if (!tracer) return undefined;
  const span = trace.getActiveSpan();
  return span ? { context: span.spanContext() } : undefined;
}

/** The active trace context as a W3C `traceparent` value, to store or to send. */
export function activeTraceparent(): string | undefined {
  if (!tracer) return undefined;
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  return carrier.traceparent;
}

/** Adds the active trace context's headers (`traceparent`, `tracestate`) to `headers`. */
export function injectTraceHeaders(headers: Record<string, string>): void {
  if (!tracer) return;
  propagation.inject(context.active(), headers);
}

/** A stored `traceparent` as a link (undefined when it is missing or malformed). */
export function linkFromTraceparent(traceparent: string | null | undefined): Link | undefined {
  if (!tracer || !traceparent) return undefined;
  const extracted = propagation.extract(context.active(), { traceparent });
  const spanContext = trace.getSpanContext(extracted);
  return spanContext ? { context: spanContext } : undefined;
}

export { SpanKind };
