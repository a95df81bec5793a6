/**
 * Retention (RETENTION_DAYS): raw callback bodies, message texts and events older than the
 * limit are removed; the day partitions of the timelines, of the events for the user's
 * endpoints and of the raw callbacks whose span ended before it are dropped whole
 * (src/db/partitions.ts), and the rest goes a small batch at a time. Each batch is one short statement (or one short transaction) that
 * skips rows someone else holds (SKIP LOCKED), so the hooks, which only ever write new rows
 * and lock recent ones, never wait behind it.
 *
 * What stays: each message's head row (number, type, status, parts: what was sent to whom,
 * without the words, and when the words went: `content_removed_at`) and the calls with their
 * outcomes; each campaign's row with its counts (its recipients go); and every aggregate
 * (flow stats).
 *
 * The audit log has a limit of its own (AUDIT_RETENTION_DAYS, `runAuditRetention`).
 *
 * @example
 * // a worker loop: again at once while there is more, else after a pause
 * const { more } = await runRetention(db, clock, config.retentionDays, 500);
 */
import { eq, sql } from 'drizzle-orm';
import { compactCounts } from '../campaigns/counts.ts';
import type { Clock } from '../clock.ts';
import { type Db, idList, rowsOf, type Tx } from '../db/client.ts';
import { deleteInboxRefs } from '../db/inbox-refs.ts';
import { dropPartitionsBefore, droppedDaysEnd } from '../db/partitions.ts';
import { settings } from '../db/schema/index.ts';
import { uuidv7Floor } from '../ids.ts';

export interface RetentionCounts {
  /**
   * raw callback bodies deleted one by one (with the pending events, inbound messages and held
   * webhooks they carried): those in the inbox's default partition
   */
  rawCallbacks: number;
  /** dedup keys of raw callbacks (`inbox_keys`) whose body's day has gone */
  callbackKeys: number;
  /**
   * day partitions of the timelines, of the events for the user's endpoints (with their
   * deliveries and attempts) and of the raw callbacks (with what they carried) dropped whole
   * (src/db/partitions.ts)
   */
  eventPartitions: number;
  /** message events deleted one by one: those in the default partition */
  messageEvents: number;
  /** call events deleted one by one: those in the default partition */
  callEvents: number;
  /**
   * messages whose texts (payload: text, messageData, menu, a cascade's variables, fallbacks'
   * texts) were removed
   */
  messageTexts: number;
  /**
   * events for the user's endpoints (with their deliveries and attempts), none still pending,
   * deleted one by one: those in the default partition
   */
  outgoingEvents: number;
  /**
   * recipients (their vars, their attempts) of campaigns that finished before the limit, and
   * contact counts of days before it
   */
  campaignRecipients: number;
}

export interface RetentionResult {
  removed: RetentionCounts;
  /** some step filled its batch: run again soon */
  more: boolean;
}

export interface RetentionStep {
  kind: keyof RetentionCounts;
  /**
   * one batch of at most `batchSize` rows older than `cutoff`, at `now`: how many it changed,
   * and whether more may be left
   */
  run(
    db: Db,
    cutoff: Date,
    batchSize: number,
    now: Date,
  ): Promise<{ changed: number; more: boolean }>;
}

const count = (result: unknown) => rowsOf(result).length;

/**
 * Raw bodies in the inbox's default partition (those of no day made: a server stopped past
 * PARTITIONS_AHEAD_DAYS, times out of range), oldest first, each with the rows that point at
 * it (src/db/inbox-refs.ts), in one transaction; the days' partitions go whole
 * (`eventPartitions`). The default partition holds few rows, and is scanned.
 */
const rawCallbacks: RetentionStep = {
  kind: 'rawCallbacks',
  async run(db, cutoff, batchSize) {
    const changed = await db.transaction(async (tx) => {
      const gone = rowsOf<{ id: number | string }>(
        await tx.execute(sql`
          delete from inbox_default where (id, received_at) in (
            select id, received_at from inbox_default
            where received_at < ${cutoff.toISOString()}::timestamptz
            order by received_at limit ${batchSize} for update skip locked)
          returning id`),
      ).map((r) => String(r.id));
      if (gone.length > 0) {
        await deleteInboxRefs(tx, (id) => sql`${id} in ${idList(gone, 'bigint')}`);
      }
      return gone.length;
    });
    return { changed, more: changed === batchSize };
  },
};

