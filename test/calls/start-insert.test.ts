/**
 * Started calls are stored from one JSON parameter a statement (`insertCalls`,
 * `insertStartedTimers`, src/calls/start-store.ts), a speed-up over drizzle's multi-row
 * inserts. Held to those plain inserts: the same calls and timers through both leave the same
 * rows (the events in the same order), on each engine, for values that stress the JSON road
 * (vars and snapshots of every odd kind, numbers and names in any script).
 */
import { randomUUID } from 'node:crypto';
import { asc, inArray } from 'drizzle-orm';
import { expect, it } from 'vitest';
import {
  insertCalls,
  insertStartedTimers,
  type NewCall,
  type StartedTimer,
} from '../../src/calls/start-store.ts';
import type { Db, Tx } from '../../src/db/client.ts';
import { callEvents, calls, callTimers } from '../../src/db/schema/index.ts';
import { createRandom } from '../../src/sandbox/random.ts';
import { describeEachEngine } from '../support/db.ts';
import { ODD_JSON_VALUES } from '../support/odd-json.ts';

/** The plain inserts the JSON ones replace, as they were: drizzle's multi-row inserts. */
async function plainInsert(
  tx: Tx,
  rows: readonly NewCall[],
  timers: readonly StartedTimer[],
  now: Date,
): Promise<void> {
  await tx.insert(calls).values([...rows]);
  if (timers.length === 0) return;
  await tx.insert(callTimers).values(
    timers.map((t) => ({
      callId: t.callId,
      timer: t.timer,
      fireAt: new Date(now.getTime() + t.afterMs),
    })),
  );
  await tx.insert(callEvents).values(
    timers.map((t) => ({
      callId: t.callId,
      kind: 'timer-started',
      detail: { timer: t.timer, afterMs: t.afterMs },
      at: now,
    })),
  );
}

/** `count` new calls at `now`, with odd vars and snapshots, and one or two timers each. */
function started(seed: number, count: number, now: Date) {
  const random = createRandom(seed);
  const pick = <T>(xs: readonly T[]) => xs[random.int(xs.length)]!;
  const odd = () =>
    Object.fromEntries(
      Array.from({ length: random.int(4) }, (_, k) => [`v${k}`, pick(ODD_JSON_VALUES)]),
    );
  const rows: NewCall[] = Array.from({ length: count }, () => ({
    id: randomUUID(),
    flowId: pick(['appointment-reminder', 'опитування', 'survey_2']),
    flowVersion: randomUUID().slice(0, 12),
    to: `+38050${1000000 + random.int(9000000)}`,
    from: pick(['Switchboard', 'Клініка "Ян"']),
    lang: pick(['en', 'uk', 'pl']),
    vars: odd(),
    state: 'queued',
    snapshot: { value: { main: pick(['say', 'ask']) }, context: odd(), status: 'active' },
    messageId: randomUUID(),
    createdAt: now,
    updatedAt: now,
  }));
  const timers: StartedTimer[] = rows.flatMap((r) =>
    ['no-response', 'ring'].slice(0, 1 + random.int(2)).map((timer) => ({
      callId: r.id,
      timer,
      afterMs: pick([0, 1, 30_000, 86_400_000]),
    })),
  );
  return { rows, timers };
}

/** What `ids`' calls left, each table in its own order (events by id: their order). */
async function stored(db: Db, ids: string[]) {
  const order = new Map(ids.map((id, i) => [id, i]));
  const timers = await db.select().from(callTimers).where(inArray(callTimers.callId, ids));
  return {
    calls: (await db.select().from(calls).where(inArray(calls.id, ids))).sort(
      (a, b) => order.get(a.id)! - order.get(b.id)!,
    ),
    timers: timers
      .map(({ id: _, ...t }) => t)
      .sort(
        (a, b) => order.get(a.callId)! - order.get(b.callId)! || a.timer.localeCompare(b.timer),
      ),
    events: (
      await db
        .select()
        .from(callEvents)
        .where(inArray(callEvents.callId, ids))
        .orderBy(asc(callEvents.id))
    ).map(({ id: _, ...e }) => e),
  };
}

describeEachEngine('started calls, stored from JSON', (ctx) => {
  it('stores what the plain multi-row inserts store, the events in the same order', async () => {
    const db = ctx.database().db;
    const now = new Date('2026-03-01T10:00:00.456Z');
    for (const seed of [1, 2, 3]) {
      const { rows, timers } = started(seed, 300, now);
      const ids = rows.map((r) => r.id);
      await db.transaction((tx) => plainInsert(tx, rows, timers, now));
      const want = await stored(db, ids);
      expect(want.calls).toHaveLength(rows.length);
      expect(want.events).toHaveLength(timers.length);
      // the same calls again, by the JSON road, once the plain ones are gone
      await db.delete(calls).where(inArray(calls.id, ids));
      await db.transaction(async (tx) => {
        await insertCalls(tx, rows);
        await insertStartedTimers(tx, timers, now);
      });
      expect(await stored(db, ids), `seed ${seed}`).toEqual(want);
    }
  });

  it('stores nothing for no calls and no timers', async () => {
    const db = ctx.database().db;
    const before = await db.$count(calls);
    await db.transaction(async (tx) => {
      await insertCalls(tx, []);
      await insertStartedTimers(tx, [], new Date());
    });
    expect(await db.$count(calls)).toBe(before);
  });
});
