/**
 * Bot users uploaded through `/api/tg_bot/{token}` and `/api/viber_bot/{token}` (one Telegram
 * or Viber user record per request, the bot's token in the path), kept per bot token. A user
 * sent again (same id) replaces the earlier record. The cascade reads them: a recipient whose
 * phone belongs to a user of some bot is reachable on that bot's channel.
 * @example
 * const bots = createBotRegistry();
 * bots.upsert('tg', 'token-1', { id: 7, userName: 'ann', phone: '+380501234567' });
 * bots.hasPhone('tg', '+380501234567'); // true
 */
import { normalizeNumber } from './scripts.ts';

export type BotKind = 'tg' | 'viber';

export interface BotUserRecord {
  kind: BotKind;
  token: string;
  id: string;
  user: Record<string, unknown>;
  receivedAt: string;
}

export interface BotRegistry {
  /** Stores `user` under its bot; returns whether it is new to that bot. */
  upsert(
    kind: BotKind,
    token: string,
    user: { id: string | number; phone?: string | undefined },
    at?: string,
  ): { created: boolean; count: number };
  users(kind?: BotKind, token?: string): BotUserRecord[];
  hasPhone(kind: BotKind, phone: string): boolean;
  /** Forgets the users `mentions` picks (by any field: phone, name); returns how many. */
  forget(mentions: (user: BotUserRecord) => boolean): number;
  reset(): void;
}

export function createBotRegistry(): BotRegistry {
  let bots = new Map<string, Map<string, BotUserRecord>>();
  const key = (kind: BotKind, token: string) => `${kind}:${token}`;

  return {
    upsert(kind, token, user, at = new Date().toISOString()) {
      const users = bots.get(key(kind, token)) ?? new Map<string, BotUserRecord>();
      bots.set(key(kind, token), users);
      const id = String(user.id);
      const created = !users.has(id);
      users.set(id, { kind, token, id, user: { ...user }, receivedAt: at });
      return { created, count: users.size };
    },
    users(kind, token) {
      return [...bots.values()]
        .flatMap((users) => [...users.values()])
        .filter(
          (u) =>
            (kind === undefined || u.kind === kind) && (token === undefined || u.token === token),
        );
    },
    hasPhone(kind, phone) {
      const wanted = normalizeNumber(phone);
      return this.users(kind).some(
        (u) => typeof u.user.phone === 'string' && normalizeNumber(u.user.phone) === wanted,
      );
    },
    forget(mentions) {
      let n = 0;
      for (const users of bots.values()) {
        for (const [id, u] of [...users]) {
          if (mentions(u)) n += Number(users.delete(id));
        }
      }
      return n;
    },
    reset() {
      bots = new Map();
    },
  };
}
