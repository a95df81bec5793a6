/**
 * 10 000 fuzzed bodies per hook and API route that takes one (every POST of /openapi.json, so
 * routes added later are fuzzed too), and 1000 fuzzed paths and queries per GET route,
 * in-process on real Postgres: JSON of every shape, near-valid messages and callbacks with
 * wrong types, huge and odd numbers, unicode (lone surrogates and U+0000 too), broken JSON,
 * wrong content types. None may get a 5xx, and the app must never throw.
 * FUZZ_RUNS and FUZZ_GET_RUNS change the counts.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import { buildTestApp } from '../support/app.ts';
import { availableEngines, createTestDatabase, type TestDatabase } from '../support/db.ts';
import { body, contentType, pathFor, query, segment } from '../support/fuzz.ts';
import { NO_POSTGRES, onlyIf } from '../support/skip.ts';

const onPostgres = availableEngines().includes('postgres');
const RUNS = Number(process.env.FUZZ_RUNS ?? 10_000);
const GET_RUNS = Number(process.env.FUZZ_GET_RUNS ?? 1000);
const BATCH = 50;
const FUZZ_TOKEN = 'fuzz-api-token';
const auth = { authorization: `Bearer ${FUZZ_TOKEN}` };

interface Route {
  method: 'get' | 'post';
  path: string;
}

describe('fuzzed requests', () => {
  let db: TestDatabase | undefined;
  let app: App;
  let routes: Route[] = [];
  beforeAll(async () => {
    if (!onPostgres) return;
    db = await createTestDatabase('postgres');
    // with API_TOKEN set and sent: on an open API the first valid POST /v1/tokens would close
    // it, and every later request would test only the 401
    app = buildTestApp(db.database, { env: { API_TOKEN: FUZZ_TOKEN } }).app;
    const doc = (await (await app.request('/openapi.json')).json()) as {
      paths: Record<string, Record<string, unknown>>;
    };
    routes = Object.entries(doc.paths).flatMap(([path, methods]) =>
      (['get', 'post'] as const).filter((m) => m in methods).map((method) => ({ method, path })),
    );
  });
  afterAll(async () => {
    await db?.drop();
  });

  it.runIf(onPostgres)(onlyIf(onPostgres, 'covers the hooks and the API', NO_POSTGRES), () => {
    const paths = routes.map((r) => `${r.method} ${r.path}`);
    expect(paths).toEqual(
      expect.arrayContaining([
        'post /hooks/delivery',
        'post /hooks/viber',
        'post /v1/messages',
        'get /v1/messages/{ref}',
      ]),
    );
  });

  it.runIf(onPostgres)(
    onlyIf(
      onPostgres,
      'answers every request with something other than a 5xx, and never throws',
      NO_POSTGRES,
    ),
    async () => {
      const failures: string[] = [];
      for (const route of routes) {
        if (route.path === '/openapi.json' || route.path === '/docs') continue;
        const request = fc.record({
          body,
          contentType,
          params: fc.array(segment, { minLength: 2, maxLength: 2 }),
          query,
        });
        const runs = route.method === 'post' ? RUNS : GET_RUNS;
        await fc
          .assert(
            fc.asyncProperty(
              fc.array(request, { minLength: BATCH, maxLength: BATCH }),
              async (batch) => {
                const answers = await Promise.all(
                  batch.map(async (r) => {
                    const url = `${pathFor(route.path, r.params)}${r.query ? `?${r.query}` : ''}`;
                    const res =
                      route.method === 'post'
                        ? await app.request(url, {
                            method: 'POST',
                            body: r.body,
                            headers: {
                              ...auth,
                              ...(r.contentType ? { 'content-type': r.contentType } : {}),
                            },
                          })
                        : await app.request(url, { headers: auth });
                    const text = await res.text();
                    return { status: res.status, text, r };
                  }),
                );
                const bad = answers.find((a) => a.status >= 500);
                if (bad) {
                  failures.push(
                    `${route.method} ${route.path} -> ${bad.status} ${bad.text.slice(0, 300)} for ${JSON.stringify(bad.r).slice(0, 500)}`,
                  );
                  return false;
                }
                return true;
              },
            ),
            { numRuns: Math.ceil(runs / BATCH), endOnFailure: true },
          )
          .catch((err: unknown) => {
            failures.push(String(err).slice(0, 2000));
          });
      }
      expect(failures).toEqual([]);
    },
    600_000,
  );
});
