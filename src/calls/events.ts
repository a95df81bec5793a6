/**
 * What reaches a call from outside: speech-call webhooks (POST /hooks/speechcall), statuses
 * of its message (from delivery callbacks, polls and the dispatcher), and durable timers.
 * Each commits in one transaction with what it changed: the dedup row or event, the
 * transition, its effects. Concurrent webhooks share a transaction (group commit).
 */
import { and, asc, eq, inArray, lte, sql } from 'drizzle-orm';
import { type Db, executePrepared, type Tx } from '../db/client.ts';
import { groupCommit } from '../db/group-commit.ts';
import { callTimers, inbox, messages } from '../db/schema/index.ts';
import { AppError } from '../errors.ts';
import { type TokenSecret, verifyNodeToken } from '../flows/index.ts';
import { dedupKey, type RawCallback, storable } from '../messages/inbox.ts';
import type { RecordResult } from '../messages/timeline.ts';
import {
  applyKey,
  applyStatus,
  applyTimer,
  type CallRowJson,
  CallWrites,
  type KeyResult,
  type LockedCall,
  lockCall,
  lockedCalls,
  type RuntimeDeps,
  readHeld,
} from './runtime.ts';

export interface EventDeps extends RuntimeDeps {
  db: Db;
  /** every secret a token may have been signed with (rotation: old calls keep working) */
  verifyingSecrets: TokenSecret[];
}

export interface WebhookResult {
  duplicate: boolean;
  result?: KeyResult | 'unknown-call';
  callId?: string;
  node?: string;
  key?: string;
}

function tokenOf(body: unknown): string | undefined {
  if (typeof body !== 'object' || body === null) return undefined;
  const b = body as { action?: { token?: unknown }; token?: unknown };
  const token = b.action?.token ?? b.token;
  return typeof token === 'string' ? token : undefined;
}

const digits = (v: string) => v.replace(/\D/g, '');

/**
 * Whether the webhook's own fields agree with the call its token names: the callee (`to`,
 * compared by digits) and, once the provider's id for the call is known, `mid`.
 */
function sameCall(body: unknown, callee: string, providerId: string | null): boolean {
  const b = body as { to?: unknown; mid?: unknown };
  if (typeof b.to === 'string' && b.to !== '' && digits(b.to) !== digits(callee)) return false;
  if (providerId && typeof b.mid === 'string' && b.mid !== '' && b.mid !== providerId) return false;
  return true;
}

interface Verified {
  raw: RawCallback;
  body: unknown;
  callId: string;
  node: string;
  key: string;
}

/** The body, parsed and its token verified; a missing, forged or altered one is a 401. */
function verify(deps: EventDeps, raw: RawCallback): Verified {
  let body: unknown;
  try {
    body = JSON.parse(raw.body);
  } catch {
    throw new AppError('UNAUTHORIZED', 'no valid token: the body is not JSON');
  }
  const token = tokenOf(body);
  const verified = token ? verifyNodeToken(token, deps.verifyingSecrets) : null;
  if (!verified) throw new AppError('UNAUTHORIZED', 'missing, forged or altered webhook token');
  return { raw, body, callId: verified.callId, node: verified.node, key: verified.key };
}

const foreignToken = () =>
  new AppError('UNAUTHORIZED', 'the webhook token belongs to another call');

/**
 * Stores and applies verified webhooks in one transaction, one answer per webhook in order:
 * a result, or the AppError of a token replayed inside another call's webhook (nothing of
 * that one is stored). A body repeated within the batch, or stored before, is a duplicate.
 * Webhooks of one call are applied in arrival order, each from the state the one before left.
 */
