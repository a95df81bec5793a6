/**
 * Bodies over real HTTP (Node's server, not `app.request`): a callback whose length is
 * announced is read straight from Node's request, a chunked one through the Fetch API; both
 * are stored byte for byte as text, and both are refused with 413 beyond the limit, announced
 * or found while reading. X-Request-Id as Node sends it.
 */
import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { like } from 'drizzle-orm';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { inbox } from '../../src/db/schema/index.ts';
import { buildTestApp, uniq } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';

interface Answer {
  status: number;
  body: string;
}

/** One POST over loopback; `chunked` sends the body in pieces with no Content-Length. */
function post(port: number, path: string, body: Buffer, chunked: boolean): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port,
        path,
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...(chunked ? { 'transfer-encoding': 'chunked' } : { 'content-length': body.length }),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }),
        );
      },
    );
    // a server that refuses a body may close before all of it is written: that is fine once
    // its answer is in (the socket error is only the unsent rest)
    let answered = false;
    req.on('response', () => {
      answered = true;
    });
    req.on('socket', (socket) => socket.on('error', () => {}));
    req.on('error', (err) => {
      if (!answered) reject(err);
    });
    if (chunked) {
      const third = Math.ceil(body.length / 3);
      for (let i = 0; i < body.length; i += third) req.write(body.subarray(i, i + third));
    } else {
      req.write(body);
    }
    req.end();
  });
}

describeEachEngine('request bodies over real HTTP', (ctx) => {
  let server: ReturnType<typeof serve>;
  let port: number;

  beforeAll(async () => {
    const { app } = buildTestApp(ctx.database());
    app.get('/boom', () => {
      throw new Error('boom');
    });
    await new Promise<void>((resolve) => {
      server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve());
    });
    port = (server.address() as AddressInfo).port;
  });

  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  const rawOf = async (cmid: string) => {
    const rows = await ctx
      .database()
      .db.select({ body: inbox.body })
      .from(inbox)
      .where(like(inbox.body, `%${cmid}%`));
    return rows.map((r) => r.body);
  };

  for (const chunked of [false, true]) {
    const how = chunked ? 'chunked' : 'with its length announced';

    it(`stores a callback sent ${how}, as the text it was (a leading BOM dropped)`, async () => {
      const cmid = uniq('body');
      const text = JSON.stringify({ customerMessageId: cmid, status: 'delivered', note: 'Київ ✓' });
      const bytes = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(text, 'utf8')]);
      const res = await post(port, '/hooks/delivery', bytes, chunked);
      expect(res.status, res.body).toBe(200);
      expect(JSON.parse(res.body)).toMatchObject({ received: true, events: 1, pending: 1 });
      const rows = await rawOf(cmid);
      expect(rows).toEqual([text]);
    });

    it(`refuses a body over the limit sent ${how} with 413, storing nothing`, async () => {
      const cmid = uniq('huge');
      const big = Buffer.from(
        JSON.stringify({ customerMessageId: cmid, pad: 'x'.repeat(33 * 1024 * 1024) }),
      );
      const res = await post(port, '/hooks/delivery', big, chunked);
      expect(res.status).toBe(413);
      expect(JSON.parse(res.body).error.code).toBe('PAYLOAD_TOO_LARGE');
      expect(await rawOf(cmid)).toEqual([]);
    });
  }

  // headers are read from Node's own request here (src/http/headers.ts), not a Fetch Headers
  it('echoes a plain X-Request-Id and replaces anything else with a new one', async () => {
    const idOf = async (given?: string) => {
      const res = await fetch(`http://127.0.0.1:${port}/healthz`, {
        headers: given === undefined ? {} : { 'x-request-id': given },
      });
      return res.headers.get('x-request-id');
    };
    expect(await idOf('trace-42_a=b')).toBe('trace-42_a=b');
    for (const bad of [undefined, '', 'has space', 'x'.repeat(256)]) {
      const id = await idOf(bad);
      expect(id).toMatch(/^[0-9a-f-]{36}$/);
    }
  });

  // as system.test.ts checks in-process: one X-Request-Id (a repeated header would read as
  // "a, a"), and the one an error body names
  it('sends X-Request-Id once, and the one its error body names', async () => {
    const get = async (path: string, given?: string) => {
      const res = await fetch(`http://127.0.0.1:${port}${path}`, {
        headers: given === undefined ? {} : { 'x-request-id': given },
      });
      return {
        status: res.status,
        id: res.headers.get('x-request-id'),
        body: (await res.json()) as { error?: { code: string; requestId?: string } },
      };
    };
    expect(await get('/healthz', 'given-1')).toMatchObject({ status: 200, id: 'given-1' });
    const missing = await get('/v2/nothing', 'given-2');
    expect(missing).toMatchObject({ status: 404, id: 'given-2' });
    expect(missing.body.error?.code).toBe('ROUTE_NOT_FOUND');
    const failed = await get('/boom');
    expect(failed.status).toBe(500);
    expect(failed.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(failed.body.error?.requestId).toBe(failed.id);
  });

  it('answers the callback content type and token as Node parsed them', async () => {
    const { app } = buildTestApp(ctx.database(), { env: { CALLBACK_TOKEN: 's3cret-token' } });
    const guarded = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' });
    await new Promise((r) => guarded.once('listening', r));
    const url = `http://127.0.0.1:${(guarded.address() as AddressInfo).port}/hooks/delivery`;
    try {
      const cmid = uniq('form');
      const send = (headers: Record<string, string>) =>
        fetch(url, { method: 'POST', headers, body: `cmid=${cmid}&stat=DELIVRD` });
      const form = { 'content-type': 'application/x-www-form-urlencoded' };
      expect((await send(form)).status).toBe(401);
      expect((await send({ ...form, 'x-callback-token': 'wrong' })).status).toBe(401);
      const ok = await send({ ...form, authorization: 'Bearer s3cret-token' });
      expect(ok.status).toBe(200);
      expect(await ok.json()).toMatchObject({ received: true, events: 1 });
    } finally {
      await new Promise((r) => guarded.close(r));
    }
  });
});
