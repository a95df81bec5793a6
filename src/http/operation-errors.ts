/**
 * The error codes each operation of the OpenAPI document can answer with, derived in this one
 * place from what the operation is, plus the few a route declares itself:
 *
 * - every operation: URI_TOO_LONG, HEADERS_TOO_LARGE (Node's parser, before any handler) and
 *   INTERNAL; INVALID_ENCODING where the input is judged (a NUL in any query name);
 * - a path or query parameter: VALIDATION_ERROR; a path parameter: NOT_FOUND;
 * - a request body: PAYLOAD_TOO_LARGE; a body the route validates (everything but the raw
 *   callbacks): MALFORMED_JSON, UNSUPPORTED_MEDIA_TYPE, VALIDATION_ERROR, INVALID_ENCODING;
 * - any security requirement: UNAUTHORIZED; the API token: UNAVAILABLE (made tokens live in
 *   the database), and INSUFFICIENT_SCOPE when some token lacks the scope the route needs;
 * - a POST under /v1 (it takes an Idempotency-Key, http/idempotency.ts): IDEMPOTENCY_KEY_*;
 * - the route's own `errorCodes({ also, never })` (spread into its createRoute).
 *
 * `withErrorResponses` writes them into the document: per HTTP status, a response whose
 * `error.code` is an `enum` of its codes (kept: the route's own description of that status),
 * and the whole list as `x-error-codes`.
 *
 * @example
 * createRoute({ method: 'post', path: '/v1/tokens', ...errorCodes({ also: ['CONFLICT'] }), ... });
 * const doc = withErrorResponses(app.getOpenAPI31Document(config));
 */
import { ERROR_CODES, type ErrorCode, httpStatus } from '../errors.ts';
import { ErrorBody } from '../messages/views.ts';
import { takesIdempotencyKey } from './idempotency.ts';
import { judgesInput } from './input.ts';
import { API_SCHEME, allows, isScope, SCOPES } from './scopes.ts';

/** Where a route's own declaration travels, from createRoute to this module (then removed). */
const DECLARED = 'x-declared-error-codes';

export interface ErrorDeclaration {
  /** codes the route answers with beyond what its shape implies */
  also?: ErrorCode[];
  /** implied codes it never answers with (an erasure of an unknown number is no 404) */
  never?: ErrorCode[];
}

/** A route's own error codes, for its createRoute (or registerPath): `...errorCodes({...})`. */
export function errorCodes(declaration: ErrorDeclaration): { [DECLARED]: ErrorDeclaration } {
  return { [DECLARED]: declaration };
}

/** The part of an OpenAPI operation this module reads and writes. */
interface Operation {
  parameters?: { in?: string }[];
  requestBody?: unknown;
  security?: Record<string, string[]>[];
  responses?: Record<string, Response>;
  [DECLARED]?: ErrorDeclaration;
  'x-error-codes'?: ErrorCode[];
}

interface Response {
  description?: string;
  content?: Record<string, { schema?: { $ref?: string } }>;
}

/** Any OpenAPI document: its paths are read as path items of operations. */
export interface OpenApiDocument {
  paths?: object;
}

const ERROR_SCHEMA = '#/components/schemas/Error';

const ALWAYS: ErrorCode[] = ['URI_TOO_LONG', 'HEADERS_TOO_LARGE', 'INTERNAL'];
const IDEMPOTENCY: ErrorCode[] = ['IDEMPOTENCY_KEY_REUSED', 'IDEMPOTENCY_KEY_IN_USE'];
const JUDGED_BODY: ErrorCode[] = [
  'MALFORMED_JSON',
  'UNSUPPORTED_MEDIA_TYPE',
  'VALIDATION_ERROR',
  'INVALID_ENCODING',
];

/** What each status means, for a status the route does not describe itself. */
const MEANING: Record<number, string> = {
  400: 'the request is not valid',
  401: 'no valid token',
  403: 'the token may not do this',
  404: 'not found',
  409: 'conflicts with an earlier request',
  413: 'the body is too large',
  414: 'the path and query are too long',
  415: 'the body is not JSON in UTF-8',
  431: 'the headers are too large',
  500: 'unexpected error: the requestId finds the log line',
  503: 'the database is not answering: nothing was done, retry shortly',
};

/** Whether some token with one scope could not use a route that needs `needed`. */
function someTokenLacks(needed: string): boolean {
  return isScope(needed) && SCOPES.some((granted) => !allows([granted], needed));
}

