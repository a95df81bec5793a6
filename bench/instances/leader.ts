/**
 * Who leads the dispatch, seen from Postgres, for `npm run bench:instances`. The leader is
 * the instance whose session holds the advisory lock of src/workers.ts (`LEADER_LOCK`, taken
 * by `createLeaderLock` in src/db/client.ts with pg_try_advisory_lock on a connection of its
 * own): pg_locks shows the holder's backend, and pg_stat_activity that backend's
 * application_name, which the bench sets per instance in its DATABASE_URL
 * (`?application_name=sb-2`). Only the bench database's locks count: other benches on the
 * same server take the same key in theirs.
 *
 * @example
 * const watch = watchLeader(db.sql, 100);
 * // ... the run ...
 * const seen = watch.stop(); // { samples, mostHolders, bySample, changes }
 */
import type postgres from 'postgres';
import { LEADER_LOCK } from '../../src/workers.ts';

/** The application_names of the sessions that hold the leader lock now (normally one). */
export async function leaderHolders(sql: postgres.Sql): Promise<string[]> {
  // a bigint key: its high half is classid (0 here), its low half objid, objsubid 1
  const rows = await sql<{ name: string | null }[]>`
    select a.application_name as name
    from pg_locks l join pg_stat_activity a on a.pid = l.pid
    where l.locktype = 'advisory' and l.granted
      and l.database = (select oid from pg_database where datname = current_database())
      and l.classid = 0 and l.objid = ${LEADER_LOCK} and l.objsubid = 1`;
  return rows.map((r) => r.name ?? '?');
}

export interface LeaderSeen {
  samples: number;
  /** the most holders seen at one sample: 1 means one leader at a time */
  mostHolders: number;
  /** samples with no holder once one had been seen (between a leader's death and the next) */
  noHolder: number;
  /** samples per holder */
  bySample: Record<string, number>;
  /** when the holder changed, ms since the epoch */
  changes: { at: number; from: string | null; to: string | null }[];
  everyMs: number;
}

/** Samples the holders every `everyMs` (one query at a time) until `stop`. */
export function watchLeader(sql: postgres.Sql, everyMs: number) {
  const seen: LeaderSeen = {
    samples: 0,
    mostHolders: 0,
    noHolder: 0,
    bySample: {},
    changes: [],
    everyMs,
  };
  let current: string | null = null;
  let busy = false;
  const take = async () => {
    if (busy) return;
    busy = true;
    try {
      const holders = await leaderHolders(sql);
      seen.samples++;
      seen.mostHolders = Math.max(seen.mostHolders, holders.length);
      if (holders.length === 0 && seen.changes.length > 0) seen.noHolder++;
      const now = holders.length === 0 ? null : holders.sort().join('+');
      if (now !== null) seen.bySample[now] = (seen.bySample[now] ?? 0) + 1;
      if (now !== current) seen.changes.push({ at: Date.now(), from: current, to: now });
      current = now;
    } catch {
      // the bench database is going away: the samples so far stand
    } finally {
      busy = false;
    }
  };
  const timer = setInterval(() => void take(), everyMs);
  return {
    stop(): LeaderSeen {
      clearInterval(timer);
      return seen;
    },
  };
}

/**
 * When an instance last logged that it became the leader, after `since` (ms since the epoch),
 * from its JSON log lines (pino's `time`): the moment its tryAcquire came back true.
 */
export function becameLeaderAt(log: string, since: number): number | undefined {
  let at: number | undefined;
  for (const line of log.split('\n')) {
    if (!line.includes('"became dispatcher leader"')) continue;
    const time = Number(line.match(/"time":(\d+)/)?.[1]);
    if (time >= since && (at === undefined || time < at)) at = time;
  }
  return at;
}