async function ingestVerified(
  deps: EventDeps,
  items: Verified[],
): Promise<{ answers: (WebhookResult | AppError)[]; queued: number }> {
  const writes = new CallWrites(deps.clock.now());
  const answers = await deps.db.transaction(async (tx) => {
    // the raw bodies, first copy of each key only, in key order (the lock order)
    const keys = items.map((i) => dedupKey('speechcall', i.raw.body));
    const firsts = new Map<string, Verified>();
    for (const [n, item] of items.entries()) if (!firsts.has(keys[n]!)) firsts.set(keys[n]!, item);
    // both statements sent at once: the held webhooks are read after the locks are taken
    const [{ inserted, calls }, held] = await Promise.all([
      storeAndLock(tx, firsts, writes.now),
      readHeld(tx, [...new Set([...firsts.values()].map((i) => i.callId))]),
    ]);
    const inboxIds = new Map(inserted.map((r) => [firsts.get(r.key)!, Number(r.id)]));
    const locked = await lockedCalls(tx, calls, held);
    const forget: number[] = [];
    const answers: (WebhookResult | AppError)[] = [];
    for (const item of items) {
      const { callId, node, key } = item;
      const inboxId = inboxIds.get(item);
      if (inboxId === undefined) {
        answers.push({ duplicate: true, callId, node, key });
        continue;
      }
      const call = locked.get(callId);
      // a signed token for a call that is gone (erased): acknowledged, and nothing of it kept
      if (!call) {
        forget.push(inboxId);
        answers.push({ duplicate: false, result: 'unknown-call', callId, node, key });
        continue;
      }
      if (!sameCall(item.body, call.row.to, call.providerMessageId ?? null)) {
        // a valid token replayed inside another call's webhook: refused, nothing of it kept
        forget.push(inboxId);
        answers.push(foreignToken());
        continue;
      }
      const result = await applyKey(tx, deps, call, { node, key, inboxId }, writes);
      answers.push({ duplicate: false, result, callId, node, key });
    }
    if (forget.length > 0) await tx.delete(inbox).where(inArray(inbox.id, forget));
    await writes.flush(tx);
    return answers;
  });
  return { answers, queued: writes.queued };
}

/**
 * One round trip: the raw bodies inserted (a key stored before is skipped), and the calls
 * of those inserted locked, in id order (the lock order of every path that locks several),
 * with the provider's id of each call's message. Rows travel as one JSON parameter, so the
 * text is the same whatever the batch's size. The locks follow the insert (the calls to
 * lock are read from what it returned): a batch never holds a call while it waits for
 * another batch's copy of a body.
 */
async function storeAndLock(
  tx: Tx,
  firsts: Map<string, Verified>,
  now: Date,
): Promise<{ inserted: { id: number | string; key: string }[]; calls: CallRowJson[] }> {
  const bodies = [...firsts.keys()].sort().map((key) => {
    const { raw, callId } = firsts.get(key)!;
    return {
      key,
      content_type: raw.contentType == null ? null : storable(raw.contentType),
      body: storable(raw.body),
      call_id: callId,
    };
  });
  const [row] = await executePrepared<{ result: string | StoreAndLockJson }>(
    tx,
    sql`
      with v as materialized (
        select * from jsonb_to_recordset(${JSON.stringify(bodies)}::jsonb)
          as v(key text, content_type text, body text, call_id uuid)),
      ins as (
        insert into inbox (kind, dedup_key, content_type, body, received_at)
        select 'speechcall', v.key, v.content_type, v.body, ${now.toISOString()}::timestamptz
        from v
        order by v.key
        on conflict (dedup_key) do nothing
        returning id, dedup_key),
      locked as (
        select c.*, m.provider_message_id
        from calls c left join messages m on m.id = c.message_id
        -- any(array(...)): an index lookup, not a scan of the whole table (see CallWrites.flush)
        where c.id = any(array(select v.call_id from ins join v on v.key = ins.dedup_key))
        order by c.id
        for update of c)
      select json_build_object(
        'inserted', coalesce((select json_agg(json_build_object('id', id, 'key', dedup_key)) from ins), '[]'),
        'calls', coalesce((select json_agg(l order by l.id) from locked l), '[]')) as result`,
  );
  return typeof row!.result === 'string' ? JSON.parse(row!.result) : row!.result;
}

interface StoreAndLockJson {
  inserted: { id: number | string; key: string }[];
  calls: CallRowJson[];
}

/**
 * POST /hooks/speechcall: `{from, to, mid, action: {token}}` (docs/provider.md, "Callbacks").
 * A missing, forged or altered token is refused (401) before anything is stored. `ingest`
 * resolves after the commit of the transaction that stored and applied it.
 *
 * Group commit, as for delivery callbacks (db/group-commit.ts): webhooks that arrive while a
 * transaction is in flight share the next one. One transaction at a time: a transaction costs
 * about as much CPU (round trips, commit, statement start-up, in Postgres and here) as a few
 * webhooks do, so batches should be as large as the arrival rate makes them. A second one in
 * flight would start with the few webhooks that came meanwhile and then wait anyway, for the
 * flow's statistics rows that the first one holds until its commit.
 *
 * @example
 * const webhooks = createSpeechWebhooks(deps);
 * const result = await webhooks.ingest({ contentType: 'application/json', body }); // after commit
 */
