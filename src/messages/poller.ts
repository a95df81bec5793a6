/**
 * Asks the provider about messages, and ends the ones it never will say anything more of.
 *
 * - Quiet messages: accepted or sent, with no final status after `afterMs`; asked again
 *   `everyMs` after the first poll, then twice as long after each (`pollWaits`, up to
 *   `maxEveryMs`), and no longer once its status is final: a message the provider has nothing
 *   new on, or answers 404 for, is asked a few dozen times over its life, not every 5 minutes.
 * - Status checks: a message with fallbacks whose final status came from a callback that names
 *   no channel (the provider's webhook) is asked once more, so which channel delivered and what
 *   became of each (the record's `extendedStatuses`) reach its timeline.
 * - Overdue messages: still without a final status `marginMs` after the end of their life
 *   (`messages.expires_at`: dtExpire, or the TTLs; see `deadlineOf`) are marked expired, so
 *   nothing is polled forever, and a call's `on: expired` runs.
 *
 * The record is read as a callback is (`parseStatusRecord`: one table of status words), and
 * only news goes on the timeline. The provider client's data-class token bucket (50
 * requests/s) spaces the requests.
 *
 * Statements: the claim (one short transaction: quiet messages marked, due checks taken);
 * per record, one transaction: the message's lock (message-lock.ts), its channels' latest
 * words when the record names channels, and one write (timeline-write.ts). Expiry: the claim
 * (the rows locked, SKIP LOCKED) and one write for all of them.
 */
import { sql } from 'drizzle-orm';
import type { Clock } from '../clock.ts';
import { type Db, rowsOf, type Tx, valueArray } from '../db/client.ts';
import { subscriptionsOf } from '../events/subscriptions.ts';
import type { Logger } from '../logger.ts';
import { type DeliveryEvent, parseStatusRecord, type StatusMap } from './delivery-parse.ts';
import { toNewEvent } from './delivery-plan.ts';
import { LOCKED_COLUMNS, lockMessages } from './message-lock.ts';
import type { NewEvent, OnRecorded } from './timeline.ts';
import { type LockedMessage, planTimeline } from './timeline-plan.ts';
import { writeTimeline } from './timeline-write.ts';

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
  /** the wait after a message's first poll; it doubles after each poll */
  everyMs: number;
  /** the longest wait between two polls of a message (unset: `everyMs`, no backoff) */
  maxEveryMs?: number;
  /** how long after the end of its life a message with no final status is marked expired */
  expireMarginMs?: number;
  limit?: number;
}

interface Due {
  id: string;
  provider_message_id: string;
  /** how many times it has been asked about, this time included (0: a status check) */
  polls: number;
  /** when it is due again (null: a status check, which leaves its schedule alone) */
  next_poll_at: string | Date | null;
}

/**
 * The waits between polls of one message: `[n - 1]` after its n-th poll, the last one for
 * every poll after. The claim's SQL indexes this array by `poll_count` (`dueAgainSql`), so
 * the schedule is written here alone.
 */
export function pollWaits(everyMs: number, maxEveryMs = everyMs): number[] {
  const waits = [everyMs];
  while (waits[waits.length - 1]! > 0 && waits[waits.length - 1]! < maxEveryMs) {
    waits.push(Math.min(waits[waits.length - 1]! * 2, maxEveryMs));
  }
  return waits;
}

/** One round: asks about quiet messages and due checks; returns how many were asked about. */
export async function pollOnce(deps: PollDeps, opts: PollOptions): Promise<number> {
  const now = deps.clock.now();
  const limit = opts.limit ?? 100;
  // mark first, in a short transaction: a slow provider never holds row locks, and another
  // instance polling at the same time skips what this one took
  const dueAgain = dueAgainSql(pollWaits(opts.everyMs, opts.maxEveryMs));
  const due = await deps.db.transaction(async (tx) => [
    ...rowsOf<Due>(
      // poll_count 0 with a last poll: asked before the count existed (migration 0025), so once
      await tx.execute(sql`
        update messages set last_polled_at = ${now.toISOString()}::timestamptz,
          poll_count = greatest(poll_count, case when last_polled_at is null then 0 else 1 end) + 1
        where id in (
          select id from messages
          where status in ('accepted', 'sent') and provider_message_id is not null
            and updated_at < ${new Date(now.getTime() - opts.afterMs).toISOString()}::timestamptz
            and (last_polled_at is null or ${dueAgain} <= ${now.toISOString()}::timestamptz)
          order by updated_at
          limit ${limit}
          for update skip locked)
        returning id, provider_message_id, poll_count as polls, ${dueAgain} as next_poll_at`),
    ),
    ...rowsOf<Due>(
      await tx.execute(sql`
        with c as (
          delete from status_checks where message_id in (
            select message_id from status_checks
            where due_at <= ${now.toISOString()}::timestamptz
            order by due_at limit ${limit}
            for update skip locked)
          returning message_id)
        select m.id, m.provider_message_id, 0 as polls, null as next_poll_at from c
        join messages m on m.id = c.message_id
        where m.provider_message_id is not null`),
    ),
  ]);
  await Promise.all(due.map((m) => askAbout(deps, m)));
  return due.length;
}

