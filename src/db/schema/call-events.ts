import {
  bigint,
  bigserial,
  index,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from 'drizzle-orm/pg-core';
import { calls } from './calls.ts';

/**
 * The append-only timeline of a call: keys pressed (kind `key`: the path), outcomes,
 * follow-ups queued, statuses of the call message, timers, webhooks held or ignored.
 */
export const callEvents = pgTable(
  'call_events',
  {
    id: bigserial('id', { mode: 'number' }).notNull(),
    callId: uuid('call_id')
      .notNull()
      .references(() => calls.id, { onDelete: 'cascade' }),
    kind: text('kind').notNull(),
    node: text('node'),
    menu: text('menu'),
    attempt: integer('attempt'),
    key: text('key'),
    detail: jsonb('detail'),
    at: timestamp('at', { withTimezone: true, mode: 'date' }).notNull(),
  },
  (t) => [
    // partitioned by call_id (migration 0017, src/db/partitions.ts): the key must be in it
    primaryKey({ columns: [t.id, t.callId] }),
    index('call_events_call_idx').on(t.callId, t.id),
  ],
);

/**
 * Key webhooks that arrived before the call reached their node (the provider does not keep
 * them in order). Applied, in arrival order, as soon as the machine gets there.
 */
export const heldWebhooks = pgTable(
  'held_webhooks',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    callId: uuid('call_id')
      .notNull()
      .references(() => calls.id, { onDelete: 'cascade' }),
    /** its body in the inbox (no foreign key: src/db/schema/inbox.ts) */
    inboxId: bigint('inbox_id', { mode: 'number' }).notNull(),
    node: text('node').notNull(),
    key: text('key').notNull(),
    receivedAt: timestamp('received_at', { withTimezone: true, mode: 'date' })
      .notNull()
      .defaultNow(),
  },
  (t) => [index('held_webhooks_call_idx').on(t.callId, t.id)],
);

/**
 * Durable timers (`on: noResponse: { after }`): fired by a worker when due, after a restart
 * too; deleted when the machine cancels them or the call no longer needs them.
 */
export const callTimers = pgTable(
  'call_timers',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    callId: uuid('call_id')
      .notNull()
      .references(() => calls.id, { onDelete: 'cascade' }),
    timer: text('timer').notNull(),
    fireAt: timestamp('fire_at', { withTimezone: true, mode: 'date' }).notNull(),
  },
  (t) => [
    uniqueIndex('call_timers_call_timer_idx').on(t.callId, t.timer),
    index('call_timers_fire_at_idx').on(t.fireAt),
  ],
);

/**
 * Aggregate counters per flow, version and language (visits, keys, hang-ups, failures,
 * outcomes), updated in the same transaction as the events they count. Kept apart from the
 * calls so that retention and erasure can remove people's data and leave the statistics.
 */
export const flowStats = pgTable(
  'flow_stats',
  {
    flowId: text('flow_id').notNull(),
    /** the calls' pinned flow version; '' for counts made before 0012 kept them apart */
    version: text('version').notNull().default(''),
    /** the calls' language; '' likewise */
    lang: text('lang').notNull().default(''),
    /** visit, key, hangup, failure, outcome, started */
    metric: text('metric').notNull(),
    /** the node (visit, key, hangup), the status (failure) or the outcome name */
    subject: text('subject').notNull(),
    key: text('key').notNull().default(''),
    count: bigint('count', { mode: 'number' }).notNull().default(0),
  },
  (t) => [uniqueIndex('flow_stats_pk').on(t.flowId, t.version, t.lang, t.metric, t.subject, t.key)],
);
