import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRoundRobin, type RoundRobin } from '../../bench/lib/round-robin.ts';

/** An upstream that answers with its name, the request it got, and the status it is asked for. */
function upstream(name: string): Server {
  return createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const status = Number(req.headers['x-want-status'] ?? 200);
      const body = JSON.stringify({
        name,
        method: req.method,
        path: req.url,
        body: Buffer.concat(chunks).toString(),
      });
      res.writeHead(status, { 'content-type': 'application/json', 'x-upstream': name });
      // in two writes, without a length: the answer goes chunked, and must arrive whole
      res.write(body.slice(0, 5));
      res.end(body.slice(5));
    });
  });
}

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function close(server: Server): Promise<void> {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

/** A port nothing listens on: one that was just free. */
async function downUrl(): Promise<string> {
  const s = createServer();
  const url = await listen(s);
  await close(s);
  return url;
}

describe('round-robin proxy', () => {
  const a = upstream('a');
  const b = upstream('b');
  let proxy: RoundRobin;
  let url: string;

  beforeAll(async () => {
    proxy = createRoundRobin([await listen(a), await listen(b)]);
    url = await listen(proxy.server);
  });
  afterAll(async () => {
    await proxy.close();
    await Promise.all([close(a), close(b)]);
  });

  it('sends request i to upstream i mod n, passing bodies, statuses and headers', async () => {
    const statuses = [200, 202, 400, 404, 500, 503];
    const seen: {
      name: string;
      status: number;
      header: string | null;
      path: string;
      body: string;
    }[] = [];
    for (const [i, status] of statuses.entries()) {
      const res = await fetch(`${url}/hooks/delivery?i=${i}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-want-status': String(status) },
        body: JSON.stringify({ i, text: 'ü'.repeat(i) }),
      });
      const got = (await res.json()) as { name: string; path: string; body: string };
      seen.push({
        name: got.name,
        status: res.status,
        header: res.headers.get('x-upstream'),
        path: got.path,
        body: got.body,
      });
    }
    expect(seen.map((s) => s.name)).toEqual(['a', 'b', 'a', 'b', 'a', 'b']);
    expect(seen.map((s) => s.status)).toEqual(statuses);
    expect(seen.map((s) => s.header)).toEqual(['a', 'b', 'a', 'b', 'a', 'b']);
    expect(seen.map((s) => s.path)).toEqual(statuses.map((_, i) => `/hooks/delivery?i=${i}`));
    expect(seen.map((s) => JSON.parse(s.body))).toEqual(
      statuses.map((_, i) => ({ i, text: 'ü'.repeat(i) })),
    );
    expect(proxy.counts).toEqual([3, 3]);
  });

  it('streams a large body both ways, whole', async () => {
    // 2 MB in one request: larger than any socket buffer, so it crosses in many pieces
    const big = 'x'.repeat(2_000_000);
    const res = await fetch(`${url}/big`, { method: 'PUT', body: big });
    const got = (await res.json()) as { method: string; body: string };
    expect(res.status).toBe(200);
    expect(got.method).toBe('PUT');
    expect(got.body.length).toBe(big.length);
  });
});

describe('round-robin proxy, an upstream down', () => {
  it('answers 502 at once for the upstream that refuses, and serves the other', async () => {
    const up = upstream('up');
    const proxy = createRoundRobin([await listen(up), await downUrl()]);
    const url = await listen(proxy.server);
    try {
      const statuses: number[] = [];
      const names: string[] = [];
      for (let i = 0; i < 4; i++) {
        // a hang would outlast the test's timeout; the signal makes it fail fast instead
        const res = await fetch(`${url}/v1/messages`, {
          method: 'POST',
          body: '{}',
          signal: AbortSignal.timeout(5000),
        });
        statuses.push(res.status);
        const body = (await res.json()) as { name?: string; error?: { code: string } };
        names.push(body.name ?? body.error?.code ?? '?');
      }
      expect(statuses).toEqual([200, 502, 200, 502]);
      expect(names).toEqual(['up', 'BAD_GATEWAY', 'up', 'BAD_GATEWAY']);
    } finally {
      await proxy.close();
      await close(up);
    }
  });

  it('answers 504 when an upstream takes the request and never answers', async () => {
    const silent = createServer(() => {
      // takes the request, never answers
    });
    const proxy = createRoundRobin([await listen(silent)], { timeoutMs: 300 });
    const url = await listen(proxy.server);
    try {
      const res = await fetch(`${url}/hooks/delivery`, {
        method: 'POST',
        body: '{}',
        signal: AbortSignal.timeout(5000),
      });
      expect(res.status).toBe(504);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('BAD_GATEWAY');
    } finally {
      await proxy.close();
      await close(silent);
    }
  });
});

describe('round-robin proxy, kept-alive connections', () => {
  it('sends a request again, once, when the upstream closed the reused connection under it', async () => {
    // each connection's second request is dropped unanswered, as an upstream whose
    // keep-alive timeout ran out just as the request arrived would drop it
    const perSocket = new WeakMap<object, number>();
    let connections = 0;
    let answered = 0;
    const flaky = createServer((req, res) => {
      const n = (perSocket.get(req.socket) ?? 0) + 1;
      perSocket.set(req.socket, n);
      if (n === 2) {
        req.socket.destroy();
        return;
      }
      req.resume();
      req.on('end', () => {
        answered++;
        res.end('ok');
      });
    });
    flaky.on('connection', () => connections++);
    const proxy = createRoundRobin([await listen(flaky)]);
    const url = await listen(proxy.server);
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 2; i++) {
        const res = await fetch(`${url}/hooks/delivery`, {
          method: 'POST',
          body: `{"i":${i}}`,
          signal: AbortSignal.timeout(5000),
        });
        statuses.push(res.status);
        await res.text();
      }
      expect(statuses).toEqual([200, 200]);
      expect(answered).toBe(2);
      expect(connections).toBe(2);
    } finally {
      await proxy.close();
      await close(flaky);
    }
  });

  it('waits for a slow answer longer than the idle connections live', async () => {
    // idle connections are closed after 2 s; a request in flight keeps its own timeout
    const slow = createServer((req, res) => {
      req.resume();
      setTimeout(() => res.end('late'), 2500);
    });
    const proxy = createRoundRobin([await listen(slow)]);
    const url = await listen(proxy.server);
    try {
      const res = await fetch(`${url}/v1/messages`, { method: 'POST', body: '{}' });
      expect(res.status).toBe(200);
      expect(await res.text()).toBe('late');
    } finally {
      await proxy.close();
      await close(slow);
    }
  });
});