/**
 * When a message polled `poll_count` times, last at `last_polled_at`, is due again: the
 * `pollWaits` entry for its count (a count of 0 with a last poll counts as 1).
 */
function dueAgainSql(waits: readonly number[]) {
  return sql`(last_polled_at + make_interval(secs => (${valueArray(waits, 'bigint')})
    [least(greatest(poll_count, 1), ${waits.length}::int)] / 1000.0))`;
}

async function askAbout(deps: PollDeps, m: Due): Promise<void> {
  let raw: unknown;
  try {
    raw = (await deps.provider.getMessage(m.provider_message_id)).raw;
  } catch (err) {
    deps.logger.warn(
      {
        err: { message: (err as Error).message },
        messageId: m.provider_message_id,
        polls: m.polls,
        ...(m.next_poll_at !== null && { nextPollAt: new Date(m.next_poll_at).toISOString() }),
      },
      'status poll failed',
    );
    return;
  }
  const parsed = parseStatusRecord(raw, m.provider_message_id, deps.statusMap);
  if (parsed.events.length === 0) return;
  await deps.db.transaction(async (tx) => {
    const at = deps.clock.now();
    const [locked] = await lockMessages(tx, { ids: [m.id] });
    if (!locked) return;
    const known = await channelStatuses(
      tx,
      m.id,
      parsed.events.some((e) => e.perChannel),
    );
    const events = newsOf(parsed.events, raw, locked, known, at);
    if (events.length === 0) return;
    const plan = planTimeline([locked], new Map([[m.id, events]]));
    await writeTimeline(tx, plan, at, {
      onRecorded: deps.onRecorded,
      events: subscriptionsOf(deps.db).wants('message.status'),
    });
  });
}

/**
 * Of a status record's events, the news: a per-channel word not already the channel's latest
 * on the timeline, and a status of the whole message other than its current one. Their times
 * are judged as a callback's are (`toNewEvent`), `at` being when the record was read.
 */
export function newsOf(
  parsed: readonly DeliveryEvent[],
  raw: unknown,
  message: Pick<LockedMessage, 'status' | 'createdAt'>,
  known: ReadonlyMap<string, string>,
  at: Date,
): NewEvent[] {
  const events: NewEvent[] = [];
  for (const e of parsed) {
    if (e.perChannel ? known.get(e.channel ?? '') === e.rawStatus : e.status === message.status)
      continue;
    const event = toNewEvent(e, undefined, at, 'poll', message.createdAt);
    if (!e.perChannel && event.detail) event.detail.response = raw;
    events.push(event);
  }
  return events;
}

/** The latest word of each channel on a message's timeline (per-channel events only). */
async function channelStatuses(
  tx: Tx,
  messageId: string,
  wanted: boolean,
): Promise<Map<string, string>> {
  if (!wanted) return new Map();
  const rows = rowsOf<{ channel: string; word: string }>(
    await tx.execute(sql`
      select distinct on (detail->>'channel') detail->>'channel' as channel,
        coalesce(detail->>'providerStatus', status) as word
      from message_events
      where message_id = ${messageId} and detail->>'perChannel' = 'true'
      order by detail->>'channel', at desc, id desc`),
  );
  return new Map(rows.map((r) => [r.channel, r.word]));
}

/**
 * Marks expired the messages still accepted or sent `marginMs` after the end of their life;
 * returns how many. One short transaction: the claim (locks, SKIP LOCKED), one write of every
 * move (timeline-write.ts), then the call runtime's hook for each.
 */
export async function expireOverdue(
  deps: Pick<PollDeps, 'db' | 'clock' | 'onRecorded'>,
  opts: { marginMs: number; limit?: number },
): Promise<number> {
  const now = deps.clock.now();
  const cutoff = new Date(now.getTime() - opts.marginMs);
  return deps.db.transaction(async (tx) => {
    const rows = rowsOf<LockedMessage & { expires_at: string | Date }>(
      await tx.execute(sql`
        select ${LOCKED_COLUMNS}, expires_at from messages
        where status in ('accepted', 'sent') and expires_at < ${cutoff.toISOString()}::timestamptz
        order by expires_at
        limit ${opts.limit ?? 100}
        for update skip locked`),
    );
    if (rows.length === 0) return 0;
    const events = new Map<string, NewEvent[]>();
    for (const r of rows) {
      const expiresAt = new Date(r.expires_at);
      events.set(r.id, [
        {
          status: 'expired',
          source: 'expiry',
          at: now,
          detail: {
            reason: 'no final status from the provider by the end of its life, and a margin',
            expiresAt: expiresAt.toISOString(),
            marginMs: opts.marginMs,
          },
        },
      ]);
    }
    // the planner takes messages in id order (the claim's is the expiry time's)
    const locked = [...rows].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    await writeTimeline(tx, planTimeline(locked, events), now, {
      onRecorded: deps.onRecorded,
      events: subscriptionsOf(deps.db).wants('message.status'),
    });
    return rows.length;
  });
}
