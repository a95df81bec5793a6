/**
 * The cascade API (seed 2.8, 4, 5): POST /api/CascadeMessage/send_message/async and the
 * Telegram-prioritized /api/CascadeMessage/send_message/tg-viber/async.
 */
import { type Context, Hono, type Next } from 'hono';
import { CascadeRequest } from '../../provider/cascade.ts';
import { issuesToDetails } from '../../provider/issues.ts';
import { checkCascadeAuth } from '../auth.ts';
import { type CascadeRoute, substitutePlaceholders } from '../cascade.ts';
import type { SandboxContext } from '../context.ts';
import { authHeaders, providerError, rateLimit, readJson } from '../http.ts';

export function cascadeRoutes(ctx: SandboxContext): Hono {
  const app = new Hono();

  const handler = (route: CascadeRoute) =>
    [
      async (c: Context, next: Next) => {
        const auth = checkCascadeAuth(authHeaders(c), ctx.credentials);
        if (!auth.ok) return providerError(c, 401, 'UNAUTHORIZED', auth.message);
        await next();
      },
      rateLimit(() => ctx.buckets().messaging, 'messaging: 100 requests/s, burst 150'),
      async (c: Context) => {
        const read = await readJson(c, { requireJsonType: true });
        if (!read.ok) return read.response;
        const parsed = CascadeRequest.safeParse(read.body);
        if (!parsed.success) {
          const details = issuesToDetails(parsed.error.issues);
          return providerError(
            c,
            400,
            'BAD_REQUEST',
            details[0] ? `${details[0].path}: ${details[0].message}` : 'invalid cascade request',
            details,
          );
        }
        const texts: string[] = [];
        const missing: { path: string; code: string; message: string }[] = [];
        parsed.data.messages.forEach((m, i) => {
          const result = substitutePlaceholders(m.text, m.variables ?? []);
          if (result.ok) texts.push(result.text);
          else {
            for (const p of result.missing) {
              missing.push({
                path: `messages[${i}].text`,
                code: 'UNKNOWN_VARIABLE',
                message: `placeholder ${p} names no variable of this message`,
              });
            }
          }
        });
        if (missing.length > 0) {
          return providerError(c, 400, 'BAD_REQUEST', missing[0]!.message, missing);
        }
        const records = parsed.data.messages.map((m, i) =>
          ctx.cascade.send(route, m.recipient, texts[i]!),
        );
        const first = records[0]!;
        return c.json({
          // One message is the usual request: its ids at the top, as the seed shows them.
          messageId: first.messageId,
          trackinId: first.trackinId,
          messages: records.map((r) => ({
            recipient: r.recipient,
            messageId: r.messageId,
            trackinId: r.trackinId,
          })),
        });
      },
    ] as const;

  app.post('/api/CascadeMessage/send_message/async', ...handler('general'));
  app.post('/api/CascadeMessage/send_message/tg-viber/async', ...handler('tg-viber'));
  return app;
}
