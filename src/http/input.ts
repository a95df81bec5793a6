/**
 * What no route takes, whatever its schema: a request target over MAX_URL_LENGTH (414), a
 * JSON body declared in another charset than UTF-8 (415) or holding bytes that are not
 * UTF-8 (400), characters Postgres cannot store (U+0000 in text and jsonb, UTF-16
 * surrogates without their pair; 400 INVALID_ENCODING) and JSON nested deeper than
 * MAX_DEPTH (400). Found before a handler runs, in one walk, and answered in the envelope
 * naming the field (`path.ref`, `query.to`, `messages[0].text`, `vars.name`), so no route
 * has to think about them and none answers 500 when Postgres or a recursive
 * `JSON.stringify` refuses them later.
 *
 * Two entry points share the rule: `requestChecks()` (middleware: the URL's path
 * parameters and query, and the bytes of a JSON body) and `validatedInputProblem` (from the
 * validation hook every router shares, src/http/errors.ts: the body as zod parsed it, no
 * second parse). The provider's callbacks (/hooks/*) are exempt: they are stored raw,
 * whatever they carry (src/messages/inbox.ts `storable`), and the sandbox (/sandbox/*)
 * answers as the provider does.
 *
 * @example
 * app.use('*', requestChecks());
 * inputProblem({ messages: [{ text: 'a\u0000b' }] }); // names messages[0].text
 */
import { isUtf8 } from 'node:buffer';
import type { Context, MiddlewareHandler } from 'hono';
import { matchedRoutes } from 'hono/route';
import { UNSTORABLE_CHAR } from '../db/errors.ts';
import { type ErrorCode, type ErrorDetail, formatPath } from '../errors.ts';
import type { AppEnv } from './env.ts';
// a cycle (errors.ts asks this module from the validation hook), harmless: both sides only
// call each other inside functions, never while the modules load
import { errorResponse } from './errors.ts';
import { header, nodeRequest } from './headers.ts';

/** The longest request target (path and query) taken: 8 KiB, as most servers and proxies. */
export const MAX_URL_LENGTH = 8 * 1024;
/** How deep a JSON body may nest: far beyond any message or call, far below a stack's end. */
export const MAX_DEPTH = 64;

export interface InputProblem {
  code: ErrorCode;
  message: string;
  details: ErrorDetail[];
}

// a cheap first pass: most strings hold neither a NUL nor any surrogate
// biome-ignore lint/suspicious/noControlCharactersInRegex: U+0000 is exactly what it looks for
const SUSPECT = /[\u0000\uD800-\uDFFF]/;

function unstorable(s: string): boolean {
  return SUSPECT.test(s) && UNSTORABLE_CHAR.test(s);
}

const ENCODING_MESSAGE =
  'holds a character that cannot be stored: U+0000 or an unpaired UTF-16 surrogate';

function encodingProblem(path: PropertyKey[]): InputProblem {
  const at = formatPath(path) || 'body';
  return {
    code: 'INVALID_ENCODING',
    message: `${at}: ${ENCODING_MESSAGE}`,
    details: [{ path: at, code: 'INVALID_ENCODING', message: ENCODING_MESSAGE }],
  };
}

interface Frame {
  value: unknown;
  key: PropertyKey | undefined;
  parent: Frame | undefined;
  depth: number;
}

function pathOf(frame: Frame | undefined, prefix: PropertyKey[]): PropertyKey[] {
  const keys: PropertyKey[] = [];
  for (let f = frame; f?.key !== undefined; f = f.parent) keys.push(f.key);
  return [...prefix, ...keys.reverse()];
}

/**
 * The first thing in `value` (a parsed JSON value, a query, parameters) that no route takes:
 * a string or a key Postgres cannot store, or nesting deeper than MAX_DEPTH. Iterative, so
 * any depth is walked without recursion; undefined when all is well.
 */
export function inputProblem(
  value: unknown,
  prefix: PropertyKey[] = [],
  /** the depth of `value` in its body (an item of a list judged one by one is deeper) */
  depth = 1,
): InputProblem | undefined {
  if (typeof value === 'string') return unstorable(value) ? encodingProblem(prefix) : undefined;
  if (value === null || typeof value !== 'object') return undefined;
  const stack: Frame[] = [{ value, key: undefined, parent: undefined, depth }];
  while (stack.length > 0) {
    const frame = stack.pop()!;
    if (frame.depth > MAX_DEPTH) {
      const at = formatPath(pathOf(frame.parent, prefix)) || 'body';
      const message = `nested deeper than ${MAX_DEPTH} levels`;
      return {
        code: 'VALIDATION_ERROR',
        message: `${at}: ${message}`,
        details: [{ path: at, code: 'TOO_DEEP', message }],
      };
    }
    const node = frame.value;
    // only what JSON, a query or a form can make: arrays and plain objects (a File is a leaf)
    const isArray = Array.isArray(node);
    if (!isArray) {
      const proto = Object.getPrototypeOf(node);
      if (proto !== Object.prototype && proto !== null) continue;
    }
    const keys = isArray ? undefined : Object.keys(node as object);
    const length = isArray ? (node as unknown[]).length : keys!.length;
    // children pushed last to first, so the first problem in document order is the one named
    for (let i = length - 1; i >= 0; i--) {
      const key: PropertyKey = isArray ? i : keys![i]!;
      if (typeof key === 'string' && unstorable(key)) {
        return encodingProblem([...pathOf(frame, prefix), key]);
      }
      const child = (node as Record<PropertyKey, unknown>)[key];
      if (typeof child === 'string') {
        if (unstorable(child)) return encodingProblem([...pathOf(frame, prefix), key]);
      } else if (child !== null && typeof child === 'object') {
        stack.push({ value: child, key, parent: frame, depth: frame.depth + 1 });
      }
    }
  }
  return undefined;
}

