/**
 * Typed errors shared by every part of Switchboard.
 *
 * Domain code throws (or returns) an `AppError` with a code from the closed `ErrorCode`
 * union; the HTTP layer maps the code to a status in exactly one place (`httpStatus`) and
 * renders the one envelope: `{"error": {"code", "message", "details"}}`.
 *
 * @example
 * throw new AppError('NOT_FOUND', 'message msg_1 not found');
 */

/** Every error code Switchboard can answer with. Add here, then to `httpStatus`. */
export const ERROR_CODES = [
  'VALIDATION_ERROR',
  'MALFORMED_JSON',
  'UNSUPPORTED_MEDIA_TYPE',
  'ROUTE_NOT_FOUND',
  'METHOD_NOT_ALLOWED',
  'NOT_FOUND',
  'UNAUTHORIZED',
  'FORBIDDEN',
  // a valid API token whose scopes do not include the one the route needs
  'INSUFFICIENT_SCOPE',
  'CONFLICT',
  'PAYLOAD_TOO_LARGE',
  'URI_TOO_LONG',
  'HEADERS_TOO_LARGE',
  'RATE_LIMITED',
  'UNAVAILABLE',
  'INTERNAL',
  // the provider's own identifiers (docs/provider.md, "What the docs leave open": error codes
  // per message), used for per-message rejections
  'INVALID_RECIPIENT',
  'INVALID_SENDER',
  'MESSAGE_TOO_LONG',
  'INVALID_ENCODING',
  'INVALID_MESSAGE',
  'DUPLICATE_CUSTOMER_MESSAGE_ID',
  // flows and calls
  'UNKNOWN_FLOW',
  'INVALID_FLOW',
  'INVALID_VARS',
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

/** One problem with one field: `path` is written like `messages[3].to`. */
export interface ErrorDetail {
  path: string;
  code: string;
  message: string;
}

export class AppError extends Error {
  readonly code: ErrorCode;
  readonly details: ErrorDetail[];
  constructor(code: ErrorCode, message: string, details: ErrorDetail[] = []) {
    super(message);
    this.name = 'AppError';
    this.code = code;
    this.details = details;
  }
}

/** The HTTP status for each error code; exhaustive, so a new code cannot be forgotten. */
export function httpStatus(
  code: ErrorCode,
): 400 | 401 | 403 | 404 | 405 | 409 | 413 | 414 | 415 | 429 | 431 | 500 | 503 {
  switch (code) {
    case 'VALIDATION_ERROR':
    case 'MALFORMED_JSON':
    case 'INVALID_RECIPIENT':
    case 'INVALID_SENDER':
    case 'MESSAGE_TOO_LONG':
    case 'INVALID_ENCODING':
    case 'INVALID_MESSAGE':
    case 'UNKNOWN_FLOW':
    case 'INVALID_FLOW':
    case 'INVALID_VARS':
      return 400;
    case 'UNAUTHORIZED':
      return 401;
    case 'FORBIDDEN':
    case 'INSUFFICIENT_SCOPE':
      return 403;
    case 'ROUTE_NOT_FOUND':
    case 'NOT_FOUND':
      return 404;
    case 'METHOD_NOT_ALLOWED':
      return 405;
    case 'CONFLICT':
    case 'DUPLICATE_CUSTOMER_MESSAGE_ID':
      return 409;
    case 'PAYLOAD_TOO_LARGE':
      return 413;
    case 'URI_TOO_LONG':
      return 414;
    case 'HEADERS_TOO_LARGE':
      return 431;
    case 'UNSUPPORTED_MEDIA_TYPE':
      return 415;
    case 'RATE_LIMITED':
      return 429;
    case 'UNAVAILABLE':
      return 503;
    case 'INTERNAL':
      return 500;
  }
}

/** Renders a zod-style issue path (`['messages', 3, 'to']`) as `messages[3].to`. */
export function formatPath(path: ReadonlyArray<PropertyKey>): string {
  let out = '';
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`;
    else out += out === '' ? String(part) : `.${String(part)}`;
  }
  return out;
}
