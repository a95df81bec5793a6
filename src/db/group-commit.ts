/**
 * Group commit: items that arrive while a transaction is in flight share the next one. Each
 * caller's promise settles only after the transaction that stored its item has committed
 * (store, then acknowledge), but a batch pays its round trips and its commit once, whatever
 * its size; an idle server still runs each item at once (a batch of one).
 *
 * A batch that fails for any reason but an unreachable database is run again one item per
 * transaction (a batch of one), so one poisonous item cannot take its neighbours down with it.
 *
 * @example
 * const submit = groupCommit({ batch: ingestMany, maxBatch: 200, concurrency: 1 });
 * const result = await submit(item); // after its commit
 */
import type { Link } from '@opentelemetry/api';
import { activeLink, inSpan, tracingEnabled } from '../tracing.ts';
import { isDatabaseUnavailable } from './errors.ts';

export interface GroupCommitOptions<T, R> {
  /** stores and applies every item in one transaction; one result per item, in order */
  batch(items: T[]): Promise<R[]>;
  /** one item in a transaction of its own (after its batch failed); by default a batch of one */
  single?(item: T): Promise<R>;
  /** most items in one transaction */
  maxBatch: number;
  /** transactions in flight at once */
  concurrency: number;
  /** names the transaction's span (`db.transaction <name>`) when tracing is on */
  name?: string;
}

interface Waiting<T, R> {
  item: T;
  resolve(result: R): void;
  reject(err: unknown): void;
  /** the caller's span (tracing on): the batch's span links to every caller it serves */
  link: Link | undefined;
}

export function groupCommit<T, R>(opts: GroupCommitOptions<T, R>): (item: T) => Promise<R> {
  const queue: Waiting<T, R>[] = [];
  let running = 0;
  const single = opts.single ?? (async (item: T) => (await opts.batch([item]))[0]!);

  const spanName = `db.transaction ${opts.name ?? 'group-commit'}`;

  function links(batch: Waiting<T, R>[]): Link[] {
    const out: Link[] = [];
    for (const w of batch) if (w.link) out.push(w.link);
    return out;
  }

  async function run(batch: Waiting<T, R>[]): Promise<void> {
    try {
      const items = batch.map((w) => w.item);
      const results = tracingEnabled()
        ? await inSpan(
            spanName,
            { links: links(batch), attributes: { 'db.batch.size': batch.length } },
            () => opts.batch(items),
          )
        : await opts.batch(items);
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
