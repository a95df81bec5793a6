/**
 * The cascade client (seed 2.8, 4, 5): one message routed across Telegram bot, Viber bot,
 * Viber business messages, RCS and SMS by the provider. Two endpoints, the general one and
 * the Telegram-prioritised one, with one of three auth headers. Placeholders in the text
 * (`%name=1%`, `%url=2%`, `%short_url=3%`) are checked against the message's variables
 * before anything is sent.
 *
 * The seed sets no maximum of messages per cascade request, so none is imposed here.
 */
import { z } from 'zod';
import { AppError } from '../errors.ts';
import { type ClientOptions, clientTransport } from './client.ts';
import { ProviderError } from './http.ts';
import { addRule, issuesToDetails } from './issues.ts';
import { Recipient } from './message.ts';

/** One of the three cascade auth headers of seed 5. */
export type CascadeAuth = { apiKey: string } | { viberBotToken: string } | { tgBotKey: string };

export function cascadeAuthHeaders(auth: CascadeAuth): Record<string, string> {
  if ('apiKey' in auth) return { 'X-Authorization-Key': auth.apiKey };
  if ('viberBotToken' in auth) return { 'X-Viber-Auth-Token': auth.viberBotToken };
  return { 'X-Tg-Bot-Key': auth.tgBotKey };
}

export const PLACEHOLDER_KINDS = ['name', 'url', 'short_url'] as const;

export const CascadeVariable = z.strictObject({
  id: z.number().int(),
  value: z.string(),
});
export type CascadeVariable = z.infer<typeof CascadeVariable>;

/** `%kind=id%` spans in a text; `id` is kept as written so a non-integer can be reported. */
export function placeholders(text: string): Array<{ kind: string; id: string; raw: string }> {
  return Array.from(text.matchAll(/%([a-z_]+)=([^%\s]*)%/g), (m) => ({
    kind: m[1] ?? '',
    id: m[2] ?? '',
    raw: m[0],
  }));
}

export const CascadeMessage = z
  .strictObject({
    recipient: Recipient,
    text: z.string().min(1, 'text is required'),
    variables: z.array(CascadeVariable).default([]),
  })
  .superRefine((m, ctx) => {
    const ids = new Map<number, number>();
    m.variables.forEach((v, i) => {
      if (ids.has(v.id)) {
        addRule(
          ctx,
          ['variables', i, 'id'],
          'DUPLICATE_VARIABLE',
          `variable id ${v.id} appears twice`,
        );
      }
      ids.set(v.id, i);
    });
    for (const p of placeholders(m.text)) {
      if (!(PLACEHOLDER_KINDS as readonly string[]).includes(p.kind)) {
        addRule(
          ctx,
          ['text'],
          'UNKNOWN_PLACEHOLDER',
          `${p.raw}: placeholders are ${PLACEHOLDER_KINDS.map((k) => `%${k}=id%`).join(', ')}`,
        );
      } else if (!/^[0-9]+$/.test(p.id)) {
        addRule(ctx, ['text'], 'INVALID_PLACEHOLDER', `${p.raw}: the id must be an integer`);
      } else if (!ids.has(Number(p.id))) {
        addRule(
          ctx,
          ['text'],
          'UNKNOWN_VARIABLE',
          `${p.raw} names variable ${p.id}, which is not in variables`,
        );
      }
    }
  });
export type CascadeMessage = z.output<typeof CascadeMessage>;
export type CascadeMessageInput = z.input<typeof CascadeMessage>;

export const CascadeRequest = z.strictObject({
  messages: z.array(CascadeMessage).min(1, 'messages must hold at least one message'),
});

/** Per message: the provider's GUID and its tracking id (`trackinId` on the wire). */
export const CascadeResult = z.object({
  messageId: z.string(),
  trackingId: z.string().optional(),
});
export type CascadeResult = z.infer<typeof CascadeResult>;

const WireResult = z
  .looseObject({
    messageId: z.union([z.string(), z.number()]).transform(String),
    trackinId: z.union([z.string(), z.number()]).transform(String).optional(),
    trackingId: z.union([z.string(), z.number()]).transform(String).optional(),
  })
  .transform((r): CascadeResult => {
    const trackingId = r.trackinId ?? r.trackingId;
    return trackingId === undefined
      ? { messageId: r.messageId }
      : { messageId: r.messageId, trackingId };
  });

/** The response carries messageId and trackinId: alone, in an array, or under `messages`. */
export function parseCascadeResponse(body: unknown): CascadeResult[] | undefined {
  const list = Array.isArray(body)
    ? body
    : body && typeof body === 'object' && Array.isArray((body as { messages?: unknown }).messages)
      ? (body as { messages: unknown[] }).messages
      : [body];
  const parsed = z.array(WireResult).safeParse(list);
  return parsed.success ? parsed.data : undefined;
}

export const CASCADE_PATHS = {
  general: '/api/CascadeMessage/send_message/async',
  'tg-viber': '/api/CascadeMessage/send_message/tg-viber/async',
} as const;

export interface CascadeClient {
  /** Validates, then POSTs to the general endpoint (or `endpoint: 'tg-viber'`). */
  send(
    messages: CascadeMessageInput[],
    opts?: { endpoint?: keyof typeof CASCADE_PATHS; signal?: AbortSignal },
  ): Promise<CascadeResult[]>;
}

/**
 * Validates cascade messages; throws an `AppError` (VALIDATION_ERROR, or the seed's
 * INVALID_RECIPIENT) with a detail per problem, paths like `messages[1].text`.
 */
export function validateCascade(messages: unknown): { messages: CascadeMessage[] } {
  const parsed = CascadeRequest.safeParse({ messages });
  if (parsed.success) return parsed.data;
  const details = issuesToDetails(parsed.error.issues);
  const recipient = details.find((d) => d.code === 'INVALID_RECIPIENT');
  const first = recipient ?? details[0];
  throw new AppError(
    recipient ? 'INVALID_RECIPIENT' : 'VALIDATION_ERROR',
    first ? `${first.path}: ${first.message}` : 'invalid cascade request',
    details,
  );
}

/**
 * @example
 * const cascade = createCascadeClient({ baseUrl, auth: { apiKey: 'k' }, limiter });
 * await cascade.send([{ recipient: '+380501234567', text: 'Hi %name=1%', variables: [{ id: 1, value: 'Ann' }] }]);
 */
export function createCascadeClient(opts: ClientOptions & { auth: CascadeAuth }): CascadeClient {
  const { transport } = clientTransport(opts, cascadeAuthHeaders(opts.auth));
  return {
    async send(messages, o = {}) {
      const body = validateCascade(messages);
      const path = CASCADE_PATHS[o.endpoint ?? 'general'];
      const res = await transport.request({
        method: 'POST',
        path,
        limitClass: 'messaging',
        json: body,
        ...(o.signal ? { signal: o.signal } : {}),
      });
      const results = parseCascadeResponse(res.json);
      if (!results) {
        throw new ProviderError(
          'invalid_response',
          `POST ${path}: no messageId in ${res.text.slice(0, 200)}`,
          {
            status: res.status,
            body: res.json ?? res.text,
            method: 'POST',
            path,
          },
        );
      }
      return results;
    },
  };
}
