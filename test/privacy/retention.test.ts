/**
 * RETENTION_DAYS: raw callback bodies, message texts and events older than the limit go, in
 * small batches; newer ones, message head rows, calls and the flow statistics stay. Rows that
 * someone holds are passed over, never waited for. AUDIT_RETENTION_DAYS: the audit log's own
 * limit, applied by a running server's retention worker as soon as it leads.
 */
import { eq, sql } from 'drizzle-orm';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Clock } from '../../src/clock.ts';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { type Db, openDatabase, rowsOf } from '../../src/db/client.ts';
import {
  auditLog,
  callEvents,
  calls,
  flowStats,
  messages,
  outbox,
} from '../../src/db/schema/index.ts';
import { uuidv7, uuidv7Floor } from '../../src/ids.ts';
import { runAuditRetention, runRetention } from '../../src/privacy/retention.ts';
import { buildTestApp, json, phone, readJson, uniq } from '../support/app.ts';
import { describeEachEngine, insertAuditRow } from '../support/db.ts';
import { eventually, startTestServer } from '../support/server.ts';
import { ONE_CONNECTION, onlyIf } from '../support/skip.ts';

const DAY = 86_400_000;
const at = (iso: string): Clock => ({ now: () => new Date(iso) });
const OLD = '2026-01-01T12:00:00.000Z';
const NOW = '2026-02-10T12:00:00.000Z'; // 40 days later
const RECENT = '2026-02-05T12:00:00.000Z'; // 5 days before NOW

describe('RETENTION_DAYS', () => {
  it('is unset by default (keep forever), a number of days when set, and never 0', () => {
    expect(loadConfig({}).retentionDays).toBeUndefined();
    expect(loadConfig({ RETENTION_DAYS: ' 30 ' }).retentionDays).toBe(30);
    for (const bad of ['0', '-1', '1.5', 'month']) {
      expect(() => loadConfig({ RETENTION_DAYS: bad }), bad).toThrow(ConfigError);
    }
  });

  it('finds old messages by their UUIDv7 ids', () => {
    const when = new Date(OLD);
    const floor = uuidv7Floor(when);
    expect(uuidv7(when.getTime() - 1) < floor).toBe(true);
    expect(uuidv7(when.getTime()) >= floor).toBe(true);
  });
});

