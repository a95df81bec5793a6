/**
 * A campaign of more recipients than one batch, CSV or JSON, stored in several transactions
 * (src/campaigns/create.ts): its row first, as `uploading`, which the scheduler never starts;
 * its recipients a bounded batch a transaction, so other work runs between them (on the
 * embedded database, everything else waits for each); then `scheduled` once all of them are
 * in. An upload that fails half-way is deleted by its request (`deleteUpload`); one whose
 * process died is deleted by the leader's scheduler once its campaign has not been touched for
 * `STALE_UPLOAD_MS` (`sweepStaleUploads`).
 *
 * Each batch of an upload ends by writing its campaign's `updated_at`, on condition that it
 * is still the value the upload last wrote: a campaign the sweep took meanwhile (the sweep
 * sets it to the epoch) or deleted matches nothing, that batch's transaction is undone, and
 * its request is answered 409 `CONFLICT` (abandoned and removed: to be sent again).
 */
import { and, eq, lt, sql } from 'drizzle-orm';
import type { Clock } from '../clock.ts';
import { type Db, rowsOf } from '../db/client.ts';
import { campaigns } from '../db/schema/index.ts';
import type { Logger } from '../logger.ts';

/**
 * Recipients stored (or deleted) per transaction of an upload: one statement
 * (`insertRecipients`), a fraction of a second that everything else on the embedded database
 * waits for (about 0.1 ms a row on PGlite).
 */
export const UPLOAD_ROWS_PER_TRANSACTION = 2000;

/**
 * An `uploading` campaign untouched this long was left by a process that died mid-upload: a
 * live upload touches it at each transaction, a second or so apart.
 */
export const STALE_UPLOAD_MS = 60 * 60_000;

/**
 * An upload's campaign deleted with its recipients and their counts (`campaign_counts`), a
 * batch of recipients a transaction, the campaign's row last: a delete cut short leaves it
 * `uploading`, for the sweep to finish. Only an `uploading` campaign is touched. It has no
 * attempts to delete: the scheduler releases nothing of it.
 */
export async function deleteUpload(db: Db, id: string): Promise<void> {
  for (;;) {
    const deleted = await db.transaction(async (tx) => {
      const [held] = await tx
        .select({ id: campaigns.id })
        .from(campaigns)
        .where(and(eq(campaigns.id, id), eq(campaigns.state, 'uploading')))
        .for('update');
      if (!held) return 0;
      const [row] = rowsOf<{ n: number }>(
        await tx.execute(sql`
          with gone as (
            delete from campaign_recipients where id in (
              select id from campaign_recipients where campaign_id = ${id}
              limit ${UPLOAD_ROWS_PER_TRANSACTION})
            returning 1)
          select count(*)::int as n from gone`),
      );
      return row?.n ?? 0;
    });
    if (deleted < UPLOAD_ROWS_PER_TRANSACTION) break;
  }
  await db.transaction(async (tx) => {
    const [held] = await tx
      .delete(campaigns)
      .where(and(eq(campaigns.id, id), eq(campaigns.state, 'uploading')))
      .returning({ id: campaigns.id });
    if (!held) return;
    // what the batches left (none, unless rows came in after the last), then the counts the
    // deletes appended: the campaign is gone, so they would count for nobody
    await tx.execute(sql`delete from campaign_recipients where campaign_id = ${id}`);
    await tx.execute(sql`delete from campaign_counts where campaign_id = ${id}`);
  });
}

/**
 * Deletes the uploads left behind (campaigns `uploading` and untouched for `STALE_UPLOAD_MS`);
 * how many. Run by the leader's scheduler each round.
 */
export async function sweepStaleUploads(deps: {
  db: Db;
  clock: Clock;
  logger: Logger;
}): Promise<number> {
  const cutoff = new Date(deps.clock.now().getTime() - STALE_UPLOAD_MS);
  // taken at once, all of them: an upload still alive finds its campaign changed and stops;
  // the epoch keeps one whose delete is cut short stale for the next round
  const stale = await deps.db
    .update(campaigns)
    .set({ updatedAt: new Date(0) })
    .where(and(eq(campaigns.state, 'uploading'), lt(campaigns.updatedAt, cutoff)))
    .returning({ id: campaigns.id });
  for (const { id } of stale) {
    await deleteUpload(deps.db, id);
    deps.logger.warn({ campaign: id }, 'an unfinished upload deleted: its campaign was stale');
  }
  return stale.length;
}
