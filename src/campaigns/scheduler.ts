/**
 * The campaign scheduler: one round of the leader's loop (src/workers.ts). Everything it
 * decides is read from and written to Postgres in the round's transactions, so a restart or a
 * second instance neither loses nor repeats an attempt:
 *
 * 1. **Start** campaigns whose `start_at` has come (`scheduled` -> `running`).
 * 2. **Settle** attempts whose call ended (or, in a message campaign, whose message was
 *    delivered or failed): the recipient's result becomes the better of its best attempt and
 *    this one (an outcome beats none; among equals, the latest), and the retry policy says
 *    whether it is tried again (`retry`, due `after` from the end) or done.
 * 3. **Release** due recipients of each running campaign, as many as its pace (a token
 *    bucket: `per_minute`, kept as `paced_at`) and its `max_concurrent` allow. Each is
 *    locked (SKIP LOCKED), then checked: an opted-out number is skipped; outside its calling
 *    window (in every time zone of its number) it waits until the window opens; over the
 *    frequency cap it waits for its next day. The rest start as calls (or are sent as
 *    messages) in the same transaction that marks them `calling` (`sending`) and writes their
 *    attempt.
 * 4. **Finish** running campaigns with nothing left open.
 *
 * A campaign `uploading` (a large one being stored: src/campaigns/uploads.ts) is none of
 * these: each round deletes those whose process died mid-upload, and starts none.
 */
import { and, eq, inArray, type SQL, sql } from 'drizzle-orm';
import { DateTime } from 'luxon';
import type { StartDeps } from '../calls/deps.ts';
import { STARTED, statScope } from '../calls/start.ts';
import { type PreparedCall, prepareCall, startableFlow } from '../calls/start-prepare.ts';
import { pinVersion, storeCalls } from '../calls/start-store.ts';
import { bumpStats } from '../calls/stats.ts';
import type { Tx } from '../db/client.ts';
import { rowsOf } from '../db/client.ts';
import { errorFields } from '../db/errors.ts';
import { campaignAttempts, campaignRecipients, campaigns } from '../db/schema/index.ts';
import { recordEvents } from '../events/record.ts';
import { subscriptionsOf } from '../events/subscriptions.ts';
import type { EventData } from '../events/types.ts';
import type { CompiledFlow } from '../flows/index.ts';
import { type CampaignRetryPolicy, parseDuration } from '../flows/schema.ts';
import { renderDeep } from '../flows/template.ts';
import { isUuid } from '../ids.ts';
import type { Logger } from '../logger.ts';
import { isTerminal, MESSAGE_STATUSES, type MessageStatus } from '../messages/status.ts';
import { prepareMessages, storeMessages } from '../messages/submit.ts';
import { optedOutAmong } from '../opt-outs/store.ts';
import { compactCounts } from './counts.ts';
import { localDateOf, takeContacts } from './limits.ts';
import { progressOf } from './read.ts';
import { IN_FLIGHT_STATES, OPEN_RECIPIENT_STATES } from './schemas.ts';
import { sweepStaleUploads } from './uploads.ts';
import { type CallingWindow, type HolidayCalendar, nextAllowed } from './windows.ts';
import { countryOf, zonesOf } from './zones.ts';

export interface SchedulerDeps extends StartDeps {
  logger: Logger;
  /** the project's calling window (CALLING_WINDOW), for campaigns without their own */
  window: CallingWindow;
  holidays: HolidayCalendar;
  /** at most this many calls per number per local day, across campaigns (CONTACT_CAP_PER_DAY) */
  capPerDay: number | undefined;
  /** the life of a message campaign's message (MESSAGE_LIFETIME_SECONDS) */
  lifetimeSeconds?: number;
}

/** Recipients released per campaign per round at most (the next round takes the rest). */
const RELEASE_LIMIT = 500;
/** Attempts settled per round at most. */
const SETTLE_LIMIT = 1000;
/** The longest burst a campaign's pace allows after a pause: a minute's worth. */
const BURST_MS = 60_000;

