/**
 * Group commit: items that arrive while a transaction is in flight share the next one. Each
 * caller's promise settles only after the transaction that stored its item has committed
 * (store, then acknowledge), but a batch pays its round trips and its commit once, whatever
 * its size; an idle server still runs each item at once (a batch of one).
 *
 * A batch that fails for any reason but an unreachable database is run again one item per
 * transaction (a batch of one), so one poisonous item cannot take its neighbours down with it.
 *
 * Each transaction has a deadline (BATCH_DEADLINE_MS): one that has not ended by then fails its
 * callers as "database unavailable" (503), frees its place in the lane, and has its signal
 * aborted, so that a transaction that can stop does (on Postgres pipelinedTransaction cancels
 * its running statement: a batch waiting on a row lock that a lost instance holds gives its
 * connection back instead of waiting until Postgres notices the loss).
 *
 * @example
 * const submit = groupCommit({ batch: ingestMany, maxBatch: 200, concurrency: 1 });
 * const result = await submit(item); // after its commit
 */
import type { Link } from '@opentelemetry/api';
import { activeLink, inSpan, tracingEnabled } from '../tracing.ts';
import { CONNECT_TIMEOUT_S } from './client.ts';
import { isDatabaseUnavailable, withTimeout } from './errors.ts';

/**
 * How long one transaction of a lane may take before its callers are answered "unavailable":
 * a connection attempt (CONNECT_TIMEOUT_S) plus 2 s for a transaction that takes milliseconds,
 * so that callers queued behind a lost one still get their 503 before a sender gives up on
 * them (postgres-restart.test.ts's senders wait 10 s).
 *
 * Why at all: a transaction whose promise never settles would stop its lane (concurrency 1)
 * for good, and nothing would fail to tell the breaker (availability.ts) that the database is
 * down. postgres.js 3.4.9 lost such promises when a reserved connection closed (a query
 * queued behind one being described, as pipelinedTransaction's COMMIT behind its last
 * statement); scripts/patch-postgres-js.mjs fixes that, and this deadline stays for what no
 * close reports (a peer that stops answering without resetting the connection).
 *
 * A transaction that timed out may still commit later. Its callers got 503 and the provider
 * retries; the retry finds the stored callback (its dedup key) and is answered as a duplicate,
 * so nothing is applied twice.
 */
export const BATCH_DEADLINE_MS = CONNECT_TIMEOUT_S * 1000 + 2000;

export interface GroupCommitOptions<T, R> {
  /**
   * stores and applies every item in one transaction; one result per item, in order.
   * `signal` aborts at the deadline, when the callers have been answered already
   */
  batch(items: T[], signal: AbortSignal): Promise<R[]>;
  /** one item in a transaction of its own (after its batch failed); by default a batch of one */
  single?(item: T, signal: AbortSignal): Promise<R>;
  /** most items in one transaction */
  maxBatch: number;
  /** transactions in flight at once */
  concurrency: number;
  /** names the transaction's span (`db.transaction <name>`) when tracing is on */
  name?: string;
  /** each transaction's deadline; BATCH_DEADLINE_MS unless a test needs a shorter one */
  deadlineMs?: number;
}

interface Waiting<T, R> {
  item: T;
  resolve(result: R): void;
  reject(err: unknown): void;
  /** the caller's span (tracing on): the batch's span links to every caller it serves */
  link: Link | undefined;
}

/**
 * A function that stores one item in a transaction it shares with the items that arrived
 * meanwhile, resolving after that transaction committed (see the module's comment).
 */
export function groupCommit<T, R>(opts: GroupCommitOptions<T, R>): (item: T) => Promise<R> {
  const queue: Waiting<T, R>[] = [];
  let running = 0;
  const name = opts.name ?? 'group-commit';
  const spanName = `db.transaction ${name}`;
  const deadlineMs = opts.deadlineMs ?? BATCH_DEADLINE_MS;
  const one =
    opts.single ?? (async (item: T, signal: AbortSignal) => (await opts.batch([item], signal))[0]!);
  // `work` with the deadline: its callers answered "unavailable" at it, its signal aborted
  const withDeadline = <X>(work: (signal: AbortSignal) => Promise<X>, what: string) => {
    const expire = new AbortController();
    return withTimeout(work(expire.signal), deadlineMs, `the database (${name}, ${what})`, expire);
  };
  const single = (item: T) => withDeadline((signal) => one(item, signal), 'one item alone');

  function links(batch: Waiting<T, R>[]): Link[] {
    const out: Link[] = [];
    for (const w of batch) if (w.link) out.push(w.link);
    return out;
  }

  async function run(batch: Waiting<T, R>[]): Promise<void> {
    try {
      const items = batch.map((w) => w.item);
      // the deadline settles this at most once: waiters are answered once, the lane freed once
      const transaction = () =>
        withDeadline((signal) => opts.batch(items, signal), `a batch of ${items.length}`);
      const results = tracingEnabled()
        ? await inSpan(
            spanName,
            { links: links(batch), attributes: { 'db.batch.size': batch.length } },
            transaction,
          )
        : await transaction();
      for (const [i, w] of batch.entries()) w.resolve(results[i]!);
    } catch (err) {
      if (batch.length === 1 || isDatabaseUnavailable(err)) {
        for (const w of batch) w.reject(err);
      } else {
        // one item per transaction: each gets its own answer, or its own error
        await Promise.all(batch.map((w) => single(w.item).then(w.resolve, w.reject)));
      }
    }
  }

  function pump(): void {
    while (running < opts.concurrency && queue.length > 0) {
      const batch = queue.splice(0, opts.maxBatch);
      running++;
      void run(batch).finally(() => {
        running--;
        pump();
      });
    }
  }

  return (item) =>
    new Promise<R>((resolve, reject) => {
      queue.push({ item, resolve, reject, link: activeLink() });
      pump();
    });
}