/**
 * The dedup keys of raw callbacks (`inbox_keys`, one table across the inbox's days: a retry is
 * a duplicate whichever day its first copy is in), once their body's whole UTC day is before
 * the cutoff: a day partition goes only then, so a key never goes before its body and dedup
 * holds for as long as the body is kept. A narrow row each, a batch at a time; their space is
 * reused by the keys that come after.
 */
const callbackKeys: RetentionStep = {
  kind: 'callbackKeys',
  async run(db, cutoff, batchSize) {
    const dayStart = droppedDaysEnd(cutoff).toISOString();
    const changed = count(
      await db.execute(sql`
        delete from inbox_keys where dedup_key in (
          select dedup_key from inbox_keys where received_at < ${dayStart}::timestamptz
          order by received_at limit ${batchSize} for update skip locked)
        returning 1`),
    );
    return { changed, more: changed === batchSize };
  },
};

/**
 * The day partitions that end before the cutoff, dropped whole: every event in one of the
 * timelines belongs to a message or call made before the limit; every event for the user's
 * endpoints was recorded before it, and goes with its deliveries once none of its day's is
 * pending. A day made or still written to is never dropped: its span ends after the cutoff.
 */
const eventPartitions: RetentionStep = {
  kind: 'eventPartitions',
  async run(db, cutoff) {
    const dropped = await dropPartitionsBefore(db, cutoff);
    // one day per round: each drop is quick, and the loop comes back at once for the next
    return { changed: dropped.length, more: dropped.length > 0 };
  },
};

/**
 * The default partition of a timeline (events whose parent's id falls in no day made: a
 * server stopped past PARTITIONS_AHEAD_DAYS, ids from elsewhere), row by row. Its bigserial
 * ids grow with time, so the oldest `batchSize` rows by id are the candidates, and those older
 * than the cutoff go. Nothing old left among the oldest: done (no scan to find nothing).
 */
function oldestFirst(
  kind: keyof RetentionCounts,
  table: 'message_events_default' | 'call_events_default',
  timeColumn: 'received_at' | 'at',
): RetentionStep {
  return {
    kind,
    async run(db, cutoff, batchSize) {
      const changed = count(
        await db.execute(sql`
          delete from ${sql.identifier(table)} where id in (
            select id from (
              select id, ${sql.identifier(timeColumn)} as t from ${sql.identifier(table)}
              order by id limit ${batchSize} for update skip locked) oldest
            where t < ${cutoff.toISOString()}::timestamptz)
          returning id`),
      );
      // the next oldest rows may be old too; a round that finds none ends it
      return { changed, more: changed > 0 };
    },
  };
}

const MESSAGES_STATE = 'retention_messages';
const NO_CURSOR = '00000000-0000-0000-0000-000000000000';
// messages passed over while unsent or busy, retried on later rounds; beyond this many the
// cursor waits for them instead (an extraordinary backlog of old unsent messages)
const MAX_SKIPPED = 10_000;

interface TextsState {
  /** every message up to this id has been seen */
  after: string;
  /** seen, but still unsent or locked by a callback then */
  skipped: string[];
}

function readState(value: string | undefined): TextsState {
  try {
    const parsed = JSON.parse(value ?? '') as Partial<TextsState>;
    if (typeof parsed.after === 'string' && Array.isArray(parsed.skipped)) {
      return { after: parsed.after, skipped: parsed.skipped.filter((v) => typeof v === 'string') };
    }
  } catch {}
  return { after: NO_CURSOR, skipped: [] };
}

/**
 * Of `ids`, those that still exist, split into the ones taken now (sent, and not locked by
 * anyone: rows a callback holds are skipped, never waited for) and the ones to retry.
 */
