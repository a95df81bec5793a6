/**
 * The status poller against records in the provider's own shape (docs/api/smsbat/status.md at
 * bc0d114: `deliverystatus`, `extendedStatuses`), served by a stand-in for the provider's
 * GET /bat/message/{messageId}; and the expiry of messages that never get a final status.
 * Every case runs on a database of its own rows, and counts them exactly.
 */
import { eq, sql } from 'drizzle-orm';
import { beforeEach, expect, it } from 'vitest';
import type { Clock } from '../../src/clock.ts';
import { rowsOf } from '../../src/db/client.ts';
import { messages, statusChecks } from '../../src/db/schema/index.ts';
import { createLogger } from '../../src/logger.ts';
import { statusMapWith } from '../../src/messages/delivery-parse.ts';
import { ingestDelivery } from '../../src/messages/ingest.ts';
import { ingestDeliveries } from '../../src/messages/ingest-batch.ts';
import {
  expireOverdue,
  pollOnce,
  pollWaits,
  type StatusLookup,
} from '../../src/messages/poller.ts';
import { getMessage } from '../../src/messages/read.ts';
import { submitMessages } from '../../src/messages/submit.ts';
import type { RecordResult } from '../../src/messages/timeline.ts';
import { phone, uniq } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';
import { recordAccepted } from '../support/dispatched.ts';
import { captureLog } from '../support/log-capture.ts';

const logger = createLogger('silent');
const HOUR = 3_600_000;

/** A clock that stands still until a test moves it. */
function stillClock(start: Date): Clock & { advance(ms: number): void } {
  let now = start.getTime();
  return {
    now: () => new Date(now),
    advance(ms) {
      now += ms;
    },
  };
}

/** The provider's status records by messageId, and every id asked about, in order. */
function provider() {
  const records = new Map<string, unknown>();
  const asked: string[] = [];
  const lookup: StatusLookup = {
    async getMessage(messageId) {
      asked.push(messageId);
      if (!records.has(messageId)) throw new Error(`404 for ${messageId}`);
      return { raw: records.get(messageId) };
    },
  };
  return { records, asked, lookup };
}

