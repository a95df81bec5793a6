/**
 * The bench's load balancer for several Switchboard instances (`npm run bench:instances`): a
 * small HTTP proxy doing what a team's nginx or caddy round robin does. Request i goes to
 * upstream i mod n, on a keep-alive Agent of that upstream's own; bodies are streamed both
 * ways, and the upstream's status and headers pass through (hop-by-hop ones aside). An
 * upstream that cannot be reached, or that sends nothing back in `timeoutMs`, is answered 502
 * (504 for the timeout) at once: nothing is retried on another upstream, since a POST may
 * have done its work before its connection dropped. No forwarding headers are added: the
 * instances see the proxy as their loopback client, as the bench's single server sees the
 * load generator.
 *
 * @example
 * const proxy = createRoundRobin(['http://127.0.0.1:3001', 'http://127.0.0.1:3002']);
 * proxy.server.listen(8080);
 * // ... later: proxy.counts is [requests to 3001, requests to 3002]
 * await proxy.close();
 */
import {
  Agent,
  createServer,
  type IncomingHttpHeaders,
  type OutgoingHttpHeaders,
  request,
  type Server,
} from 'node:http';

export interface RoundRobin {
  server: Server;
  /** requests sent to each upstream so far, in the order of `upstreams` */
  counts: number[];
  /** stops listening, ends every connection and the agents' idle sockets */
  close(): Promise<void>;
}

// connection-level headers (RFC 9110 7.6.1): each hop has its own
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
]);

function endToEnd(headers: IncomingHttpHeaders, keep: string[] = []): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const [k, v] of Object.entries(headers)) {
    if (v !== undefined && (!HOP_BY_HOP.has(k) || keep.includes(k))) out[k] = v;
  }
  return out;
}

function fail(res: import('node:http').ServerResponse, status: number, message: string): void {
  if (res.headersSent) {
    // the status already went out: cut the body short, the client sees a broken response
    res.destroy();
    return;
  }
  const body = JSON.stringify({ error: { code: 'BAD_GATEWAY', message } });
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
}

/** A proxy over `upstreams` (base URLs, `http://host:port`); not listening yet. */
export function createRoundRobin(
  upstreams: string[],
  opts: { timeoutMs?: number } = {},
): RoundRobin {
  if (upstreams.length === 0) throw new Error('round robin: no upstreams');
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const targets = upstreams.map((u) => {
    const url = new URL(u);
    return {
      host: url.hostname,
      port: Number(url.port || 80),
      // an idle connection is closed after 2 s, before the upstream's own keep-alive timeout
      // (Node's 5 s) closes it under a request; the agent reads the upstream's Keep-Alive
      // hint only when it has a timeout of its own to shorten
      agent: new Agent({ keepAlive: true, timeout: 2000 }),
    };
  });
  const counts = targets.map(() => 0);
  let next = 0;
  const server = createServer((req, res) => {
    const i = next % targets.length;
    next++;
    counts[i]!++;
    const target = targets[i]!;
    // the body as it streams through, kept for one resend (see `send`)
    const body: Buffer[] = [];
    req.on('data', (chunk: Buffer) => body.push(chunk));
    const send = (resend: boolean) => {
      const upstream = request(
        {
          host: target.host,
          port: target.port,
          agent: target.agent,
          method: req.method,
          path: req.url,
          // a chunked request body stays chunked; its length, when given, passes as is
          headers: endToEnd(req.headers, ['transfer-encoding']),
          timeout: timeoutMs,
        },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.statusMessage, endToEnd(answer.headers));
          answer.pipe(res);
          answer.once('error', () => res.destroy());
        },
      );
      upstream.once('timeout', () => {
        upstream.destroy();
        fail(res, 504, `upstream ${i} sent nothing back in ${timeoutMs} ms`);
      });
      upstream.once('error', (err) => {
        if (res.writableEnded) return;
        // An idle kept-alive connection the upstream closed just as this request went out
        // on it: the upstream never read the request, so it goes again, once, on a new
        // connection (as nginx does for a cached upstream connection; Node's docs advise it,
        // see `request.reusedSocket`). Only once the whole body is here to send again.
        if (!resend && upstream.reusedSocket && !res.headersSent && req.readableEnded) {
          send(true);
          return;
        }
        fail(res, 502, `upstream ${i}: ${err.message}`);
      });
      // a client gone before its answer: the upstream request goes too
      res.once('close', () => {
        if (!res.writableFinished) upstream.destroy();
      });
      if (resend) upstream.end(Buffer.concat(body));
      else req.pipe(upstream);
    };
    send(false);
  });
  return {
    server,
    counts,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
        for (const t of targets) t.agent.destroy();
      }),
  };
}
