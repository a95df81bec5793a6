/**
 * The real process exports its spans over OTLP/HTTP when `OTEL_EXPORTER_OTLP_ENDPOINT` is
 * set: a collector stand-in (a plain HTTP server taking `POST /v1/traces`) receives the
 * request span of a call made to the server, at the latest when the server stops.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServerProcess } from '../support/process.ts';

describe('OTLP export', () => {
  let collector: Server;
  let endpoint: string;
  const received: { path: string; type: string; body: string }[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'switchboard-otlp-'));
  beforeAll(async () => {
    collector = createServer((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => {
        body += d.toString();
      });
      req.on('end', () => {
        received.push({ path: req.url ?? '', type: req.headers['content-type'] ?? '', body });
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((r) => collector.listen(0, '127.0.0.1', r));
    endpoint = `http://127.0.0.1:${(collector.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((r) => collector.close(r));
    rmSync(dir, { recursive: true, force: true });
  });

  it('sends the request spans to the configured endpoint', async () => {
    const server = await startServerProcess({
      DATA_DIR: dir,
      OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
      OTEL_SERVICE_NAME: 'switchboard-otlp-test',
    });
    expect(server.output()).toContain('tracing: exporting spans over OTLP');
    expect((await fetch(`${server.url}/v1/flows`)).status).toBe(200);
    // a clean stop flushes what the batch processor still holds
    expect((await server.stop('SIGTERM')).code).toBe(0);
    const traces = received.filter((r) => r.path === '/v1/traces');
    expect(traces.length).toBeGreaterThan(0);
    const all = traces.map((t) => t.body).join('\n');
    expect(all).toContain('GET /v1/flows');
    expect(all).toContain('switchboard-otlp-test');
  });
});
