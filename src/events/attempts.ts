/**
 * What happened to an endpoint's events: every request made to it (`delivery_attempts`,
 * written by the worker, src/events/deliver.ts) and its queue (`event_deliveries`), newest
 * first, one page at a time, for `GET /v1/endpoints/{id}/attempts`, `.../deliveries` and the
 * console. Each item names its event as the receiver saw it (`webhook-id`: `evt_...`).
 *
 * @example
 * const page = await listAttempts(db, 'ep_4fQ9xk2LmB7wZr1c', { limit: 20 });
 * page.items[0]; // { eventId: 'evt_0193...', type: 'call.ended', status: 'failed', responseStatus: 500, ... }
 */
import { z } from '@hono/zod-openapi';
import { and, desc, eq, lt, type SQL } from 'drizzle-orm';
import type { Queryable } from '../db/client.ts';
import { deliveryAttempts, eventDeliveries, outgoingEvents } from '../db/schema/endpoints.ts';
import { decodeIdCursor, encodeIdCursor } from '../http/cursor.ts';
import { webhookId } from './sign.ts';

export const ATTEMPT_STATUSES = ['succeeded', 'failed'] as const;
export const DELIVERY_STATES = ['pending', 'delivered', 'exhausted'] as const;

export const AttemptView = z
  .object({
    id: z.number().int(),
    eventId: z.string().meta({
      description: 'the `webhook-id` the request carried',
      example: 'evt_0193f1c27b4e7c1a9f3d2a6b8c0d1e2f',
    }),
    type: z.string().meta({ example: 'call.ended' }),
    deliveryId: z.number().int(),
    at: z.string(),
    status: z.enum(ATTEMPT_STATUSES),
    responseStatus: z
      .number()
      .int()
      .nullable()
      .meta({ description: "the endpoint's HTTP status; null: no answer (timeout, refused)" }),
    responseBody: z
      .string()
      .nullable()
      .meta({ description: "the start of the endpoint's answer (capped)" }),
    durationMs: z.number().int(),
    error: z.string().nullable().meta({ description: 'why it failed when no answer came' }),
    trigger: z.enum(['scheduled', 'replay']).meta({
      description: '`replay`: made because someone replayed the event',
    }),
  })
  .meta({ id: 'DeliveryAttempt' });
export type AttemptView = z.infer<typeof AttemptView>;

export const AttemptPage = z
  .object({
    items: z.array(AttemptView),
    nextCursor: z.string().nullable().meta({ description: 'pass as `cursor` for the next page' }),
  })
  .meta({ id: 'DeliveryAttemptPage' });
export type AttemptPage = z.infer<typeof AttemptPage>;

export const DeliveryView = z
  .object({
    id: z.number().int(),
    eventId: z.string().meta({ example: 'evt_0193f1c27b4e7c1a9f3d2a6b8c0d1e2f' }),
    type: z.string(),
    subject: z.string().meta({ example: 'call:0193f1c2-7b4e-7c1a-9f3d-2a6b8c0d1e2f' }),
    state: z.enum(DELIVERY_STATES).meta({
      description: '`exhausted`: every attempt of the schedule failed (replay sends it again)',
    }),
    attempts: z.number().int().meta({ description: 'attempts since it was queued or replayed' }),
    nextAt: z.string().meta({ description: 'the next attempt not before this (when pending)' }),
    lastAttemptAt: z.string().nullable(),
    deliveredAt: z.string().nullable(),
    createdAt: z.string().meta({ description: "the event's time" }),
  })
  .meta({ id: 'EventDelivery' });
export type DeliveryView = z.infer<typeof DeliveryView>;

export const DeliveryPage = z
  .object({
    items: z.array(DeliveryView),
    nextCursor: z.string().nullable().meta({ description: 'pass as `cursor` for the next page' }),
  })
  .meta({ id: 'EventDeliveryPage' });
export type DeliveryPage = z.infer<typeof DeliveryPage>;

export interface PageOptions {
  limit?: number | undefined;
  cursor?: string | undefined;
}

/** `rows` (one more than `limit` when there is a next page) as a page. */
function pageOf<R extends { id: number }, V>(rows: R[], limit: number, view: (r: R) => V) {
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  return {
    items: page.map(view),
    nextCursor: rows.length > limit && last ? encodeIdCursor(last.id) : null,
  };
}

/** The requests made to one endpoint, newest first. */
export async function listAttempts(
  db: Queryable,
  endpointId: string,
  opts: PageOptions & { status?: (typeof ATTEMPT_STATUSES)[number] | undefined } = {},
): Promise<AttemptPage> {
  const limit = opts.limit ?? 50;
  const where: SQL[] = [eq(deliveryAttempts.endpointId, endpointId)];
  if (opts.cursor) where.push(lt(deliveryAttempts.id, decodeIdCursor(opts.cursor)));
  if (opts.status) where.push(eq(deliveryAttempts.status, opts.status));
  const rows = await db
    .select({ attempt: deliveryAttempts, type: outgoingEvents.type })
    .from(deliveryAttempts)
    .leftJoin(outgoingEvents, eq(outgoingEvents.id, deliveryAttempts.eventId))
    .where(and(...where))
    .orderBy(desc(deliveryAttempts.id))
    .limit(limit + 1);
  return pageOf(
    rows.map((r) => ({ ...r.attempt, type: r.type })),
    limit,
    (a): AttemptView => ({
      id: a.id,
      eventId: webhookId(a.eventId),
      // the event is gone only when retention removed it before its attempts
      type: a.type ?? 'unknown',
      deliveryId: a.deliveryId,
      at: a.at.toISOString(),
      status: a.status === 'succeeded' ? 'succeeded' : 'failed',
      responseStatus: a.responseStatus,
      responseBody: a.responseBody,
      durationMs: a.durationMs,
      error: a.error,
      trigger: a.trigger === 'replay' ? 'replay' : 'scheduled',
    }),
  );
}

/** One endpoint's queue, newest first; `state` narrows it (`exhausted`: what gave up). */
export async function listDeliveries(
  db: Queryable,
  endpointId: string,
  opts: PageOptions & { state?: (typeof DELIVERY_STATES)[number] | undefined } = {},
): Promise<DeliveryPage> {
  const limit = opts.limit ?? 50;
  const where: SQL[] = [eq(eventDeliveries.endpointId, endpointId)];
  if (opts.cursor) where.push(lt(eventDeliveries.id, decodeIdCursor(opts.cursor)));
  if (opts.state) where.push(eq(eventDeliveries.state, opts.state));
  const rows = await db
    .select({
      delivery: eventDeliveries,
      type: outgoingEvents.type,
      createdAt: outgoingEvents.createdAt,
    })
    .from(eventDeliveries)
    .innerJoin(outgoingEvents, eq(outgoingEvents.id, eventDeliveries.eventId))
    .where(and(...where))
    .orderBy(desc(eventDeliveries.id))
    .limit(limit + 1);
  return pageOf(
    rows.map((r) => ({ ...r.delivery, type: r.type, createdAt: r.createdAt })),
    limit,
    (d): DeliveryView => ({
      id: d.id,
      eventId: webhookId(d.eventId),
      type: d.type,
      subject: d.subject,
      state: (DELIVERY_STATES as readonly string[]).includes(d.state)
        ? (d.state as DeliveryView['state'])
        : 'pending',
      attempts: d.attempts,
      nextAt: d.nextAt.toISOString(),
      lastAttemptAt: d.lastAttemptAt?.toISOString() ?? null,
      deliveredAt: d.deliveredAt?.toISOString() ?? null,
      createdAt: d.createdAt.toISOString(),
    }),
  );
}
