/**
 * The HTTP plumbing every provider client shares: base URL, auth headers, the shared rate
 * limiter, timeouts, retries and typed errors.
 *
 * Retries: a 429 waits for Retry-After when given (and holds the whole limit class back
 * until then, since the provider has said so for everyone), otherwise a jittered exponential
 * backoff; a request with `maxRateLimitWaitMs` waits that long at most and is then given up
 * as `rate_limited`, naming the wait left (`retryAfterMs`). 5xx and network errors (including
 * timeouts) are retried a bounded number of times, a 5xx's Retry-After honoured up to the
 * policy's longest backoff. Other 4xx are final. Nothing here knows about message shapes.
 */

import { NOT_THE_DATABASE } from '../errors.ts';
import { injectTraceHeaders, inSpan, SpanKind, tracingEnabled } from '../tracing.ts';
import {
  type LimitClass,
  type MillisClock,
  performanceClock,
  type RateLimiter,
  realSleep,
  type Sleep,
} from './limiter.ts';

export type ProviderErrorKind =
  | 'unauthorized'
  | 'forbidden'
  | 'rate_limited'
  | 'bad_request'
  | 'not_found'
  | 'server'
  | 'network'
  | 'invalid_response';

/**
 * A failed call to the provider, after any retries. `status` is the last HTTP status (none
 * for network errors); `body` the parsed error body when there was one.
 */
export class ProviderError extends Error {
  readonly [NOT_THE_DATABASE] = true;
  readonly kind: ProviderErrorKind;
  readonly status: number | undefined;
  readonly body: unknown;
  readonly attempts: number;
  readonly method: string;
  readonly path: string;
  /**
   * For `rate_limited` given up by `maxRateLimitWaitMs`: how long until the provider takes
   * requests again (its Retry-After, or the backoff that would have been waited).
   */
  readonly retryAfterMs: number | undefined;
  constructor(
    kind: ProviderErrorKind,
    message: string,
    info: {
      status?: number;
      body?: unknown;
      attempts?: number;
      method?: string;
      path?: string;
      cause?: unknown;
      retryAfterMs?: number;
    } = {},
  ) {
    super(message, info.cause === undefined ? undefined : { cause: info.cause });
    this.name = 'ProviderError';
    this.kind = kind;
    this.status = info.status;
    this.body = info.body;
    this.attempts = info.attempts ?? 1;
    this.method = info.method ?? '';
    this.path = info.path ?? '';
    this.retryAfterMs = info.retryAfterMs;
  }
}

/** The error kind for a final HTTP status. */
export function kindForStatus(status: number): ProviderErrorKind {
  if (status === 401) return 'unauthorized';
  if (status === 403) return 'forbidden';
  if (status === 404) return 'not_found';
  if (status === 429) return 'rate_limited';
  if (status >= 500) return 'server';
  return 'bad_request';
}

