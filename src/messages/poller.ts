/**
 * Asks the provider about messages that have gone quiet: accepted or sent, with no final
 * status after `afterMs`. Each is asked at most once per `everyMs`; the provider client's
 * data-class token bucket (50 requests/s) spaces the requests.
 */
import { sql } from 'drizzle-orm';
import type { Clock } from '../clock.ts';
import { type Db, rowsOf } from '../db/client.ts';
import type { Logger } from '../logger.ts';
import { normaliseWord, type StatusMap } from './delivery-parse.ts';
import type { OnRecorded } from './ingest.ts';
import { recordEvents } from './timeline.ts';

export interface StatusLookup {
  getMessage(messageId: string): Promise<{ status?: string | undefined; raw: unknown }>;
}

export interface PollDeps {
  db: Db;
  provider: StatusLookup;
  clock: Clock;
  logger: Logger;
  statusMap: StatusMap;
  /** the call runtime's hook, run in the transaction that recorded the status */
  onRecorded?: OnRecorded;
}

export interface PollOptions {
  afterMs: number;
  everyMs: number;
  limit?: number;
}

/** One round; returns how many messages were asked about. */
export async function pollOnce(deps: PollDeps, opts: PollOptions): Promise<number> {
  const now = deps.clock.now();
  // mark first, in a short transaction: a slow provider never holds row locks, and another
  // instance polling at the same time skips what this one took
  const due = await deps.db.transaction(async (tx) =>
    rowsOf<{ id: string; provider_message_id: string; status: string }>(
      await tx.execute(sql`
        update messages set last_polled_at = ${now.toISOString()}::timestamptz
        where id in (
          select id from messages
          where status in ('accepted', 'sent') and provider_message_id is not null
            and updated_at < ${new Date(now.getTime() - opts.afterMs).toISOString()}::timestamptz
            and (last_polled_at is null
                 or last_polled_at < ${new Date(now.getTime() - opts.everyMs).toISOString()}::timestamptz)
          order by updated_at
          limit ${opts.limit ?? 100}
          for update skip locked)
        returning id, provider_message_id, status`),
    ),
  );
  await Promise.all(
    due.map(async (m) => {
      let answer: { status?: string | undefined; raw: unknown };
      try {
        answer = await deps.provider.getMessage(m.provider_message_id);
      } catch (err) {
        deps.logger.warn({ err: { message: (err as Error).message } }, 'status poll failed');
        return;
      }
      if (!answer.status) return;
      const status = deps.statusMap[normaliseWord(answer.status)] ?? answer.status;
      // only news goes on the timeline: a poll that confirms what we know adds nothing
      if (status === m.status) return;
      const at = deps.clock.now();
      const events = [
        {
          status,
          source: 'poll' as const,
          at,
          detail: { providerStatus: answer.status, response: answer.raw },
        },
      ];
      await deps.db.transaction(async (tx) => {
        const result = await recordEvents(tx, m.id, events, at);
        if (result && deps.onRecorded) await deps.onRecorded(tx, result, events);
      });
    }),
  );
  return due.length;
}
