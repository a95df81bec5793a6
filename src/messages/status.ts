/**
 * Message statuses and the one rule about them: the current status only moves up a rank,
 * and a terminal status stays. The timeline keeps every event regardless; this decides only
 * what `messages.status` says now.
 *
 * @example
 * nextStatus('delivered', 'sent') // 'delivered' (a late `sent` never overwrites it)
 */
import { type SQL, sql } from 'drizzle-orm';
import { z } from 'zod';

export const MESSAGE_STATUSES = [
  'queued',
  'accepted',
  'sent',
  'delivered',
  'read',
  'rejected',
  'failed',
  'expired',
] as const;
export const MessageStatus = z.enum(MESSAGE_STATUSES);
export type MessageStatus = z.infer<typeof MessageStatus>;

const RANK: Record<MessageStatus, number> = {
  queued: 0,
  accepted: 1,
  sent: 2,
  delivered: 3,
  read: 4,
  // terminal failures outrank everything before delivery, and stay
  rejected: 10,
  failed: 10,
  expired: 10,
};

const TERMINAL = new Set<MessageStatus>(['read', 'rejected', 'failed', 'expired']);

export function isTerminal(status: MessageStatus): boolean {
  return TERMINAL.has(status);
}

/** Whether `status` is one of the canonical statuses (callbacks may carry others). */
export function isMessageStatus(status: string): status is MessageStatus {
  return (MESSAGE_STATUSES as readonly string[]).includes(status);
}

/**
 * The status a message has after an event with `incoming` is recorded: `incoming` when it
 * outranks `current` and `current` is not terminal, otherwise `current`. Unknown (vendor)
 * statuses never move it.
 */
export function nextStatus(current: MessageStatus, incoming: string): MessageStatus {
  if (!isMessageStatus(incoming) || isTerminal(current)) return current;
  // delivered is final for failure purposes: a `failed` after `delivered` is noise
  if ((current === 'delivered' || current === 'read') && RANK[incoming] >= 10) return current;
  return RANK[incoming] > RANK[current] ? incoming : current;
}

/**
 * `nextStatus` in SQL, written from `nextStatus` itself: for each current status, the
 * incoming statuses that win over it, so the two cannot disagree (a test runs every pair
 * through both). For set-based updates of many messages (the dispatcher's answers): one
 * comparison picks the current status's branch, one short list decides.
 *
 * @example
 * sql`update messages set status = ${nextStatusSql(sql`status`, sql`v.s`)} ...`
 */
export function nextStatusSql(current: SQL, incoming: SQL): SQL {
  const branches = WINNERS.map(
    ([from, wins]) =>
      sql`when ${sql.raw(`'${from}'`)} then (case when ${incoming} in (${sql.raw(wins)}) then ${incoming} else ${current} end)`,
  );
  return sql`(case ${current} ${sql.join(branches, sql` `)} else ${current} end)`;
}

/** Per current status, the incoming statuses that replace it, as SQL literals. */
const WINNERS: Array<[MessageStatus, string]> = MESSAGE_STATUSES.flatMap((current) => {
  const wins = MESSAGE_STATUSES.filter(
    (incoming) => incoming !== current && nextStatus(current, incoming) === incoming,
  );
  return wins.length === 0
    ? []
    : [[current, wins.map((w) => `'${w}'`).join(', ')] as [MessageStatus, string]];
});
