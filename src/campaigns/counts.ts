/**
 * A campaign's counts, kept in `campaign_counts` by triggers on its recipients (migration
 * 0022): each statement that moves recipients appends what it moved, and the counts are the
 * sums. `compactCounts` folds a campaign's rows into one per (state, outcome) once they pile
 * up, so that reading its progress sums a few rows, however many recipients it has.
 *
 * Folding is safe beside anything: it deletes rows and inserts their sums in one statement, and
 * a row another transaction appends meanwhile is not among those it deletes. Two folds at once
 * delete each row once (the second skips rows the first deleted), so no change is counted twice
 * or lost.
 *
 * @example
 * await compactCounts(db, runningIds);
 */
import { sql } from 'drizzle-orm';
import { idList, type Queryable } from '../db/client.ts';

/** Rows a campaign may have in `campaign_counts` before its next fold. */
export const COMPACT_AFTER_ROWS = 64;

/** Folds the counts of those of `ids` with more than `afterRows` rows. */
export async function compactCounts(
  db: Queryable,
  ids: readonly string[],
  afterRows = COMPACT_AFTER_ROWS,
): Promise<void> {
  if (ids.length === 0) return;
  await db.execute(sql`
    with piled as (
      select campaign_id from campaign_counts where campaign_id in ${idList(ids, 'uuid')}
      group by campaign_id having count(*) > ${afterRows}::int),
    gone as (
      delete from campaign_counts k using piled p where k.campaign_id = p.campaign_id
      returning k.campaign_id, k.state, k.outcome, k.n, k.attempts)
    insert into campaign_counts (campaign_id, state, outcome, n, attempts)
    select campaign_id, state, outcome, sum(n), sum(attempts) from gone
    group by campaign_id, state, outcome
    having sum(n) <> 0 or sum(attempts) <> 0`);
}
