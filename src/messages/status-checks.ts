/**
 * Status checks: a message with fallbacks whose final status came through events that name no
 * channel (the provider's own webhook says only how the message as a whole ended) gets its
 * status record read once more by the poller, for which channel delivered and what became of
 * each. Decided here, queued in the transaction that recorded the status.
 */
import { sql } from 'drizzle-orm';
import type { Tx } from '../db/client.ts';
import { isTerminal, type MessageStatus } from './status.ts';
import type { NewEvent } from './timeline.ts';

/**
 * Whether a recorded status move leaves a message whose channels the timeline does not know:
 * a message with fallbacks that reached a final status through events naming no channel.
 */
export function needsStatusCheck(
  after: MessageStatus,
  fallbackCount: number,
  events: readonly Pick<NewEvent, 'channel' | 'fallbackIndex' | 'source'>[],
  type: string,
): boolean {
  // a cascade's record shows no channels (cascade/send.md: its messageId tracks the status)
  if (type === 'cascade') return false;
  if (fallbackCount === 0 || !(isTerminal(after) || after === 'delivered')) return false;
  if (events.some((e) => e.source === 'poll')) return false;
  return events.every((e) => e.channel === undefined && e.fallbackIndex === undefined);
}

/** Queues status checks for `ids` (a message already queued keeps its time). */
export async function queueStatusChecks(tx: Tx, ids: readonly string[], dueAt: Date) {
  if (ids.length === 0) return;
  await tx.execute(sql`
    insert into status_checks (message_id, due_at)
    select v::uuid, ${dueAt.toISOString()}::timestamptz
    from jsonb_array_elements_text(${JSON.stringify(ids)}::jsonb) as t(v)
    on conflict (message_id) do nothing`);
}
