/**
 * Bot-user loading: POST /api/tg_bot/{token} and /api/viber_bot/{token}, one user record each.
 * The bot token in the path is the authentication. The provider documents no response; the sandbox
 * answers `{"status": "ok", "id", "created", "users"}` (users: how many the bot now has).
 */
import { Hono } from 'hono';
import type { z } from 'zod';
import { TelegramBotUser, ViberBotUser } from '../../provider/bots.ts';
import { issuesToDetails } from '../../provider/issues.ts';
import { knownBot } from '../auth.ts';
import type { BotKind } from '../bots.ts';
import type { SandboxContext } from '../context.ts';
import { providerError, rateLimit, readJson } from '../http.ts';

export function botRoutes(ctx: SandboxContext): Hono {
  const app = new Hono();
  const limit = rateLimit(() => ctx.buckets().messaging, 'messaging: 100 requests/s, burst 150');

  const route = (
    kind: BotKind,
    schema: z.ZodType<{ id: string | number; phone?: string | undefined }>,
  ) => {
    const path = kind === 'tg' ? '/api/tg_bot/:token' : '/api/viber_bot/:token';
    const allowed = () =>
      kind === 'tg' ? ctx.credentials.tgBotKeys : ctx.credentials.viberBotTokens;
    app.post(
      path,
      async (c, next) => {
        if (!knownBot(c.req.param('token') ?? '', allowed())) {
          return providerError(c, 401, 'UNAUTHORIZED', 'the bot token in the path is not known');
        }
        await next();
      },
      limit,
      async (c) => {
        const read = await readJson(c, { requireJsonType: true });
        if (!read.ok) return read.response;
        const parsed = schema.safeParse(read.body);
        if (!parsed.success) {
          const details = issuesToDetails(parsed.error.issues);
          return providerError(
            c,
            400,
            'BAD_REQUEST',
            details[0] ? `${details[0].path}: ${details[0].message}` : 'invalid bot user',
            details,
          );
        }
        const token = c.req.param('token') ?? '';
        const result = ctx.bots.upsert(
          kind,
          token,
          parsed.data,
          new Date(ctx.clock.now()).toISOString(),
        );
        return c.json({
          status: 'ok',
          id: parsed.data.id,
          created: result.created,
          users: result.count,
        });
      },
    );
  };

  route('tg', TelegramBotUser);
  route('viber', ViberBotUser);
  return app;
}