/** Paths Switchboard does not judge: callbacks are kept raw, the sandbox plays the provider. */
function exempt(path: string): boolean {
  return path.startsWith('/hooks/') || path === '/sandbox' || path.startsWith('/sandbox/');
}

/** Whether a path's input is judged here (the OpenAPI document lists what that answers). */
export function judgesInput(path: string): boolean {
  return !exempt(path);
}

/** The request target as sent: Node's `req.url`, or the path and query of an in-process URL. */
function targetLength(c: Context<AppEnv>): number {
  const incoming = nodeRequest(c);
  if (incoming?.url !== undefined) return incoming.url.length;
  const url = c.req.url;
  const start = url.indexOf('/', url.indexOf('//') + 2);
  return start === -1 ? 1 : url.length - start;
}

/**
 * The path parameters of the routes this request matched, by name. Parameters are read
 * from the route patterns (`/v1/messages/:ref`), segment by segment: a middleware has no
 * parameters of its own.
 */
function pathParams(c: Context<AppEnv>): Record<string, string> {
  const params: Record<string, string> = Object.create(null);
  const segments = c.req.path.split('/');
  for (const route of matchedRoutes(c)) {
    if (!route.path.includes(':')) continue;
    const pattern = route.path.split('/');
    for (let i = 0; i < pattern.length && i < segments.length; i++) {
      const name = /^:(\w+)/.exec(pattern[i]!)?.[1];
      if (name !== undefined) params[name] = decode(segments[i]!);
    }
  }
  return params;
}

/** The query as a validator sees it: one value as itself, a repeated name as a list. */
function queryValues(c: Context<AppEnv>): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = Object.create(null);
  for (const [name, values] of Object.entries(c.req.queries())) {
    out[name] = values.length === 1 ? values[0]! : values;
  }
  return out;
}

/** decodeURIComponent, or the text as it is when it is not valid percent-encoding. */
function decode(s: string): string {
  try {
    return s.includes('%') ? decodeURIComponent(s) : s;
  } catch {
    return s;
  }
}

const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i;
const CHARSET = /;\s*charset\s*=\s*"?([^";\s]+)/i;
const BODYLESS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** The URL and JSON-body half of the rule; see the module comment. */
export function requestChecks(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    if (targetLength(c) > MAX_URL_LENGTH) {
      return problemResponse(c, {
        code: 'URI_TOO_LONG',
        message: `the request's path and query are longer than ${MAX_URL_LENGTH / 1024} KiB`,
        details: [],
      });
    }
    if (exempt(c.req.path)) return next();
    // the URL parser percent-encodes NUL and replaces lone surrogates: only an escape can
    // carry one, so a URL without '%' needs no decoding
    if (c.req.url.includes('%')) {
      const problem =
        inputProblem(pathParams(c), ['path']) ??
        (c.req.path.includes('\u0000') ? encodingProblem(['path']) : undefined) ??
        inputProblem(queryValues(c), ['query']);
      if (problem) return problemResponse(c, problem);
    }
    const type = header(c, 'content-type');
    if (type !== undefined && !BODYLESS.has(c.req.method) && JSON_TYPE.test(type)) {
      const charset = CHARSET.exec(type)?.[1]?.toLowerCase();
      if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
        return problemResponse(c, {
          code: 'UNSUPPORTED_MEDIA_TYPE',
          message: `JSON is taken in UTF-8 only (the Content-Type says charset=${charset})`,
          details: [
            { path: 'header.content-type', code: 'UNSUPPORTED_CHARSET', message: 'not UTF-8' },
          ],
        });
      }
      // read once and kept (Hono caches it): the validator decodes these same bytes
      if (!isUtf8(await c.req.arrayBuffer())) {
        return problemResponse(c, {
          code: 'INVALID_ENCODING',
          message: 'the request body is not valid UTF-8',
          details: [{ path: 'body', code: 'INVALID_UTF8', message: 'not valid UTF-8' }],
        });
      }
    }
    return next();
  };
}

/**
 * The body half: what a router's validator parsed (zod's output, so only the fields the
 * route keeps), called from the shared validation hook. Query and path parameters were
 * checked before routing, by `requestChecks`.
 */
export function validatedInputProblem(
  target: string,
  data: unknown,
  path = '',
): InputProblem | undefined {
  if (target !== 'json' && target !== 'form') return undefined;
  const list = ITEM_LISTS[path];
  if (list !== undefined && data !== null && typeof data === 'object' && list in data) {
    // the list's items are judged one by one where they are answered (itemInputProblem)
    return inputProblem({ ...(data as Record<string, unknown>), [list]: [] });
  }
  return inputProblem(data);
}

/**
 * Routes that answer a list item by item (202 with a result per item, whatever the mix): the
 * body field holding the list. A character Postgres cannot store, or nesting too deep, in one
 * item rejects that item alone, in its result, with the same code and details as ever.
 */
export const ITEM_LISTS: Readonly<Record<string, string>> = {
  '/v1/messages': 'messages',
  '/v1/calls/batch': 'calls',
};

/** `inputProblem` of item `index` of a route's ITEM_LISTS list (two levels down the body). */
export function itemInputProblem(list: string, index: number, item: unknown) {
  return inputProblem(item, [list, index], 3);
}

function problemResponse(c: Context<AppEnv>, problem: InputProblem) {
  return errorResponse(c, problem.code, problem.message, problem.details);
}
