/**
 * The messaging client (docs/provider.md, "Sending: POST /bat/messagelist", "The answer to a
 * messagelist", "Statuses" and "Limits"): messagelists and status lookup, with any of the
 * three auth methods, chunking to 5000 messages per request, the shared rate limiter and
 * retries of `http.ts`.
 *
 * `sendMessagelist` answers one normalised response per request (chunk), in order: chunk i
 * holds messages [5000 i, 5000 (i + 1)). When some chunk fails it throws a
 * `MessagelistError` that still lists, per chunk, the response or the error, so a caller
 * knows exactly which messages the provider took. `sendMessagelistSettled` returns that list
 * without throwing.
 */
import { z } from 'zod';
import {
  basicAuth,
  type CallBudget,
  createTransport,
  ProviderError,
  type RetryPolicy,
  type Transport,
  type TransportEvent,
} from './http.ts';
import {
  createRateLimiter,
  type MillisClock,
  type RateLimit,
  type RateLimiter,
  type Sleep,
} from './limiter.ts';
import {
  MAX_MESSAGES_PER_LIST,
  type Message,
  type NormalisedMessagelistResponse,
  parseMessagelistResponse,
  toWireMessage,
  type WireMessage,
} from './message.ts';
import { statusWordOf } from './statuses.ts';

/**
 * The messaging API's three auth methods (docs/provider.md, "Addresses and credentials"; the
 * third from the condensed interface): Basic login:password; the API key in
 * X-Authorization-Key (`scheme: 'header'`, the default); or Basic with `@` as login and the
 * key as password.
 */
export type ProviderAuth =
  | { login: string; password: string }
  | { apiKey: string; scheme?: 'header' | 'basic' };

/** The auth headers for one of those methods. */
export function messagingAuthHeaders(auth: ProviderAuth): Record<string, string> {
  if ('login' in auth) return { Authorization: basicAuth(auth.login, auth.password) };
  if (auth.scheme === 'basic') return { Authorization: basicAuth('@', auth.apiKey) };
  return { 'X-Authorization-Key': auth.apiKey };
}

/** Options every client of this package takes, besides its own auth. */
export interface ClientOptions {
  baseUrl: string;
  fetch?: typeof fetch;
  /** Pass one limiter to every client of the process; otherwise each client makes its own. */
  limiter?: RateLimiter;
  /** Limits for the limiter this client makes when none is passed. */
  limits?: Partial<Record<'messaging' | 'data' | 'chat', RateLimit>>;
  retry?: Partial<RetryPolicy>;
  clock?: MillisClock;
  sleep?: Sleep;
  random?: () => number;
  timeoutMs?: number;
  onEvent?: (event: TransportEvent) => void;
  /** Sent with every request besides the auth headers (the built-in sandbox's X-Sandbox-Token). */
  extraHeaders?: Record<string, string>;
}

/** The limiter and transport for a client: the shared plumbing, not a copy of it. */
export function clientTransport(
  opts: ClientOptions,
  headers?: Record<string, string> | (() => Record<string, string>),
): { transport: Transport; limiter: RateLimiter } {
  const limiter =
    opts.limiter ??
    createRateLimiter({
      ...(opts.limits ? { limits: opts.limits } : {}),
      ...(opts.clock ? { clock: opts.clock } : {}),
      ...(opts.sleep ? { sleep: opts.sleep } : {}),
    });
  const extra = opts.extraHeaders;
  const all =
    extra === undefined
      ? headers
      : typeof headers === 'function'
        ? () => ({ ...extra, ...headers() })
        : { ...extra, ...headers };
  const transport = createTransport({ ...opts, limiter, ...(all ? { headers: all } : {}) });
  return { transport, limiter };
}

export interface ChunkResult {
  /** The messages of this chunk, in request order. */
  messages: Message[];
  response?: NormalisedMessagelistResponse;
  error?: ProviderError;
}

