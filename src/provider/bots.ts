/**
 * Bot-user loading: Telegram and Viber bot users uploaded to the organization, one user per
 * request (POST /api/tg_bot/{token}, /api/viber_bot/{token}), the bot token in the path (it
 * is the only auth the provider names for these endpoints). The provider does not document
 * the response, so it is returned as parsed.
 */
import { z } from 'zod';
import { AppError } from '../errors.ts';
import { type ClientOptions, clientTransport } from './client.ts';
import { issuesToDetails } from './issues.ts';

export const TelegramBotUser = z.strictObject({
  id: z.number().int(),
  firstName: z.string().optional(),
  lastName: z.string().optional(),
  userName: z.string().min(1),
  phone: z.string().optional(),
  languageCode: z.string().optional(),
});
export type TelegramBotUser = z.infer<typeof TelegramBotUser>;

export const ViberBotUser = z.strictObject({
  id: z.string().min(1),
  name: z.string().min(1),
  phone: z.string().optional(),
  country: z.string().optional(),
  language: z.string().optional(),
  avatar: z.url({ protocol: /^https?$/ }).optional(),
});
export type ViberBotUser = z.infer<typeof ViberBotUser>;

export interface BotsClient {
  uploadTelegramUser(
    botToken: string,
    user: TelegramBotUser,
    opts?: { signal?: AbortSignal },
  ): Promise<unknown>;
  uploadViberUser(
    botToken: string,
    user: ViberBotUser,
    opts?: { signal?: AbortSignal },
  ): Promise<unknown>;
}

function check<T>(schema: z.ZodType<T>, value: unknown, what: string): T {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const details = issuesToDetails(parsed.error.issues);
  throw new AppError(
    'VALIDATION_ERROR',
    `invalid ${what}: ${details[0]?.path}: ${details[0]?.message}`,
    details,
  );
}

/** The token as a path segment; `:` (as in Telegram's `123:ABC`) is legal there and kept. */
export function tokenSegment(token: string): string {
  if (token.trim() === '')
    throw new AppError('VALIDATION_ERROR', 'the bot token must not be empty');
  return encodeURIComponent(token).replace(/%3A/gi, ':');
}

/**
 * @example
 * const bots = createBotsClient({ baseUrl, limiter });
 * await bots.uploadTelegramUser('123:ABC', { id: 42, userName: 'ann' });
 */
export function createBotsClient(opts: ClientOptions): BotsClient {
  const { transport } = clientTransport(opts);
  const upload = async (path: string, json: unknown, signal?: AbortSignal) => {
    const res = await transport.request({
      method: 'POST',
      path,
      limitClass: 'messaging',
      json,
      ...(signal ? { signal } : {}),
    });
    return res.json ?? (res.text === '' ? undefined : res.text);
  };
  return {
    async uploadTelegramUser(botToken, user, o = {}) {
      const body = check(TelegramBotUser, user, 'Telegram bot user');
      return upload(`/api/tg_bot/${tokenSegment(botToken)}`, body, o.signal);
    },
    async uploadViberUser(botToken, user, o = {}) {
      const body = check(ViberBotUser, user, 'Viber bot user');
      return upload(`/api/viber_bot/${tokenSegment(botToken)}`, body, o.signal);
    },
  };
}
