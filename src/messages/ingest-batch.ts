/**
 * Delivery callbacks in, many to one transaction (group commit). Under load, a request waits
 * for the transaction that stores it, as before (store, then acknowledge), but the callbacks
 * that arrived meanwhile share that transaction and its set-based statements: two round trips
 * for the batch (BEGIN travels with the first statement, COMMIT with the last:
 * pipelinedTransaction). An idle server still commits each callback at once (a batch of one),
 * and a single callback is exactly that: there is no other implementation.
 *
 * Read (delivery-write.ts `lockAndCheck`), decide (delivery-plan.ts), write
 * (delivery-write.ts `writeDeliveries`). Locks are taken in one order everywhere (messages by
 * id, then inbox keys sorted, then calls by id), so concurrent batches, here or in another
 * instance, wait for each other but never deadlock. A batch that fails for any reason but an
 * unreachable database is retried one callback per transaction (group-commit.ts), so one
 * poisonous body cannot take its neighbours down with it.
 *
 * @example
 * const batcher = createDeliveryBatcher(ingestDeps);
 * const result = await batcher.ingest({ contentType: 'application/json', body }); // after commit
 */
import { pipelinedTransaction } from '../db/client.ts';
import { isUniqueViolation } from '../db/errors.ts';
import { groupCommit } from '../db/group-commit.ts';
import { subscriptionsOf } from '../events/subscriptions.ts';
import { erasedFilter } from '../privacy/erased.ts';
import { parseDeliveryBody } from './delivery-parse.ts';
import { inboxIdsOf, type ParsedCallback, planDeliveries, unmatchedOf } from './delivery-plan.ts';
import { lockAndCheck, writeDeliveries } from './delivery-write.ts';
import { dedupKey, keysTimedSince, type RawCallback, storable } from './inbox.ts';
import type { IngestDeps, IngestResult } from './ingest.ts';

export interface DeliveryBatcher {
  /** resolves once the callback is committed (or rejects: nothing of it was stored) */
  ingest(raw: RawCallback): Promise<IngestResult>;
}

export interface BatchOptions {
  /** most callbacks in one transaction */
  maxBatch?: number;
  /** transactions in flight at once */
  concurrency?: number;
  /** each transaction's deadline (group-commit.ts BATCH_DEADLINE_MS unless a test sets it) */
  deadlineMs?: number;
}

export function createDeliveryBatcher(deps: IngestDeps, opts: BatchOptions = {}): DeliveryBatcher {
  const ingest = groupCommit<RawCallback, IngestResult>({
    batch: (raws, signal) => ingestDeliveries(deps, raws, signal),
    name: 'delivery-callbacks',
    maxBatch: opts.maxBatch ?? 200,
    // one at a time: later callbacks make the next batch larger, at the same round trips
    // (docs/performance.md, "Write path notes")
    concurrency: opts.concurrency ?? 1,
    deadlineMs: opts.deadlineMs,
  });
  return { ingest };
}

/**
 * Stores, parses, matches and records many delivery callbacks in one transaction; one result
 * per callback, in order. A body repeated within the batch, or stored before, is a duplicate.
 */
export async function ingestDeliveries(
  deps: IngestDeps,
  raws: readonly RawCallback[],
  signal?: AbortSignal,
): Promise<IngestResult[]> {
  const now = deps.clock.now();
  const timedSince = await keysTimedSince(deps.db);
  const callbacks = raws.map((raw): ParsedCallback => {
    const { events, problems } = storable(
      parseDeliveryBody(raw.contentType, raw.body, deps.statusMap),
    );
    return { raw, key: dedupKey('delivery', raw.body, timedSince), events, problems };
  });
  try {
    return await storeBatch(deps, callbacks, now, signal);
  } catch (err) {
    // a key the first statement did not find was stored meanwhile by a transaction that had
    // not committed then: the batch was undone, and once more finds the duplicate
    if (!isUniqueViolation(err, 'inbox_keys_pkey')) throw err;
    return storeBatch(deps, callbacks, now, signal);
  }
}

function storeBatch(
  deps: IngestDeps,
  callbacks: ParsedCallback[],
  now: Date,
  signal: AbortSignal | undefined,
): Promise<IngestResult[]> {
  return pipelinedTransaction(
    deps.db,
    async (tx, last) => {
      const keys = [...new Set(callbacks.map((c) => c.key))];
      const { existing, ids, locked } = await lockAndCheck(
        tx,
        keys,
        callbacks.flatMap((c) => c.events),
      );
      const inboxIds = inboxIdsOf(callbacks, keys, existing, ids);
      // all duplicates: nothing to look up, nothing to write
      const fresh = inboxIds.some((id) => id !== undefined);
      const isErased = fresh
        ? await erasedFilter(tx, unmatchedOf(callbacks, inboxIds, locked))
        : () => false;
      const plan = planDeliveries(callbacks, { inboxIds, locked, isErased, now });
      if (fresh) {
        // a Set lookup: with no endpoint that wants them, the statement is as it always was
        const events = subscriptionsOf(deps.db).wants('message.status');
        await writeDeliveries(tx, last, plan, now, deps.onRecorded, events);
      }
      return plan.results;
    },
    signal,
  );
}
