/** Durable call timers: fired when due by any instance, after a restart too. */
import { asc, eq, lte, sql } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { callTimers } from '../db/schema/index.ts';
import { subscriptionsOf } from '../events/subscriptions.ts';
import { applyTimer } from './apply.ts';
import type { EventDeps } from './deps.ts';
import { createCallPlan } from './plan.ts';
import { lockedOnce } from './status-hooks.ts';
import { writePlan } from './write-plan.ts';

/** Fires due timers (any instance; SKIP LOCKED keeps two from firing one). Returns how many. */
export async function fireDueTimers(deps: EventDeps, limit = 100): Promise<number> {
  let queued = 0;
  const fired = await deps.db.transaction(async (tx) => {
    const plan = createCallPlan(deps.clock.now());
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
      await applyTimer(tx, deps, call, t.timer, plan);
    }
    queued = await writePlan(tx, plan, subscriptionsOf(deps.db));
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
