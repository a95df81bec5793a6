/**
 * A list's time filter as a range of its primary key. Messages and calls take a UUIDv7 id
 * made from the same clock reading as their `created_at` (src/messages/submit.ts,
 * src/calls/start-prepare.ts), so the rows made from `since` to `until` are the ids from
 * `uuidv7Floor(since)` to below `uuidv7Floor(until + 1 ms)`. Filtered on `created_at` alone,
 * a page walked the primary key from the newest row and read every row outside the span
 * until it had found a page, or to the table's end when the span held less than a page (at a
 * million messages 0.3-1.2 s, and it grows with the table); the id range makes Postgres read
 * only the span. The `created_at` conditions stay: the range narrows the read, they decide.
 *
 * @example
 * db.select().from(messages).where(and(...createdWithin(messages, since, until)))
 */
import { gte, lt, lte, type SQL } from 'drizzle-orm';
import type { PgColumn } from 'drizzle-orm/pg-core';
import { uuidv7Floor } from '../ids.ts';

export function createdWithin(
  table: { id: PgColumn; createdAt: PgColumn },
  since: Date | undefined,
  until: Date | undefined,
): SQL[] {
  const ids = createdIds(since, until && new Date(until.getTime() + 1));
  const where: SQL[] = [];
  if (since && ids.from) where.push(gte(table.createdAt, since), gte(table.id, ids.from));
  if (until && ids.below) where.push(lte(table.createdAt, until), lt(table.id, ids.below));
  return where;
}

/**
 * The ids of the rows made from `since` (inclusive) to `before` (exclusive): from
 * `uuidv7Floor(since)`, below `uuidv7Floor(before)`. For statements written by hand (the
 * flow replay's, src/calls/replay.ts), which keep their own `created_at` conditions beside.
 */
export function createdIds(
  since: Date | undefined,
  before: Date | undefined,
): { from?: string; below?: string } {
  return {
    ...(since && { from: uuidv7Floor(since) }),
    ...(before && { below: uuidv7Floor(before) }),
  };
}
