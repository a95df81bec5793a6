/**
 * The API description: GET /openapi.json, the OpenAPI 3.1 document of every route's
 * createRoute (with the info, servers and tags here, and each operation's error responses
 * from http/operation-errors.ts), built once on first request; and GET /docs, a reference
 * page for it rendered by Swagger UI from the swagger-ui-dist package, served from this
 * process (never a CDN, so it works offline).
 *
 * @example
 * app.route('/', docsRoutes(app, { version: '0.1.0', publicUrl: 'https://sb.example.org' }));
 */
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { OpenAPIHono } from '@hono/zod-openapi';
import { Hono } from 'hono';
import { EVENTS_TAG, registerEventWebhooks } from '../events/webhooks-doc.ts';
import type { AppEnv } from './env.ts';
import { IDEMPOTENCY_PARAMETER, takesIdempotencyKey } from './idempotency.ts';
import { withErrorResponses } from './operation-errors.ts';
import { documentReadRouting } from './read-routing.ts';

const TAGS = [
  { name: 'system', description: 'liveness, readiness, metrics' },
  { name: 'messages', description: 'outbound messages and their timelines' },
  { name: 'calls', description: 'calls started from flows, their paths and timelines' },
  { name: 'flows', description: 'the IVR flows, compiled, with diagrams and statistics' },
  { name: 'inbound', description: 'incoming Viber messages' },
  { name: 'privacy', description: 'erasing what is held about a person' },
  { name: 'tokens', description: 'API tokens with scopes' },
  { name: 'audit', description: 'what was changed through the API, by which token' },
  { name: 'hooks', description: 'callbacks from the provider' },
  { name: 'prompts', description: 'rendered prompts, fetched by the provider (docs/speech.md)' },
  {
    name: 'endpoints',
    description: 'your systems that receive events: their secrets, attempts and replays',
  },
  EVENTS_TAG,
];

/** Every operation that takes an Idempotency-Key documents the header (in place). */
function withIdempotencyKeys<T extends { paths?: object }>(doc: T): T {
  const paths = (doc.paths ?? {}) as Record<string, Record<string, { parameters?: unknown[] }>>;
  for (const [path, item] of Object.entries(paths)) {
    for (const [method, op] of Object.entries(item)) {
      if (takesIdempotencyKey(method, path)) {
        op.parameters = [...(op.parameters ?? []), IDEMPOTENCY_PARAMETER];
      }
    }
  }
  return doc;
}

/** The OpenAPI document of `api`'s routes, served at `publicUrl`. */
export function apiDocument(
  api: OpenAPIHono<AppEnv>,
  opts: { version: string; publicUrl: string },
) {
  return withErrorResponses(
    documentReadRouting(
      withIdempotencyKeys(
        api.getOpenAPI31Document({
          openapi: '3.1.0',
          info: {
            title: 'Switchboard',
            version: opts.version,
            description:
              'IVR flows compiled to provider speech-call menus, callbacks correlated in Postgres, and status timelines. Every non-2xx answer is the one error envelope; each operation lists the codes it can answer with, per status (`error.code`), and all of them in `x-error-codes`.',
            license: { name: 'MIT', url: 'https://spdx.org/licenses/MIT.html' },
          },
          servers: [{ url: opts.publicUrl, description: 'this server (PUBLIC_URL)' }],
          tags: TAGS,
        }),
      ),
    ),
  );
}

const ASSETS: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'favicon-32x32.png': 'image/png',
};

const PAGE = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>Switchboard API</title>
  <link rel="stylesheet" href="/docs/assets/swagger-ui.css">
  <link rel="icon" type="image/png" href="/docs/assets/favicon-32x32.png">
</head>
<body>
  <main id="swagger-ui"><h1>Switchboard API</h1><p>The machine-readable document is at <a href="/openapi.json">/openapi.json</a>.</p></main>
  <script src="/docs/assets/swagger-ui-bundle.js"></script>
  <script src="/docs/assets/init.js"></script>
</body>
</html>`;

const INIT = `window.ui = SwaggerUIBundle({ url: '/openapi.json', dom_id: '#swagger-ui', deepLinking: true });`;

/** `api`: the app whose routes the document describes (every one mounted by the first request). */
export function docsRoutes(api: OpenAPIHono<AppEnv>, opts: { version: string; publicUrl: string }) {
  const dir = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
  const cache = new Map<string, Buffer>();
  const app = new Hono<AppEnv>();
  let document: ReturnType<typeof apiDocument> | undefined;
  // the event catalog as the document's top-level `webhooks` (src/events/webhooks-doc.ts)
  registerEventWebhooks(api.openAPIRegistry);
  app.get('/openapi.json', (c) => {
    document ??= apiDocument(api, opts);
    return c.json(document);
  });
  app.get('/docs', (c) => c.html(PAGE));
  app.get('/docs/assets/init.js', (c) =>
    c.body(INIT, 200, { 'Content-Type': 'text/javascript; charset=utf-8' }),
  );
  app.get('/docs/assets/:file', async (c) => {
    const file = c.req.param('file');
    // own keys only: `constructor` or `__proto__` is no asset
    const type = Object.hasOwn(ASSETS, file) ? ASSETS[file] : undefined;
    if (!type) return c.notFound();
    let body = cache.get(file);
    if (!body) {
      body = await readFile(join(dir, file));
      cache.set(file, body);
    }
    return c.body(new Uint8Array(body), 200, {
      'Content-Type': type,
      'Cache-Control': 'public, max-age=86400',
    });
  });
  return app;
}