/** Values as a list of SQL parameters, for `in (...)`. */
function inList(values: readonly string[]): SQL {
  return sql.join(
    values.map((v) => sql`${v}`),
    sql`, `,
  );
}

/** One round; true when it did something (the loop then runs again at once). */
export async function runCampaigns(deps: SchedulerDeps): Promise<boolean> {
  const swept = await sweepStaleUploads(deps);
  const started = await startDue(deps);
  const settled = await settleEnded(deps);
  let released = 0;
  const running = await runningCampaigns(deps);
  for (const campaign of running) {
    released += await release(deps, campaign);
  }
  await compactCounts(
    deps.db,
    running.map((c) => c.id),
  );
  const finished = await finishDone(deps);
  return swept + started + settled + released + finished > 0;
}

async function startDue(deps: SchedulerDeps): Promise<number> {
  const now = deps.clock.now();
  return deps.db.transaction(async (tx) => {
    const rows = await tx
      .update(campaigns)
      .set({ state: 'running', updatedAt: now })
      .where(
        and(
          eq(campaigns.state, 'scheduled'),
          sql`${campaigns.startAt} <= ${now.toISOString()}::timestamptz`,
        ),
      )
      .returning({
        id: campaigns.id,
        name: campaigns.name,
        flowId: campaigns.flowId,
        recipients: campaigns.recipients,
      });
    for (const r of rows) deps.logger.info({ campaign: r.id }, 'campaign started');
    if (rows.length > 0 && subscriptionsOf(deps.db).wants('campaign.started')) {
      await recordEvents(
        tx,
        rows.map((r) =>
          campaignEvent('campaign.started', r.id, now, {
            campaignId: r.id,
            name: r.name,
            flow: r.flowId,
            recipients: r.recipients,
            at: now.toISOString(),
          }),
        ),
      );
    }
    return rows.length;
  });
}

/** An event about a campaign (its subject: `campaign:<id>`, so one campaign's are ordered). */
function campaignEvent<T extends 'campaign.started' | 'campaign.recipient.done' | 'campaign.done'>(
  type: T,
  id: string,
  at: Date,
  data: EventData<T>,
) {
  return { type, subject: `campaign:${id}`, data, at };
}

/** The recipients' results as `campaign.recipient.done` events, when an endpoint wants them. */
async function recipientsDone(
  tx: Tx,
  deps: SchedulerDeps,
  done: ReadonlyArray<EventData<'campaign.recipient.done'>>,
  now: Date,
): Promise<void> {
  if (done.length === 0 || !subscriptionsOf(deps.db).wants('campaign.recipient.done')) return;
  await recordEvents(
    tx,
    done.map((d) => campaignEvent('campaign.recipient.done', d.campaignId, now, d)),
  );
}

interface Ended {
  kind: 'call' | 'message';
  id: number;
  campaign_id: string;
  line: number;
  phone: string;
  attempt_id: string;
  attempts: number;
  outcome: string | null;
  best_id: string | null;
  retry: CampaignRetryPolicy;
  campaign_state: string;
  /** the attempt's end as `settle` reads it: its state and outcome */
  state: string;
  attempt_outcome: string | null;
  ended_at: Date | string | null;
}

/** The recipient's answer to its attempt's end: its new state, result and next time. */
export function settle(r: {
  attempts: number;
  outcome: string | null;
  bestId: string | null;
  retry: CampaignRetryPolicy;
  cancelled: boolean;
  attempt: { id: string; state: string; outcome: string | null; endedAt: Date };
}): { state: 'retry' | 'done'; outcome: string | null; bestId: string; nextAt: Date | null } {
  // an attempt with an outcome beats one without; among equals, the latest (this one)
  const better = r.attempt.outcome !== null || r.bestId === null || r.outcome === null;
  const bestId = better ? r.attempt.id : r.bestId!;
  const outcome = better ? r.attempt.outcome : r.outcome;
  const result = r.attempt.state === 'failed' ? 'failed' : (r.attempt.outcome ?? 'no-outcome');
  const again = !r.cancelled && r.attempts < r.retry.maxAttempts && r.retry.on.includes(result);
  return again
    ? {
        state: 'retry',
        outcome,
        bestId,
        nextAt: new Date(r.attempt.endedAt.getTime() + parseDuration(r.retry.after)),
      }
    : { state: 'done', outcome, bestId, nextAt: null };
}

