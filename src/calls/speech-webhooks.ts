/**
 * POST /hooks/speechcall, batched: the webhooks that arrive while a transaction is in
 * flight share the next one (group commit), which stores their raw bodies, locks their
 * calls, decides each key into one plan and writes that plan in one statement.
 */
import { sql } from 'drizzle-orm';
import { idList, pipelinedTransaction } from '../db/client.ts';
import { groupCommit } from '../db/group-commit.ts';
import { deleteBodies } from '../db/inbox-refs.ts';
import { AppError } from '../errors.ts';
import { subscriptionsOf } from '../events/subscriptions.ts';
import { dedupKey, keysTimedSince, type RawCallback } from '../messages/inbox.ts';
import { applyKey } from './apply.ts';
import { lockedCalls, readHeld } from './call-rows.ts';
import type { KeyResult } from './decide.ts';
import type { EventDeps } from './deps.ts';
import { createCallPlan } from './plan.ts';
import { storeAndLock } from './webhook-store.ts';
import { foreignToken, sameCall, type Verified, verify } from './webhook-verify.ts';
import { writePlan } from './write-plan.ts';

export interface WebhookResult {
  duplicate: boolean;
  result?: KeyResult | 'unknown-call';
  callId?: string;
  node?: string;
  key?: string;
}

/**
 * Stores and applies verified webhooks in one transaction, one answer per webhook in order:
 * a result, or the AppError of a token replayed inside another call's webhook (nothing of
 * that one is stored). A body repeated within the batch, or stored before, is a duplicate.
 * Webhooks of one call are applied in arrival order, each from the state the one before left.
 */
async function ingestVerified(
  deps: EventDeps,
  items: Verified[],
  signal: AbortSignal,
): Promise<{ answers: (WebhookResult | AppError)[]; queued: number }> {
  const plan = createCallPlan(deps.clock.now());
  let queued = 0;
  const timedSince = await keysTimedSince(deps.db);
  // BEGIN travels with the first statements; the deadline (group-commit.ts) cancels a wait
  const answers = await pipelinedTransaction(
    deps.db,
    async (tx) => {
      // the raw bodies, first copy of each key only, in key order (the lock order)
      const keys = items.map((i) => dedupKey('speechcall', i.raw.body, timedSince));
      const firsts = new Map<string, Verified>();
      for (const [n, item] of items.entries())
        if (!firsts.has(keys[n]!)) firsts.set(keys[n]!, item);
      // both statements sent at once: the held webhooks are read after the locks are taken
      const [{ inserted, calls }, held] = await Promise.all([
        storeAndLock(tx, firsts, plan.now),
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
        const result = applyKey(deps, plan, call, { node, key, inboxId });
        answers.push({ duplicate: false, result, callId, node, key });
      }
      // stored a moment ago: the bodies and their keys, as if they never came
      if (forget.length > 0)
        await deleteBodies(tx, (id) => sql`${id} in ${idList(forget, 'bigint')}`, [plan.now]);
      queued = await writePlan(tx, plan, subscriptionsOf(deps.db));
      return answers;
    },
    signal,
  );
  return { answers, queued };
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
  const ingestAll = async (items: Verified[], signal: AbortSignal) => {
    const { answers, queued } = await ingestVerified(deps, items, signal);
    if (queued > 0) deps.onQueued?.();
    return answers;
  };
  const submit = groupCommit<Verified, WebhookResult | AppError>({
    batch: ingestAll,
    maxBatch,
    concurrency,
    name: 'speech-webhooks',
  });
  return {
    async ingest(raw: RawCallback): Promise<WebhookResult> {
      const answer = await submit(verify(deps, raw));
      if (answer instanceof AppError) throw answer;
      return answer;
    },
  };
}
