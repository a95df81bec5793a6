/**
 * The cascade API (docs/api/cascade/*.md): POST /api/CascadeMessage/send_message/async, the
 * Telegram-prioritized /api/CascadeMessage/send_message/tg-viber/async, and POST /api/items
 * (variables.md "Step 1: Upload Variable Values"), each with one of the three auth headers.
 *
 * A send takes send.md's bare array or index.md's `{messages: [...]}`, with messages in either
 * form (provider/cascade.ts `checkCascade`). The docs dialect answers `[{messageId,
 * trackinId}]` in the order of the messages, whichever form came in (send.md "Success
 * Response", index.md "Response Format"); the compact dialect answers as the condensed
 * interface does, `{messageId, trackinId, messages: [{recipient, messageId, trackinId}]}`.
 * trackinId is the message's `id`, or one the sandbox makes for a condensed-form message,
 * which has none.
 * Placeholders resolve against the message's own variables, then against those its account
 * uploaded; one that resolves to neither is a 400 naming it.
 *
 * An upload answers `{"uploaded": n}`: the docs show no answer body for it.
 *
 * Errors: in the docs dialect, send.md's "Error Response", `{"error": {"code", "message",
 * "field"}}` (field: the first problem's field within its message; a phone number that is not
 * E.164 is send.md's INVALID_PHONE); in the compact dialect, `{error, message, status,
 * details}` as everywhere in the sandbox.
 */
import { type Context, Hono, type Next } from 'hono';
import type { ErrorDetail } from '../../errors.ts';
import {
  type CascadeMessage,
  checkCascade,
  checkUploadVariables,
  isCondensed,
} from '../../provider/cascade.ts';
import { checkCascadeAuth } from '../auth.ts';
import { type CascadeRoute, type CascadeSubmission, substitutePlaceholders } from '../cascade.ts';
import type { SandboxContext } from '../context.ts';
import type { SandboxDialect } from '../dialect.ts';
import { authHeaders, providerError, rateLimit, readJson, useDocsErrors } from '../http.ts';

type Vars = { Variables: { cascadeAccount: string } };

/** send.md "Error Response": `{"error": {"code", "message", "field"}}`. */
export function cascadeDocsError(
  code: string,
  message: string,
  field?: string,
): { error: { code: string; message: string; field?: string } } {
  return { error: { code, message, ...(field !== undefined && { field }) } };
}

/** The docs' code for a detail: send.md names a bad phone number INVALID_PHONE. */
function docsCode(d: ErrorDetail): string {
  return d.code === 'INVALID_RECIPIENT' ? 'INVALID_PHONE' : d.code;
}

/** `[1].toPhone` or `messages[1].toPhone` -> message 1, field `toPhone`. */
function splitPath(path: string): { index?: number; field: string } {
  const m = /^(?:messages)?\[(\d+)\]\.?(.*)$/.exec(path);
  return m ? { index: Number(m[1]), field: m[2] ?? '' } : { field: path };
}