/**
 * A message attempt's end, in `settle`'s terms: delivered (or read) is its outcome; rejected,
 * failed or expired is `failed`. Null while the message may still change (queued, accepted,
 * sent). The message statuses that settle an attempt are the ones this answers for.
 */
export function messageAttemptEnd(
  status: MessageStatus,
): { state: string; outcome: string | null } | null {
  if (status === 'delivered' || status === 'read') return { state: status, outcome: status };
  if (isTerminal(status)) return { state: 'failed', outcome: null };
  return null;
}

/** The message statuses that settle an attempt (`messageAttemptEnd` not null), as SQL. */
const SETTLING_STATUSES = inList(MESSAGE_STATUSES.filter((s) => messageAttemptEnd(s) !== null));

/** The attempts in flight that ended: calls ended or failed, messages delivered or failed. */
async function endedAttempts(tx: Tx): Promise<Ended[]> {
  const calls = rowsOf<Omit<Ended, 'kind'>>(
    await tx.execute(sql`
      select r.id, r.campaign_id, r.line, r.phone, r.call_id as attempt_id, r.attempts, r.outcome,
        r.best_call_id as best_id, k.retry, k.state as campaign_state,
        c.state, c.outcome as attempt_outcome, c.ended_at
      from campaign_recipients r
      join calls c on c.id = r.call_id
      join campaigns k on k.id = r.campaign_id
      where r.state = 'calling' and c.state in ('ended', 'failed')
      order by r.id
      limit ${SETTLE_LIMIT}
      for update of r skip locked`),
  );
  const sent = rowsOf<Omit<Ended, 'kind'> & { status: MessageStatus }>(
    await tx.execute(sql`
      select r.id, r.campaign_id, r.line, r.phone, r.message_id as attempt_id, r.attempts,
        r.outcome, r.best_message_id as best_id, k.retry, k.state as campaign_state,
        m.status, m.updated_at as ended_at
      from campaign_recipients r
      join messages m on m.id = r.message_id
      join campaigns k on k.id = r.campaign_id
      where r.state = 'sending' and m.status in (${SETTLING_STATUSES})
      order by r.id
      limit ${SETTLE_LIMIT}
      for update of r skip locked`),
  );
  return [
    ...calls.map((c) => ({ ...c, kind: 'call' as const })),
    ...sent.map((m) => {
      const end = messageAttemptEnd(m.status)!;
      return { ...m, kind: 'message' as const, state: end.state, attempt_outcome: end.outcome };
    }),
  ];
}

