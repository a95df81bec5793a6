/**
 * An incoming Viber message's raw body gets its outcome in the inbox's day partition of the
 * time it was received (src/messages/inbound.ts), on PGlite and on Postgres: the update names
 * that time, so it looks in one day, and it must still find the body on any day.
 */
import { sql } from 'drizzle-orm';
import { expect, it } from 'vitest';
import { type Db, rowsOf } from '../../src/db/client.ts';
import { ensurePartitions } from '../../src/db/partitions.ts';
import { ingestViber } from '../../src/messages/inbound.ts';
import { DEFAULT_STATUS_MAP } from '../../src/provider/statuses.ts';
import { describeEachEngine } from '../support/db.ts';

const DAY = 86_400_000;
// days well before today, so no partition of today's meets them
const D0 = Math.floor(Date.now() / DAY) * DAY - 400 * DAY;

/** Where the raw body `id` is stored, and its outcome. */
async function body(db: Db, id: number) {
  const [row] = rowsOf<{ part: string; outcome: unknown }>(
    await db.execute(
      sql`select tableoid::regclass::text as part, outcome from inbox where id = ${id}`,
    ),
  );
  return row;
}

describeEachEngine('the outcome of an incoming message', (ctx) => {
  const db = (): Db => ctx.database().db;

  it('is written on the body in its own day, a day made or not', async () => {
    await ensurePartitions(db(), new Date(D0), 1);
    // the second day's partition was made, the fifth's was not (its body is in the default)
    for (const [ms, part] of [
      [
        D0 + DAY + 3_600_000,
        `inbox_p${new Date(D0 + DAY).toISOString().slice(0, 10).replaceAll('-', '')}`,
      ],
      [D0 + 5 * DAY + 60_000, 'inbox_default'],
    ] as const) {
      const at = new Date(ms);
      const result = await ingestViber(
        { db: db(), clock: { now: () => at }, statusMap: DEFAULT_STATUS_MAP },
        {
          contentType: 'application/json',
          body: JSON.stringify({
            idUuid: `in-${ms}`,
            alphaName: 'Shop',
            phoneNumber: '380501234567',
            text: 'hello',
            dt: at.toISOString(),
          }),
        },
      );
      expect(result).toMatchObject({ duplicate: false, events: 1, matched: 1, problems: [] });
      const row = await body(db(), result.inboxId!);
      expect(row?.part).toBe(part);
      expect(row?.outcome).toEqual({ events: 1, matched: 1, pending: 0, problems: [] });
    }
  });
});
