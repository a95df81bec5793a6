/**
 * Reading campaigns: one with its progress (recipients by state, results by outcome), a list,
 * and the results per recipient (JSON pages, or every row as CSV, streamed a page at a time
 * so a campaign of a million recipients is never held whole in memory).
 */
import { and, asc, desc, eq, gt, inArray, lt, sql } from 'drizzle-orm';
import type { Queryable } from '../db/client.ts';
import {
  callEvents,
  calls as callsTable,
  campaignAttempts,
  campaignCounts,
  campaignRecipients,
  campaigns,
  messages,
} from '../db/schema/index.ts';
import { AppError } from '../errors.ts';
import type { CampaignRetryPolicy } from '../flows/schema.ts';
import { isUuid } from '../ids.ts';
import { decodeCursor, encodeCursor } from '../messages/read.ts';
import type { CampaignView, RecipientResult } from './schemas.ts';
import type { CallingWindow } from './windows.ts';

type CampaignRow = typeof campaigns.$inferSelect;

/**
 * Recipients by state, results by outcome (`(none)` for a result without one) and attempts,
 * per campaign: what a campaign's view shows and its `campaign.done` event reports. Read from
 * `campaign_counts` (counts.ts), a few rows a campaign.
 */
export async function progressOf(db: Queryable, ids: readonly string[]) {
  const byState = new Map<string, Record<string, number>>();
  const byOutcome = new Map<string, Record<string, number>>();
  const attempts = new Map<string, number>();
  if (ids.length === 0) return { byState, byOutcome, attempts };
  // the sums of what the recipients' statements appended (counts.ts): a group they all left
  // sums to 0, and is not shown, as a GROUP BY over the recipients would not show it
  const rows = await db
    .select({
      campaignId: campaignCounts.campaignId,
      state: campaignCounts.state,
      outcome: campaignCounts.outcome,
      n: sql<number>`sum(${campaignCounts.n})::int`,
      attempts: sql<number>`sum(${campaignCounts.attempts})::int`,
    })
    .from(campaignCounts)
    .where(inArray(campaignCounts.campaignId, [...ids]))
    .groupBy(campaignCounts.campaignId, campaignCounts.state, campaignCounts.outcome)
    .having(sql`sum(${campaignCounts.n}) <> 0`);
  for (const r of rows) {
    const s = byState.get(r.campaignId) ?? {};
    s[r.state] = (s[r.state] ?? 0) + r.n;
    byState.set(r.campaignId, s);
    if (r.state === 'done') {
      const o = byOutcome.get(r.campaignId) ?? {};
      const key = r.outcome ?? '(none)';
      o[key] = (o[key] ?? 0) + r.n;
      byOutcome.set(r.campaignId, o);
    }
    attempts.set(r.campaignId, (attempts.get(r.campaignId) ?? 0) + (r.attempts ?? 0));
  }
  return { byState, byOutcome, attempts };
}

function toView(row: CampaignRow, p: Awaited<ReturnType<typeof progressOf>>): CampaignView {
  return {
    id: row.id,
    name: row.name,
    flow: row.flowId,
    message: row.message as Record<string, unknown> | null,
    from: row.from,
    state: row.state as CampaignView['state'],
    startAt: row.startAt.toISOString(),
    perMinute: row.perMinute,
    maxConcurrent: row.maxConcurrent,
    window: row.window as CallingWindow | null,
    retry: row.retry as CampaignRetryPolicy,
    recipients: row.recipients,
    progress: {
      byState: p.byState.get(row.id) ?? {},
      byOutcome: p.byOutcome.get(row.id) ?? {},
      attempts: p.attempts.get(row.id) ?? 0,
    },
    createdAt: row.createdAt.toISOString(),
    finishedAt: row.finishedAt?.toISOString() ?? null,
  };
}

export async function getCampaign(db: Queryable, id: string): Promise<CampaignView> {
  const [row] = isUuid(id) ? await db.select().from(campaigns).where(eq(campaigns.id, id)) : [];
  if (!row) throw new AppError('NOT_FOUND', `no campaign with id "${id}"`);
  return toView(row, await progressOf(db, [id]));
}

/** Newest first, keyset pages by id (UUIDv7). */
export async function listCampaigns(
  db: Queryable,
  filter: { state?: string | undefined; limit?: number | undefined; cursor?: string | undefined },
) {
  const limit = filter.limit ?? 50;
  const where = [
    ...(filter.state ? [eq(campaigns.state, filter.state)] : []),
    ...(filter.cursor ? [lt(campaigns.id, decodeCursor(filter.cursor))] : []),
  ];
  const rows = await db
    .select()
    .from(campaigns)
    .where(and(...where))
    .orderBy(desc(campaigns.id))
    .limit(limit + 1);
  const page = rows.slice(0, limit);
  const progress = await progressOf(
    db,
    page.map((r) => r.id),
  );
  return {
    items: page.map((r) => toView(r, progress)),
    nextCursor: rows.length > limit && page.length > 0 ? encodeCursor(page.at(-1)!.id) : null,
  };
}