async function settleEnded(deps: SchedulerDeps): Promise<number> {
  return deps.db.transaction(async (tx) => {
    const ended = await endedAttempts(tx);
    if (ended.length === 0) return 0;
    const now = deps.clock.now();
    const updates = ended.map((e) => {
      const endedAt = e.ended_at ? new Date(e.ended_at) : now;
      const s = settle({
        attempts: e.attempts,
        outcome: e.outcome,
        bestId: e.best_id,
        retry: e.retry,
        cancelled: e.campaign_state === 'cancelled',
        attempt: { id: e.attempt_id, state: e.state, outcome: e.attempt_outcome, endedAt },
      });
      return {
        id: e.id,
        attempt_id: e.attempt_id,
        state: s.state,
        outcome: s.outcome,
        best_id: s.bestId,
        next_at: s.nextAt?.toISOString() ?? null,
        attempt_state: e.state,
        attempt_outcome: e.attempt_outcome,
        ended_at: endedAt.toISOString(),
      };
    });
    const json = JSON.stringify(updates);
    // the best attempt's id goes to the column of its kind: a call's, or a message's
    await tx.execute(sql`
      update campaign_recipients r
      set state = v.state, outcome = v.outcome,
        best_call_id = case when r.call_id is not null then v.best_id else r.best_call_id end,
        best_message_id = case when r.message_id is not null then v.best_id else r.best_message_id end,
        next_at = v.next_at, call_id = null, message_id = null,
        updated_at = ${now.toISOString()}::timestamptz
      from jsonb_to_recordset(${json}::jsonb)
        as v(id bigint, state text, outcome text, best_id uuid, next_at timestamptz)
      where r.id = v.id`);
    await tx.execute(sql`
      update campaign_attempts a
      set state = v.attempt_state, outcome = v.attempt_outcome, ended_at = v.ended_at
      from jsonb_to_recordset(${json}::jsonb)
        as v(id bigint, attempt_id uuid, attempt_state text, attempt_outcome text, ended_at timestamptz)
      where a.recipient_id = v.id and (a.call_id = v.attempt_id or a.message_id = v.attempt_id)`);
    await recipientsDone(
      tx,
      deps,
      ended.flatMap((e, i) => {
        const u = updates[i]!;
        if (u.state !== 'done') return [];
        const call = e.kind === 'call';
        return [
          {
            campaignId: e.campaign_id,
            line: e.line,
            to: e.phone,
            state: 'done' as const,
            attempts: e.attempts,
            outcome: u.outcome,
            callId: call ? u.best_id : null,
            messageId: call ? null : u.best_id,
            reason: null,
            at: now.toISOString(),
          },
        ];
      }),
      now,
    );
    return ended.length;
  });
}

interface Running {
  id: string;
  flowId: string | null;
  message: Record<string, unknown> | null;
  from: string;
  lang: string | null;
  perMinute: number;
  maxConcurrent: number | null;
  window: CallingWindow | null;
  pacedAt: Date;
}

async function runningCampaigns(deps: SchedulerDeps): Promise<Running[]> {
  const rows = await deps.db
    .select({
      id: campaigns.id,
      flowId: campaigns.flowId,
      message: campaigns.message,
      from: campaigns.from,
      lang: campaigns.lang,
      perMinute: campaigns.perMinute,
      maxConcurrent: campaigns.maxConcurrent,
      window: campaigns.window,
      pacedAt: campaigns.pacedAt,
    })
    .from(campaigns)
    .where(eq(campaigns.state, 'running'));
  return rows as Running[];
}

/**
 * How many calls a campaign's pace allows now, and the `paced_at` a release of `n` leaves:
 * one call per `60 000 / per_minute` ms since `paced_at`, at most a minute's worth at once.
 * A campaign starts (and resumes) with one call's worth (`startingPace`), so its first call
 * goes at once.
 */
export function paceAllows(
  pacedAt: Date,
  perMinute: number,
  now: Date,
): { tokens: number; after: (used: number) => Date } {
  const interval = 60_000 / perMinute;
  const from = Math.max(pacedAt.getTime(), now.getTime() - BURST_MS);
  const tokens = Math.max(0, Math.floor((now.getTime() - from) / interval));
  return { tokens, after: (used) => new Date(from + used * interval) };
}

/** A message campaign's message for one recipient: its template filled, with `to` and `from`. */
export function campaignMessage(
  template: Record<string, unknown>,
  to: string,
  from: string,
  vars: Readonly<Record<string, unknown>>,
): Record<string, unknown> {
  return { ...renderDeep(template, vars), to, from };
}

/** The `paced_at` of a campaign starting at `at`: one call's worth already there. */
export function startingPace(at: Date, perMinute: number): Date {
  return new Date(at.getTime() - 60_000 / perMinute);
}

interface Due {
  id: number;
  line: number;
  phone: string;
  vars: Record<string, unknown>;
  lang: string | null;
  attempts: number;
  outcome: string | null;
  best_call_id: string | null;
  best_message_id: string | null;
}