async function takeMessages(tx: Tx, ids: readonly string[]) {
  const rows = rowsOf<{ id: string; waiting: boolean }>(
    await tx.execute(sql`
      select m.id, exists(select 1 from outbox o where o.message_id = m.id) as waiting
      from messages m where m.id in ${idList(ids, 'uuid')}`),
  );
  const ready = rows.filter((r) => !r.waiting).map((r) => r.id);
  const taken = new Set(
    ready.length === 0
      ? []
      : rowsOf<{ id: string }>(
          await tx.execute(
            sql`select id from messages where id in ${idList(ready, 'uuid')} for no key update skip locked`,
          ),
        ).map((r) => r.id),
  );
  return { taken, retry: rows.map((r) => r.id).filter((id) => !taken.has(id)) };
}

async function stripTexts(tx: Tx, ids: readonly string[], now: Date): Promise<number> {
  if (ids.length === 0) return 0;
  return count(
    await tx.execute(sql`
      update messages set content_removed_at = ${now.toISOString()}::timestamptz, payload =
        (payload - 'text' - 'messageData' - 'menu' - 'variables')
        || case when jsonb_typeof(payload->'fallbacks') = 'array'
             then jsonb_build_object('fallbacks', (
               select coalesce(jsonb_agg(f - 'text' - 'messageData'), '[]'::jsonb)
               from jsonb_array_elements(payload->'fallbacks') f))
             else '{}'::jsonb end
        || case when jsonb_typeof(payload->'fallback') = 'object'
             then jsonb_build_object('fallback', (payload->'fallback') - 'text' - 'messageData')
             else '{}'::jsonb end
        || '{"redacted":"retention"}'::jsonb
      where id in ${idList(ids, 'uuid')} and not (payload ? 'redacted')
      returning id`),
  );
}

/**
 * Message texts: the payload keeps its shape (type, sender, recipient, the fallbacks'
 * channels, which the timeline counts) and loses the words. Messages are walked by id
 * (UUIDv7, so by creation time) from a cursor kept in `settings`, so a round does not re-read
 * what earlier rounds did; a message still waiting to be sent keeps its text until it is
 * sent, and is retried from a short list.
 */
const messageTexts: RetentionStep = {
  kind: 'messageTexts',
  async run(db, cutoff, batchSize, now) {
    return db.transaction(async (tx) => {
      const [saved] = await tx
        .select({ value: settings.value })
        .from(settings)
        .where(eq(settings.key, MESSAGES_STATE));
      const state = readState(saved?.value);
      let changed = 0;

      const earlier = state.skipped.length > 0 ? await takeMessages(tx, state.skipped) : undefined;
      if (earlier) changed += await stripTexts(tx, [...earlier.taken], now);
      const skipped = earlier?.retry ?? [];

      const batch = rowsOf<{ id: string }>(
        await tx.execute(sql`
          select id from messages
          where id > ${state.after}::uuid and id < ${uuidv7Floor(cutoff)}::uuid
            and created_at < ${cutoff.toISOString()}::timestamptz
          order by id limit ${batchSize}`),
      ).map((r) => r.id);
      let after = state.after;
      if (batch.length > 0) {
        const taken = await takeMessages(tx, batch);
        changed += await stripTexts(tx, [...taken.taken], now);
        const retry = new Set(taken.retry);
        for (const id of batch) {
          if (retry.has(id)) {
            if (skipped.length >= MAX_SKIPPED) break;
            skipped.push(id);
          }
          after = id;
        }
      }
      if (after !== state.after || skipped.length !== state.skipped.length || earlier) {
        const value = JSON.stringify({ after, skipped } satisfies TextsState);
        await tx
          .insert(settings)
          .values({ key: MESSAGES_STATE, value })
          .onConflictDoUpdate({ target: settings.key, set: { value } });
      }
      return { changed, more: batch.length === batchSize && after !== state.after };
    });
  },
};

/**
 * Events for the user's endpoints (src/events/) in the default partition (those of no day
 * made: a day already past the limit when the server came back, PARTITIONS=external, ids with
 * no time in them), oldest first through their time index, with their deliveries in the same
 * statement (no foreign key to cascade through: src/db/schema/endpoints.ts) and so their
 * attempts (that one cascades); the days' partitions go whole (`eventPartitions`), so this
 * never thins a day that is about to. An event still pending for some endpoint (being
 * retried) stays until that delivery is done: retention never cuts a retry. One a replay
 * holds (locked) is skipped, so no delivery it queues outlives its event.
 */
