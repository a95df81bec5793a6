/**
 * Updates of a raw body after it was stored name the time it was received, its day
 * partition's key, so each looks in one day of the inbox, on PGlite and on Postgres: an
 * incoming Viber message's outcome (src/messages/inbound.ts), and the count of a delivery
 * callback's waiting events when they are attached to their message (attachPending,
 * src/messages/ingest.ts). Each must still find its body on any day, made or not.
 */
import { sql } from 'drizzle-orm';
import { expect, it } from 'vitest';
import { type Db, rowsOf } from '../../src/db/client.ts';
import { ensurePartitions } from '../../src/db/partitions.ts';
import { messages } from '../../src/db/schema/index.ts';
import { uuidv7 } from '../../src/ids.ts';
import { ingestViber } from '../../src/messages/inbound.ts';
import { attachPending, ingestDelivery } from '../../src/messages/ingest.ts';
import { getMessage } from '../../src/messages/read.ts';
import { DEFAULT_STATUS_MAP } from '../../src/provider/statuses.ts';
import { describeEachEngine } from '../support/db.ts';

const DAY = 86_400_000;
// days well before today, so no partition of today's meets them
const D0 = Math.floor(Date.now() / DAY) * DAY - 400 * DAY;

/** Where the raw body `id` is stored, its outcome and its count of waiting events. */
async function body(db: Db, id: number) {
  const [row] = rowsOf<{ part: string; outcome: unknown; pending: number }>(
    await db.execute(
      sql`select tableoid::regclass::text as part, outcome, pending from inbox where id = ${id}`,
    ),
  );
  return row;
}

const dayPart = (ms: number) =>
  `inbox_p${new Date(ms).toISOString().slice(0, 10).replaceAll('-', '')}`;

describeEachEngine('updates of a stored raw body', (ctx) => {
  const db = (): Db => ctx.database().db;

  it("writes an incoming message's outcome on its body, in its own day, made or not", async () => {
    await ensurePartitions(db(), new Date(D0), 1);
    // the second day's partition was made, the fifth's was not (its body is in the default)
    for (const [ms, part] of [
      [D0 + DAY + 3_600_000, dayPart(D0 + DAY)],
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

  it("lowers a callback body's count of waiting events when they are attached, in its own day", async () => {
    await ensurePartitions(db(), new Date(D0 + 10 * DAY), 0);
    for (const [ms, part] of [
      [D0 + 10 * DAY + 3_600_000, dayPart(D0 + 10 * DAY)],
      [D0 + 14 * DAY + 60_000, 'inbox_default'],
    ] as const) {
      const at = new Date(ms);
      const deps = { db: db(), clock: { now: () => at }, statusMap: DEFAULT_STATUS_MAP };
      const cmid = `attach-${ms}`;
      // the callback comes before its message is stored: its event waits
      const result = await ingestDelivery(deps, {
        contentType: 'application/json',
        body: JSON.stringify({ customerMessageId: cmid, status: 'delivered', timestamp: at }),
      });
      expect(result).toMatchObject({ duplicate: false, matched: 0, pending: 1 });
      expect(await body(db(), result.inboxId!)).toMatchObject({ part, pending: 1 });
      await db()
        .insert(messages)
        .values({
          id: uuidv7(ms - 60_000),
          customerMessageId: cmid,
          type: 'sms',
          from: 'Shop',
          to: '380501234567',
          payload: { type: 'sms', from: 'Shop', to: '380501234567', text: 'hi' },
          status: 'sent',
          createdAt: new Date(ms - 60_000),
          updatedAt: new Date(ms - 60_000),
        });
      expect(await attachPending(deps)).toBe(1);
      expect(await body(db(), result.inboxId!)).toMatchObject({ part, pending: 0 });
      expect((await getMessage(db(), cmid)).status).toBe('delivered');
    }
  });
});