export interface RetryPolicy {
  /** Retries after a 5xx or a network error (timeouts included). */
  maxRetries: number;
  /** Retries after a 429; generous, since a 429 means "not processed, come back". */
  maxRateLimitRetries: number;
  /** First backoff step; doubles per retry up to maxDelayMs. */
  baseDelayMs: number;
  maxDelayMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = {
  maxRetries: 3,
  maxRateLimitRetries: 20,
  baseDelayMs: 200,
  maxDelayMs: 20_000,
};

/** Something that happened on the wire, for logs and metrics (e.g. provider 429s). */
export type TransportEvent =
  | { type: 'response'; method: string; path: string; status: number; attempt: number }
  | {
      type: 'retry';
      method: string;
      path: string;
      reason: 'rate_limited' | 'server' | 'network';
      delayMs: number;
      attempt: number;
    };

export interface TransportOptions {
  /** The provider's {base_url} (or {chat_url}); may carry a path prefix such as /sandbox. */
  baseUrl: string;
  fetch?: typeof fetch;
  /** Shared limiter; without one, requests are not rate limited. */
  limiter?: RateLimiter;
  retry?: Partial<RetryPolicy>;
  clock?: MillisClock;
  sleep?: Sleep;
  /** In [0, 1); drives the backoff jitter. */
  random?: () => number;
  /** Per attempt. */
  timeoutMs?: number;
  /** Headers sent with every request (auth); a function is called per attempt. */
  headers?: Record<string, string> | (() => Record<string, string>);
  onEvent?: (event: TransportEvent) => void;
}

export interface HttpRequest {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  path: string;
  query?: Record<string, string | number | undefined>;
  limitClass?: LimitClass;
  headers?: Record<string, string>;
  /** Sent as JSON. */
  json?: unknown;
  /** Sent as it is, as JSON (a body already serialised); instead of `json`. */
  jsonText?: string;
  signal?: AbortSignal;
  /** False for calls that must not be repeated; 429s are still retried (never processed). */
  retry?: boolean;
  /**
   * The longest this request waits for the provider's rate limit in all (its 429s' waits, and
   * the limiter's hold after one) before it is given up as `rate_limited` with the wait left
   * in `retryAfterMs`. For a caller that must not wait long (the dispatcher holds its claimed
   * rows meanwhile). Unset: as long as the provider says, within the retry policy's count.
   */
  maxRateLimitWaitMs?: number;
}

/** What a caller may bound one provider call by: its abort signal and its rate-limit wait. */
export type CallBudget = Pick<HttpRequest, 'signal' | 'maxRateLimitWaitMs'>;

export interface HttpResponse {
  status: number;
  headers: Headers;
  /** Raw body text. */
  text: string;
  /** The body parsed as JSON when it is JSON, otherwise undefined. */
  json: unknown;
}

export interface Transport {
  request(req: HttpRequest): Promise<HttpResponse>;
  readonly baseUrl: string;
}

/** Basic auth header value. */
export function basicAuth(user: string, password: string): string {
  return `Basic ${Buffer.from(`${user}:${password}`, 'utf8').toString('base64')}`;
}

/**
 * Retry-After in ms from now: delta-seconds (fractions tolerated) or an HTTP date.
 *
 * @example
 * parseRetryAfter('2', 0) // 2000
 * parseRetryAfter('Wed, 21 Oct 2015 07:28:00 GMT', Date.parse('Wed, 21 Oct 2015 07:27:58 GMT')) // 2000
 */
export function parseRetryAfter(
  value: string | null | undefined,
  nowMs: number,
): number | undefined {
  if (value === null || value === undefined || value.trim() === '') return undefined;
  const v = value.trim();
  if (/^\d+(\.\d+)?$/.test(v)) return Math.round(Number(v) * 1000);
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - nowMs);
}

/**
 * Backoff before retry number `retry` (0-based): half the capped exponential step plus a
 * random half, so concurrent clients spread out but never retry at once.
 */
export function backoffMs(retry: number, policy: RetryPolicy, random: () => number): number {
  const step = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** retry);
  return step / 2 + random() * (step / 2);
}

/**
 * @example
 * const t = createTransport({ baseUrl: 'http://127.0.0.1:3000/sandbox', limiter });
 * const res = await t.request({ method: 'GET', path: '/bat/message/m1', limitClass: 'data' });
 */