/** What a running campaign's release hands each recipient: a call of its flow, or its message. */
type Sender =
  | { kind: 'flow'; flow: { compiled: CompiledFlow; source: string } }
  | { kind: 'message'; template: Record<string, unknown> };

async function senderOf(deps: SchedulerDeps, campaign: Running): Promise<Sender | undefined> {
  if (campaign.message !== null) return { kind: 'message', template: campaign.message };
  const flow = await startableFlow(deps, campaign.flowId ?? '', 'flow').catch((err: unknown) => {
    deps.logger.warn(
      { campaign: campaign.id, err: errorFields(err) },
      'campaign flow cannot start calls; its recipients wait',
    );
    return undefined;
  });
  return flow && { kind: 'flow', flow };
}

async function release(deps: SchedulerDeps, campaign: Running): Promise<number> {
  // read without a lock: most rounds end here, with nothing locked
  if (paceAllows(campaign.pacedAt, campaign.perMinute, deps.clock.now()).tokens === 0) return 0;
  const sender = await senderOf(deps, campaign);
  if (!sender) return 0;
  const window = campaign.window ?? deps.window;
  let released = 0;
  await deps.db.transaction(async (tx) => {
    // Two schedulers at once (a leader that hung and resumed, beside the one that took over)
    // take turns per campaign: the pace, the clock and the in-flight count are read under the
    // campaign's row lock, after the other's release has committed, so neither spends the
    // pace or the concurrency the other already spent. Campaign first, then its recipients.
    const [locked] = rowsOf<{ paced_at: string | Date }>(
      await tx.execute(sql`select paced_at from campaigns
        where id = ${campaign.id} and state = 'running' for update`),
    );
    if (!locked) return;
    const now = deps.clock.now();
    const pace = paceAllows(new Date(locked.paced_at), campaign.perMinute, now);
    let budget = Math.min(pace.tokens, RELEASE_LIMIT);
    if (campaign.maxConcurrent !== null) {
      const [row] = rowsOf<{ n: number | string }>(
        await tx.execute(sql`select count(*) as n from campaign_recipients
          where campaign_id = ${campaign.id} and state in (${IN_FLIGHT})`),
      );
      budget = Math.min(budget, campaign.maxConcurrent - Number(row?.n ?? 0));
    }
    if (budget <= 0) return;
    const due = rowsOf<Due>(
      await tx.execute(sql`
        select id, line, phone, vars, lang, attempts, outcome, best_call_id, best_message_id
        from campaign_recipients
        where campaign_id = ${campaign.id} and state in ('pending', 'waiting', 'retry')
          and next_at <= ${now.toISOString()}::timestamptz
        order by next_at, id
        limit ${budget}
        for update skip locked`),
    );
    if (due.length === 0) return;
    const optedOut = await optedOutAmong(
      tx,
      due.map((d) => d.phone),
    );
    const skipped: Array<{ id: number; reason: string }> = [];
    const waiting: Array<{ id: number; next_at: string }> = [];
    const callable: Array<{ due: Due; zones: string[]; country: string | undefined }> = [];
    for (const d of due) {
      if (optedOut.has(d.phone)) {
        skipped.push({ id: d.id, reason: 'opted out: the number asked not to be contacted' });
        continue;
      }
      const zones = await zonesOf(d.phone);
      const country = countryOf(d.phone);
      const allowed = nextAllowed(now, zones, window, deps.holidays, country);
      if (allowed === null) {
        skipped.push({
          id: d.id,
          reason: `no time fits the calling window ${window.from}-${window.to} in all of its time zones (${zones.join(', ') || 'UTC'}) within two weeks`,
        });
      } else if (allowed.getTime() > now.getTime()) {
        waiting.push({ id: d.id, next_at: allowed.toISOString() });
      } else callable.push({ due: d, zones, country });
    }
    // the frequency cap, taken atomically per number and local day (any instance, any campaign)
    const capped = await overCap(tx, deps, callable, now);
    const going: Due[] = [];
    for (const c of callable) {
      if (!capped.has(c.due.id)) {
        going.push(c.due);
        continue;
      }
      const next = nextAllowed(
        nextLocalDay(now, c.zones),
        c.zones,
        window,
        deps.holidays,
        c.country,
      );
      if (next === null) {
        skipped.push({
          id: c.due.id,
          reason: 'over the frequency cap, and no later time fits its window',
        });
      } else waiting.push({ id: c.due.id, next_at: next.toISOString() });
    }
    released =
      sender.kind === 'flow'
        ? await startCalls(tx, deps, sender.flow, campaign, going, skipped, now)
        : await sendMessages(tx, deps, sender.template, campaign, going, skipped, now);
    await markRecipients(tx, skipped, waiting, now);
    const byId = new Map(due.map((d) => [d.id, d]));
    await recipientsDone(
      tx,
      deps,
      skipped.map((k) => {
        const d = byId.get(k.id)!;
        return {
          campaignId: campaign.id,
          line: d.line,
          to: d.phone,
          state: 'skipped' as const,
          attempts: d.attempts,
          outcome: d.outcome,
          callId: d.best_call_id,
          messageId: d.best_message_id,
          reason: k.reason,
          at: now.toISOString(),
        };
      }),
      now,
    );
    if (released > 0) {
      await tx
        .update(campaigns)
        .set({ pacedAt: pace.after(released), updatedAt: now })
        .where(eq(campaigns.id, campaign.id));
    }
  });
  if (released > 0) deps.onQueued?.();
  return released;
}

