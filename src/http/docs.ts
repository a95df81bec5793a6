/**
 * GET /docs: a reference page for /openapi.json, rendered by Swagger UI from the
 * swagger-ui-dist package, served from this process (never a CDN, so it works offline).
 */
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { Hono } from 'hono';
import type { AppEnv } from './env.ts';

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

export function docsRoutes() {
  const dir = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
  const cache = new Map<string, Buffer>();
  const app = new Hono<AppEnv>();
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