describeEachEngine('runRetention', (ctx) => {
  const db = (): Db => ctx.database().db;
  const count = async (query: ReturnType<typeof sql>) =>
    Number(rowsOf<{ n: number | string }>(await db().execute(query))[0]?.n);
  const flow = uniq('flow');
  const ids = { oldSent: uniq('old-sent'), oldUnsent: uniq('old-unsent'), recent: uniq('recent') };
  const oldText = `old words ${uniq('w')}`;

  /** Messages, callbacks, Viber messages and call events at a given time. */
  async function writeAt(iso: string, cmids: string[], text: string) {
    const { app } = buildTestApp(ctx.database(), { clock: at(iso) });
    const to = phone();
    const res = await app.request(
      '/v1/messages',
      json({
        messages: cmids.map((customerMessageId) => ({
          from: 'Acme',
          to,
          type: 'sms',
          text,
          customerMessageId,
          fallbacks: [{ from: 'Acme', to, type: 'sms', text: `${text} (fallback)` }],
        })),
      }),
    );
    expect(res.status).toBe(202);
    for (const cmid of cmids) {
      const hook = await app.request(
        '/hooks/delivery',
        json({ customerMessageId: cmid, status: 'delivered', to, text }),
      );
      expect(hook.status).toBe(200);
    }
    await app.request('/hooks/viber', json({ messageId: uniq('v'), from: to, text }));
    const callId = uuidv7(new Date(iso).getTime());
    await db().insert(calls).values({
      id: callId,
      flowId: flow,
      flowVersion: 'v1',
      to,
      from: 'Clinic',
      lang: 'en',
      vars: {},
      state: 'ended',
      snapshot: {},
      messageId: callId,
    });
    await db()
      .insert(callEvents)
      .values([1, 2, 3].map((i) => ({ callId, kind: 'key', key: String(i), at: new Date(iso) })));
  }

  beforeAll(async () => {
    await writeAt(
      OLD,
      [ids.oldSent, ids.oldUnsent, uniq('old'), uniq('old'), uniq('old')],
      oldText,
    );
    await writeAt(RECENT, [ids.recent], 'recent words');
    // every message was sent but one old one, still waiting in the outbox
    await db().execute(sql`delete from outbox where message_id <> (
      select id from messages where customer_message_id = ${ids.oldUnsent})`);
    await db().insert(flowStats).values({ flowId: flow, metric: 'started', subject: '', count: 7 });
  });

  it('does nothing without RETENTION_DAYS', async () => {
    const result = await runRetention(db(), at(NOW), undefined, 2);
    expect(result).toEqual({
      removed: {
        rawCallbacks: 0,
        callbackKeys: 0,
        eventPartitions: 0,
        messageEvents: 0,
        callEvents: 0,
        messageTexts: 0,
        outgoingEvents: 0,
        campaignRecipients: 0,
      },
      more: false,
    });
    // all of beforeAll's: 5 + 1 delivery callbacks and 2 Viber messages
    expect(await count(sql`select count(*) as n from inbox`)).toBe(8);
  });

  it('removes what is older than the limit, a small batch at a time, and keeps the rest', async () => {
    const inboxBefore = await count(sql`select count(*) as n from inbox`);
    const rounds: { more: boolean }[] = [];
    const total = {
      rawCallbacks: 0,
      callbackKeys: 0,
      eventPartitions: 0,
      messageEvents: 0,
      callEvents: 0,
      messageTexts: 0,
      outgoingEvents: 0,
      campaignRecipients: 0,
    };
    for (;;) {
      const result = await runRetention(db(), at(NOW), 30, 2);
      rounds.push(result);
      for (const k of Object.keys(total) as (keyof typeof total)[]) total[k] += result.removed[k];
      // a cap per round, the property under test: a batch of 2 of each kind of row
      for (const n of Object.values(result.removed)) expect(n).toBeLessThanOrEqual(2);
      if (!result.more) break;
      expect(rounds.length).toBeLessThan(50);
    }
    // the ten old message events take five full batches of 2; the sixth round finds none left
    expect(rounds.length).toBe(6);
    // five old delivery callbacks and one old Viber message; 5 queued + 5 delivered events;
    // three old call events; four old messages sent (the fifth is waiting). No day partition
    // was made here (the server makes them: test/db/partitions.test.ts), so every event is in
    // the default partitions, removed row by row
    expect(total).toEqual({
      rawCallbacks: 6,
      // and their dedup keys
      callbackKeys: 6,
      eventPartitions: 0,
      messageEvents: 10,
      callEvents: 3,
      messageTexts: 4,
      outgoingEvents: 0,
      campaignRecipients: 0,
    });

    const cutoff = new Date(new Date(NOW).getTime() - 30 * DAY).toISOString();
    expect(
      await count(sql`select count(*) as n from inbox where received_at < ${cutoff}::timestamptz`),
    ).toBe(0);
    expect(await count(sql`select count(*) as n from inbox`)).toBe(inboxBefore - 6);
    // a key for every body kept, none for a body gone
    expect(
      await count(sql`select count(*) as n from inbox_keys k
        where not exists (select 1 from inbox i where decode(i.dedup_key, 'hex') = k.dedup_key)`),
    ).toBe(0);
    expect(await count(sql`select count(*) as n from inbox_keys`)).toBe(inboxBefore - 6);
    expect(
      await count(
        sql`select count(*) as n from inbound_messages where at < ${cutoff}::timestamptz`,
      ),
    ).toBe(0);
    expect(await count(sql`select count(*) as n from inbound_messages`)).toBe(1);
    expect(
      await count(
        sql`select count(*) as n from message_events where received_at < ${cutoff}::timestamptz`,
      ),
    ).toBe(0);
    expect(await count(sql`select count(*) as n from call_events`)).toBe(3);
    expect(await count(sql`select count(*) as n from calls`)).toBe(2);
    const [stat] = await db().select().from(flowStats).where(eq(flowStats.flowId, flow));
    expect(stat?.count).toBe(7);

    // the old message keeps its head row and its shape, without the words
    const [old] = await db()
      .select()
      .from(messages)
      .where(eq(messages.customerMessageId, ids.oldSent));
    expect(old?.status).toBe('delivered');
    expect(old?.payload).toEqual({
      from: 'Acme',
      to: old?.to,
      type: 'sms',
      ttl: 86_400,
      customerMessageId: ids.oldSent,
      // stored as sent: one fallback in the docs' form, its from and to the message's
      fallback: { type: 'sms', ttl: 86_400 },
      redacted: 'retention',
    });
    const texts = await db()
      .select({ cmid: messages.customerMessageId, payload: messages.payload })
      .from(messages);
    expect(texts.filter((m) => JSON.stringify(m.payload).includes('old words'))).toEqual([
      { cmid: ids.oldUnsent, payload: expect.anything() },
    ]);
    // ... but the one not sent yet
    const [unsent] = await db()
      .select()
      .from(messages)
      .where(eq(messages.customerMessageId, ids.oldUnsent));
    expect(unsent?.payload).toMatchObject({ text: oldText });
    const [recent] = await db()
      .select()
      .from(messages)
      .where(eq(messages.customerMessageId, ids.recent));
    expect(recent?.payload).toMatchObject({ text: 'recent words' });
    const { app } = buildTestApp(ctx.database());
    const view = await readJson(await app.request(`/v1/messages/${ids.recent}`));
    expect(view.timeline.map((e: { status: string }) => e.status)).toEqual(['queued', 'delivered']);
  });

  it('takes the texts of a message passed over while unsent, once it is sent', async () => {
    const [unsent] = await db()
      .select()
      .from(messages)
      .where(eq(messages.customerMessageId, ids.oldUnsent));
    await db().delete(outbox).where(eq(outbox.messageId, unsent!.id));
    const result = await runRetention(db(), at(NOW), 30, 2);
    expect(result.removed.messageTexts).toBe(1);
    const [after] = await db().select().from(messages).where(eq(messages.id, unsent!.id));
    expect(after?.payload).not.toHaveProperty('text');
    expect((await runRetention(db(), at(NOW), 30, 2)).removed).toEqual({
      rawCallbacks: 0,
      callbackKeys: 0,
      eventPartitions: 0,
      messageEvents: 0,
      callEvents: 0,
      messageTexts: 0,
      outgoingEvents: 0,
      campaignRecipients: 0,
    });
  });

  const passesOver = 'passes over a row someone holds instead of waiting for it';
  it(onlyIf(ctx.engine === 'postgres', passesOver, ONE_CONNECTION), async (test) => {
    const url = ctx.url();
    if (!url) return test.skip(); // one connection on PGlite: nobody else can hold a lock
    const cmid = uniq('held');
    // old, and made after the earlier rounds moved past OLD (as every new message is)
    await writeAt('2026-01-02T12:00:00.000Z', [cmid], 'held words');
    await db().execute(sql`delete from outbox`);
    const other = await openDatabase({ url, maxConnections: 1 });
    try {
      await other.db.transaction(async (tx) => {
        await tx.execute(
          sql`select id from messages where customer_message_id = ${cmid} for update`,
        );
        // a callback holds the message: retention goes on around it (it would hang otherwise)
        let result = await runRetention(db(), at(NOW), 30, 500);
        while (result.more) result = await runRetention(db(), at(NOW), 30, 500);
      });
      const [held] = await db().select().from(messages).where(eq(messages.customerMessageId, cmid));
      expect(held?.payload).toMatchObject({ text: 'held words' });
      await runRetention(db(), at(NOW), 30, 500);
      const [later] = await db()
        .select()
        .from(messages)
        .where(eq(messages.customerMessageId, cmid));
      expect(later?.payload).not.toHaveProperty('text');
    } finally {
      await other.close();
    }
  });
});