export function cascadeRoutes(ctx: SandboxContext): Hono<Vars> {
  const app = new Hono<Vars>();
  const dialect = (): SandboxDialect => ctx.dialect;

  function badRequest(c: Context, details: ErrorDetail[], many: boolean): Response {
    const first = details[0];
    if (dialect() === 'docs') {
      if (first === undefined)
        return c.json(cascadeDocsError('BAD_REQUEST', 'invalid request'), 400);
      const { index, field } = splitPath(first.path);
      const where = many && index !== undefined ? `message ${index}: ` : '';
      return c.json(
        cascadeDocsError(docsCode(first), `${where}${first.message}`, field || undefined),
        400,
      );
    }
    return providerError(
      c,
      400,
      'BAD_REQUEST',
      first ? `${first.path === '' ? 'body' : first.path}: ${first.message}` : 'invalid request',
      details,
    );
  }

  const guard = [
    async (c: Context<Vars>, next: Next) => {
      if (dialect() === 'docs') useDocsErrors(c);
      const auth = checkCascadeAuth(authHeaders(c), ctx.credentials);
      if (!auth.ok) return providerError(c, 401, 'UNAUTHORIZED', auth.message);
      // Uploaded variables belong to the account the header names.
      c.set(
        'cascadeAccount',
        auth.token === undefined ? auth.principal : `${auth.principal}:${auth.token}`,
      );
      await next();
    },
    rateLimit(() => ctx.buckets().messaging, 'messaging: 100 requests/s, burst 150'),
  ] as const;

  const send = (route: CascadeRoute) => async (c: Context<Vars>) => {
    const read = await readJson(c, { requireJsonType: true });
    if (!read.ok) return read.response;
    const account = c.get('cascadeAccount');
    const lookup = (type: Parameters<typeof ctx.cascade.variable>[1], id: number) =>
      ctx.cascade.variable(account, type, id);
    const checked = checkCascade(read.body, {
      uploaded: (type, id) => lookup(type, id) !== undefined,
    });
    if (!checked.ok) {
      const list = Array.isArray(read.body)
        ? read.body
        : (read.body as { messages?: unknown } | null)?.messages;
      return badRequest(c, checked.details, Array.isArray(list) && list.length > 1);
    }
    const resolve = (text: string | undefined, m: CascadeMessage): string | null => {
      if (text === undefined) return null;
      const out = substitutePlaceholders(text, m.variables ?? [], lookup);
      // checkCascade has resolved every placeholder already.
      return out.ok ? out.text : text;
    };
    const records = checked.messages.map((m) => {
      const submission: CascadeSubmission = isCondensed(m)
        ? {
            recipient: m.recipient,
            messageType: 'transaction',
            fromName: null,
            text: resolve(m.text, m),
            ...(m.ttl !== undefined && { ttl: m.ttl }),
            ...(m.scheduledTime !== undefined && { scheduledSent: m.scheduledTime }),
          }
        : {
            recipient: m.toPhone,
            messageType: m.messageType,
            fromName: m.fromName,
            text: resolve(m.text, m),
            trackinId: m.id,
            ...(m.surveyOptions !== undefined && { surveyOptions: m.surveyOptions }),
            ...(m.ttl !== undefined && { ttl: m.ttl }),
            ...(m.scheduledSent !== undefined && { scheduledSent: m.scheduledSent }),
            ...(m.fallback !== undefined && {
              fallback: {
                messageType: m.fallback.messageType,
                text: resolve(m.fallback.text, m),
                ...(m.fallback.surveyOptions !== undefined && {
                  surveyOptions: m.fallback.surveyOptions,
                }),
              },
            }),
          };
      return ctx.cascade.send(route, submission);
    });
    const results = records.map((r) => ({ messageId: r.messageId, trackinId: r.trackinId }));
    if (dialect() === 'docs') return c.json(results);
    const first = records[0]!;
    return c.json({
      // compact: the condensed interface's answer, one message's ids at the top, then each
      messageId: first.messageId,
      trackinId: first.trackinId,
      messages: records.map((r) => ({
        recipient: r.recipient,
        messageId: r.messageId,
        trackinId: r.trackinId,
      })),
    });
  };

  app.post('/api/CascadeMessage/send_message/async', ...guard, send('general'));
  app.post('/api/CascadeMessage/send_message/tg-viber/async', ...guard, send('tg-viber'));
  app.post('/api/items', ...guard, async (c) => {
    const read = await readJson(c, { requireJsonType: true });
    if (!read.ok) return read.response;
    const checked = checkUploadVariables(read.body);
    if (!checked.ok) return badRequest(c, checked.details, false);
    ctx.cascade.uploadVariables(c.get('cascadeAccount'), checked.variables);
    return c.json({ uploaded: checked.variables.length });
  });
  return app;
}