const outgoingEvents: RetentionStep = {
  kind: 'outgoingEvents',
  async run(db, cutoff, batchSize) {
    const changed = count(
      await db.execute(sql`
        with gone as (
          delete from outgoing_events_default where id in (
            select o.id from outgoing_events_default o
            where o.created_at < ${cutoff.toISOString()}::timestamptz
              and not exists (select 1 from event_deliveries d
                where d.event_id = o.id and d.state = 'pending')
            order by o.created_at limit ${batchSize} for update skip locked)
          returning id),
        d as (delete from event_deliveries where event_id in (select id from gone))
        select id from gone`),
    );
    return { changed, more: changed === batchSize };
  },
};

/**
 * Campaigns that finished (done or cancelled) before the limit: their recipients, whose vars
 * hold people's details, with their attempts; the campaign's own row stays, with its counts
 * in `recipients`. And contact counts (frequency caps) of days before the limit.
 */
const campaignRecipients: RetentionStep = {
  kind: 'campaignRecipients',
  async run(db, cutoff, batchSize) {
    const at = cutoff.toISOString();
    const [row] = rowsOf<{ n: number | string; campaigns: string[] | string }>(
      await db.execute(sql`
        with r as (
          delete from campaign_recipients where id in (
            select r.id from campaign_recipients r join campaigns c on c.id = r.campaign_id
            where c.finished_at < ${at}::timestamptz
            limit ${batchSize} for update of r skip locked)
          returning id, campaign_id),
        a as (delete from campaign_attempts where recipient_id in (select id from r)),
        k as (delete from contact_counts where day < (${at}::timestamptz)::date - 1)
        select count(*) as n, coalesce(json_agg(distinct campaign_id), '[]') as campaigns from r`),
    );
    const changed = Number(row?.n ?? 0);
    // the campaigns are over, so the scheduler folds their counts no more: each batch appended
    // its removals to them (campaigns/counts.ts)
    const campaigns = row?.campaigns ?? [];
    await compactCounts(db, typeof campaigns === 'string' ? JSON.parse(campaigns) : campaigns);
    return { changed, more: changed === batchSize };
  },
};

export const RETENTION_STEPS: readonly RetentionStep[] = [
  rawCallbacks,
  eventPartitions,
  callbackKeys,
  oldestFirst('messageEvents', 'message_events_default', 'received_at'),
  oldestFirst('callEvents', 'call_events_default', 'at'),
  messageTexts,
  outgoingEvents,
  campaignRecipients,
];

/** What RETENTION_DAYS keeps at `now`: what is older than this goes. */
export function retentionCutoff(now: Date, days: number): Date {
  return new Date(now.getTime() - days * 86_400_000);
}

/**
 * One round of retention: a batch of each kind older than `days` days (by `clock`). Call it
 * again while `more` is true, and every few minutes otherwise. Does nothing without `days`.
 */
export async function runRetention(
  db: Db,
  clock: Clock,
  days: number | undefined,
  batchSize = 500,
  steps: readonly RetentionStep[] = RETENTION_STEPS,
): Promise<RetentionResult> {
  const removed: RetentionCounts = {
    rawCallbacks: 0,
    callbackKeys: 0,
    eventPartitions: 0,
    messageEvents: 0,
    callEvents: 0,
    messageTexts: 0,
    outgoingEvents: 0,
    campaignRecipients: 0,
  };
  if (days === undefined || days <= 0) return { removed, more: false };
  const now = clock.now();
  const cutoff = retentionCutoff(now, days);
  let more = false;
  for (const step of steps) {
    const result = await step.run(db, cutoff, batchSize, now);
    removed[step.kind] += result.changed;
    more ||= result.more;
  }
  return { removed, more };
}

/** What one round of the audit log's retention removed (AUDIT_RETENTION_DAYS). */
export interface AuditRetentionResult {
  /** audit rows deleted */
  removed: number;
  /** the batch was full: run again soon */
  more: boolean;
}

/**
 * One round of the audit log's retention: at most `batchSize` rows older than `days` days
 * (by `clock`), oldest first through `audit_log_at_idx`, in one short statement that skips
 * rows someone holds. Narrow rows: autovacuum makes their space reusable for the rows that
 * come after, so the table stays the size of its limit. Does nothing without `days`.
 */
