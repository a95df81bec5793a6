/**
 * The messaging API: POST /bat/messagelist and GET /bat/message/{messageId}, with the three
 * auth methods (login and password, X-Authorization-Key, `@` and the key) and rate limits.
 * What they answer depends on the dialect (dialect.ts): `docsStatusRecord` or `statusRecord`.
 */
import { Hono, type MiddlewareHandler } from 'hono';
import { MAX_MESSAGES_PER_LIST } from '../../provider/message.ts';
import { checkMessagingAuth } from '../auth.ts';
import type { SandboxContext } from '../context.ts';
import {
  type ChannelWord,
  compactType,
  costOf,
  docsType,
  docsWord,
  SANDBOX_CURRENCY,
  SANDBOX_RATE,
  type SandboxDialect,
} from '../dialect.ts';
import { authHeaders, providerError, rateLimit, readJson } from '../http.ts';
import { channelOf, type SandboxMessage } from '../messages.ts';

/** Refuses a request without valid messaging credentials (401). */
export function messagingAuth(ctx: SandboxContext): MiddlewareHandler {
  return async (c, next) => {
    const result = checkMessagingAuth(authHeaders(c), ctx.credentials);
    if (!result.ok) {
      c.header('WWW-Authenticate', 'Basic realm="sandbox"');
      return providerError(c, 401, 'UNAUTHORIZED', result.message);
    }
    await next();
  };
}

/**
 * The status record of the compact dialect (the condensed interface shows none; see README),
 * also the sandbox's full view of a message in `/_control/messages` in both dialects (types
 * as the dialect names them).
 */
export function statusRecord(
  m: SandboxMessage,
  all: (id: string) => SandboxMessage | undefined,
  dialect: SandboxDialect = 'compact',
) {
  const name = dialect === 'compact' ? compactType : docsType;
  return {
    messageId: m.messageId,
    messagelistId: m.messagelistId,
    customerMessageId: m.customerMessageId ?? null,
    type: name(m.type),
    from: m.from,
    to: m.to,
    status: m.status,
    parts: m.parts,
    ...(m.text !== undefined && m.type === 'flashcall' && { text: m.text }),
    acceptedAt: m.acceptedAt,
    dispatchAt: m.dispatchAt,
    expiresAt: m.expiresAt,
    updatedAt: m.history[m.history.length - 1]?.at ?? m.acceptedAt,
    history: m.history,
    error: m.error ?? null,
    parentMessageId: m.parentMessageId ?? null,
    fallbackIndex: m.fallbackIndex ?? null,
    fallbacks: m.fallbacks.map((f) => {
      const fb = all(f.messageId);
      return {
        index: f.index,
        messageId: f.messageId,
        type: fb === undefined ? undefined : name(fb.type),
        status: fb?.status,
      };
    }),
    ...(m.call !== undefined && { call: m.call }),
  };
}

/**
 * The status record of the docs dialect, for a primary message (status.md, "Basic Response"):
 * `{messagelistId, messageId, deliverystatus, partscount, cost}`; with fallbacks configured,
 * also `fallbacks: [{type, status}]` (each fallback's word, `not_used` until it is tried),
 * `extendedStatuses` (each channel's word, keyed sms, viber, rcs, flashcall, speechcall),
 * `rate`, `rateAmount`, `rateCurrency`, `billAmount`, `billCurrency` ("Extended Response (with
 * Fallback)"). partscount and cost are those of the channel tried last; cost is 0 until it is
 * delivered.
 */
export function docsStatusRecord(
  m: SandboxMessage,
  all: (id: string) => SandboxMessage | undefined,
) {
  const deliverystatus = m.deliverystatus ?? docsWord(m.status);
  const tried = m.fallbacks.map((f) => all(f.messageId));
  const last = tried.filter((f) => f !== undefined).pop() ?? m;
  const cost = deliverystatus === 'delivered' ? costOf(last.parts) : 0;
  const basic = {
    messagelistId: m.messagelistId,
    messageId: m.messageId,
    deliverystatus,
    partscount: last.parts,
    cost,
  };
  const types = m.fallbackTypes;
  if (types === undefined) return basic;
  const fallbacks = types.map((type, index) => {
    const entry = m.fallbacks.find((f) => f.index === index);
    const fb = entry === undefined ? undefined : all(entry.messageId);
    const status: ChannelWord = fb === undefined ? 'not_used' : docsWord(fb.status);
    return { type, status };
  });
  // one key per channel; two fallbacks on one channel: the one tried last says
  const extendedStatuses: Record<string, ChannelWord> = {
    [channelOf(m.type)]: docsWord(m.status),
  };
  for (const f of fallbacks) {
    const key = channelOf(f.type);
    if (f.status !== 'not_used' || extendedStatuses[key] === undefined) {
      extendedStatuses[key] = f.status;
    }
  }
  return {
    ...basic,
    fallbacks,
    extendedStatuses,
    rate: SANDBOX_RATE,
    rateAmount: SANDBOX_RATE,
    rateCurrency: SANDBOX_CURRENCY,
    billAmount: cost,
    billCurrency: SANDBOX_CURRENCY,
  };
}

export function messagingRoutes(ctx: SandboxContext): Hono {
  const app = new Hono();
  const auth = messagingAuth(ctx);

  app.post(
    '/bat/messagelist',
    auth,
    rateLimit(() => ctx.buckets().messaging, 'messaging: 100 requests/s, burst 150'),
    async (c) => {
      const read = await readJson(c, { requireJsonType: true });
      if (!read.ok) return read.response;
      const body = read.body;
      const messages =
        typeof body === 'object' && body !== null && !Array.isArray(body)
          ? (body as { messages?: unknown }).messages
          : undefined;
      if (!Array.isArray(messages)) {
        return providerError(c, 400, 'BAD_REQUEST', 'the body must be {"messages": [...]}', [
          { path: 'messages', code: 'INVALID_TYPE', message: 'messages must be an array' },
        ]);
      }
      if (messages.length === 0) {
        return providerError(c, 400, 'BAD_REQUEST', 'messages must hold at least one message', [
          { path: 'messages', code: 'TOO_SMALL', message: 'at least one message' },
        ]);
      }
      if (messages.length > MAX_MESSAGES_PER_LIST) {
        const message = `at most ${MAX_MESSAGES_PER_LIST} messages per request (got ${messages.length})`;
        return providerError(c, 400, 'TOO_MANY_MESSAGES', message, [
          { path: 'messages', code: 'TOO_BIG', message },
        ]);
      }
      return c.json(ctx.messages.submit(messages));
    },
  );

  app.get(
    '/bat/message/:messageId',
    auth,
    rateLimit(() => ctx.buckets().data, 'data: 50 requests/s, burst 75'),
    (c) => {
      const id = c.req.param('messageId');
      const m = ctx.messages.get(id);
      // docs dialect: a fallback has no messageId of its own; its primary's record tells it
      if (m === undefined || (ctx.dialect === 'docs' && m.parentMessageId !== undefined)) {
        return providerError(c, 404, 'NOT_FOUND', `message ${id} not found`);
      }
      return c.json(
        ctx.dialect === 'docs'
          ? docsStatusRecord(m, ctx.messages.get)
          : statusRecord(m, ctx.messages.get),
      );
    },
  );

  return app;
}
