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
// every zod parse speaks in Switchboard's sentences: the error map is installed as this
// module loads, before anything that can fail validation runs
import './zod-issues.ts';

/**
 * Marks an error about another system than the database (the provider, a user's endpoint):
 * what it wraps (a refused connection, a reset, a timeout) is that system's, and never reads as
 * the database being down. Without it, a route that let such an error through would answer
 * 503 "database" and trip the breaker for every request.
 *
 * @example
 * class ProviderError extends Error { readonly [NOT_THE_DATABASE] = true; }
 */
export const NOT_THE_DATABASE = Symbol.for('switchboard.notTheDatabase');

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
  'INCOMPLETE_BODY',
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
  // a call's `lang` that its flow does not speak
  'INVALID_LANGUAGE',
  // an Idempotency-Key sent again with a different request, or while its first is running
  'IDEMPOTENCY_KEY_REUSED',
  'IDEMPOTENCY_KEY_IN_USE',
  // an endpoint declared in ENDPOINTS_FILE: changed by editing the file, not through the API
  'ENDPOINT_READ_ONLY',
  // a flow written through the console or the API while FLOWS_WRITABLE is off
  'FLOWS_READ_ONLY',
  // a flow version no call ran on and the file is not at (GET /v1/flows/{id}/diff, versions)
  'UNKNOWN_FLOW_VERSION',
  // the recipient is on the opt-out list (src/opt-outs/): nothing is sent to it
  'OPTED_OUT',
  // a send that asked for a calling window no time of the next two weeks fits, or for the
  // frequency cap the number has reached (src/campaigns/limits.ts)
  'OUTSIDE_WINDOW',
  'OVER_CAP',
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

/**
 * Every code a detail (`details[].code`, one problem with one field) can carry: the closed
 * list of field-level codes, UPPER_SNAKE_CASE like the top-level ones (docs/errors.md lists
 * both). A schema's problems map here in src/zod-issues.ts; a flow's check rules are here
 * too (src/flows/checks.ts `FLOW_RULES`), as `INVALID_FLOW` names them.
 */