describeEachEngine('status poller', (ctx) => {
  let clock: ReturnType<typeof stillClock>;
  let p: ReturnType<typeof provider>;
  let recorded: RecordResult[];
  const db = () => ctx.database().db;
  const deps = () => ({
    db: db(),
    provider: p.lookup,
    clock,
    logger,
    statusMap: statusMapWith({}),
    onRecorded: async (_tx: unknown, r: RecordResult) => void recorded.push(r),
  });
  const opts = { afterMs: 60_000, everyMs: 60_000, limit: 1000 };

  /** A message the provider accepted an hour ago under `pmid`, quiet since. */
  async function accepted(pmid: string, extra: Record<string, unknown> = {}) {
    const cmid = uniq('poll');
    const before = new Date(clock.now().getTime() - HOUR);
    const { results } = await submitMessages({ db: db(), clock: { now: () => before } }, [
      { from: 'Acme', to: phone(), type: 'sms', text: 'x', customerMessageId: cmid, ...extra },
    ]);
    await recordAccepted(db(), [{ id: results[0]!.id!, providerMessageId: pmid }], before);
    return cmid;
  }

  beforeEach(async () => {
    clock = stillClock(new Date('2030-01-01T12:00:00Z'));
    p = provider();
    recorded = [];
    // each case counts its own rows: the poller looks at every quiet message of the table
    await db().execute(sql`delete from message_events`);
    await db().execute(sql`delete from messages`);
  });

  it("reads deliverystatus, maps the docs' words, and stops once the status is final", async () => {
    const cmid = await accepted('p-1');
    // status.md, "Processing"
    p.records.set('p-1', { messageId: 'p-1', deliverystatus: 'processing', partscount: 1 });
    expect(await pollOnce(deps(), opts)).toBe(1);
    let v = await getMessage(db(), cmid);
    expect(v.status).toBe('sent');
    expect(v.timeline.at(-1)).toMatchObject({
      status: 'sent',
      source: 'poll',
      detail: { providerStatus: 'processing', messageId: 'p-1' },
    });
    // asked again only after everyMs, and a poll that says nothing new adds nothing
    expect(await pollOnce(deps(), opts)).toBe(0);
    clock.advance(2 * 60_000);
    await db()
      .update(messages)
      .set({ updatedAt: new Date(clock.now().getTime() - HOUR) });
    expect(await pollOnce(deps(), opts)).toBe(1);
    expect((await getMessage(db(), cmid)).timeline).toHaveLength(v.timeline.length);
    // status.md, "Undeliverable": failed, final
    p.records.set('p-1', { deliverystatus: 'undeliverable', partscount: 1, cost: 0.0 });
    clock.advance(2 * 60_000);
    expect(await pollOnce(deps(), opts)).toBe(1);
    v = await getMessage(db(), cmid);
    expect(v.status).toBe('failed');
    expect(v.timeline.at(-1)).toMatchObject({
      status: 'failed',
      detail: { providerStatus: 'undeliverable' },
    });
    expect(recorded.map((r) => `${r.before}->${r.after}`)).toEqual([
      'accepted->sent',
      'sent->failed',
    ]);
    // nothing more is asked about a final status, however long it waits
    clock.advance(48 * HOUR);
    expect(await pollOnce(deps(), opts)).toBe(0);
    expect(p.asked).toEqual(['p-1', 'p-1', 'p-1']);
  });

  it("backs off: each wait between a quiet message's polls doubles, up to the longest", async () => {
    const MINUTE = 60_000;
    const backoff = { ...opts, everyMs: MINUTE, maxEveryMs: 8 * MINUTE };
    const waits = pollWaits(MINUTE, 8 * MINUTE);
    expect(waits).toEqual([MINUTE, 2 * MINUTE, 4 * MINUTE, 8 * MINUTE]);
    // the provider answers 404 for it every time (not in p.records), so nothing ends it
    await accepted('p-gone');
    const log = captureLog();
    const start = clock.now().getTime();
    const askedAt: number[] = [];
    // every half minute for an hour: each poll's time is the schedule's, none early or late
    for (let t = 0; t <= 60 * MINUTE; t += MINUTE / 2) {
      if ((await pollOnce({ ...deps(), logger: createLogger('warn', log.stream) }, backoff)) > 0)
        askedAt.push((clock.now().getTime() - start) / MINUTE);
      clock.advance(MINUTE / 2);
    }
    // the SQL's choice of wait against the schedule, for every poll count up to past the cap
    const expected = [0];
    for (let n = 1; ; n++) {
      const next = expected.at(-1)! + waits[Math.min(n, waits.length) - 1]! / MINUTE;
      if (next > 60) break;
      expected.push(next);
    }
    expect(askedAt).toEqual(expected);
    expect(askedAt).toEqual([0, 1, 3, 7, 15, 23, 31, 39, 47, 55]);
    expect(p.asked).toHaveLength(10);
    // each failure is logged once, with the provider's id, the count and when it is due again
    const lines = log.lines.map((l) => JSON.parse(l));
    expect(lines).toHaveLength(10);
    expect(lines[2]).toMatchObject({
      msg: 'status poll failed',
      messageId: 'p-gone',
      polls: 3,
      nextPollAt: new Date(start + 7 * MINUTE).toISOString(),
    });
    const [row] = await db()
      .select({ pollCount: messages.pollCount })
      .from(messages)
      .where(eq(messages.providerMessageId, 'p-gone'));
    expect(row?.pollCount).toBe(10);
  });

  it('counts a message polled before poll_count existed as polled once', async () => {
    const cmid = await accepted('p-old');
    const last = clock.now();
    await db()
      .update(messages)
      .set({ lastPolledAt: last, pollCount: 0 })
      .where(eq(messages.customerMessageId, cmid));
    const backoff = { ...opts, everyMs: 60_000, maxEveryMs: 600_000 };
    clock.advance(59_000);
    expect(await pollOnce(deps(), backoff)).toBe(0);
    clock.advance(1_000);
    expect(await pollOnce(deps(), backoff)).toBe(1);
    // its second poll: the next wait is the schedule's second, 2 minutes
    clock.advance(119_000);
    expect(await pollOnce(deps(), backoff)).toBe(0);
    clock.advance(1_000);
    expect(await pollOnce(deps(), backoff)).toBe(1);
  });

  it.each([
    [300_000, 3_600_000, [300_000, 600_000, 1_200_000, 2_400_000, 3_600_000]],
    [300_000, 300_000, [300_000]],
    [300_000, undefined, [300_000]],
    [60_000, 100_000, [60_000, 100_000]],
  ])('pollWaits(%i, %s): the waits after each poll', (every, max, waits) => {
    expect(pollWaits(every, max)).toEqual(waits);
  });

  it.each([
    ['scheduled', 'accepted'],
    ['processing', 'sent'],
    ['delivered', 'delivered'],
    ['undeliverable', 'failed'],
    ['permanenterror', 'failed'],
  ])('maps %s to %s (status.md, "Delivery Status Values")', async (word, status) => {
    const pmid = uniq('w');
    const cmid = await accepted(pmid);
    p.records.set(pmid, { messageId: pmid, deliverystatus: word });
    await pollOnce(deps(), opts);
    expect((await getMessage(db(), cmid)).status).toBe(status);
  });

  it('keeps per-channel statuses on the timeline without moving the status by them', async () => {
    const cmid = await accepted('p-fb', {
      type: 'viber_trans',
      fallback: { type: 'sms', text: 'x' },
    });
    // status.md, "Extended Response (with Fallback)"
    const record = {
      messagelistId: 123456,
      messageId: 'p-fb',
      deliverystatus: 'delivered',
      partscount: 1,
      cost: 0.05,
      fallbacks: [{ type: 'sms', status: 'not_used' }],
      extendedStatuses: { viber: 'delivered', sms: 'not_used' },
    };
    p.records.set('p-fb', record);
    await pollOnce(deps(), opts);
    const v = await getMessage(db(), cmid);
    expect(v.status).toBe('delivered');
    expect(v.deliveredVia).toBe('viber');
    const polled = v.timeline.filter((e) => e.source === 'poll');
    expect(polled.map((e) => [e.status, (e.detail as { channel?: string }).channel])).toEqual([
      ['delivered', undefined],
      ['delivered', 'viber'],
      ['not_used', 'sms'],
    ]);
    expect(polled.filter((e) => (e.detail as { perChannel?: boolean }).perChannel)).toHaveLength(2);
  });

  it('reads the record once more when a channel-less webhook ends a message with fallbacks', async () => {
    const cmid = await accepted('p-check', {
      type: 'viber_trans',
      fallback: { type: 'sms', text: 'x' },
    });
    const plain = await accepted('p-plain');
    // status.md, "Webhook Alternative": the message as a whole, no channel
    const body = (pmid: string) =>
      JSON.stringify({
        messageId: pmid,
        deliverystatus: 'delivered',
        timestamp: '2030-01-01T11:59:00Z',
        cost: 0.05,
      });
    const single = await ingestDelivery(
      { db: db(), clock, statusMap: statusMapWith({}) },
      { contentType: 'application/json', body: body('p-check') },
    );
    expect(single).toMatchObject({ matched: 1, pending: 0 });
    const [batched] = await ingestDeliveries({ db: db(), clock, statusMap: statusMapWith({}) }, [
      { contentType: 'application/json', body: body('p-plain') },
    ]);
    expect(batched).toMatchObject({ matched: 1, pending: 0 });
    // only the message with a fallback gets a check; one without has no channels to learn
    const checks = await db().select().from(statusChecks);
    const [row] = await db()
      .select({ id: messages.id })
      .from(messages)
      .where(eq(messages.customerMessageId, cmid));
    expect(checks.map((c) => c.messageId)).toEqual([row!.id]);
    expect((await getMessage(db(), plain)).status).toBe('delivered');

    p.records.set('p-check', {
      messageId: 'p-check',
      deliverystatus: 'delivered',
      extendedStatuses: { viber: 'undeliverable', sms: 'delivered' },
    });
    expect(await pollOnce(deps(), opts)).toBe(1);
    const v = await getMessage(db(), cmid);
    expect(v.deliveredVia).toBe('sms');
    expect(v.status).toBe('delivered');
    expect(
      v.timeline
        .filter((e) => (e.detail as { perChannel?: boolean } | undefined)?.perChannel)
        .map((e) => `${(e.detail as { channel: string }).channel}:${e.status}`),
    ).toEqual(['viber:failed', 'sms:delivered']);
    expect(await db().select().from(statusChecks)).toEqual([]);
    expect(p.asked).toEqual(['p-check']);
  });

  it('marks expired a message with no final status past its life and the margin, once', async () => {
    const cmid = await accepted('p-ttl', { ttl: 60 });
    const [row] = rowsOf<{ expires_at: string | Date }>(
      await db().execute(sql`select expires_at from messages where customer_message_id = ${cmid}`),
    );
    // the life counts from the submission an hour ago: ttl 60 s
    expect(new Date(row!.expires_at).toISOString()).toBe('2030-01-01T11:01:00.000Z');
    expect(await expireOverdue(deps(), { marginMs: 2 * HOUR })).toBe(0);
    clock.advance(HOUR); // 13:00: the margin runs to 13:01
    expect(await expireOverdue(deps(), { marginMs: 2 * HOUR })).toBe(0);
    clock.advance(2 * 60_000);
    expect(await expireOverdue(deps(), { marginMs: 2 * HOUR })).toBe(1);
    const v = await getMessage(db(), cmid);
    expect(v.status).toBe('expired');
    expect(v.timeline.at(-1)).toMatchObject({
      status: 'expired',
      source: 'expiry',
      detail: { expiresAt: '2030-01-01T11:01:00.000Z', marginMs: 2 * HOUR },
    });
    expect(recorded.map((r) => `${r.before}->${r.after}`)).toEqual(['accepted->expired']);
    // final: never polled, never expired again
    expect(await expireOverdue(deps(), { marginMs: 2 * HOUR })).toBe(0);
    expect(await pollOnce(deps(), opts)).toBe(0);
  });

  it("counts a fallback's life after the message's own", async () => {
    const cmid = await accepted('p-chain', {
      type: 'viber_trans',
      ttl: 600,
      fallback: { type: 'sms', text: 'x', ttl: 300 },
    });
    const [row] = rowsOf<{ expires_at: string | Date }>(
      await db().execute(sql`select expires_at from messages where customer_message_id = ${cmid}`),
    );
    expect(new Date(row!.expires_at).toISOString()).toBe('2030-01-01T11:15:00.000Z');
  });
});