/** A recipient's in-flight states, as SQL. */
const IN_FLIGHT = inList(IN_FLIGHT_STATES);
/** The recipients' open states, as SQL. */
const OPEN = inList(OPEN_RECIPIENT_STATES);

/** Starts the calls of a flow campaign's released recipients; one refused is skipped. */
async function startCalls(
  tx: Tx,
  deps: SchedulerDeps,
  flow: { compiled: CompiledFlow; source: string },
  campaign: Running,
  going: readonly Due[],
  skipped: Array<{ id: number; reason: string }>,
  now: Date,
): Promise<number> {
  const ready: { p: PreparedCall; input: { to: string; from: string }; due: Due }[] = [];
  for (const due of going) {
    const input = {
      to: due.phone,
      from: campaign.from,
      vars: due.vars,
      lang: due.lang ?? campaign.lang ?? undefined,
    };
    const prepared = prepareCall(deps, flow.compiled, input, '', now);
    if (prepared.error) {
      skipped.push({ id: due.id, reason: `${prepared.error.code}: ${prepared.error.message}` });
    } else ready.push({ p: prepared.call!, input, due });
  }
  if (ready.length > 0) await storeStarted(tx, deps, flow, ready, campaign.id, now);
  return ready.length;
}

/**
 * Sends a message campaign's released recipients their messages: each filled from the
 * template and checked as `POST /v1/messages` checks one (a message refused is skipped with
 * its reason), stored with its outbox row like any other, and its recipient marked `sending`.
 */
async function sendMessages(
  tx: Tx,
  deps: SchedulerDeps,
  template: Record<string, unknown>,
  campaign: Running,
  going: readonly Due[],
  skipped: Array<{ id: number; reason: string }>,
  now: Date,
): Promise<number> {
  if (going.length === 0) return 0;
  const checked = prepareMessages(
    going.map((d) => campaignMessage(template, d.phone, campaign.from, d.vars)),
    {
      ...(deps.maxSmsParts !== undefined && { maxSmsParts: deps.maxSmsParts }),
      ...(deps.lifetimeSeconds !== undefined && { lifetimeSeconds: deps.lifetimeSeconds }),
    },
    now,
  );
  checked.results.forEach((r, i) => {
    if (r?.status === 'rejected' && r.error) {
      skipped.push({ id: going[i]!.id, reason: `${r.error.code}: ${r.error.message}` });
    }
  });
  if (checked.prepared.length === 0) return 0;
  const stored = await storeMessages(
    tx,
    checked.prepared,
    now,
    subscriptionsOf(deps.db).wants('message.status'),
  );
  // every id is new (UUIDv7, no customerMessageId given): all of them are stored
  if (stored.size !== checked.prepared.length) throw new Error('a campaign message was not stored');
  await attemptsStarted(
    tx,
    campaign.id,
    'sending',
    checked.prepared.map((p) => ({ due: going[p.index]!, callId: null, messageId: p.row.id! })),
    now,
  );
  return checked.prepared.length;
}

