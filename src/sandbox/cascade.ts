/**
 * The cascade (seed 1.4 and 2.8): one message, tried on channels cheapest first (Telegram
 * bot, Viber bot, Viber business, RCS, SMS) until one reaches the recipient. The
 * Telegram-prioritized endpoint (`tg-viber`) tries the Telegram bot, then the Viber bot.
 *
 * Which channels reach a recipient is scriptable through the control API. Unscripted, a
 * recipient is reachable on Viber business and SMS, and on the Telegram or Viber bot when a
 * user of such a bot with that phone was uploaded (bots.ts).
 *
 * Each channel tried is reported to the delivery callback URL: `failed` for a channel that
 * does not reach the recipient (then the next is tried, `failedAfterMs` later), and `sent`,
 * `delivered` on the one that does; `failed` with channel null when none does.
 *
 * @example
 * substitutePlaceholders('Hi %name=1%', [{ id: 1, value: 'Ann' }]) // { ok: true, text: 'Hi Ann' }
 */
import { createHash, randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { BotRegistry } from './bots.ts';
import type { CallbackSender } from './callbacks.ts';
import type { Scheduler } from './clock.ts';
import type { LifecycleTimings } from './messages.ts';
import { normalizeNumber } from './scripts.ts';

export const CASCADE_CHANNELS = [
  'telegram_bot',
  'viber_bot',
  'viber_business',
  'rcs',
  'sms',
] as const;
export const CascadeChannel = z.enum(CASCADE_CHANNELS);
export type CascadeChannel = z.infer<typeof CascadeChannel>;

export const CASCADE_ROUTES = {
  general: CASCADE_CHANNELS,
  'tg-viber': ['telegram_bot', 'viber_bot'],
} as const satisfies Record<string, readonly CascadeChannel[]>;
export type CascadeRoute = keyof typeof CASCADE_ROUTES;

export interface Variable {
  id: number;
  value: string;
}

const PLACEHOLDER = /%(name|url|short_url)=(\d+)%/g;

/** A stable short link for `url`, as a provider's shortener would make. */
export function shortUrl(url: string): string {
  return `https://sbx.link/${createHash('sha256').update(url).digest('base64url').slice(0, 8)}`;
}

/**
 * Replaces %name=id%, %url=id% and %short_url=id% with the variable of that id; a
 * placeholder naming no variable is an error.
 *
 * @example
 * substitutePlaceholders('Go %short_url=2%', [{ id: 2, value: 'https://example.com/a' }])
 * // { ok: true, text: 'Go https://sbx.link/...' }
 */
export function substitutePlaceholders(
  text: string,
  variables: readonly Variable[],
): { ok: true; text: string } | { ok: false; missing: string[] } {
  const missing: string[] = [];
  const out = text.replace(PLACEHOLDER, (whole, kind: string, id: string) => {
    const variable = variables.find((v) => v.id === Number(id));
    if (variable === undefined) {
      missing.push(whole);
      return whole;
    }
    return kind === 'short_url' ? shortUrl(variable.value) : variable.value;
  });
  return missing.length > 0 ? { ok: false, missing } : { ok: true, text: out };
}

export type CascadeStatus = 'accepted' | 'sent' | 'delivered' | 'failed';

export interface CascadeRecord {
  messageId: string;
  trackinId: string;
  route: CascadeRoute;
  recipient: string;
  text: string;
  status: CascadeStatus;
  /** The channel that reached the recipient, once one did. */
  channel: CascadeChannel | null;
  attempts: { channel: CascadeChannel; status: 'sent' | 'delivered' | 'failed'; at: string }[];
  acceptedAt: string;
}

export interface CascadeDeps {
  scheduler: Scheduler;
  sender: CallbackSender;
  bots: BotRegistry;
  timings: () => LifecycleTimings;
  callbackUrl: string | undefined;
  callbackHeaders?: Record<string, string>;
}

export interface CascadeEngine {
  /** Starts one cascade message whose text is already substituted. */
  send(route: CascadeRoute, recipient: string, text: string): CascadeRecord;
  setReachable(recipient: string, channels: readonly CascadeChannel[]): void;
  reachable(recipient: string): CascadeChannel[];
  get(id: string): CascadeRecord | undefined;
  list(): CascadeRecord[];
  reset(): void;
}

export function createCascadeEngine(deps: CascadeDeps): CascadeEngine {
  const { scheduler } = deps;
  let records = new Map<string, CascadeRecord>();
  let scripted = new Map<string, CascadeChannel[]>();
  let nextTrackin = 1;
  const iso = (ms: number) => new Date(ms).toISOString();

  function reachable(recipient: string): CascadeChannel[] {
    const key = normalizeNumber(recipient);
    const set = scripted.get(key);
    if (set !== undefined) return [...set];
    return CASCADE_CHANNELS.filter(
      (c) =>
        c === 'viber_business' ||
        c === 'sms' ||
        (c === 'telegram_bot' && deps.bots.hasPhone('tg', key)) ||
        (c === 'viber_bot' && deps.bots.hasPhone('viber', key)),
    );
  }

  function report(
    r: CascadeRecord,
    status: CascadeStatus,
    channel: CascadeChannel | null,
    at: number,
  ): Promise<void> {
    if (status !== 'accepted') r.status = status;
    if (deps.callbackUrl === undefined) return Promise.resolve();
    return deps.sender.send({
      kind: 'delivery',
      url: deps.callbackUrl,
      body: {
        eventId: `${r.messageId}:${channel ?? 'none'}:${status}`,
        customerMessageId: null,
        messageId: r.messageId,
        trackinId: r.trackinId,
        cascade: true,
        status,
        timestamp: iso(at),
        channel,
        type: 'cascade',
        to: r.recipient,
        error:
          status === 'failed'
            ? {
                code: channel === null ? 'NO_CHANNEL' : 'CHANNEL_UNREACHABLE',
                message:
                  channel === null
                    ? 'no channel of the cascade reached the recipient'
                    : `the recipient is not reachable on ${channel}`,
              }
            : null,
      },
      headers: deps.callbackHeaders ?? {},
      messageId: r.messageId,
    });
  }

  function tryChannel(r: CascadeRecord, index: number, at: number, canReach: CascadeChannel[]) {
    const t = deps.timings();
    const channel = CASCADE_ROUTES[r.route][index];
    if (channel === undefined) {
      scheduler.at(at, () => report(r, 'failed', null, at));
      return;
    }
    if (!canReach.includes(channel)) {
      const failedAt = at + t.failedAfterMs;
      scheduler.at(failedAt, async () => {
        r.attempts.push({ channel, status: 'failed', at: iso(failedAt) });
        await report(r, 'failed', channel, failedAt);
        tryChannel(r, index + 1, failedAt, canReach);
      });
      return;
    }
    const sentAt = at + t.sentAfterMs;
    const deliveredAt = at + t.deliveredAfterMs;
    scheduler.at(sentAt, () => {
      r.channel = channel;
      r.attempts.push({ channel, status: 'sent', at: iso(sentAt) });
      return report(r, 'sent', channel, sentAt);
    });
    scheduler.at(deliveredAt, () => {
      r.attempts.push({ channel, status: 'delivered', at: iso(deliveredAt) });
      return report(r, 'delivered', channel, deliveredAt);
    });
  }

  return {
    send(route, recipient, text) {
      const now = scheduler.now();
      const record: CascadeRecord = {
        messageId: randomUUID(),
        trackinId: `trk-${String(nextTrackin++).padStart(8, '0')}`,
        route,
        recipient: normalizeNumber(recipient),
        text,
        status: 'accepted',
        channel: null,
        attempts: [],
        acceptedAt: iso(now),
      };
      records.set(record.messageId, record);
      // Forget the oldest beyond about 100 000 (a long-running sandbox must not grow forever).
      if (records.size > 125_000) {
        for (const id of records.keys()) {
          if (records.size <= 100_000) break;
          records.delete(id);
        }
      }
      // Reachability is fixed when the cascade starts, like a script.
      tryChannel(record, 0, now, reachable(record.recipient));
      return record;
    },
    setReachable(recipient, channels) {
      scripted.set(normalizeNumber(recipient), [...channels]);
    },
    reachable,
    get: (id) => records.get(id) ?? [...records.values()].find((r) => r.trackinId === id),
    list: () => [...records.values()],
    reset() {
      records = new Map();
      scripted = new Map();
      nextTrackin = 1;
    },
  };
}
