/**
 * The console's static files, served by this process: its stylesheet and script, and the
 * Mermaid bundle from the installed `mermaid` package (never a CDN, so the console works
 * offline and loads nothing from elsewhere).
 */
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Hono } from 'hono';
import type { AppEnv } from '../http/env.ts';

const here = dirname(fileURLToPath(import.meta.url));

function files(): Record<string, { path: string; type: string }> {
  const mermaid = dirname(createRequire(import.meta.url).resolve('mermaid/package.json'));
  return {
    'console.css': { path: join(here, 'assets', 'console.css'), type: 'text/css; charset=utf-8' },
    'console.js': {
      path: join(here, 'assets', 'console.js'),
      type: 'text/javascript; charset=utf-8',
    },
    'flow-edit.js': {
      path: join(here, 'assets', 'flow-edit.js'),
      type: 'text/javascript; charset=utf-8',
    },
    'mermaid.min.js': {
      path: join(mermaid, 'dist', 'mermaid.min.js'),
      type: 'text/javascript; charset=utf-8',
    },
  };
}

/** GET /assets/:file (mounted under /ui). */
export function assetRoutes() {
  const known = files();
  const cache = new Map<string, Promise<Buffer>>();
  const app = new Hono<AppEnv>();
  app.get('/assets/:file', async (c) => {
    const file = c.req.param('file');
    // own keys only: `constructor` or `__proto__` is no asset
    const asset = Object.hasOwn(known, file) ? known[file] : undefined;
    if (!asset) return c.notFound();
    let body = cache.get(file);
    if (!body) {
      body = readFile(asset.path);
      cache.set(file, body);
      body.catch(() => cache.delete(file));
    }
    return c.body(new Uint8Array(await body), 200, {
      'Content-Type': asset.type,
      // the bundle only changes with the package; the console's own files with a deploy
      'Cache-Control': file.startsWith('mermaid') ? 'public, max-age=86400' : 'no-cache',
    });
  });
  return app;
}
