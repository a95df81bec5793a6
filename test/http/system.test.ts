import { beforeAll, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import { openDatabase } from '../../src/db/client.ts';
import { ProviderError } from '../../src/provider/http.ts';
import { buildTestApp, json, phone, readJson } from '../support/app.ts';
import { createTestDatabase, describeEachEngine } from '../support/db.ts';

describeEachEngine('system routes', (ctx) => {
  let app: App;
  beforeAll(() => {
    app = buildTestApp(ctx.database()).app;
  });

  it('GET /healthz answers ok', async () => {
    const res = await app.request('/healthz');
    expect(res.status).toBe(200);
    expect(await readJson(res)).toEqual({ status: 'ok' });
  });

  it('GET /readyz answers 200 when the database answers and is migrated', async () => {
    const res = await app.request('/readyz');
    expect(res.status).toBe(200);
    expect(await readJson(res)).toEqual({ status: 'ok', database: 'ok', engine: ctx.engine });
  });

  it('GET /metrics counts requests by route pattern and status', async () => {
    await app.request('/v1/messages/does-not-exist');
    await app.request(
      '/v1/messages',
      json({ messages: [{ from: 'Acme', to: phone(), type: 'sms', text: 'x' }] }),
    );
    const res = await app.request('/metrics');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/plain');
    const text = await res.text();
    expect(text).toMatch(
      /http_requests_total\{method="GET",route="\/v1\/messages\/:ref",status="404"\} 1/,
    );
    expect(text).toMatch(
      /http_requests_total\{method="POST",route="\/v1\/messages",status="202"\} 1/,
    );
    expect(text).toContain('http_request_duration_seconds_bucket');
  });

  it('GET /openapi.json is OpenAPI 3.1 describing every route with its schemas', async () => {
    const res = await app.request('/openapi.json');
    expect(res.status).toBe(200);
    const doc = await readJson(res);
    expect(doc.openapi).toBe('3.1.0');
    for (const path of ['/healthz', '/readyz', '/metrics', '/v1/messages', '/v1/messages/{ref}']) {
      expect(Object.keys(doc.paths), path).toContain(path);
    }
    expect(Object.keys(doc.paths['/v1/messages'])).toEqual(expect.arrayContaining(['get', 'post']));
    expect(doc.components.schemas).toHaveProperty('Message');
    expect(doc.components.schemas).toHaveProperty('Error');
  });

  it('GET /docs serves a reference page and its assets locally', async () => {
    const page = await app.request('/docs');
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain('/openapi.json');
    expect(html).not.toMatch(/https?:\/\/(?!localhost)/);
    const js = await app.request('/docs/assets/swagger-ui-bundle.js');
    expect(js.status).toBe(200);
    expect((await js.arrayBuffer()).byteLength).toBeGreaterThan(100_000);
    expect((await app.request('/docs/assets/package.json')).status).toBe(404);
  });
});

describeEachEngine('error envelope', (ctx) => {
  let app: App;
  beforeAll(() => {
    app = buildTestApp(ctx.database()).app;
    app.get('/boom', () => {
      throw new Error('secret internals at /home/app/src/x.ts:12');
    });
    // the provider refused the connection: its error, not the database's
    app.get('/boom-provider', () => {
      const refused = Object.assign(new Error('connect ECONNREFUSED 10.0.0.9:443'), {
        code: 'ECONNREFUSED',
      });
      throw new ProviderError('network', 'POST /bat/messagelist: fetch failed', {
        cause: new TypeError('fetch failed', { cause: refused }),
      });
    });
  });

  it("a provider's refused connection is a 500, never the database's 503", async () => {
    const res = await app.request('/boom-provider');
    expect(res.status).toBe(500);
    expect((await readJson(res)).error.code).toBe('INTERNAL');
    expect(ctx.database().availability.up).toBe(true);
  });

  it('malformed JSON', async () => {
    const res = await app.request('/v1/messages', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"messages": [',
    });
    expect(res.status).toBe(400);
    const body = await readJson(res);
    // where it breaks: the end of the text, line 1, column 15
    expect(body).toEqual({
      error: {
        code: 'MALFORMED_JSON',
        message:
          "the request body is not valid JSON: line 1, column 15: the text ends before the list's ']'",
        details: [
          {
            path: 'body',
            code: 'JSON_SYNTAX',
            message: "the text ends before the list's ']'",
            line: 1,
            column: 15,
          },
        ],
      },
    });
  });

  it('unknown route', async () => {
    const res = await app.request('/v2/nothing');
    expect(res.status).toBe(404);
    expect((await readJson(res)).error.code).toBe('ROUTE_NOT_FOUND');
  });

  it('an unexpected failure is a 500 with a request id and no internals', async () => {
    const res = await app.request('/boom');
    expect(res.status).toBe(500);
    const body = await readJson(res);
    expect(body.error.code).toBe('INTERNAL');
    expect(body.error.requestId).toEqual(expect.any(String));
    expect(res.headers.get('x-request-id')).toBe(body.error.requestId);
    expect(JSON.stringify(body)).not.toContain('secret');
    expect(JSON.stringify(body)).not.toContain('.ts');
  });

  it('a body over the limit is a 413', async () => {
    const res = await app.request('/v1/messages', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ messages: [{ text: 'x'.repeat(33 * 1024 * 1024) }] }),
    });
    expect(res.status).toBe(413);
    expect((await readJson(res)).error.code).toBe('PAYLOAD_TOO_LARGE');
  });
});

it('GET /readyz answers 503 while the database does not answer (closed embedded database)', async () => {
  const test = await createTestDatabase('pglite');
  const { app } = buildTestApp(test.database);
  expect((await app.request('/readyz')).status).toBe(200);
  await test.database.close();
  const res = await app.request('/readyz');
  expect(res.status).toBe(503);
  expect(await readJson(res)).toMatchObject({ status: 'unavailable', database: 'down' });
});

it('GET /readyz answers 503 and the API 503 while Postgres is unreachable', async () => {
  const database = await openDatabase({
    url: 'postgres://postgres@127.0.0.1:1/none',
    maxConnections: 1,
  });
  try {
    const { app } = buildTestApp(database);
    const res = await app.request('/readyz');
    expect(res.status).toBe(503);
    const api = await app.request('/v1/messages/some-ref');
    expect(api.status).toBe(503);
    expect((await readJson(api)).error.code).toBe('UNAVAILABLE');
  } finally {
    await database.close();
  }
});
