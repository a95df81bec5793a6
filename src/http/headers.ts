/**
 * Request headers, read from what Node's HTTP parser already made when @hono/node-server
 * serves the request. `c.req.header()` makes @hono/node-server build a Fetch `Headers` of
 * every header of the request first (WebIDL conversions included): ~8 KB of garbage per
 * request, the largest share of what a delivery callback allocated. Requests made in-process
 * (`app.request`, tests) have no Node request and are read through `c.req.header()`.
 *
 * Node keeps the first of repeated `authorization`, `content-type`, `content-length` and a
 * few other headers, and joins the rest with ", " as a Fetch `Headers` does.
 *
 * @example
 * const type = header(c, 'content-type');
 */
import type { IncomingMessage } from 'node:http';
import type { Context, MiddlewareHandler } from 'hono';

/** Node's own request, when @hono/node-server serves this one (it passes it as `incoming`). */
export function nodeRequest(c: Context): IncomingMessage | undefined {
  return (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
}

export function header(c: Context, name: string): string | undefined {
  const incoming = nodeRequest(c);
  if (!incoming?.headers) return c.req.header(name);
  const value = incoming.headers[name.toLowerCase()];
  return Array.isArray(value) ? value.join(', ') : value;
}

const REQUEST_ID = /^[\w\-=]{1,255}$/;

/**
 * `c.get('requestId')`: the caller's `X-Request-Id` when it is a plain token of at most 255
 * characters, else a new UUID; sent back as `X-Request-Id` (what `hono/request-id` does).
 */
export function requestIds(): MiddlewareHandler<{ Variables: { requestId: string } }> {
  return async (c, next) => {
    const given = header(c, 'x-request-id');
    const id = given !== undefined && REQUEST_ID.test(given) ? given : crypto.randomUUID();
    c.set('requestId', id);
    c.header('X-Request-Id', id);
    await next();
  };
}