/**
 * Released recipients whose attempt is now in flight: each marked `calling` (its call's id in
 * `call_id`) or `sending` (its message's in `message_id`), and its attempt written, with the
 * call's own message for a call.
 */
async function attemptsStarted(
  tx: Tx,
  campaignId: string,
  state: 'calling' | 'sending',
  started: ReadonlyArray<{ due: Due; callId: string | null; messageId: string | null }>,
  now: Date,
): Promise<void> {
  const rows = started.map((s) => ({
    id: s.due.id,
    in_flight: state === 'calling' ? s.callId : s.messageId,
    attempts: s.due.attempts + 1,
  }));
  const column = sql.raw(state === 'calling' ? 'call_id' : 'message_id');
  await tx.execute(sql`
    update campaign_recipients r
    set state = ${state}, ${column} = v.in_flight, attempts = v.attempts, next_at = null,
      updated_at = ${now.toISOString()}::timestamptz
    from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
      as v(id bigint, in_flight uuid, attempts integer)
    where r.id = v.id`);
  await tx.insert(campaignAttempts).values(
    started.map((s) => ({
      recipientId: s.due.id,
      campaignId,
      attempt: s.due.attempts + 1,
      callId: s.callId,
      messageId: s.messageId,
      startedAt: now,
      state: 'queued',
    })),
  );
}

/** The number's next local midnight (its first zone's; UTC without one). */
function nextLocalDay(now: Date, zones: readonly string[]): Date {
  return DateTime.fromJSDate(now, { zone: zones[0] ?? 'UTC' })
    .startOf('day')
    .plus({ days: 1 })
    .toJSDate();
}

/** The recipients over the frequency cap (each other one takes a contact for its day). */
async function overCap(
  tx: Tx,
  deps: SchedulerDeps,
  callable: ReadonlyArray<{ due: Due; zones: string[] }>,
  now: Date,
): Promise<Set<number>> {
  if (deps.capPerDay === undefined || callable.length === 0) return new Set();
  const wanted = callable.map((c) => ({ phone: c.due.phone, day: localDateOf(now, c.zones) }));
  const taken = await takeContacts(tx, wanted, deps.capPerDay);
  return new Set(callable.filter((_, i) => !taken[i]).map((c) => c.due.id));
}

async function storeStarted(
  tx: Tx,
  deps: SchedulerDeps,
  flow: { compiled: CompiledFlow; source: string },
  ready: { p: PreparedCall; input: { to: string; from: string }; due: Due }[],
  campaignId: string,
  now: Date,
): Promise<void> {
  const compiled = flow.compiled;
  await pinVersion(tx, compiled, flow.source, now);
  await storeCalls(tx, deps, compiled, ready, now);
  await bumpStats(
    tx,
    ready.map((r) => ({ scope: statScope(compiled, r.p), entries: [STARTED] })),
  );
  await attemptsStarted(
    tx,
    campaignId,
    'calling',
    ready.map((r) => ({ due: r.due, callId: r.p.id, messageId: r.p.message.row.id ?? null })),
    now,
  );
}

async function markRecipients(
  tx: Tx,
  skipped: Array<{ id: number; reason: string }>,
  waiting: Array<{ id: number; next_at: string }>,
  now: Date,
): Promise<void> {
  const at = now.toISOString();
  if (skipped.length > 0) {
    await tx.execute(sql`
      update campaign_recipients r
      set state = 'skipped', reason = v.reason, next_at = null, updated_at = ${at}::timestamptz
      from jsonb_to_recordset(${JSON.stringify(skipped)}::jsonb) as v(id bigint, reason text)
      where r.id = v.id`);
  }
  if (waiting.length > 0) {
    await tx.execute(sql`
      update campaign_recipients r
      set state = 'waiting', next_at = v.next_at, updated_at = ${at}::timestamptz
      from jsonb_to_recordset(${JSON.stringify(waiting)}::jsonb) as v(id bigint, next_at timestamptz)
      where r.id = v.id`);
  }
}