export const DETAIL_CODES = [
  // the shape of a value (what a schema says; src/zod-issues.ts)
  'REQUIRED',
  'INVALID_TYPE',
  'INVALID_VALUE',
  'INVALID_FORMAT',
  'TOO_SMALL',
  'TOO_BIG',
  'TOO_SHORT',
  'TOO_LONG',
  'NOT_MULTIPLE_OF',
  'UNKNOWN_FIELD',
  'INVALID_KEY',
  // the request itself (src/http/input.ts, src/http/errors.ts)
  'JSON_SYNTAX',
  'INVALID_ENCODING',
  'INVALID_UTF8',
  'UNSUPPORTED_CHARSET',
  'TOO_DEEP',
  'INVALID_CURSOR',
  'INSUFFICIENT_SCOPE',
  'DUPLICATE',
  'ERASED',
  // a message (the provider's rules, src/provider/*)
  'INVALID_RECIPIENT',
  'INVALID_SENDER',
  'INVALID_PHONE',
  'INVALID_DATETIME',
  'EXPIRE_BEFORE_SEND',
  'EXPIRED',
  'INVALID_EXPIRY',
  'MESSAGE_TOO_LONG',
  'TEXT_REQUIRED',
  'EMPTY_TEXT',
  'EMPTY_OPTION',
  'INVALID_BUTTON',
  'INVALID_IMAGE',
  'INVALID_MEDIA_TYPE',
  'INVALID_OTP',
  'INVALID_PROMO',
  'INVALID_SURVEY',
  'INVALID_FALLBACK',
  'INVALID_LANGUAGE',
  'INVALID_URL',
  'INVALID_MESSAGE',
  'DUPLICATE_CUSTOMER_MESSAGE_ID',
  'OPTED_OUT',
  'OUTSIDE_WINDOW',
  'OVER_CAP',
  // a cascade message (src/provider/cascade.ts)
  'DUPLICATE_ID',
  'DUPLICATE_VARIABLE',
  'UNKNOWN_VARIABLE',
  'UNKNOWN_PLACEHOLDER',
  'INVALID_PLACEHOLDER',
  'NO_MESSAGES',
  'TEXT_TOO_LONG',
  'OPTION_TOO_LONG',
  'SURVEY_OPTIONS_COUNT',
  'SURVEY_OPTIONS_NOT_ALLOWED',
  'CONFLICTING_FIELDS',
  'INVALID_ENDPOINT',
  // a speech-call menu (src/provider/menu.ts)
  'ACTION_AFTER_HANGUP',
  // a call and its flow (src/flows/vars.ts, src/calls/*)
  'UNKNOWN_FLOW',
  'UNKNOWN_PARAM',
  'UNKNOWN_LANGUAGE',
  'UNKNOWN_FLOW_VERSION',
  // a flow's check rules (src/flows/checks.ts FLOW_RULES)
  'YAML_SYNTAX',
  'DUPLICATE_KEY',
  'INVALID_ID',
  'SCHEMA',
  'INVALID_ACTION',
  'UNKNOWN_MENU',
  'UNREACHABLE_MENU',
  'UNREACHABLE_ACTION',
  'NO_END',
  'TEMPLATE_SYNTAX',
  'UNDECLARED_PARAM',
  'UNUSED_PARAM',
  'PARAM_DEFAULT',
  'MISSING_LANGUAGE',
  'DUPLICATE_LANGUAGE',
  'INVALID_DURATION',
  'SEND_TEXT',
  'SEND_CASCADE',
  'MENU_LIMIT',
  'PROVIDER_MENU',
  // a flow's assert: section (src/flows/assertions.ts)
  'ASSERT_OUTCOME',
  'ASSERT_MAX_MESSAGES',
  'ASSERT_MAX_DURATION',
  'ASSERT_PROMPT_LENGTH',
  'ASSERT_TIMEOUT',
  'ASSERT_PATH',
  'ASSERT_REACHABLE',
  'ASSERT_UNREACHABLE',
  // a flow's `say:` prompt against the speech engine (src/flows/checks.ts; TEXT_TOO_LONG too)
  'NO_VOICE',
  'RETRY_OUTCOME',
  // `flows validate --check-audio`: a prompt URL that does not answer with audio (src/flows/audio-check.ts)
  'AUDIO_NOT_AUDIO',
  // a campaign asked to pause, resume or cancel from a state that does not allow it
  'INVALID_STATE',
  // a campaign's CSV upload: a line that is not a row of the header's columns
  'INVALID_CSV',
  // an event endpoint (src/events/endpoints.ts)
  'UNKNOWN_EVENT_TYPE',
  'ADDRESS_NOT_ALLOWED',
] as const;

export type DetailCode = (typeof DETAIL_CODES)[number];

/**
 * One problem with one field: `path` is written like `messages[3].to` (`body` for the
 * request body as a whole), `code` is one of DETAIL_CODES, `message` a sentence for people.
 * `line` and `column` (both from 1) say where in the body a `JSON_SYNTAX` detail found the
 * first error; no other detail carries them.
 */
export interface ErrorDetail {
  path: string;
  code: DetailCode;
  message: string;
  line?: number;
  column?: number;
}

/** Whether a string is one of DETAIL_CODES. */
export function isDetailCode(code: string): code is DetailCode {
  return (DETAIL_CODES as readonly string[]).includes(code);
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
    case 'INCOMPLETE_BODY':
    case 'INVALID_RECIPIENT':
    case 'INVALID_SENDER':
    case 'MESSAGE_TOO_LONG':
    case 'INVALID_ENCODING':
    case 'INVALID_MESSAGE':
    case 'UNKNOWN_FLOW':
    case 'INVALID_FLOW':
    case 'INVALID_VARS':
    case 'INVALID_LANGUAGE':
      return 400;
    case 'UNAUTHORIZED':
      return 401;
    case 'FORBIDDEN':
    case 'INSUFFICIENT_SCOPE':
    case 'FLOWS_READ_ONLY':
      return 403;
    case 'ROUTE_NOT_FOUND':
    case 'NOT_FOUND':
    case 'UNKNOWN_FLOW_VERSION':
      return 404;
    case 'METHOD_NOT_ALLOWED':
      return 405;
    case 'CONFLICT':
    case 'DUPLICATE_CUSTOMER_MESSAGE_ID':
    case 'IDEMPOTENCY_KEY_REUSED':
    case 'IDEMPOTENCY_KEY_IN_USE':
    case 'ENDPOINT_READ_ONLY':
    case 'OPTED_OUT':
    case 'OUTSIDE_WINDOW':
    case 'OVER_CAP':
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
