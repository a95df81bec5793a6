/**
 * The messaging API (seed 4): POST /bat/messagelist and GET /bat/message/{messageId}, with
 * the seed's three auth methods and rate limits.
 */
import { Hono, type MiddlewareHandler } from 'hono';
import { MAX_MESSAGES_PER_LIST } from '../../provider/message.ts';
import { checkMessagingAuth } from '../auth.ts';
import type { SandboxContext } from '../context.ts';
import { authHeaders, providerError, rateLimit, readJson } from '../http.ts';
import type { SandboxMessage } from '../messages.ts';

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

/** The status record GET /bat/message/{id} answers (the seed shows none; see README). */
export function statusRecord(m: SandboxMessage, all: (id: string) => SandboxMessage | undefined) {
  return {
    messageId: m.messageId,
    messagelistId: m.messagelistId,
    customerMessageId: m.customerMessageId ?? null,
    type: m.type,
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
    fallbacks: m.fallbacks.map((f) => ({
      index: f.index,
      messageId: f.messageId,
      type: all(f.messageId)?.type,
      status: all(f.messageId)?.status,
    })),
    ...(m.call !== undefined && { call: m.call }),
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
          { path: 'messages', code: 'invalid_type', message: 'messages must be an array' },
        ]);
      }
      if (messages.length === 0) {
        return providerError(c, 400, 'BAD_REQUEST', 'messages must hold at least one message', [
          { path: 'messages', code: 'too_small', message: 'at least one message' },
        ]);
      }
      if (messages.length > MAX_MESSAGES_PER_LIST) {
        const message = `at most ${MAX_MESSAGES_PER_LIST} messages per request (got ${messages.length})`;
        return providerError(c, 400, 'TOO_MANY_MESSAGES', message, [
          { path: 'messages', code: 'too_big', message },
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
      if (m === undefined) return providerError(c, 404, 'NOT_FOUND', `message ${id} not found`);
      return c.json(statusRecord(m, ctx.messages.get));
    },
  );

  return app;
}