export function createSpeechWebhooks(deps: EventDeps, maxBatch = 100, concurrency = 1) {
  const ingestAll = async (items: Verified[]) => {
    const { answers, queued } = await ingestVerified(deps, items);
    if (queued > 0) deps.onQueued?.();
    return answers;
  };
  const submit = groupCommit<Verified, WebhookResult | AppError>({
    batch: ingestAll,
    single: async (item) => (await ingestAll([item]))[0]!,
    maxBatch,
    concurrency,
  });
  return {
    async ingest(raw: RawCallback): Promise<WebhookResult> {
      const answer = await submit(verify(deps, raw));
      if (answer instanceof AppError) throw answer;
      return answer;
    },
  };
}

/**
 * Feeds the statuses of calls' own messages to their machines. Runs inside the transaction
 * that recorded the status (delivery callback, poll): called with its RecordResult.
 */
export function callStatusHook(deps: EventDeps) {
  return async (tx: Tx, result: RecordResult): Promise<void> => {
    if (result.role !== 'call' || !result.callId || result.after === result.before) return;
    const call = await lockCall(tx, result.callId);
    if (!call) return;
    const { queued } = await applyStatus(tx, deps, call, result.after);
    if (queued > 0) queueMicrotask(() => deps.onQueued?.());
  };
}

/**
 * lockCall, once per call in a transaction: a second event of the same call must start from
 * the state the first left in memory (its writes wait for the flush).
 */
function lockedOnce(tx: Tx) {
  const seen = new Map<string, LockedCall | undefined>();
  return async (callId: string): Promise<LockedCall | undefined> => {
    if (!seen.has(callId)) seen.set(callId, await lockCall(tx, callId));
    return seen.get(callId);
  };
}

/** The dispatcher's answers for call messages: `accepted`, or `rejected` (the call failed). */
export function callDispatchHook(deps: EventDeps) {
  return async (
    tx: Tx,
    all: { id: string; status: 'accepted' | 'rejected'; role: string | null }[],
  ): Promise<void> => {
    // a call's own messages only: the others of a batch cost no lookup at all
    const outcomes = all.filter((o) => o.role === 'call');
    if (outcomes.length === 0) return;
    const status = new Map(outcomes.map((o) => [o.id, o.status]));
    const writes = new CallWrites(deps.clock.now());
    const owned = await tx
      .select({ id: messages.id, callId: messages.callId, current: messages.status })
      .from(messages)
      .where(and(inArray(messages.id, [...status.keys()]), eq(messages.role, 'call')));
    const locked = lockedOnce(tx);
    for (const m of owned.sort((a, b) => a.callId!.localeCompare(b.callId!))) {
      const call = await locked(m.callId!);
      // the message's status may already be further on (a callback outran the answer)
      if (call) await applyStatus(tx, deps, call, status.get(m.id)!, writes);
    }
    await writes.flush(tx);
  };
}

/** Fires due timers (any instance; SKIP LOCKED keeps two from firing one). Returns how many. */
export async function fireDueTimers(deps: EventDeps, limit = 100): Promise<number> {
  let queued = 0;
  const fired = await deps.db.transaction(async (tx) => {
    const writes = new CallWrites(deps.clock.now());
    const due = await tx
      .select()
      .from(callTimers)
      .where(lte(callTimers.fireAt, deps.clock.now()))
      .orderBy(asc(callTimers.fireAt))
      .limit(limit)
      .for('update', { skipLocked: true });
    const locked = lockedOnce(tx);
    for (const t of due) {
      await tx.delete(callTimers).where(eq(callTimers.id, t.id));
      const call = await locked(t.callId);
      if (!call) continue;
      await applyTimer(tx, deps, call, t.timer, writes);
    }
    queued = await writes.flush(tx);
    return due.length;
  });
  if (queued > 0) deps.onQueued?.();
  return fired;
}

/** For tests and the worker's idle wait: when the next timer is due. */
export async function nextTimerAt(db: Db): Promise<Date | undefined> {
  const [row] = await db.select({ at: sql<Date>`min(${callTimers.fireAt})` }).from(callTimers);
  return row?.at ? new Date(row.at) : undefined;
}
