/**
 * Status checks: a message with fallbacks whose final status came through events that name no
 * channel (the provider's own webhook says only how the message as a whole ended) gets its
 * status record read once more by the poller, for which channel delivered and what became of
 * each. Decided here (for timeline-plan.ts), queued by the write that records the status
 * (timeline-write.ts, `sc`).
 */
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
