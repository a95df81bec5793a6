import { sql } from 'drizzle-orm';
import {
  bigint,
  bigserial,
  boolean,
  index,
  integer,
  jsonb,
  pgTable,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from 'drizzle-orm/pg-core';

/**
 * The user's own systems that receive Switchboard's events (Standard Webhooks), made through
 * `/v1/endpoints` or declared in ENDPOINTS_FILE. Each has its own signing secrets: the newest
 * signs alone, or together with the one before it until that one expires (rotation overlap).
 */
export const endpoints = pgTable(
  'endpoints',
  {
    /** ep_... */
    id: text('id').primaryKey(),
    /** optional short name, unique: what a flow's `notify:` and ENDPOINTS_FILE refer to */
    name: text('name'),
    url: text('url').notNull(),
    description: text('description').notNull().default(''),
    /** the event types it receives; null: every type */
    eventTypes: text('event_types').array(),
    enabled: boolean('enabled').notNull().default(true),
    /** at most this many requests per second to it; null: no limit */
    rateLimit: integer('rate_limit'),
    /** one subject's events (one call's, one message's) delivered in the order they happened */
    ordered: boolean('ordered').notNull().default(false),
    /** `api` or `file` (ENDPOINTS_FILE: changed by editing the file, not through the API) */
    source: text('source').notNull().default('api'),
    /** [{ secret: 'whsec_...', expiresAt: ISO | null }], newest first */
    secrets: jsonb('secrets').notNull(),
    /** since when every attempt to it has failed (null: its last attempt succeeded) */
    failingSince: timestamp('failing_since', { withTimezone: true, mode: 'date' }),
    /** why it was disabled by Switchboard (kept failing); null when enabled or disabled by a user */
    disabledReason: text('disabled_reason'),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  },
  (t) => [uniqueIndex('endpoints_name_idx').on(t.name).where(sql`name is not null`)],
);

/**
 * Events for the user's endpoints, written in the same transaction as the change they report,
 * and only when at least one enabled endpoint wanted their type then. The body sent is
 * `{ type, timestamp: created_at, data }`; `webhook-id` is `evt_` and the id without dashes.
 */
export const outgoingEvents = pgTable(
  'outgoing_events',
  {
    /** a UUIDv7 of created_at, the partition key: a day each (migration 0018, db/partitions.ts) */
    id: uuid('id').primaryKey(),
    /** message.status, call.started, call.key, call.outcome, call.ended, inbound.viber, ... */
    type: text('type').notNull(),
    /** what the event is about (`call:<id>`, `message:<id>`): the unit of ordering */
    subject: text('subject').notNull(),
    data: jsonb('data').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  },
  (t) => [index('outgoing_events_created_idx').on(t.createdAt)],
);

/**
 * One event to one endpoint: the delivery queue. Written with its event (one row per endpoint
 * that wanted the type then); `pending` until delivered or its attempts are exhausted, and
 * pending again when replayed.
 *
 * `event_id` has no foreign key to `outgoing_events`: with one, dropping a day partition of
 * the events would first detach it, holding the table's lock while Postgres checks every event
 * of the day against the deliveries (migration 0018). Integrity is the application's instead:
 * deliveries are written with their events (src/events/record.ts) or for an event a replay
 * holds locked (src/events/replay.ts), and whatever deletes events deletes their deliveries
 * in the same transaction (src/db/partitions.ts, src/privacy/retention.ts, erasure.ts).
 */
export const eventDeliveries = pgTable(
  'event_deliveries',
  {
    /** also the order of one subject's events to one endpoint */
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    /** an outgoing_events id (no foreign key: above), led by event_deliveries_event_endpoint_idx */
    eventId: uuid('event_id').notNull(),
    endpointId: text('endpoint_id')
      .notNull()
      .references(() => endpoints.id, { onDelete: 'cascade' }),
    /** the event's subject, copied for the ordering check */
    subject: text('subject').notNull(),
    /** pending, delivered, exhausted */
    state: text('state').notNull().default('pending'),
    /** attempts since it was queued or last replayed */
    attempts: integer('attempts').notNull().default(0),
    /** the next attempt not before this time */
    nextAt: timestamp('next_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
    lastAttemptAt: timestamp('last_attempt_at', { withTimezone: true, mode: 'date' }),
    deliveredAt: timestamp('delivered_at', { withTimezone: true, mode: 'date' }),
  },
  (t) => [
    uniqueIndex('event_deliveries_event_endpoint_idx').on(t.eventId, t.endpointId),
    // the worker's claim walks this one
    index('event_deliveries_due_idx').on(t.nextAt, t.id).where(sql`state = 'pending'`),
    // "is an earlier event of this subject still pending for this endpoint?"
    index('event_deliveries_subject_idx')
      .on(t.endpointId, t.subject, t.id)
      .where(sql`state = 'pending'`),
    index('event_deliveries_endpoint_idx').on(t.endpointId, t.id),
  ],
);

/** Every request made to an endpoint, kept for `GET /v1/endpoints/{id}/attempts`. */
export const deliveryAttempts = pgTable(
  'delivery_attempts',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    deliveryId: bigint('delivery_id', { mode: 'number' })
      .notNull()
      .references(() => eventDeliveries.id, { onDelete: 'cascade' }),
    eventId: uuid('event_id').notNull(),
    endpointId: text('endpoint_id').notNull(),
    at: timestamp('at', { withTimezone: true, mode: 'date' }).notNull(),
    /** succeeded or failed */
    status: text('status').notNull(),
    /** the endpoint's HTTP status; null when no answer came (timeout, connection refused) */
    responseStatus: integer('response_status'),
    /** the start of the endpoint's answer, capped */
    responseBody: text('response_body'),
    durationMs: integer('duration_ms').notNull(),
    /** why it failed when there was no answer, in words (never a secret) */
    error: text('error'),
    /** scheduled (the queue) or replay (a user asked) */
    trigger: text('trigger').notNull().default('scheduled'),
  },
  (t) => [
    index('delivery_attempts_endpoint_idx').on(t.endpointId, t.id),
    // a delivery's delete cascades to its attempts through this one, not a scan per delivery
    // (retention deletes a dropped day's deliveries at once: src/db/partitions.ts)
    index('delivery_attempts_delivery_idx').on(t.deliveryId),
  ],
);
