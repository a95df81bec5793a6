import { sql } from 'drizzle-orm';
import { index, jsonb, pgTable, primaryKey, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import { timestamps } from './columns.ts';

/**
 * Each compiled flow version a call was started with (rule 6: calls are pinned). A call
 * keeps running on its version even after the file changes or disappears. `created_at` is
 * when the first call started on it; `source` keeps the file as it was, for diffs.
 */
export const flowVersions = pgTable(
  'flow_versions',
  {
    flowId: text('flow_id').notNull(),
    version: text('version').notNull(),
    compiled: jsonb('compiled').notNull(),
    /** the flow file's text it was compiled from; null for versions pinned before 0012 */
    source: text('source'),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.flowId, t.version] })],
);

/**
 * One call: its pinned flow version, the machine's snapshot, and what came of it. The row
 * lock on it serializes the events of one call, whichever instance receives them.
 */
export const calls = pgTable(
  'calls',
  {
    id: uuid('id').primaryKey(),
    flowId: text('flow_id').notNull(),
    flowVersion: text('flow_version').notNull(),
    to: text('to').notNull(),
    from: text('from').notNull(),
    lang: text('lang').notNull(),
    vars: jsonb('vars').notNull(),
    /** queued, accepted, in-progress, ended, failed */
    state: text('state').notNull(),
    outcome: text('outcome'),
    /** the machine's persisted snapshot ({ value, context }) */
    snapshot: jsonb('snapshot').notNull(),
    /** the speechcall message that carries the menu */
    messageId: uuid('message_id').notNull(),
    endedAt: timestamp('ended_at', { withTimezone: true, mode: 'date' }),
    ...timestamps,
  },
  (t) => [
    // by phone number: call_recipients, written once instead of at every update that is not HOT
    index('calls_flow_id_idx').on(t.flowId, t.id),
    index('calls_message_id_idx').on(t.messageId),
    // a list by state or outcome walks its own entries, newest first, however many calls
    // there are of other kinds; the switchboard_calls gauge counts the live states here. An
    // update that leaves the state alone (most of a call's) stays HOT
    index('calls_state_id_idx').on(t.state, t.id),
    index('calls_outcome_id_idx').on(t.outcome, t.id).where(sql`${t.outcome} is not null`),
  ],
);

export type CallRow = typeof calls.$inferSelect;
