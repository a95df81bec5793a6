import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runLoad } from '../../bench/lib/load.ts';
import { responseReader, runOpenLoop } from '../../bench/lib/open-loop.mjs';

interface Reply {
  status: number;
  body: string;
  chunked: boolean;
  close: boolean;
}

function encode(r: Reply): string {
  const head = `HTTP/1.1 ${r.status} X\r\ncontent-type: text/plain\r\n${r.close ? 'Connection: close\r\n' : ''}`;
  if (!r.chunked) return `${head}Content-Length: ${Buffer.byteLength(r.body)}\r\n\r\n${r.body}`;
  // the body in pieces of up to 5 bytes, sizes in hex, then the zero chunk
  let body = '';
  for (let i = 0; i < r.body.length; i += 5) {
    const piece = r.body.slice(i, i + 5);
    body += `${Buffer.byteLength(piece).toString(16)}\r\n${piece}\r\n`;
  }
  return `${head}Transfer-Encoding: chunked\r\n\r\n${body}0\r\n\r\n`;
}

const reply = fc.record({
  status: fc.integer({ min: 200, max: 599 }).filter((s) => s !== 204 && s !== 304),
  body: fc.string({ maxLength: 40 }),
  chunked: fc.boolean(),
  close: fc.boolean(),
});

describe('responseReader', () => {
  it('reports every response of a stream, in order, however its bytes are split', () => {
    fc.assert(
      fc.property(
        fc.array(reply, { maxLength: 8 }),
        fc.array(fc.nat(), { maxLength: 20 }),
        (replies, cuts) => {
          const bytes = Buffer.from(replies.map(encode).join(''));
          const seen: [number, boolean][] = [];
          const reader = responseReader((status, close) => seen.push([status, close]));
          const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort(
            (a, b) => a - b,
          );
          let from = 0;
          for (const p of [...points, bytes.length]) {
            reader.push(bytes.subarray(from, p));
            from = p;
          }
          expect(seen).toEqual(replies.map((r) => [r.status, r.close]));
        },
      ),
    );
  });
});

describe('runOpenLoop', () => {
  let server: Server;
  let port: number;
  beforeAll(async () => {
    // answers with the status the request asks for, chunked when asked, closing when asked
    server = createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      const status = Number(url.searchParams.get('status') ?? 200);
      let body = '';
      req.on('data', (d) => (body += d));
      req.on('end', () => {
        if (url.searchParams.has('close')) res.setHeader('connection', 'close');
        if (url.searchParams.has('chunked')) {
          res.writeHead(status);
          res.write(`echo ${body.length}`);
          res.end('!');
        } else {
          res.writeHead(status, { 'content-length': 3 }).end('ok!');
        }
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('sends every request at its rate and records each answer', async () => {
    const paths = Array.from({ length: 60 }, (_, i) =>
      i % 10 === 3 ? `/?status=503&close` : i % 4 === 0 ? `/?status=202&chunked` : `/?status=200`,
    );
    const parts = paths.map((p, i) =>
      Buffer.from(
        `POST ${p} HTTP/1.1\r\nhost: x\r\ncontent-length: ${String(i).length}\r\n\r\n${i}`,
      ),
    );
    const offsets = new Uint32Array(parts.length + 1);
    parts.forEach((b, i) => {
      offsets[i + 1] = offsets[i]! + b.length;
    });
    const started = performance.now();
    const result = await runOpenLoop({
      host: '127.0.0.1',
      port,
      rate: 200,
      connections: 4,
      timeoutMs: 5000,
      requests: Buffer.concat(parts),
      offsets,
    });
    expect(result.errors).toBe(0);
    expect([...result.statuses]).toEqual(
      paths.map((p) => Number(new URL(p, 'http://x').searchParams.get('status'))),
    );
    for (const ms of result.latencies) expect(ms).toBeGreaterThanOrEqual(0);
    // 60 requests at 200/s are spread over about 0.3 s, not sent at once
    expect(performance.now() - started).toBeGreaterThanOrEqual(250);
  });

  it('counts a request whose connection closed before its answer as an error', async () => {
    const hang = createServer((req) => req.socket.destroy());
    await new Promise<void>((resolve) => hang.listen(0, '127.0.0.1', resolve));
    const request = Buffer.from('GET / HTTP/1.1\r\nhost: x\r\n\r\n');
    const result = await runOpenLoop({
      host: '127.0.0.1',
      port: (hang.address() as AddressInfo).port,
      rate: 100,
      connections: 2,
      timeoutMs: 5000,
      requests: Buffer.concat([request, request, request]),
      offsets: Uint32Array.from([0, request.length, 2 * request.length, 3 * request.length]),
    });
    await new Promise<void>((resolve) => hang.close(() => resolve()));
    expect(result.errors).toBe(3);
    expect([...result.statuses]).toEqual([0, 0, 0]);
  });

  it('gives the p99 of each second of requests by when they were due, so a stall shows where it was', async () => {
    // requests 100..109 (due in the second second) are held 300 ms; the rest answered at once
    const held = createServer((req, res) => {
      const i = Number(new URL(req.url ?? '/', 'http://x').searchParams.get('i'));
      const answer = () => res.end('ok');
      if (i >= 100 && i < 110) setTimeout(answer, 300);
      else answer();
    });
    await new Promise<void>((resolve) => held.listen(0, '127.0.0.1', resolve));
    try {
      const r = await runLoad({
        url: `http://127.0.0.1:${(held.address() as AddressInfo).port}`,
        seconds: 2,
        rate: 100,
        connections: 20,
        method: 'GET',
        request: (i) => ({ path: `/?i=${i}` }),
      });
      expect(r.requests).toBe(200);
      expect(r.p99BySecond).toHaveLength(2);
      const [first, second] = r.p99BySecond!;
      // latency counts from when a request was due: a held one is at least its 300 ms late
      expect(second).toBeGreaterThanOrEqual(300);
      expect(first).toBeLessThan(second! - 100);
    } finally {
      await new Promise<void>((resolve) => held.close(() => resolve()));
    }
  });
});
