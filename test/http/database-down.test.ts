/**
 * While the database is known down (src/db/availability.ts), the routes that need it answer
 * 503 at once and the operational ones stay open; when the probe answers, everything is back.
 * The breaker here is a real one with a probe the test answers, on a database that works: a
 * 503 can only come from the breaker, never from the database failing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import { createAvailability, type DatabaseAvailability } from '../../src/db/availability.ts';
import { buildTestApp, json, readJson } from '../support/app.ts';
import { createTestDatabase, describeEachEngine } from '../support/db.ts';
import { eventually } from '../support/server.ts';

const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), {
  code: 'ECONNREFUSED',
});

const callback = () =>
  json({ customerMessageId: 'nobody', status: 'delivered', timestamp: new Date().toISOString() });

describeEachEngine('requests while the database is down', (ctx) => {
  let app: App;
  let availability: DatabaseAvailability;
  let probed: (() => void) | undefined;
  let pings = 0;
  beforeAll(() => {
    const database = ctx.database();
    availability = createAvailability(
      () =>
        new Promise<void>((resolve) => {
          probed = resolve;
        }),
    );
    app = buildTestApp({
      ...database,
      availability,
      ping: (timeoutMs) => {
        pings++;
        return database.ping(timeoutMs);
      },
    }).app;
  });
  afterAll(() => availability.stop());

  it('answers as usual while up', async () => {
    expect((await app.request('/v1/messages/nobody')).status).toBe(404);
    expect((await app.request('/hooks/delivery', callback())).status).toBe(200);
    expect((await app.request('/readyz')).status).toBe(200);
    expect(await (await app.request('/metrics')).text()).toMatch(/^switchboard_database_up 1$/m);
  });

  it('refuses what needs the database with a 503 at once, and keeps the rest open', async () => {
    availability.failed(refused);
    for (const [path, init] of [
      ['/v1/messages/nobody', undefined],
      ['/v1/messages', json({ messages: [] })],
      ['/hooks/delivery', callback()],
      ['/hooks/viber', json({})],
    ] as const) {
      const res = await app.request(path, init);
      expect(res.status, path).toBe(503);
      expect(res.headers.get('retry-after'), path).toBe('1');
      const body = await readJson(res);
      expect(body.error, path).toMatchObject({
        code: 'UNAVAILABLE',
        message: 'the database is not answering; retry shortly',
        details: [],
      });
      expect(body.error.requestId).toBe(res.headers.get('x-request-id'));
    }

    // readiness says so without asking the database
    const pinged = pings;
    const ready = await app.request('/readyz');
    expect(ready.status).toBe(503);
    expect(await readJson(ready)).toEqual({
      status: 'unavailable',
      database: 'down',
      engine: ctx.engine,
    });
    expect(pings).toBe(pinged);

    // the console says it as a page, and its own files are still served
    const page = await app.request('/ui/messages');
    expect(page.status).toBe(503);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    expect(page.headers.get('retry-after')).toBe('1');
    expect(await page.text()).toContain('The database is not answering.');
    expect((await app.request('/ui/assets/console.css')).status).toBe(200);

    expect((await app.request('/healthz')).status).toBe(200);
    expect((await app.request('/openapi.json')).status).toBe(200);
    const metrics = await app.request('/metrics');
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toMatch(/^switchboard_database_up 0$/m);
  });

  it('is back once the probe answers', async () => {
    // barrier: the breaker's probe is waiting for its answer
    await eventually(async () => probed, 5000, 'a probe');
    probed!();
    await eventually(async () => availability.up, 5000, 'the breaker to close');
    expect((await app.request('/v1/messages/nobody')).status).toBe(404);
    expect((await app.request('/hooks/delivery', callback())).status).toBe(200);
    expect((await app.request('/readyz')).status).toBe(200);
    expect((await app.request('/ui/messages')).status).toBe(200);
    expect(await (await app.request('/metrics')).text()).toMatch(/^switchboard_database_up 1$/m);
  });
});

describe('a console page that finds the database gone', () => {
  it('answers a 503 page and tells the breaker, as the API does', async () => {
    const test = await createTestDatabase('pglite');
    // a probe that never answers: the breaker stays open once told
    const availability = createAvailability(() => new Promise<void>(() => {}));
    try {
      const { app } = buildTestApp({ ...test.database, availability });
      await test.database.close();
      const page = await app.request('/ui/messages');
      expect(page.status).toBe(503);
      expect(page.headers.get('retry-after')).toBe('1');
      expect(await page.text()).toContain('The database is not answering.');
      expect(availability.up).toBe(false);
      // and the API is refused at once from then on
      expect((await app.request('/v1/messages/nobody')).status).toBe(503);
    } finally {
      availability.stop();
    }
  });
});
