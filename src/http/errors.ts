/**
 * The one error envelope: `{"error":{"code","message","details"}}`. Every failure path of the
 * HTTP layer (validation, malformed JSON, unknown routes, typed domain errors, database
 * outages, bugs) ends in `errorResponse`. A schema's problems are worded for people in one
 * place, src/zod-issues.ts; a body that is not JSON is answered with the line and column of
 * its first error (src/http/json-syntax.ts).
 */
import type { Hook } from '@hono/zod-openapi';
import type { Context, MiddlewareHandler } from 'hono';
import { HTTPException } from 'hono/http-exception';
import type { ZodError } from 'zod';
import { type DatabaseAvailability, databaseDown } from '../db/availability.ts';
import { errorFields, isDatabaseUnavailable, isUnstorableText } from '../db/errors.ts';
import { AppError, type ErrorCode, type ErrorDetail, httpStatus } from '../errors.ts';
import { issuesToDetails } from '../zod-issues.ts';
import type { AppEnv } from './env.ts';
import { validatedInputProblem } from './input.ts';
import { jsonSyntaxError } from './json-syntax.ts';

export function errorResponse(
  c: Context,
  code: ErrorCode,
  message: string,
  details: ErrorDetail[] = [],
  extra: Record<string, unknown> = {},
) {
  return c.json({ error: { code, message, details, ...extra } }, httpStatus(code));
}

/** zod issues as envelope details, with paths like `messages[3].to` (src/zod-issues.ts). */
export function zodDetails(error: ZodError, prefix: PropertyKey[] = []): ErrorDetail[] {
  return issuesToDetails(error.issues, prefix);
}

/** The zod-openapi validation hook: a failed request schema becomes a 400 envelope. */
export const validationHook: Hook<unknown, AppEnv, string, unknown> = (result, c) => {
  if (result.success) {
    // what no schema allows: characters Postgres refuses, any depth (src/http/input.ts)
    const problem = validatedInputProblem(result.target, result.data, c.req.path);
    if (problem) return errorResponse(c, problem.code, problem.message, problem.details);
  } else {
    const details = zodDetails(result.error as ZodError);
    const first = details[0];
    return errorResponse(
      c,
      'VALIDATION_ERROR',
      first ? `${first.path || 'body'}: ${first.message}` : 'invalid request',
      details,
    );
  }
};

function codeForHttpException(status: number, message: string): ErrorCode {
  if (status === 400 && /malformed|json/i.test(message)) return 'MALFORMED_JSON';
  if (status === 401) return 'UNAUTHORIZED';
  if (status === 403) return 'FORBIDDEN';
  if (status === 404) return 'NOT_FOUND';
  if (status === 413) return 'PAYLOAD_TOO_LARGE';
  if (status === 415) return 'UNSUPPORTED_MEDIA_TYPE';
  if (status === 429) return 'RATE_LIMITED';
  if (status === 503) return 'UNAVAILABLE';
  if (status >= 400 && status < 500) return 'VALIDATION_ERROR';
  return 'INTERNAL';
}

/**
 * MALFORMED_JSON naming where: the body's text (read once already, kept by Hono) scanned for
 * its first error, given as line and column in the message and in a `JSON_SYNTAX` detail.
 */
async function malformedJson(c: Context<AppEnv>) {
  const text = await c.req.text().catch(() => undefined);
  const at = text === undefined ? undefined : jsonSyntaxError(text);
  if (!at) return errorResponse(c, 'MALFORMED_JSON', 'the request body is not valid JSON');
  const where = `line ${at.line}, column ${at.column}`;
  return errorResponse(
    c,
    'MALFORMED_JSON',
    `the request body is not valid JSON: ${where}: ${at.reason}`,
    [{ path: 'body', code: 'JSON_SYNTAX', message: at.reason, line: at.line, column: at.column }],
  );
}

/**
 * While the database is known down (db/availability.ts), requests that need it are refused
 * at once with a 503 through onError, instead of queueing for a connection.
 */
export function whileDatabaseUp(availability: DatabaseAvailability): MiddlewareHandler<AppEnv> {
  return async (_c, next) => {
    if (!availability.up) throw databaseDown();
    await next();
  };
}

/**
 * What every answer to a database outage does, whatever it looks like (this envelope, the
 * console's page): tells `availability`, so the next requests are refused at once, logs it,
 * and says when to come back.
 */
export function databaseUnavailable(
  err: Error,
  c: Context<AppEnv>,
  availability: DatabaseAvailability | undefined,
): void {
  availability?.failed(err);
  c.get('logger')?.warn({ err: errorFields(err) }, 'database unavailable');
  c.header('Retry-After', '1');
}

/**
 * `app.onError`: typed errors to their status, outages to 503, the rest to a bare 500. An
 * outage is told to `availability`, so the next requests are refused at once (src/app.ts).
 */
export async function onError(err: Error, c: Context<AppEnv>, availability?: DatabaseAvailability) {
  if (err instanceof AppError) return errorResponse(c, err.code, err.message, err.details);
  if (err instanceof HTTPException) {
    const code = codeForHttpException(err.status, err.message);
    if (code === 'MALFORMED_JSON') return malformedJson(c);
    return errorResponse(c, code, err.message || code);
  }
  const requestId = c.get('requestId');
  const log = c.get('logger');
  if (isUnstorableText(err)) {
    return errorResponse(
      c,
      'INVALID_ENCODING',
      'the request holds a character that cannot be stored: U+0000 or an unpaired UTF-16 surrogate',
    );
  }
  if (isDatabaseUnavailable(err)) {
    databaseUnavailable(err, c, availability);
    return errorResponse(c, 'UNAVAILABLE', 'the database is not answering; retry shortly', [], {
      requestId,
    });
  }
  // the stack as pino serialises it, and Postgres's own words when it refused a statement
  const { db } = errorFields(err);
  log?.error(db ? { err, db } : { err }, 'unhandled error');
  // no stack, no internals: the request id finds the log line
  return errorResponse(c, 'INTERNAL', 'unexpected error', [], { requestId });
}

export function notFound(c: Context<AppEnv>) {
  return errorResponse(c, 'ROUTE_NOT_FOUND', `no route for ${c.req.method} ${c.req.path}`);
}