export async function runAuditRetention(
  db: Db,
  clock: Clock,
  days: number | undefined,
  batchSize = 500,
): Promise<AuditRetentionResult> {
  if (days === undefined || days <= 0) return { removed: 0, more: false };
  const cutoff = retentionCutoff(clock.now(), days).toISOString();
  const removed = count(
    await db.execute(sql`
      delete from audit_log where id in (
        select id from audit_log where at < ${cutoff}::timestamptz
        order by at, id limit ${batchSize} for update skip locked)
      returning id`),
  );
  return { removed, more: removed === batchSize };
}

/** What one round of prompt removal did. */
export interface PromptRemoval {
  /** personal prompt uses removed: their call ended a grace period ago, or they expired */
  uses: number;
  /** calls' spoken prompts removed, by the same rule (src/speech/spoken.ts) */
  compositions: number;
  /** audio rows no use refers to any more, unused for the grace period */
  audio: number;
  /** of that audio, the files in PROMPTS_DIR (to remove after this) */
  files: { contentHash: string; ext: string }[];
  more: boolean;
}

/**
 * Rendered prompts with a person's details (src/speech/prompts.ts), whatever RETENTION_DAYS
 * says: a call's prompts go `graceMs` after the call ended (the provider may fetch them until
 * then), a prompt with `expires_at` at that time, one whose call is gone (erased, or never
 * started) `graceMs` after it was rendered. Shared prompts (no call) stay. Then the audio no
 * use refers to any more and unused for `graceMs` goes: a render reusing it moves
 * `last_used_at` under the row's lock, so this delete re-reads it and keeps the row.
 *
 * @example
 * const { files, more } = await removeEndedPrompts(db, clock.now(), config.speech.graceMs, 500);
 * await store.removeFiles(files);
 */
export async function removeEndedPrompts(
  db: Db,
  now: Date,
  graceMs: number,
  batchSize = 500,
): Promise<PromptRemoval> {
  const at = now.toISOString();
  const cutoff = new Date(now.getTime() - graceMs).toISOString();
  const uses = count(
    await db.execute(sql`
      delete from prompt_uses where id in (
        select u.id from prompt_uses u
        where (u.call_id is not null or u.expires_at is not null)
          and (
          (u.expires_at is not null and u.expires_at < ${at}::timestamptz)
          or (u.call_id is not null and u.expires_at is null and (
            exists (select 1 from calls c where c.id = u.call_id
              and c.ended_at < ${cutoff}::timestamptz)
            or (u.created_at < ${cutoff}::timestamptz
              and not exists (select 1 from calls c where c.id = u.call_id)))))
        order by u.id limit ${batchSize} for update skip locked)
      returning id`),
  );
  // a call's spoken prompts (src/speech/spoken.ts) go with its uses, by the same rule
  const compositions = count(
    await db.execute(sql`
      delete from prompt_compositions where id in (
        select p.id from prompt_compositions p
        where p.call_id is not null and (
          exists (select 1 from calls c where c.id = p.call_id
            and c.ended_at < ${cutoff}::timestamptz)
          or (p.created_at < ${cutoff}::timestamptz
            and not exists (select 1 from calls c where c.id = p.call_id)))
        order by p.id limit ${batchSize} for update skip locked)
      returning id`),
  );
  const audio = rowsOf<{ content_hash: string; ext: string; in_file: boolean }>(
    await db.execute(sql`
      delete from prompt_audio where content_hash in (
        select a.content_hash from prompt_audio a
        where a.last_used_at < ${cutoff}::timestamptz
          and not exists (select 1 from prompt_uses u where u.content_hash = a.content_hash)
        order by a.last_used_at limit ${batchSize} for update skip locked)
      returning content_hash, ext, body is null as in_file`),
  );
  return {
    uses,
    compositions,
    audio: audio.length,
    files: audio.filter((a) => a.in_file).map((a) => ({ contentHash: a.content_hash, ext: a.ext })),
    more: uses === batchSize || compositions === batchSize || audio.length === batchSize,
  };
}
