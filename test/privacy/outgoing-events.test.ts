/**
 * Events for the user's endpoints hold numbers and texts, so privacy reaches them too:
 * DELETE /v1/subjects/{phone} deletes the events about the number's messages and those that
 * mention it (an incoming Viber message from it), with their deliveries, and keeps everyone
 * else's; RETENTION_DAYS removes old events once no endpoint is still being retried for them.
 */
import { randomBytes } from 'node:crypto';
import { eq, sql } from 'drizzle-orm';
import { beforeAll, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import { rowsOf } from '../../src/db/client.ts';
import { endpoints, eventDeliveries, messages, outgoingEvents } from '../../src/db/schema/index.ts';
import { subscriptionsOf } from '../../src/events/subscriptions.ts';
import { runRetention } from '../../src/privacy/retention.ts';
import { buildTestApp, json, phone, readJson, uniq } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';

const DAY = 86_400_000;

describeEachEngine("the user's events and privacy", (ctx) => {
  let app: App;
  const db = () => ctx.database().db;
  const P = phone();
  const Q = phone();
  const cm = { p: uniq('p'), q: uniq('q') };
  const messageIdOf: Record<string, string> = {};
  // the events about a number: its message's (by subject) and those whose data names it
  const eventsAbout = async (number: string) =>
    rowsOf<{ id: string; type: string }>(
      await db().execute(
        sql`select id, type from outgoing_events
            where subject = ${`message:${messageIdOf[number]}`}
              or data::text like ${`%${number.slice(1)}%`}`,
      ),
    );

  beforeAll(async () => {
    ({ app } = buildTestApp(ctx.database()));
    // an endpoint that wants every type, inserted as the endpoints store would
    await db()
      .insert(endpoints)
      .values({
        id: `ep_${randomBytes(6).toString('hex')}`,
        url: 'https://receiver.example.org/hook',
        secrets: [{ secret: `whsec_${randomBytes(24).toString('base64')}`, expiresAt: null }],
      });
    subscriptionsOf(db()).changed();
    const sms = (to: string, customerMessageId: string) => ({
      from: 'Acme',
      to,
      type: 'sms',
      text: 'Your order has shipped',
      customerMessageId,
    });
    const res = await app.request('/v1/messages', json({ messages: [sms(P, cm.p), sms(Q, cm.q)] }));
    expect(res.status).toBe(202);
    for (const [customerMessageId, to] of [
      [cm.p, P],
      [cm.q, Q],
    ] as const) {
      const hook = await app.request(
        '/hooks/delivery',
        json({ customerMessageId, status: 'delivered', to }),
      );
      expect(hook.status).toBe(200);
    }
    for (const [number, customerMessageId] of [
      [P, cm.p],
      [Q, cm.q],
    ] as const) {
      const [row] = await db()
        .select({ id: messages.id })
        .from(messages)
        .where(eq(messages.customerMessageId, customerMessageId));
      messageIdOf[number] = row!.id;
    }
    for (const from of [P, Q]) {
      const hook = await app.request(
        '/hooks/viber',
        json({ messageId: uniq('v'), from, text: 'hello' }),
      );
      expect(hook.status).toBe(200);
    }
  });

  it('erasing a number deletes the events about it and keeps the others', async () => {
    // queued and delivered for each message, and each number's Viber message
    const aboutP = await eventsAbout(P);
    expect(aboutP.map((e) => e.type).sort()).toEqual([
      'inbound.viber',
      'message.status',
      'message.status',
    ]);
    const aboutQ = await eventsAbout(Q);
    expect(aboutQ).toHaveLength(3);

    const res = await app.request(`/v1/subjects/${encodeURIComponent(P)}`, { method: 'DELETE' });
    expect(res.status).toBe(200);
    const report = await readJson(res);
    expect(report.removed.outgoingEvents).toBe(aboutP.length);

    expect(await eventsAbout(P)).toEqual([]);
    expect((await eventsAbout(Q)).map((e) => e.id).sort()).toEqual(aboutQ.map((e) => e.id).sort());
    // their deliveries went with them
    const orphans = rowsOf<{ n: number | string }>(
      await db().execute(sql`select count(*) as n from event_deliveries d
        where not exists (select 1 from outgoing_events o where o.id = d.event_id)`),
    );
    expect(Number(orphans[0]!.n)).toBe(0);
  });

  it('retention removes old events once delivered, and keeps one still being retried', async () => {
    const left = await eventsAbout(Q);
    expect(left.length).toBeGreaterThanOrEqual(2);
    const [retried, ...done] = left;
    // all of them older than the limit; every delivery done but one event's
    await db().execute(sql`update outgoing_events set created_at = now() - interval '40 days'`);
    await db()
      .update(eventDeliveries)
      .set({ state: 'delivered' })
      .where(sql`event_id <> ${retried!.id}::uuid`);

    let removed = 0;
    for (let round = 0; round < 10; round++) {
      const result = await runRetention(db(), { now: () => new Date() }, 30, 500);
      removed += result.removed.outgoingEvents;
      if (!result.more) break;
    }
    expect(removed).toBe(done.length);
    const kept = await db().select({ id: outgoingEvents.id }).from(outgoingEvents);
    expect(kept.map((k) => k.id)).toEqual([retried!.id]);

    // once that one is exhausted (done, replayable until retention), it goes too
    await db()
      .update(eventDeliveries)
      .set({ state: 'exhausted' })
      .where(eq(eventDeliveries.eventId, retried!.id));
    const last = await runRetention(db(), { now: () => new Date(Date.now() + DAY) }, 30, 500);
    expect(last.removed.outgoingEvents).toBe(1);
  });
});
