import { sql } from 'drizzle-orm';
import {
  bigserial,
  date,
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

const at = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });

/**
 * A campaign (src/campaigns/): a flow (or a message template) for a list of recipients, at a
 * time, at a pace, inside a calling window, with retries. Its schedule lives here and in its
 * recipients' `next_at`: the leader's loop releases what is due, so a restart or another
 * instance neither loses nor repeats an attempt.
 */
export const campaigns = pgTable(
  'campaigns',
  {
    id: uuid('id').primaryKey(),
    name: text('name'),
    /** what each recipient gets: a call of `flow_id`, or the message template `message` */
    flowId: text('flow_id'),
    message: jsonb('message'),
    from: text('from').notNull(),
    lang: text('lang'),
    /** uploading (a large campaign being stored), scheduled, running, paused, done, cancelled */
    state: text('state').notNull(),
    startAt: at('start_at').notNull(),
    perMinute: integer('per_minute').notNull(),
    maxConcurrent: integer('max_concurrent'),
    /** `{ from, to, days? }`; null: the project's default window */
    window: jsonb('window'),
    /** `{ on: [...], after, maxAttempts }` */
    retry: jsonb('retry').notNull(),
    /**
     * Pacing (a token bucket kept here): starts are released up to `per_minute` per minute
     * counted from this instant, which moves forward by what each release used.
     */
    pacedAt: at('paced_at').notNull(),
    recipients: integer('recipients').notNull().default(0),
    createdAt: at('created_at').notNull().defaultNow(),
    updatedAt: at('updated_at').notNull().defaultNow(),
    finishedAt: at('finished_at'),
  },
  (t) => [
    // the scheduler's every round asks for campaigns by state (uploading, scheduled, running),
    // and a list by state walks its own entries newest first: both read the live few, however
    // many campaigns are done (a campaign changes state a handful of times in its life)
    index('campaigns_state_id_idx').on(t.state, t.id),
  ],
);

/**
 * A campaign's recipient: one per number (a number listed twice is called once), with its
 * line in the upload, its state and the time it is next due. `call_id` (`message_id` in a
 * message campaign) is the attempt in progress; `best_call_id` (`best_message_id`) the attempt
 * whose result is the recipient's (an outcome beats none; among equals, the latest).
 */
export const campaignRecipients = pgTable(
  'campaign_recipients',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    campaignId: uuid('campaign_id').notNull(),
    line: integer('line').notNull(),
    phone: text('phone').notNull(),
    vars: jsonb('vars').notNull(),
    lang: text('lang'),
    /** pending, waiting (outside its window), calling or sending, retry, done, skipped, cancelled */
    state: text('state').notNull(),
    nextAt: at('next_at'),
    attempts: integer('attempts').notNull().default(0),
    callId: uuid('call_id'),
    bestCallId: uuid('best_call_id'),
    /** a message campaign's: the message in flight, and the best attempt's */
    messageId: uuid('message_id'),
    bestMessageId: uuid('best_message_id'),
    outcome: text('outcome'),
    /** why it was skipped (opted out, over the frequency cap, no time fits its window...) */
    reason: text('reason'),
    updatedAt: at('updated_at').notNull().defaultNow(),
  },
  (t) => [
    uniqueIndex('campaign_recipients_phone_key').on(t.campaignId, t.phone),
    index('campaign_recipients_due_idx')
      .on(t.nextAt)
      .where(sql`${t.state} in ('pending', 'waiting', 'retry')`),
    index('campaign_recipients_calling_idx')
      .on(t.campaignId)
      .where(sql`${t.state} in ('calling', 'sending')`),
    index('campaign_recipients_call_id_idx').on(t.callId),
    index('campaign_recipients_message_id_idx').on(t.messageId),
  ],
);

/**
 * A campaign's recipients counted by state and outcome, with their attempts: what its progress
 * shows, without reading its recipients (a million of them took 270 ms a read). Written by
 * triggers on `campaign_recipients` alone (migration 0022): each statement that inserts,
 * updates or deletes recipients appends its change, one row per (campaign, state, outcome) it
 * moved, so no two writers wait for one row. A campaign's counts are the sums of its rows;
 * `compactCounts` (src/campaigns/counts.ts) folds them into one row per group while it runs.
 */
export const campaignCounts = pgTable(
  'campaign_counts',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    campaignId: uuid('campaign_id').notNull(),
    state: text('state').notNull(),
    outcome: text('outcome'),
    /** recipients added to the group (negative: gone from it) */
    n: integer('n').notNull(),
    /** their attempts, likewise */
    attempts: integer('attempts').notNull(),
  },
  (t) => [index('campaign_counts_campaign_id_idx').on(t.campaignId)],
);

/** Each attempt of a recipient: a real call with its own timeline. */
export const campaignAttempts = pgTable(
  'campaign_attempts',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    recipientId: integer('recipient_id').notNull(),
    campaignId: uuid('campaign_id').notNull(),
    attempt: integer('attempt').notNull(),
    callId: uuid('call_id'),
    messageId: uuid('message_id'),
    startedAt: at('started_at').notNull(),
    endedAt: at('ended_at'),
    state: text('state'),
    outcome: text('outcome'),
  },
  (t) => [
    uniqueIndex('campaign_attempts_recipient_key').on(t.recipientId, t.attempt),
    index('campaign_attempts_call_id_idx').on(t.callId),
  ],
);

/** Numbers that asked not to be contacted: honoured by every later send. */
export const optOuts = pgTable('opt_outs', {
  phone: text('phone').primaryKey(),
  /** api, inbound (a reply matching OPT_OUT_WORDS), flow (the `opt-out` action) */
  source: text('source').notNull(),
  /** what it came from: the inbound message, the call and node */
  detail: jsonb('detail'),
  createdAt: at('created_at').notNull().defaultNow(),
});

/**
 * Contacts per number and day (the number's local day), for frequency caps that hold across
 * campaigns and instances: a contact is taken with one conditional upsert.
 */
export const contactCounts = pgTable(
  'contact_counts',
  {
    phone: text('phone').notNull(),
    day: date('day').notNull(),
    count: integer('count').notNull(),
  },
  (t) => [primaryKey({ columns: [t.phone, t.day] })],
);