export function createTransport(opts: TransportOptions): Transport {
  const doFetch = opts.fetch ?? globalThis.fetch;
  const policy = { ...DEFAULT_RETRY, ...opts.retry };
  const clock = opts.clock ?? performanceClock;
  const sleep = opts.sleep ?? realSleep;
  const random = opts.random ?? Math.random;
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const baseUrl = opts.baseUrl.replace(/\/+$/, '');

  const url = (req: HttpRequest) => {
    const u = new URL(baseUrl + req.path);
    for (const [k, v] of Object.entries(req.query ?? {})) {
      if (v !== undefined) u.searchParams.set(k, String(v));
    }
    return u.toString();
  };

  // tracing on: one client span around every attempt, its context sent as `traceparent`
  function request(req: HttpRequest): Promise<HttpResponse> {
    if (!tracingEnabled()) return attempts(req);
    return inSpan(
      `${req.method} ${req.path}`,
      {
        kind: SpanKind.CLIENT,
        attributes: { 'http.request.method': req.method, 'url.path': req.path },
      },
      async (span) => {
        const headers: Record<string, string> = { ...req.headers };
        injectTraceHeaders(headers);
        const res = await attempts({ ...req, headers });
        span?.setAttribute('http.response.status_code', res.status);
        return res;
      },
    );
  }

  async function attempts(req: HttpRequest): Promise<HttpResponse> {
    const canRetry = req.retry !== false;
    let serverRetries = 0;
    let rateRetries = 0;
    // what this request has waited for the rate limit so far (maxRateLimitWaitMs)
    let rateWaited = 0;
    // serialised once, whatever the number of attempts
    const body = req.jsonText ?? (req.json === undefined ? undefined : JSON.stringify(req.json));
    for (let attempt = 1; ; attempt++) {
      if (req.maxRateLimitWaitMs !== undefined && opts.limiter && req.limitClass) {
        const held = opts.limiter.pausedUntil(req.limitClass) - clock.now();
        if (held > 0 && rateWaited + held > req.maxRateLimitWaitMs) {
          throw new ProviderError(
            'rate_limited',
            `${req.method} ${req.path}: not sent, the provider's rate limit holds requests back for ${Math.ceil(held)} ms`,
            { attempts: attempt - 1, method: req.method, path: req.path, retryAfterMs: held },
          );
        }
        if (held > 0) rateWaited += held; // waited in the limiter's acquire below
      }
      const permit =
        opts.limiter && req.limitClass
          ? await opts.limiter.acquire(req.limitClass, req.signal)
          : undefined;
      const fixed = typeof opts.headers === 'function' ? opts.headers() : (opts.headers ?? {});
      const headers: Record<string, string> = {
        Accept: 'application/json',
        ...fixed,
        ...req.headers,
      };
      if (body !== undefined) headers['Content-Type'] = 'application/json';
      const timeout = AbortSignal.timeout(timeoutMs);
      const signal = req.signal ? AbortSignal.any([req.signal, timeout]) : timeout;
      const info = { method: req.method, path: req.path, attempts: attempt };

      let res: Response;
      let text: string;
      try {
        res = await doFetch(url(req), {
          method: req.method,
          headers,
          body,
          signal,
        });
        text = await res.text();
      } catch (cause) {
        permit?.release();
        if (req.signal?.aborted) throw req.signal.reason;
        const what = timeout.aborted ? `timed out after ${timeoutMs} ms` : describe(cause);
        if (canRetry && serverRetries < policy.maxRetries) {
          const delayMs = backoffMs(serverRetries++, policy, random);
          opts.onEvent?.({
            type: 'retry',
            method: req.method,
            path: req.path,
            reason: 'network',
            delayMs,
            attempt,
          });
          await sleep(delayMs, req.signal);
          continue;
        }
        throw new ProviderError('network', `${req.method} ${req.path}: ${what}`, {
          ...info,
          cause,
        });
      }

      // The request has certainly arrived by now: the limiter may count it as done.
      permit?.release();
      opts.onEvent?.({
        type: 'response',
        method: req.method,
        path: req.path,
        status: res.status,
        attempt,
      });
      const json = parseJson(text);
      if (res.ok) return { status: res.status, headers: res.headers, text, json };

      const retryAfter = parseRetryAfter(res.headers.get('retry-after'), clock.now());
      if (res.status === 429 && rateRetries < policy.maxRateLimitRetries) {
        const delayMs = retryAfter ?? backoffMs(rateRetries, policy, random);
        rateRetries++;
        if (retryAfter !== undefined && opts.limiter && req.limitClass) {
          opts.limiter.pauseUntil(req.limitClass, clock.now() + retryAfter);
        }
        if (req.maxRateLimitWaitMs !== undefined && rateWaited + delayMs > req.maxRateLimitWaitMs) {
          throw new ProviderError(
            'rate_limited',
            `${req.method} ${req.path}: HTTP 429, not waited (${Math.ceil(delayMs)} ms)`,
            { ...info, status: 429, body: json ?? text, retryAfterMs: delayMs },
          );
        }
        rateWaited += delayMs;
        opts.onEvent?.({
          type: 'retry',
          method: req.method,
          path: req.path,
          reason: 'rate_limited',
          delayMs,
          attempt,
        });
        await sleep(delayMs, req.signal);
        continue;
      }
      if (res.status >= 500 && canRetry && serverRetries < policy.maxRetries) {
        // a 5xx's Retry-After within the policy's longest step: a retry is no promise it is up
        const delayMs = Math.min(
          retryAfter ?? backoffMs(serverRetries, policy, random),
          policy.maxDelayMs,
        );
        serverRetries++;
        opts.onEvent?.({
          type: 'retry',
          method: req.method,
          path: req.path,
          reason: 'server',
          delayMs,
          attempt,
        });
        await sleep(delayMs, req.signal);
        continue;
      }
      const detail = errorText(json, text);
      throw new ProviderError(
        kindForStatus(res.status),
        `${req.method} ${req.path}: HTTP ${res.status}${detail ? ` ${detail}` : ''}`,
        { ...info, status: res.status, body: json ?? text },
      );
    }
  }

  return { request, baseUrl };
}

function parseJson(text: string): unknown {
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function errorText(json: unknown, text: string): string {
  if (json && typeof json === 'object') {
    const o = json as Record<string, unknown>;
    const nested =
      o.error && typeof o.error === 'object' ? (o.error as Record<string, unknown>) : undefined;
    const parts = [
      nested?.code ?? (typeof o.error === 'string' ? o.error : undefined),
      nested?.message ?? o.message,
    ].filter((p): p is string => typeof p === 'string' && p !== '');
    if (parts.length > 0) return parts.join(': ');
  }
  return text.slice(0, 200);
}

function describe(cause: unknown): string {
  if (cause instanceof Error) {
    const inner = cause.cause instanceof Error ? `: ${cause.cause.message}` : '';
    return `${cause.message}${inner}`;
  }
  return String(cause);
}