/** One page of results, in the order of the upload (by line), after `afterLine`. */
export async function campaignResults(
  db: Queryable,
  id: string,
  opts: { afterLine?: number | undefined; limit?: number | undefined } = {},
): Promise<{ items: RecipientResult[]; nextCursor: string | null }> {
  const limit = opts.limit ?? 500;
  const [exists] = isUuid(id)
    ? await db.select({ id: campaigns.id }).from(campaigns).where(eq(campaigns.id, id))
    : [];
  if (!exists) throw new AppError('NOT_FOUND', `no campaign with id "${id}"`);
  const rows = await db
    .select()
    .from(campaignRecipients)
    .where(
      and(
        eq(campaignRecipients.campaignId, id),
        ...(opts.afterLine !== undefined ? [gt(campaignRecipients.line, opts.afterLine)] : []),
      ),
    )
    .orderBy(asc(campaignRecipients.line))
    .limit(limit + 1);
  const page = rows.slice(0, limit);
  const attempts =
    page.length === 0
      ? []
      : await db
          .select()
          .from(campaignAttempts)
          .where(
            inArray(
              campaignAttempts.recipientId,
              page.map((r) => r.id),
            ),
          )
          .orderBy(asc(campaignAttempts.attempt));
  const byRecipient = new Map<number, typeof attempts>();
  for (const a of attempts) {
    byRecipient.set(a.recipientId, [...(byRecipient.get(a.recipientId) ?? []), a]);
  }
  const best = await bestAttempts(
    db,
    page.flatMap((r) => (r.bestCallId ? [r.bestCallId] : [])),
    page.flatMap((r) => (r.bestMessageId ? [r.bestMessageId] : [])),
  );
  return {
    items: page.map((r) => {
      const call = r.bestCallId ? best.calls.get(r.bestCallId) : undefined;
      const message = r.bestMessageId ? best.messages.get(r.bestMessageId) : undefined;
      return {
        line: r.line,
        to: r.phone,
        state: r.state as RecipientResult['state'],
        attempts: r.attempts,
        outcome: r.outcome,
        status: call?.state ?? message?.status ?? null,
        path: call?.path ?? [],
        followUps: call?.followUps ?? [],
        reason: r.reason,
        nextAt: r.nextAt?.toISOString() ?? null,
        history: (byRecipient.get(r.id) ?? []).map((a) => ({
          attempt: a.attempt,
          callId: a.callId,
          messageId: a.callId ? null : a.messageId,
          state: a.state,
          outcome: a.outcome,
          startedAt: a.startedAt.toISOString(),
          endedAt: a.endedAt?.toISOString() ?? null,
        })),
      };
    }),
    nextCursor: rows.length > limit && page.length > 0 ? String(page.at(-1)!.line) : null,
  };
}

/**
 * The best attempts of a page of recipients: each call's state, its path (the keys, in order)
 * and its follow-ups with their statuses; each message's status. Three queries a page.
 */
async function bestAttempts(db: Queryable, callIds: string[], messageIds: string[]) {
  const calls = new Map<
    string,
    {
      state: string;
      path: Array<{ node: string; key: string }>;
      followUps: Array<{ id: string; type: string; status: string }>;
    }
  >();
  const messagesById = new Map<string, { status: string }>();
  if (callIds.length > 0) {
    const rows = await db
      .select({ id: callsTable.id, state: callsTable.state })
      .from(callsTable)
      .where(inArray(callsTable.id, callIds));
    for (const r of rows) calls.set(r.id, { state: r.state, path: [], followUps: [] });
    const keys = await db
      .select({ callId: callEvents.callId, node: callEvents.node, key: callEvents.key })
      .from(callEvents)
      .where(and(inArray(callEvents.callId, callIds), eq(callEvents.kind, 'key')))
      .orderBy(asc(callEvents.at), asc(callEvents.id));
    for (const k of keys) calls.get(k.callId)?.path.push({ node: k.node ?? '', key: k.key ?? '' });
    const sent = await db
      .select({
        id: messages.id,
        callId: messages.callId,
        type: messages.type,
        status: messages.status,
      })
      .from(messages)
      .where(and(inArray(messages.callId, callIds), eq(messages.role, 'follow-up')))
      .orderBy(asc(messages.id));
    for (const m of sent) {
      calls.get(m.callId!)?.followUps.push({ id: m.id, type: m.type, status: m.status });
    }
  }
  if (messageIds.length > 0) {
    const rows = await db
      .select({ id: messages.id, status: messages.status })
      .from(messages)
      .where(inArray(messages.id, messageIds));
    for (const r of rows) messagesById.set(r.id, { status: r.status });
  }
  return { calls, messages: messagesById };
}

const CSV_COLUMNS = [
  'line',
  'to',
  'state',
  'attempts',
  'outcome',
  'status',
  'path',
  'followUps',
  'reason',
  'history',
] as const;

/** A CSV field: quoted when it holds a comma, a quote or a line break (RFC 4180). */
function csvField(value: unknown): string {
  const text = value === null || value === undefined ? '' : String(value);
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

/**
 * One result as a CSV line. Lists are space-separated: `path` as `node:key`, `followUps` as
 * `type:status`, `history` as `attempt:id:state:outcome`.
 */
function csvLine(r: RecipientResult): string {
  const path = r.path.map((p) => `${p.node}:${p.key}`).join(' ');
  const followUps = r.followUps.map((f) => `${f.type}:${f.status}`).join(' ');
  const history = r.history
    .map((a) => `${a.attempt}:${a.callId ?? a.messageId ?? ''}:${a.state ?? ''}:${a.outcome ?? ''}`)
    .join(' ');
  const fields = [
    r.line,
    r.to,
    r.state,
    r.attempts,
    r.outcome,
    r.status,
    path,
    followUps,
    r.reason,
    history,
  ];
  return `${fields.map(csvField).join(',')}\r\n`;
}

/** Every result as CSV lines, a page at a time: the header, then one line per recipient. */
export async function* campaignResultsCsv(db: Queryable, id: string): AsyncGenerator<string> {
  yield `${CSV_COLUMNS.join(',')}\r\n`;
  let afterLine: number | undefined;
  for (;;) {
    const page = await campaignResults(db, id, { afterLine, limit: 1000 });
    const out = page.items.map(csvLine).join('');
    if (out) yield out;
    if (page.nextCursor === null) return;
    afterLine = Number(page.nextCursor);
  }
}
