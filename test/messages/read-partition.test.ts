/**
 * `GET /v1/messages/{ref}` reads the timeline from its day partition (src/db/partition-map.ts,
 * readFromDay in src/messages/read.ts): by id at once, by customerMessageId or messageId after
 * finding the id. On PGlite and on Postgres. The fast path is held to the plain one: the read
 * by each of a message's three refs equals the plain read (`throughParent`: one statement
 * through the parent table); and it stays right when the map is behind the catalog (a day
 * dropped or made since it was listed).
 */
import { sql } from 'drizzle-orm';
import { expect, it } from 'vitest';
import type { Db } from '../../src/db/client.ts';
import { forgetPartitions, partitionOf } from '../../src/db/partition-map.ts';
import { ensurePartitions } from '../../src/db/partitions.ts';
import { messages } from '../../src/db/schema/index.ts';
import { uuidv7 } from '../../src/ids.ts';
import { getMessage } from '../../src/messages/read.ts';
import { describeEachEngine } from '../support/db.ts';

const DAY = 86_400_000;
// days well before today, so no partition of today's meets them
const D0 = Math.floor(Date.now() / DAY) * DAY - 300 * DAY;
const dayName = (ms: number) =>
  `message_events_p${new Date(ms).toISOString().slice(0, 10).replaceAll('-', '')}`;

/** A message made at `ms` with the given statuses on its timeline, a second apart. */
async function addMessage(db: Db, ms: number, cmid: string, statuses: string[]) {
  const id = uuidv7(ms);
  await db.insert(messages).values({
    id,
    customerMessageId: cmid,
    providerMessageId: `pm-${cmid}`,
    type: 'sms',
    from: 'Shop',
    to: '380501234567',
    payload: { type: 'sms', from: 'Shop', to: '380501234567', text: 'hi' },
    status: statuses.at(-1)!,
    createdAt: new Date(ms),
    updatedAt: new Date(ms),
  });
  for (const [i, status] of statuses.entries()) {
    const at = new Date(ms + i * 1000).toISOString();
    await db.execute(sql`
      insert into message_events (message_id, status, source, at, received_at)
      values (${id}, ${status}, 'callback', ${at}::timestamptz, ${at}::timestamptz)`);
  }
  return id;
}

/** The reads by id, customerMessageId and messageId, and the plain reads by each, agree. */
async function readBoth(db: Db, id: string, cmid: string) {
  const plain = await getMessage(db, id, { throughParent: true });
  expect(plain.id).toBe(id);
  for (const ref of [id, cmid, `pm-${cmid}`]) {
    expect(await getMessage(db, ref)).toEqual(plain);
    expect(await getMessage(db, ref, { throughParent: true })).toEqual(plain);
  }
  return plain;
}

describeEachEngine('reading a message by id from its day partition', (ctx) => {
  const db = (): Db => ctx.database().db;

  it('finds the day of an id, and none for a day not made or an id without a time', async () => {
    await ensurePartitions(db(), new Date(D0), 1);
    forgetPartitions(db());
    expect(await partitionOf(db(), 'message_events', uuidv7(D0 + 5000))).toBe(dayName(D0));
    expect(await partitionOf(db(), 'message_events', uuidv7(D0 + DAY + 5000))).toBe(
      dayName(D0 + DAY),
    );
    expect(await partitionOf(db(), 'message_events', uuidv7(D0 + 9 * DAY))).toBeUndefined();
    // a v4 id: its first bits are no time of a day made
    expect(
      await partitionOf(db(), 'message_events', '5b8e2c1a-0d4f-4c2b-9a1e-3f6d7c8b9a0e'),
    ).toBeUndefined();
  });

  it('reads the same message and timeline as through the parent, whatever the day', async () => {
    const inDay = await addMessage(db(), D0 + 1000, 'rp-in-day', ['queued', 'sent', 'delivered']);
    // no partition for this day: its events wait in the default partition
    const notMade = await addMessage(db(), D0 + 5 * DAY, 'rp-not-made', ['queued', 'failed']);
    const a = await readBoth(db(), inDay, 'rp-in-day');
    expect(a.timeline.map((e) => e.status)).toEqual(['queued', 'sent', 'delivered']);
    const b = await readBoth(db(), notMade, 'rp-not-made');
    expect(b.timeline.map((e) => e.status)).toEqual(['queued', 'failed']);
  });

  it('gives a customerMessageId shaped like an id of a day made its own timeline', async () => {
    const looksLikeId = uuidv7(D0 + 2000);
    const id = await addMessage(db(), D0 + 3000, looksLikeId, ['queued', 'accepted']);
    const view = await getMessage(db(), looksLikeId);
    expect(view.id).toBe(id);
    expect(view.timeline.map((e) => e.status)).toEqual(['queued', 'accepted']);
    expect(view).toEqual(await getMessage(db(), looksLikeId, { throughParent: true }));
  });

  it('names the same message by each ref as the plain read, a customerMessageId first', async () => {
    // one message's customerMessageId is the other's messageId: the customerMessageId wins
    const named = await addMessage(db(), D0 + 4000, 'pm-rp-other', ['queued', 'sent']);
    await addMessage(db(), D0 + DAY + 4000, 'rp-other', ['queued', 'delivered']);
    const view = await getMessage(db(), 'pm-rp-other');
    expect(view.id).toBe(named);
    expect(view).toEqual(await getMessage(db(), 'pm-rp-other', { throughParent: true }));
    for (const how of [{}, { throughParent: true }]) {
      await expect(getMessage(db(), 'rp-nothing', how)).rejects.toMatchObject({
        code: 'NOT_FOUND',
      });
    }
  });

  it('reads through the parent when the day was dropped or made after it was listed', async () => {
    const d = D0 + 20 * DAY;
    await ensurePartitions(db(), new Date(d), 0);
    forgetPartitions(db());
    const id = await addMessage(db(), d + 1000, 'rp-dropped', ['queued', 'sent']);
    expect((await readBoth(db(), id, 'rp-dropped')).timeline).toHaveLength(2);
    // dropped behind the map's back, as retention on another instance drops a day
    await db().execute(sql.raw(`drop table ${dayName(d)}`));
    expect(await partitionOf(db(), 'message_events', id)).toBe(dayName(d));
    const after = await readBoth(db(), id, 'rp-dropped');
    expect(after.timeline).toEqual([]);
    // the failed read made the map list the catalog again
    expect(await partitionOf(db(), 'message_events', id)).toBeUndefined();

    // a day made after the map was listed: its rows move out of the default partition
    const late = D0 + 30 * DAY;
    const lateId = await addMessage(db(), late + 1000, 'rp-late', ['queued', 'delivered']);
    expect(await partitionOf(db(), 'message_events', lateId)).toBeUndefined();
    await ensurePartitions(db(), new Date(late), 0);
    expect((await readBoth(db(), lateId, 'rp-late')).timeline).toHaveLength(2);
    forgetPartitions(db());
    expect(await partitionOf(db(), 'message_events', lateId)).toBe(dayName(late));
    expect((await readBoth(db(), lateId, 'rp-late')).timeline).toHaveLength(2);
  });
});
