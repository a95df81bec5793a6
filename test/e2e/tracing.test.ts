/**
 * Traces, read with an in-memory exporter: an SMS sent through `POST /v1/messages` is one
 * trace from the request through its database write; the dispatch round that sends it later
 * links back to that request, and its request to the provider (the sandbox, over real HTTP)
 * carries `traceparent`, so the sandbox's own server span is the client span's child. A
 * delivery callback is a server span with the group commit's transaction under it.
 */
import { SpanKind } from '@opentelemetry/api';
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../../src/server.ts';
import { startTracing, type Tracing } from '../../src/tracing.ts';
import { json, phone, readJson } from '../support/app.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { eventually, startTestServer } from '../support/server.ts';

const spanId = (s: ReadableSpan) => s.spanContext().spanId;
const traceId = (s: ReadableSpan) => s.spanContext().traceId;
const parentId = (s: ReadableSpan) => s.parentSpanContext?.spanId;

describe('OpenTelemetry traces', () => {
  const exporter = new InMemorySpanExporter();
  let tracing: Tracing;
  let db: TestDatabase;
  let server: RunningServer;
  beforeAll(async () => {
    tracing = await startTracing({ exporter, immediate: true });
    db = await createTestDatabase('pglite');
    server = await startTestServer(db.database);
  });
  afterAll(async () => {
    await server?.stop();
    await db?.drop();
    await tracing?.stop();
  });

  it('follows a message from the API call to the provider request and its callback', async () => {
    const to = phone();
    const res = await fetch(
      `${server.url}/v1/messages`,
      json({ messages: [{ type: 'sms', from: 'Acme', to, text: 'traced' }] }),
    );
    expect(res.status).toBe(202);
    const id = (await readJson(res)).messages[0].id as string;
    await eventually(async () => {
      const t = await readJson(await fetch(`${server.url}/v1/messages/${id}`));
      return t.status === 'delivered';
    });
    await tracing.flush();
    const spans = exporter.getFinishedSpans();

    // the API call: a server span, and the transaction that stored the message under it
    const api = spans.find((s) => s.name === 'POST /v1/messages' && s.kind === SpanKind.SERVER);
    expect(api, spans.map((s) => s.name).join(', ')).toBeDefined();
    const store = spans.find((s) => s.name === 'db.transaction submit-messages');
    expect(store && parentId(store)).toBe(spanId(api!));
    expect(traceId(store!)).toBe(traceId(api!));

    // the round that sent it links to the API call's trace
    const round = spans.find(
      (s) => s.name === 'dispatch' && s.links.some((l) => l.context.traceId === traceId(api!)),
    );
    expect(round, 'a dispatch span linked to the API call').toBeDefined();
    // its provider request is a client span under it, and the sandbox, reached over real
    // HTTP, continued the same trace from the `traceparent` it was sent
    const out = spans.find(
      (s) =>
        s.kind === SpanKind.CLIENT &&
        s.name === 'POST /bat/messagelist' &&
        parentId(s) === spanId(round!),
    );
    expect(out, 'the provider request under the round').toBeDefined();
    expect(out!.attributes['http.response.status_code']).toBe(200);
    const sandbox = spans.find((s) => s.kind === SpanKind.SERVER && parentId(s) === spanId(out!));
    expect(sandbox?.name).toMatch(/^POST \/sandbox\//);
    expect(traceId(sandbox!)).toBe(traceId(out!));

    // the delivery callbacks: server spans, each with the group commit's transaction under
    // it or linked to it (a batch serves several callers)
    const hooks = spans.filter((s) => s.name === 'POST /hooks/delivery');
    expect(hooks.length).toBeGreaterThan(0);
    const batches = spans.filter((s) => s.name === 'db.transaction delivery-callbacks');
    const hookIds = new Set(hooks.map(spanId));
    expect(
      batches.some(
        (b) => hookIds.has(parentId(b) ?? '') || b.links.some((l) => hookIds.has(l.context.spanId)),
      ),
    ).toBe(true);
  });
});
