/**
 * Bad requests as bytes on a real socket (issue 21, point 4), where `fetch` would refuse to
 * send them or Node's parser answers before any handler: headers over Node's limit (431), a
 * request line over it (414), a Content-Length that lies either way, a chunked body over the
 * limit, bytes that are not HTTP. Each gets a 4xx in the one envelope, never a 500.
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { MAX_URL_LENGTH } from '../../src/http/input.ts';
import type { RunningServer } from '../../src/server.ts';
import { describeEachEngine } from '../support/db.ts';
import { startTestServer } from '../support/server.ts';

interface Answer {
  status: number;
  headers: string;
  body: string;
}

/**
 * Writes `parts` to a new connection (a function part is called with the socket, to stream),
 * then reads until the server closes, and returns the first answer on it.
 */
function exchange(
  port: number,
  parts: (string | Buffer)[],
  opts: { halfClose?: boolean; stream?: (write: (b: Buffer) => boolean) => void } = {},
): Promise<Answer & { raw: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (d) => chunks.push(d));
    socket.on('error', (err) => {
      // the server may close while the rest is still being written: what came back counts
      if (
        (err as NodeJS.ErrnoException).code !== 'EPIPE' &&
        (err as NodeJS.ErrnoException).code !== 'ECONNRESET'
      )
        reject(err);
    });
    socket.on('close', () => {
      const raw = Buffer.concat(chunks).toString('latin1');
      const [head = '', ...rest] = raw.split('\r\n\r\n');
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0);
      resolve({ status, headers: head, body: rest.join('\r\n\r\n'), raw });
    });
    socket.on('connect', () => {
      for (const p of parts) socket.write(p);
      opts.stream?.((b) => socket.write(b));
      if (opts.halfClose) socket.end();
    });
  });
}

function envelope(answer: Answer): { code: string; message: string } {
  // a chunked answer (Hono's) carries its length line first; ours is one JSON object
  const start = answer.body.indexOf('{');
  const end = answer.body.lastIndexOf('}');
  return (
    JSON.parse(answer.body.slice(start, end + 1)) as { error: { code: string; message: string } }
  ).error;
}

describeEachEngine('bad requests on the wire', (ctx) => {
  let server: RunningServer;
  beforeAll(async () => {
    server = await startTestServer(ctx.database());
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('answers headers over the server limit with 431 in the envelope', async () => {
    const answer = await exchange(server.port, [
      `GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Big: ${'x'.repeat(20 * 1024)}\r\nConnection: close\r\n\r\n`,
    ]);
    expect(answer.status).toBe(431);
    expect(answer.headers).toMatch(/content-type: application\/json/i);
    expect(envelope(answer).code).toBe('HEADERS_TOO_LARGE');
  });

  it('answers a request line over the limit with 414 in the envelope, below and beyond what Node parses', async () => {
    for (const [path, what] of [
      [`/v1/messages?to=${'1'.repeat(MAX_URL_LENGTH)}`, 'in the app'],
      [`/ui/messages/${'x'.repeat(MAX_URL_LENGTH)}`, 'the console'],
      [`/sandbox/_control/messages/${'x'.repeat(MAX_URL_LENGTH)}`, 'the sandbox'],
      [`/v1/messages?to=${'1'.repeat(20 * 1024)}`, 'in the parser'],
    ] as const) {
      const answer = await exchange(server.port, [
        `GET ${path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`,
      ]);
      expect(answer.status, what).toBe(414);
      expect(envelope(answer).code, what).toBe('URI_TOO_LONG');
    }
  });

  it('answers bytes that are not HTTP with 400 in the envelope', async () => {
    const answer = await exchange(server.port, ['NOT HTTP AT ALL\r\n\r\n']);
    expect(answer.status).toBe(400);
    expect(envelope(answer).code).toBe('VALIDATION_ERROR');
  });

  it('answers a Content-Length shorter than the body with 400s, never a 500', async () => {
    const body = '{"messages":[{"type":"sms","from":"Shop","to":"+380501234567","text":"hi"}]}';
    const answer = await exchange(server.port, [
      `POST /v1/messages HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n${body}`,
    ]);
    // the first 10 bytes are cut JSON; the rest is read as a next request, which is no HTTP
    expect(answer.status).toBe(400);
    // whichever is judged first: the cut JSON, or the bytes after it that are no request
    expect(['MALFORMED_JSON', 'VALIDATION_ERROR']).toContain(envelope(answer).code);
    expect(answer.raw).not.toMatch(/HTTP\/1\.1 5\d\d/);
  });

  it('does not answer 500 to a Content-Length longer than the body', async () => {
    const answer = await exchange(
      server.port,
      [
        'POST /v1/messages HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"messages":[',
      ],
      { halfClose: true },
    );
    // the client gave up: there is no one to answer, or a 4xx
    expect(answer.raw).not.toMatch(/HTTP\/1\.1 5\d\d/);
    const after = await fetch(`${server.url}/healthz`);
    expect(after.status).toBe(200);
  });

  it('answers a chunked body over the limit on /v1/messages with 413 in the envelope', async () => {
    const chunk = Buffer.from(`100000\r\n${'x'.repeat(0x100000)}\r\n`);
    const answer = await exchange(
      server.port,
      [
        'POST /v1/messages HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n',
      ],
      {
        // 33 chunks of 1 MiB: one more than the 32 MiB the route takes
        stream: (write) => {
          for (let i = 0; i < 33; i++) write(chunk);
          write(Buffer.from('0\r\n\r\n'));
        },
      },
    );
    expect(answer.status).toBe(413);
    expect(envelope(answer).code).toBe('PAYLOAD_TOO_LARGE');
  });
});
