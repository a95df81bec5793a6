/**
 * Request bodies: their size limits, and reading a raw body as text. Both avoid the Fetch
 * API's machinery where Node serves the request: `@hono/node-server` builds a real `Request`
 * (with its stream, abort signal and headers copy) the first time anything touches
 * `c.req.raw.body`, which costs more than the rest of a small callback's handling. Hono's own
 * `bodyLimit` touches it on every request, even a GET; here a request's headers decide
 * first, and the full check runs only for a body of unannounced length (chunked).
 *
 * @example
 * app.use('*', bodyLimits());
 * const text = await readText(c); // in a handler
 */
import type { IncomingMessage } from 'node:http';
import type { Context, MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { AppError } from '../errors.ts';
import type { AppEnv } from './env.ts';
import { errorResponse } from './errors.ts';
import { header, nodeRequest } from './headers.ts';

const KiB = 1024;
const MiB = 1024 * KiB;
// 5000 messages of up to ~6 KiB each (a 10-part SMS with a fallback is ~3.5 KiB), 10 000
// calls of ~3 KiB each, a campaign's 100 000 recipients as JSON, callbacks carrying 5000
// events; everything else: 1 MiB
// (test/http/limits.test.ts holds these sizes)
export const LARGE_BODY = 32 * MiB;
export const DEFAULT_BODY = 1 * MiB;
// a speech-call webhook is one key press (a token and a few fields): refused before a big read
export const SPEECH_HOOK_BODY = 64 * KiB;
// a campaign's recipients as CSV stream to a temporary file, never held whole in memory: a
// million rows is ~50 MiB
export const CAMPAIGN_CSV_BODY = 1024 * MiB;

function limitFor(path: string, contentType: string | undefined): number {
  if (path === '/hooks/speechcall') return SPEECH_HOOK_BODY;
  if (path === '/v1/campaigns' && contentType !== undefined && /^text\/csv\b/i.test(contentType))
    return CAMPAIGN_CSV_BODY;
  return path === '/v1/messages' ||
    path === '/v1/campaigns' ||
    path === '/v1/calls/batch' ||
    path.startsWith('/hooks/') ||
    path.startsWith('/sandbox/')
    ? LARGE_BODY
    : DEFAULT_BODY;
}

const DECIMAL = /^\d+$/;

/** 413 in the error envelope for a body over its route's limit; see the module comment. */
export function bodyLimits(): MiddlewareHandler<AppEnv> {
  const tooLarge = (c: Context<AppEnv>, max: number) =>
    errorResponse(
      c,
      'PAYLOAD_TOO_LARGE',
      `the request body is larger than ${max < MiB ? `${max / KiB} KiB` : `${max / MiB} MiB`}`,
    );
  const counting = new Map(
    [LARGE_BODY, DEFAULT_BODY, SPEECH_HOOK_BODY, CAMPAIGN_CSV_BODY].map((max) => [
      max,
      bodyLimit({ maxSize: max, onError: (c) => tooLarge(c as Context<AppEnv>, max) }),
    ]),
  );
  return async (c, next) => {
    const max = limitFor(c.req.path, header(c, 'content-type'));
    const chunked = header(c, 'transfer-encoding');
    const length = header(c, 'content-length');
    if (chunked === undefined) {
      // on the wire (HTTP/1.1) a request with neither header has no body at all; a Request
      // made in-process (app.request) may carry one without saying so
      if (length === undefined && nodeRequest(c) !== undefined) return next();
      if (length !== undefined && DECIMAL.test(length))
        return Number(length) > max ? tooLarge(c, max) : next();
    }
    // a campaign's CSV of unannounced length: its route counts it as it streams in
    // (routes/campaigns.ts `countedBody`); the generic count below would hold it whole first
    if (max === CAMPAIGN_CSV_BODY) return next();
    // a chunked body (or an odd length header): read and counted as it arrives
    return counting.get(max)!(c, next);
  };
}

const utf8 = new TextDecoder();

/**
 * A body the client stopped sending (it closed the request, or its connection reset): 400, and
 * never read as the database being down (a reset reads as one, and would trip the breaker for
 * every request). `cause`: what the body's stream failed with.
 */
export function incompleteBody(cause?: unknown): AppError {
  const why = cause instanceof Error && cause.message ? ` (${cause.message})` : '';
  return new AppError(
    'INCOMPLETE_BODY',
    `the request body did not arrive whole: the client closed the request before its end${why}`,
  );
}

function incomingOf(c: Context<AppEnv>): IncomingMessage | undefined {
  const incoming = nodeRequest(c);
  // untouched: nothing has read it, or wrapped it in a Request that did
  if (!incoming || incoming.readableDidRead || typeof incoming.on !== 'function') return undefined;
  return incoming;
}

function readAll(incoming: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let ended = false;
    incoming.on('data', (chunk: Buffer) => chunks.push(chunk));
    incoming.once('end', () => {
      ended = true;
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));
    });
    incoming.once('error', (err) => reject(incompleteBody(err)));
    incoming.once('close', () => {
      if (!ended) reject(incompleteBody());
    });
  });
}

/**
 * The request body as text (UTF-8, as `Request.text()` decodes it: a leading BOM dropped,
 * invalid bytes replaced). Read straight from Node's request when it is untouched and its
 * length was announced (so `bodyLimits` has already checked it); through `c.req.text()`
 * otherwise (tests calling `app.request`, chunked bodies).
 */
export async function readText(c: Context<AppEnv>): Promise<string> {
  const incoming =
    header(c, 'transfer-encoding') === undefined && header(c, 'content-length') !== undefined
      ? incomingOf(c)
      : undefined;
  if (!incoming) return c.req.text();
  return utf8.decode(await readAll(incoming));
}