async function finishDone(deps: SchedulerDeps): Promise<number> {
  const now = deps.clock.now();
  return deps.db.transaction(async (tx) => {
    const rows = rowsOf<{ id: string }>(
      await tx.execute(sql`
        update campaigns c set state = 'done', finished_at = ${now.toISOString()}::timestamptz,
          updated_at = ${now.toISOString()}::timestamptz
        where c.state = 'running' and not exists (
          select 1 from campaign_counts k where k.campaign_id = c.id and k.state in (${OPEN})
          group by k.state having sum(k.n) <> 0)
        returning c.id`),
    );
    for (const r of rows) deps.logger.info({ campaign: r.id }, 'campaign done');
    await campaignsDone(
      tx,
      deps,
      rows.map((r) => r.id),
      'done',
      now,
    );
    return rows.length;
  });
}

/** `campaign.done` for campaigns that finished or were cancelled, with their tallies. */
async function campaignsDone(
  tx: Tx,
  deps: Pick<SchedulerDeps, 'db'>,
  ids: readonly string[],
  state: 'done' | 'cancelled',
  now: Date,
): Promise<void> {
  if (ids.length === 0 || !subscriptionsOf(deps.db).wants('campaign.done')) return;
  const progress = await progressOf(tx, ids);
  await recordEvents(
    tx,
    ids.map((id) =>
      campaignEvent('campaign.done', id, now, {
        campaignId: id,
        state,
        byState: progress.byState.get(id) ?? {},
        byOutcome: progress.byOutcome.get(id) ?? {},
        at: now.toISOString(),
      }),
    ),
  );
}

/**
 * Pause, resume or cancel: the states each may come from, and what it does to recipients. An
 * `uploading` campaign refuses all three: its upload is still storing it.
 */
export async function changeCampaignState(
  deps: Pick<SchedulerDeps, 'db' | 'clock'>,
  id: string,
  action: 'pause' | 'resume' | 'cancel',
): Promise<{ from: string; to: string } | { refused: string } | undefined> {
  const now = deps.clock.now();
  if (!isUuid(id)) return undefined;
  return deps.db.transaction(async (tx) => {
    const [row] = await tx
      .select({ state: campaigns.state, perMinute: campaigns.perMinute })
      .from(campaigns)
      .where(eq(campaigns.id, id))
      .for('update');
    if (!row) return undefined;
    const from = row.state;
    const to =
      action === 'pause'
        ? from === 'running' || from === 'scheduled'
          ? 'paused'
          : undefined
        : action === 'resume'
          ? from === 'paused'
            ? 'running'
            : undefined
          : from === 'done' || from === 'cancelled' || from === 'uploading'
            ? undefined
            : 'cancelled';
    if (to === undefined) return { refused: from };
    await tx
      .update(campaigns)
      .set({
        state: to,
        updatedAt: now,
        // a resumed campaign's pace starts now: no burst for the time it was paused
        ...(action === 'resume' && { pacedAt: startingPace(now, row.perMinute) }),
        ...(to === 'cancelled' && { finishedAt: now }),
      })
      .where(eq(campaigns.id, id));
    if (to === 'cancelled') {
      await tx
        .update(campaignRecipients)
        .set({ state: 'cancelled', nextAt: null, updatedAt: now })
        .where(
          and(
            eq(campaignRecipients.campaignId, id),
            inArray(campaignRecipients.state, ['pending', 'waiting', 'retry']),
          ),
        );
      await campaignsDone(tx, deps, [id], 'cancelled', now);
    }
    return { from, to };
  });
}