/** Some chunk of a messagelist failed; `results` says what happened to each chunk. */
export class MessagelistError extends ProviderError {
  readonly results: ChunkResult[];
  constructor(first: ProviderError, results: ChunkResult[]) {
    const failed = results.filter((r) => r.error).length;
    super(
      first.kind,
      `${failed} of ${results.length} messagelist requests failed: ${first.message}`,
      {
        ...(first.status === undefined ? {} : { status: first.status }),
        body: first.body,
        attempts: first.attempts,
        method: first.method,
        path: first.path,
        cause: first,
      },
    );
    this.name = 'MessagelistError';
    this.results = results;
  }
}

/** What GET /bat/message/{id} answers (status.md): the status word, and the whole record. */
export const StatusRecord = z.object({
  messageId: z.string(),
  /** The lower-cased status word (`deliverystatus`, or a usual field name), when there is one. */
  status: z.string().optional(),
  raw: z.unknown(),
});
export type StatusRecord = z.infer<typeof StatusRecord>;

export interface ProviderClient {
  sendMessagelist(messages: Message[], opts?: CallBudget): Promise<NormalisedMessagelistResponse[]>;
  sendMessagelistSettled(messages: Message[], opts?: CallBudget): Promise<ChunkResult[]>;
  /**
   * `sendMessagelist` for messages already serialised, one JSON object text each (e.g. as
   * stored): they go into the request body as they are, with no parse and re-serialise.
   */
  sendMessagelistJson(
    messages: readonly string[],
    opts?: CallBudget,
  ): Promise<NormalisedMessagelistResponse[]>;
  /**
   * `sendMessagelistJson` for `count` messages whose JSON texts are already joined with
   * commas (as Postgres's `string_agg` gives them): one request when they fit one, with no
   * per-message work at all; more are split (parsed and serialised again) as
   * `sendMessagelist` would.
   */
  sendMessagelistText(
    list: string,
    count: number,
    opts?: CallBudget,
  ): Promise<NormalisedMessagelistResponse[]>;
  getMessage(messageId: string, opts?: { signal?: AbortSignal }): Promise<StatusRecord>;
  readonly limiter: RateLimiter;
  readonly transport: Transport;
}

/** Splits a list into chunks of at most `size`. */
export function chunk<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/**
 * @example
 * const limiter = createRateLimiter();
 * const client = createProviderClient({ baseUrl, auth: { apiKey: 'k' }, limiter });
 * const [res] = await client.sendMessagelist([{ from: 'Acme', to: '+380501234567', type: 'sms', text: 'hi' }]);
 * res.messages[0].messageId;
 */
