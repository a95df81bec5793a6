/**
 * Which day partition holds the rows of a UUIDv7 key, from the catalog (`listPartitions`),
 * kept per database for a minute. A read that knows the partition names it in its statement,
 * so that Postgres opens that one partition alone. Through the parent, a statement whose key
 * comes from another table's row (a message's timeline beside the message, found by any of
 * its refs) starts a scan of every day kept and prunes them only as it runs: measured, 70 us
 * of a 250 us read at 33 days, a cost that grows with the days kept, not with the data.
 *
 * The map may be behind the catalog; each way it is safe. A day not in it yet: the caller
 * reads through the parent. A day dropped since it was listed (by retention, on any
 * instance): the caller's statement fails with undefined_table, the caller calls
 * `forgetPartitions` and reads through the parent. A named day partition holds all of its
 * key range: Postgres does not make a partition while the default one holds rows of its range.
 *
 * @example
 * const part = await partitionOf(db, 'message_events', id); // 'message_events_p20261128'
 */
import { uuidv7Time } from '../ids.ts';
import type { Db } from './client.ts';
import { type DayPartition, listPartitions, type PartitionedTable } from './partitions.ts';

/** How long a listing of the partitions is used before it is read again. */
const PARTITION_MAP_MAX_AGE_MS = 60_000;

interface PartitionMap {
  /** per table, oldest first */
  byTable: Map<PartitionedTable, DayPartition[]>;
  listedAt: number;
}

/** A database's map, and the listing under way that will replace it. */
interface Entry {
  map?: PartitionMap;
  refreshing?: Promise<void>;
}

const maps = new WeakMap<Db, Entry>();

function refresh(db: Db, entry: Entry) {
  entry.refreshing ??= listPartitions(db)
    .then((parts) => {
      const byTable = new Map<PartitionedTable, DayPartition[]>();
      for (const p of parts) {
        const list = byTable.get(p.table);
        if (list) list.push(p);
        else byTable.set(p.table, [p]);
      }
      entry.map = { byTable, listedAt: Date.now() };
    })
    .finally(() => {
      entry.refreshing = undefined;
    });
  return entry.refreshing;
}

/**
 * The name of the day partition of `table` that holds key `id` (a UUIDv7), or undefined when
 * none is known to. The first call per database waits for the catalog; later ones answer from
 * the map at once and read the catalog again in the background once it is a minute old.
 */
export async function partitionOf(
  db: Db,
  table: Exclude<PartitionedTable, 'inbox'>,
  id: string,
): Promise<string | undefined> {
  let entry = maps.get(db);
  if (!entry) {
    entry = {};
    maps.set(db, entry);
  }
  if (!entry.map) await refresh(db, entry);
  else if (Date.now() - entry.map.listedAt > PARTITION_MAP_MAX_AGE_MS) {
    // a failed background listing leaves the old map; the next call tries again
    refresh(db, entry).catch(() => {});
  }
  const parts = entry.map?.byTable.get(table);
  if (!parts) return undefined;
  const ms = uuidv7Time(id);
  // binary search: the last partition starting at or before ms
  let lo = 0;
  let hi = parts.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (parts[mid]!.fromMs <= ms) lo = mid + 1;
    else hi = mid - 1;
  }
  const p = parts[hi];
  return p && ms < p.toMs ? p.name : undefined;
}

/** Drops the map of `db`: the next `partitionOf` reads the catalog again. */
export function forgetPartitions(db: Db): void {
  maps.delete(db);
}