/** Every code `op` (at `path`) can answer with, in ERROR_CODES order. */
export function operationErrorCodes(path: string, op: Operation, method = 'get'): ErrorCode[] {
  const codes = new Set<ErrorCode>(ALWAYS);
  const add = (...more: ErrorCode[]) => {
    for (const code of more) codes.add(code);
  };
  const judged = judgesInput(path);
  if (judged) add('INVALID_ENCODING');
  const params = op.parameters ?? [];
  if (params.some((p) => p.in === 'path' || p.in === 'query')) add('VALIDATION_ERROR');
  if (params.some((p) => p.in === 'path')) add('NOT_FOUND');
  if (op.requestBody !== undefined) {
    add('PAYLOAD_TOO_LARGE', 'INCOMPLETE_BODY');
    if (judged) add(...JUDGED_BODY);
  }
  const requirements = op.security ?? [];
  if (requirements.some((r) => Object.keys(r).length > 0)) add('UNAUTHORIZED');
  const scopes = requirements.flatMap((r) => r[API_SCHEME] ?? []);
  if (requirements.some((r) => API_SCHEME in r)) add('UNAVAILABLE');
  if (scopes.some(someTokenLacks)) add('INSUFFICIENT_SCOPE');
  if (takesIdempotencyKey(method, path)) add(...IDEMPOTENCY);
  const declared = op[DECLARED];
  add(...(declared?.also ?? []));
  for (const code of declared?.never ?? []) codes.delete(code);
  return ERROR_CODES.filter((c) => codes.has(c));
}

function isEnvelope(response: Response | undefined): boolean {
  return response?.content?.['application/json']?.schema?.$ref === ERROR_SCHEMA;
}

/** The envelope, its `error.code` narrowed to `codes`. */
function envelopeOf(codes: ErrorCode[]) {
  return {
    allOf: [
      { $ref: ERROR_SCHEMA },
      {
        type: 'object',
        required: ['error'],
        properties: {
          error: {
            type: 'object',
            required: ['code'],
            properties: { code: { type: 'string', enum: codes } },
          },
        },
      },
    ],
  };
}

/** One operation's error responses, rewritten from its codes; see the module comment. */
function describeErrors(method: string, path: string, op: Operation): void {
  const where = `${method.toUpperCase()} ${path}`;
  const codes = operationErrorCodes(path, op, method);
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of codes) {
    const status = httpStatus(code);
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  const responses = op.responses ?? {};
  for (const [status, response] of Object.entries(responses)) {
    if (Number(status) >= 400 && isEnvelope(response) && !byStatus.has(Number(status))) {
      throw new Error(
        `${where} documents a ${status} that none of its error codes answers with: declare the code with errorCodes({ also: [...] }) (src/http/operation-errors.ts), or drop the response`,
      );
    }
  }
  const ordered: Record<string, Response> = {};
  for (const [status, response] of Object.entries(responses)) {
    if (Number(status) < 400) ordered[status] = response;
  }
  for (const status of [...byStatus.keys()].sort((a, b) => a - b)) {
    const list = byStatus.get(status)!;
    const own = responses[String(status)];
    if (own && !isEnvelope(own)) {
      throw new Error(
        `${where}: its ${status} is not the error envelope, but ${list.join(', ')} are`,
      );
    }
    ordered[String(status)] = {
      description: `${own?.description ?? MEANING[status] ?? 'error'} (${list.join(', ')})`,
      content: { 'application/json': { schema: envelopeOf(list) as { $ref?: string } } },
    };
  }
  // statuses answered with another body (GET /readyz's 503 is its Readiness)
  for (const [status, response] of Object.entries(responses)) {
    if (!(status in ordered)) ordered[status] = response;
  }
  op.responses = ordered;
  delete op[DECLARED];
  op['x-error-codes'] = codes;
}

const METHODS = new Set(['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace']);

/** `doc` with every operation's error responses written from its codes (in place). */
export function withErrorResponses<T extends OpenApiDocument>(doc: T): T {
  const paths = (doc.paths ?? {}) as Record<string, Record<string, unknown>>;
  for (const [path, item] of Object.entries(paths)) {
    for (const [method, op] of Object.entries(item)) {
      if (!METHODS.has(method)) continue;
      describeErrors(method, path, op as Operation);
    }
  }
  return doc;
}

/**
 * A response in the error envelope, for a route's `responses` (`404: errorBody('no such flow')`).
 *
 * @example
 * responses: { 200: ..., 404: errorBody('no such flow') }
 */
export const errorBody = (description: string) => ({
  description,
  content: { 'application/json': { schema: ErrorBody } },
});