export function createProviderClient(
  opts: ClientOptions & { auth: ProviderAuth; maxPerRequest?: number },
): ProviderClient {
  const { transport, limiter } = clientTransport(opts, messagingAuthHeaders(opts.auth));
  const perRequest = Math.min(opts.maxPerRequest ?? MAX_MESSAGES_PER_LIST, MAX_MESSAGES_PER_LIST);

  async function sendChunk(
    body: { json: { messages: WireMessage[] } } | { jsonText: string },
    o: CallBudget,
  ): Promise<NormalisedMessagelistResponse> {
    const res = await transport.request({
      method: 'POST',
      path: '/bat/messagelist',
      limitClass: 'messaging',
      ...body,
      signal: o.signal,
      maxRateLimitWaitMs: o.maxRateLimitWaitMs,
    });
    const parsed = parseMessagelistResponse(res.json);
    if (!parsed) {
      // Not retried: the provider answered 200, so the list may well have been taken.
      throw new ProviderError(
        'invalid_response',
        `POST /bat/messagelist: unrecognised 200 body: ${res.text.slice(0, 200)}`,
        {
          status: res.status,
          body: res.json ?? res.text,
          method: 'POST',
          path: '/bat/messagelist',
        },
      );
    }
    return parsed;
  }

  /** Sends every chunk at once (the limiter spaces them) and settles each. */
  async function settle<T>(
    chunks: T[][],
    send: (chunk: T[]) => Promise<NormalisedMessagelistResponse>,
  ): Promise<{ response?: NormalisedMessagelistResponse; error?: ProviderError }[]> {
    const settled = await Promise.allSettled(chunks.map(send));
    return settled.map((s) => {
      if (s.status === 'fulfilled') return { response: s.value };
      const error =
        s.reason instanceof ProviderError
          ? s.reason
          : new ProviderError('network', String(s.reason), { cause: s.reason });
      return { error };
    });
  }

  async function sendMessagelistSettled(messages: Message[], o: CallBudget = {}) {
    const chunks = chunk(messages, perRequest);
    // sent as the docs write them (a single fallback as `fallback`): toWireMessage
    const settled = await settle(chunks, (c) =>
      sendChunk({ json: { messages: c.map(toWireMessage) } }, o),
    );
    return settled.map((s, i): ChunkResult => ({ messages: chunks[i] ?? [], ...s }));
  }

  /** The responses in chunk order, or the first failure (a MessagelistError when several). */
  function allOrThrow(results: ChunkResult[]): NormalisedMessagelistResponse[] {
    const failed = results.find((r) => r.error);
    if (failed?.error) {
      if (results.length === 1) throw failed.error;
      throw new MessagelistError(failed.error, results);
    }
    return results.map((r) => r.response as NormalisedMessagelistResponse);
  }

  async function sendMessagelistJson(
    messages: readonly string[],
    o: CallBudget = {},
  ): Promise<NormalisedMessagelistResponse[]> {
    if (o.signal?.aborted) throw o.signal.reason;
    const chunks = chunk(messages, perRequest);
    const settled = await settle(chunks, (c) =>
      sendChunk({ jsonText: `{"messages":[${c.join(',')}]}` }, o),
    );
    if (o.signal?.aborted) throw o.signal.reason;
    if (settled.every((s) => s.response)) {
      return settled.map((s) => s.response as NormalisedMessagelistResponse);
    }
    // a failure names the messages of each chunk: parsed only then
    return allOrThrow(
      settled.map(
        (s, i): ChunkResult => ({
          messages: (chunks[i] ?? []).map((m) => JSON.parse(m) as Message),
          ...s,
        }),
      ),
    );
  }

  return {
    limiter,
    transport,
    sendMessagelistSettled,
    async sendMessagelist(messages, o = {}) {
      if (o.signal?.aborted) throw o.signal.reason;
      const results = await sendMessagelistSettled(messages, o);
      if (o.signal?.aborted) throw o.signal.reason;
      return allOrThrow(results);
    },
    sendMessagelistJson,
    async sendMessagelistText(list, count, o = {}) {
      if (count > perRequest) {
        const texts = (JSON.parse(`[${list}]`) as unknown[]).map((m) => JSON.stringify(m));
        return sendMessagelistJson(texts, o);
      }
      if (o.signal?.aborted) throw o.signal.reason;
      if (count === 0) return [];
      const [settled] = await settle([[list]], (c) =>
        sendChunk({ jsonText: `{"messages":[${c[0]}]}` }, o),
      );
      if (o.signal?.aborted) throw o.signal.reason;
      if (settled?.response) return [settled.response];
      // one chunk: its failure is the error (allOrThrow would throw it as it is)
      throw settled?.error ?? new ProviderError('network', 'no answer');
    },
    async getMessage(messageId, o = {}) {
      const res = await transport.request({
        method: 'GET',
        path: `/bat/message/${encodeURIComponent(messageId)}`,
        limitClass: 'data',
        ...(o.signal ? { signal: o.signal } : {}),
      });
      const raw = res.json ?? res.text;
      const status = statusWordOf(raw);
      return status === undefined ? { messageId, raw } : { messageId, status, raw };
    },
  };
}
