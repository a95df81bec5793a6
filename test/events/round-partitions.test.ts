/**
 * The event-delivery worker reads a round's events by their ids as one array
 * (src/events/deliver.ts `eventsByIds`), so that Postgres plans only the day partitions that
 * hold them: the join through `outgoing_events` it replaced planned every day kept, 17 ms a
 * claim at a year of days (docs/scaling.md, "Partitions"). What a statement planned shows in
 * the locks its transaction holds: the planner locks each partition it considers, and a
 * partition pruned while planning is never opened.
 */
import { sql } from 'drizzle-orm';
import { expect, it } from 'vitest';
import { type Db, rowsOf, type Tx } from '../../src/db/client.ts';
import { ensurePartitions } from '../../src/db/partitions.ts';
import { eventsByIds } from '../../src/events/deliver.ts';
import { describeEachEngine } from '../support/db.ts';
import { insertEndpoint, insertEvent } from './delivery-helpers.ts';

const DAY = 86_400_000;
const DAYS = 40;
// days well in the past, within the years a UUIDv7's day is believed
const D0 = Math.floor(Date.now() / DAY) * DAY - 100 * DAY;
const dayName = (ms: number) =>
  `outgoing_events_p${new Date(ms).toISOString().slice(0, 10).replaceAll('-', '')}`;

/** The day partitions of outgoing_events this transaction holds a lock on. */
async function lockedDays(tx: Tx): Promise<string[]> {
  return rowsOf<{ name: string }>(
    await tx.execute(sql`
      select c.relname::text as name from pg_locks l join pg_class c on c.oid = l.relation
      where l.pid = pg_backend_pid() and c.relkind = 'r'
        and c.relname::text like 'outgoing_events_p%'`),
  )
    .map((r) => r.name)
    .sort();
}

describeEachEngine('the events of a delivery round', (ctx) => {
  const db = (): Db => ctx.database().db;

  it('are read from their own days only, however many days are kept', async () => {
    for (let i = 0; i < DAYS; i++) await ensurePartitions(db(), new Date(D0 + i * DAY), 0);
    const ep = await insertEndpoint(db(), { url: 'https://receiver.example.org/hook' });
    const a = await insertEvent(db(), [ep.id], { at: new Date(D0 + 3 * DAY + 1000) });
    const b = await insertEvent(db(), [ep.id], { at: new Date(D0 + 7 * DAY + 1000) });

    const read = await db().transaction(async (tx) => {
      const events = await eventsByIds(tx, [a.eventId, b.eventId]);
      return { events, days: await lockedDays(tx) };
    });
    expect([...read.events.keys()].sort()).toEqual([a.eventId, b.eventId].sort());
    expect(read.events.get(a.eventId)).toMatchObject({ type: 'call.ended' });
    expect(read.days).toEqual([dayName(D0 + 3 * DAY), dayName(D0 + 7 * DAY)]);

    // the yardstick: the same events through a join with their deliveries plan every day
    const joined = await db().transaction(async (tx) => {
      await tx.execute(sql`
        select ev.id from event_deliveries d join outgoing_events ev on ev.id = d.event_id
        where d.endpoint_id = ${ep.id}`);
      return lockedDays(tx);
    });
    expect(joined.length).toBeGreaterThanOrEqual(DAYS);
  });
});