describe('AUDIT_RETENTION_DAYS', () => {
  it('is unset by default (keep forever), a number of days when set, and never 0', () => {
    expect(loadConfig({}).auditRetentionDays).toBeUndefined();
    expect(loadConfig({ AUDIT_RETENTION_DAYS: '400' }).auditRetentionDays).toBe(400);
    for (const bad of ['0', '-1', '1.5', 'year']) {
      expect(() => loadConfig({ AUDIT_RETENTION_DAYS: bad }), bad).toThrow(
        /AUDIT_RETENTION_DAYS: must be a whole number of days, at least 1 \(unset keeps the audit log forever\)/,
      );
    }
  });
});

describeEachEngine('runAuditRetention', (ctx) => {
  const db = (): Db => ctx.database().db;
  const audited = async (id: number) =>
    (await db().select({ id: auditLog.id }).from(auditLog).where(eq(auditLog.id, id))).length > 0;

  it('removes the rows older than its limit, a batch at a time, and keeps the rest', async () => {
    const rows = {
      old: [
        await insertAuditRow(db(), new Date(OLD)),
        await insertAuditRow(db(), new Date(OLD)),
        await insertAuditRow(db(), new Date(Date.parse(OLD) + DAY)),
      ],
      recent: await insertAuditRow(db(), new Date(RECENT)),
    };
    // RETENTION_DAYS leaves the audit log alone
    let result = await runRetention(db(), at(NOW), 30, 500);
    while (result.more) result = await runRetention(db(), at(NOW), 30, 500);
    for (const id of rows.old) expect(await audited(id)).toBe(true);
    expect(await runAuditRetention(db(), at(NOW), undefined)).toEqual({ removed: 0, more: false });
    // 30 days kept: the three old rows go, two a batch, oldest first
    expect(await runAuditRetention(db(), at(NOW), 30, 2)).toEqual({ removed: 2, more: true });
    expect(await audited(rows.old[0]!)).toBe(false);
    expect(await audited(rows.old[1]!)).toBe(false);
    expect(await audited(rows.old[2]!)).toBe(true);
    expect(await runAuditRetention(db(), at(NOW), 30, 2)).toEqual({ removed: 1, more: false });
    expect(await audited(rows.old[2]!)).toBe(false);
    expect(await audited(rows.recent)).toBe(true);
  });
});

describeEachEngine('AUDIT_RETENTION_DAYS on a running server', (ctx) => {
  const db = (): Db => ctx.database().db;
  const audited = async (id: number) =>
    (await db().select({ id: auditLog.id }).from(auditLog).where(eq(auditLog.id, id))).length > 0;

  it('removes the old audit rows as soon as it leads, and keeps the rest', async () => {
    const old = await insertAuditRow(db(), new Date(Date.now() - 3 * DAY));
    const fresh = await insertAuditRow(db(), new Date());
    const server = await startTestServer(ctx.database(), { env: { AUDIT_RETENTION_DAYS: '1' } });
    try {
      // the retention worker runs every 5 minutes: this is its run on becoming leader
      await eventually(async () => !(await audited(old)), 10_000, 'the old row removed');
      expect(await audited(fresh)).toBe(true);
    } finally {
      await server.stop();
    }
  });
});
