/**
 * Replay: sending events again on request, through the same queue as the first time (the
 * worker's `requeue`, src/events/deliver.ts: pending, attempts 0, next attempt now), with the
 * same `webhook-id`, so a receiver that kept it can tell a repeat.
 *
 * - One event (`POST /v1/events/{id}/replay`, the id as sent: `evt_...`): every endpoint it
 *   went to, or one endpoint; to an endpoint it never went to (made later, or not subscribed
 *   to its type) it is queued anew, since asking for it is the point.
 * - What failed for one endpoint since a time (`POST /v1/endpoints/{id}/replay`): its
 *   deliveries of events since then that are exhausted, or pending with failed attempts
 *   behind them, at most REPLAY_BATCH per request (`more` says to ask again: those requeued
 *   no longer count as failed, so the next request takes the next ones).
 *
 * A disabled endpoint's requeued deliveries wait until it is enabled again.
 *
 * @example
 * await replayEvent({ db, clock }, { eventId: 'evt_0193f1c27b4e7c1a9f3d2a6b8c0d1e2f' });
 * await replayFailed({ db, clock }, 'ep_4fQ9xk2LmB7wZr1c', new Date('2026-03-01T00:00:00Z'));
 */
import { z } from '@hono/zod-openapi';
import { and, asc, eq, gte, sql } from 'drizzle-orm';
import type { Clock } from '../clock.ts';
import type { Db } from '../db/client.ts';
import { eventDeliveries, outgoingEvents } from '../db/schema/endpoints.ts';
import { AppError } from '../errors.ts';
import { requeue } from './deliver.ts';
import { findEndpoint } from './endpoints.ts';
import { webhookId } from './sign.ts';

/** Most deliveries one bulk replay requeues. */
export const REPLAY_BATCH = 10_000;

const WEBHOOK_ID = /^evt_([0-9a-f]{8})([0-9a-f]{4})([0-9a-f]{4})([0-9a-f]{4})([0-9a-f]{12})$/;

/** The event uuid of a `webhook-id` (`evt_` and 32 hex digits), or undefined. */
export function eventUuidOf(id: string): string | undefined {
  const m = WEBHOOK_ID.exec(id.toLowerCase());
  return m ? m.slice(1).join('-') : undefined;
}

export const ReplayedEvent = z
  .object({
    eventId: z.string().meta({ example: 'evt_0193f1c27b4e7c1a9f3d2a6b8c0d1e2f' }),
    requeued: z
      .array(z.object({ endpointId: z.string(), deliveryId: z.number().int() }))
      .meta({ description: 'the deliveries queued again, one per endpoint' }),
  })
  .meta({ id: 'ReplayedEvent' });
export type ReplayedEvent = z.infer<typeof ReplayedEvent>;

export const ReplayedFailures = z
  .object({
    endpointId: z.string(),
    requeued: z.number().int().meta({ description: 'how many deliveries were queued again' }),
    more: z.boolean().meta({
      description: `true: more than ${REPLAY_BATCH} matched; the same request again takes the next ones`,
    }),
  })
  .meta({ id: 'ReplayedFailures' });
export type ReplayedFailures = z.infer<typeof ReplayedFailures>;

/** Queues one event again: to every endpoint it went to, or to `endpoint` (an id or a name). */
export async function replayEvent(
  deps: { db: Db; clock: Clock },
  input: { eventId: string; endpoint?: string | undefined },
): Promise<ReplayedEvent> {
  const uuid = eventUuidOf(input.eventId);
  const unknown = () => new AppError('NOT_FOUND', `no event "${input.eventId.slice(0, 64)}"`);
  if (!uuid) throw unknown();
  const now = deps.clock.now();
  return deps.db.transaction(async (tx) => {
    // locked, as a foreign key's check would: no delete of it (erasure, retention) passes
    // the delivery queued for it here (no foreign key: src/db/schema/endpoints.ts)
    const [event] = await tx
      .select({ id: outgoingEvents.id, subject: outgoingEvents.subject })
      .from(outgoingEvents)
      .where(eq(outgoingEvents.id, uuid))
      .for('key share');
    if (!event) throw unknown();
    let rows: { id: number; endpointId: string }[];
    if (input.endpoint !== undefined) {
      const endpoint = await findEndpoint(tx, input.endpoint);
      if (!endpoint) {
        throw new AppError('NOT_FOUND', `no endpoint "${input.endpoint.slice(0, 64)}"`, [
          { path: 'endpoint', code: 'INVALID_VALUE', message: 'names no endpoint' },
        ]);
      }
      await tx
        .insert(eventDeliveries)
        .values({ eventId: event.id, endpointId: endpoint.id, subject: event.subject })
        .onConflictDoNothing();
      rows = await tx
        .select({ id: eventDeliveries.id, endpointId: eventDeliveries.endpointId })
        .from(eventDeliveries)
        .where(
          and(eq(eventDeliveries.eventId, event.id), eq(eventDeliveries.endpointId, endpoint.id)),
        );
    } else {
      rows = await tx
        .select({ id: eventDeliveries.id, endpointId: eventDeliveries.endpointId })
        .from(eventDeliveries)
        .where(eq(eventDeliveries.eventId, event.id))
        .orderBy(asc(eventDeliveries.id));
    }
    if (rows.length > 0)
      await requeue(
        tx,
        rows.map((r) => r.id),
        now,
      );
    return {
      eventId: webhookId(event.id),
      requeued: rows.map((r) => ({ endpointId: r.endpointId, deliveryId: r.id })),
    };
  });
}

/** Queues again what failed for one endpoint, for events at or after `since`. */
export async function replayFailed(
  deps: { db: Db; clock: Clock },
  endpointRef: string,
  since: Date,
): Promise<ReplayedFailures> {
  const now = deps.clock.now();
  return deps.db.transaction(async (tx) => {
    const endpoint = await findEndpoint(tx, endpointRef);
    if (!endpoint) throw new AppError('NOT_FOUND', `no endpoint "${endpointRef.slice(0, 64)}"`);
    const rows = await tx
      .select({ id: eventDeliveries.id })
      .from(eventDeliveries)
      .innerJoin(outgoingEvents, eq(outgoingEvents.id, eventDeliveries.eventId))
      .where(
        and(
          eq(eventDeliveries.endpointId, endpoint.id),
          sql`(${eventDeliveries.state} = 'exhausted' or (${eventDeliveries.state} = 'pending' and ${eventDeliveries.attempts} > 0))`,
          gte(outgoingEvents.createdAt, since),
        ),
      )
      .orderBy(asc(eventDeliveries.id))
      .limit(REPLAY_BATCH + 1);
    const ids = rows.slice(0, REPLAY_BATCH).map((r) => r.id);
    if (ids.length > 0) await requeue(tx, ids, now);
    return { endpointId: endpoint.id, requeued: ids.length, more: rows.length > REPLAY_BATCH };
  });
}
