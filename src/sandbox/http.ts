/**
 * HTTP helpers shared by the sandbox's routes. An error answer has the compact dialect's
 * body, `{error, message, status}` (the condensed interface's 429 body, the only error body it
 * shows), plus `details` naming the fields when there are any; except on a request marked
 * with `useDocsErrors` (the docs dialect's messaging API), which gets send-message.md's
 * "Error Response", `{"error": {"code", "message"}}`, with the same HTTP status.
 *
 * @example
 * return providerError(c, 400, 'BAD_REQUEST', 'messages must be an array');
 */
import type { Context, MiddlewareHandler } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import type { z } from 'zod';
import type { ErrorDetail } from '../errors.ts';
import { issuesToDetails } from '../provider/issues.ts';
import { docsErrorBody } from './dialect.ts';
import type { TokenBucket } from './rate-limit.ts';

/** The context variable that marks a request whose errors take the docs' body. */
const DOCS_ERRORS = 'sandboxDocsErrors';

/** Marks this request: its error answers take the docs' body (send-message.md). */
export function useDocsErrors(c: Context): void {
  c.set(DOCS_ERRORS, true);
}

export interface ProviderErrorBody {
  error: string;
  message: string;
  status: number;
  details?: ErrorDetail[];
}

export function providerError(
  c: Context,
  status: ContentfulStatusCode,
  error: string,
  message: string,
  details?: ErrorDetail[],
): Response {
  if (c.get(DOCS_ERRORS) === true) return c.json(docsErrorBody(error, message), status);
  const body: ProviderErrorBody = {
    error,
    message,
    status,
    ...(details !== undefined && details.length > 0 && { details }),
  };
  return c.json(body, status);
}

/**
 * A JSON media type: `application/json` or `application/<subtype>+json`, with parameters. The
 * subtype stops at `;`: `application/x-www-form-urlencoded; a=b+json` is a form, not JSON.
 */
export function isJsonType(type: string): boolean {
  return /^application\/([^\s;/]+\+)?json\s*(;|$)/i.test(type);
}

/** Reads a JSON body; a body that is not JSON is answered with 400 (invalid request format). */
export async function readJson(
  c: Context,
  opts: { requireJsonType?: boolean } = {},
): Promise<{ ok: true; body: unknown } | { ok: false; response: Response }> {
  const type = c.req.header('content-type') ?? '';
  if (opts.requireJsonType && !isJsonType(type)) {
    return {
      ok: false,
      response: providerError(
        c,
        400,
        'BAD_REQUEST',
        `Content-Type must be application/json (got ${type === '' ? 'none' : `"${type}"`})`,
      ),
    };
  }
  const text = await c.req.text();
  try {
    return { ok: true, body: JSON.parse(text) };
  } catch {
    return {
      ok: false,
      response: providerError(c, 400, 'BAD_REQUEST', 'the request body is not valid JSON'),
    };
  }
}

/**
 * Refuses a request with 429 and Retry-After (whole seconds, at least 1) when `bucket` is
 * empty.
 */
export function rateLimit(bucket: () => TokenBucket, what: string): MiddlewareHandler {
  return async (c, next) => {
    const taken = bucket().take();
    if (!taken.ok) {
      c.header('Retry-After', String(Math.max(1, Math.ceil(taken.retryAfterMs / 1000))));
      return providerError(c, 429, 'RATE_LIMITED', `rate limit exceeded (${what})`);
    }
    await next();
  };
}

/** The request's auth-related headers, in the shape auth.ts reads. */
export function authHeaders(c: Context) {
  return {
    authorization: c.req.header('authorization'),
    'x-authorization-key': c.req.header('x-authorization-key'),
    'x-viber-auth-token': c.req.header('x-viber-auth-token'),
    'x-tg-bot-key': c.req.header('x-tg-bot-key'),
  };
}

/** Reads a JSON body and checks it with `schema`; a 400 in the provider's error shape otherwise. */
export async function parseBody<T>(
  c: Context,
  schema: z.ZodType<T>,
  opts: { requireJsonType?: boolean } = {},
): Promise<{ ok: true; value: T } | { ok: false; response: Response }> {
  const read = await readJson(c, opts);
  if (!read.ok) return read;
  const parsed = schema.safeParse(read.body);
  if (parsed.success) return { ok: true, value: parsed.data };
  const details = issuesToDetails(parsed.error.issues);
  const first = details[0];
  return {
    ok: false,
    response: providerError(
      c,
      400,
      'BAD_REQUEST',
      first ? `${first.path === '' ? 'body' : first.path}: ${first.message}` : 'invalid request',
      details,
    ),
  };
}
