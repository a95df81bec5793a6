/**
 * DELETE /v1/subjects/{phone}: every message, event, outbox row, pending event, inbound
 * message and raw body of the number goes (bodies shared with others keep the others), the
 * answer counts them, and callbacks arriving afterwards about the erased messages are
 * acknowledged and dropped, never kept or attached.
 */
import { eq, sql } from 'drizzle-orm';
import { beforeAll, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import { openDatabase, rowsOf } from '../../src/db/client.ts';
import { erasedIds, messages, pendingEvents } from '../../src/db/schema/index.ts';
import { attachPending, type IngestDeps, ingestDelivery } from '../../src/messages/ingest.ts';
import { hashId } from '../../src/privacy/erased.ts';
import { buildTestApp, json, phone, readJson, uniq } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';
import { eventually } from '../support/server.ts';
import { ONE_CONNECTION, onlyIf } from '../support/skip.ts';

const sms = (to: string, customerMessageId: string, over: Record<string, unknown> = {}) => ({
  from: 'Acme',
  to,
  type: 'sms',
  text: 'Your order has shipped',
  customerMessageId,
  ...over,
});

describeEachEngine('DELETE /v1/subjects/{phone}', (ctx) => {
  let app: App;
  let ingest: IngestDeps;
  const db = () => ctx.database().db;
  const P = phone();
  const Q = phone();
  const digitsP = P.slice(1);
  const cm = { m1: uniq('p-m1'), m2: uniq('p-m2'), x: uniq('p-x'), q1: uniq('q-m1') };
  const pmidOfM2 = uniq('prov');
  const erase = (p: string) =>
    app.request(`/v1/subjects/${encodeURIComponent(p)}`, { method: 'DELETE' });
  const deliver = async (body: unknown, contentType = 'application/json') => {
    const res = await app.request('/hooks/delivery', {
      method: 'POST',
      headers: { 'content-type': contentType },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
    expect(res.status).toBe(200);
    return readJson(res);
  };
  const viber = async (body: unknown) => {
    const res = await app.request('/hooks/viber', json(body));
    expect(res.status).toBe(200);
  };
  const inboxBodies = async (pattern: string) =>
    rowsOf<{ id: number; body: string }>(
      await db().execute(sql`select id, body from inbox where body ~ ${pattern}`),
    );
  let report: Record<string, unknown>;
  let campaignId: string;

  beforeAll(async () => {
    ({ app, ingest } = buildTestApp(ctx.database()));
    const submit = async (list: unknown[]) => {
      const res = await app.request('/v1/messages', json({ messages: list }));
      expect(res.status).toBe(202);
    };
    await submit([
      sms(P, cm.m1, { fallbacks: [{ from: 'Acme', to: P, type: 'sms', text: 'fallback' }] }),
      { from: 'Acme', to: P, type: 'viber_service', text: 'Hi', customerMessageId: cm.m2 },
      sms(Q, cm.q1),
    ]);
    // as if dispatched: the provider's id is known for m2
    await db()
      .update(messages)
      .set({ providerMessageId: pmidOfM2 })
      .where(eq(messages.customerMessageId, cm.m2));
    // a callback about P alone (matched), one that outran its message (pending until it
    // appears; no worker attaches it here), and one that carries P and Q together
    await deliver({ customerMessageId: cm.m1, status: 'sent', to: P });
    expect(await deliver({ customerMessageId: cm.x, status: 'sent', to: P })).toMatchObject({
      pending: 1,
    });
    await submit([sms(P, cm.x)]);
    await deliver([
      { customerMessageId: cm.m1, status: 'delivered', to: P },
      { customerMessageId: cm.q1, status: 'delivered', to: Q },
    ]);
    // Viber: from P alone, and a batch from both (with P written without its +)
    await viber({ messageId: uniq('v'), from: P, text: 'STOP' });
    await viber([
      { messageId: uniq('v'), from: digitsP, text: 'from P' },
      { messageId: uniq('v'), from: Q, text: 'from Q' },
    ]);
    // bodies that only mention the number, and two decoys: longer numbers holding its digits
    await deliver(`call me on ${P} please`, 'text/plain');
    await deliver(`decoys: +${digitsP}9 and 1${digitsP}`, 'text/plain');
    // a campaign listing P and Q (their vars hold their names), and P's contacts of a day
    const made = await app.request(
      '/v1/campaigns',
      json({
        message: { type: 'sms', text: 'Hi {{name}}' },
        from: 'Acme',
        startAt: '2099-01-01T00:00:00Z',
        recipients: [
          { to: P, vars: { name: 'Petro' } },
          { to: Q, vars: { name: 'Queenie' } },
        ],
      }),
    );
    expect(made.status).toBe(201);
    campaignId = (await readJson(made)).id;
    await db().execute(
      sql`insert into contact_counts (phone, day, count) values (${P}, '2026-03-02', 1)`,
    );

    const res = await erase(P);
    expect(res.status).toBe(200);
    report = await readJson(res);
  });

  it('reports what it removed, per kind', () => {
    expect(report).toEqual({
      phone: P,
      erasedAt: expect.any(String),
      removed: {
        messages: 3,
        messageEvents: 5, // three 'queued', m1's 'sent' and 'delivered'
        outbox: 3,
        pendingEvents: 1,
        calls: 0,
        callEvents: 0,
        callTimers: 0,
        heldWebhooks: 0,
        inboundMessages: 2,
        inboundMessagesRedacted: 0,
        rawCallbacks: 4, // m1 sent, x pending, Viber from P, the plain mention
        rawCallbacksRedacted: 2, // the P+Q delivery batch and the P+Q Viber batch
        outgoingEvents: 0, // no endpoint: none were recorded
        prompts: 0, // no spoken prompt was rendered
        campaignRecipients: 1, // P's row of the campaign (Q's stays)
        sandbox: 0, // none built in
      },
    });
  });

  it("takes the number's campaign rows and contact counts, and leaves the others'", async () => {
    const rows = rowsOf<{ phone: string; vars: unknown }>(
      await db().execute(
        sql`select phone, vars from campaign_recipients where campaign_id = ${campaignId}`,
      ),
    );
    expect(rows).toEqual([{ phone: Q, vars: { name: 'Queenie' } }]);
    const counts = rowsOf(await db().execute(sql`select 1 from contact_counts where phone = ${P}`));
    expect(counts).toEqual([]);
  });

  it('leaves nothing of the number: messages, inbound messages, raw bodies', async () => {
    for (const ref of [cm.m1, cm.m2, cm.x, pmidOfM2]) {
      expect((await app.request(`/v1/messages/${ref}`)).status, ref).toBe(404);
    }
    const listed = await readJson(await app.request(`/v1/messages?to=${encodeURIComponent(P)}`));
    expect(listed.items).toEqual([]);
    // nor the number's own table (src/db/schema/message-recipients.ts)
    const recipients = await db().execute(
      sql`select message_id from message_recipients where "to" = ${P}`,
    );
    expect(rowsOf(recipients)).toEqual([]);
    for (const from of [P, digitsP]) {
      const inbound = await readJson(
        await app.request(`/v1/inbound?from=${encodeURIComponent(from)}`),
      );
      expect(inbound.items).toEqual([]);
    }
    expect(await inboxBodies(`(^|[^0-9])${digitsP}([^0-9]|$)`)).toEqual([]);
    for (const id of [cm.m1, cm.m2, cm.x]) expect(await inboxBodies(id)).toEqual([]);
    const pending = await db()
      .select()
      .from(pendingEvents)
      .where(eq(pendingEvents.customerMessageId, cm.x));
    expect(pending).toEqual([]);
  });

  it('keeps everyone else: the other number, and its part of shared bodies', async () => {
    const q1 = await readJson(await app.request(`/v1/messages/${cm.q1}`));
    expect(q1.status).toBe('delivered');
    const listed = await readJson(await app.request(`/v1/messages?to=${encodeURIComponent(Q)}`));
    expect(listed.items.map((m: { id: string }) => m.id)).toEqual([q1.id]);
    const inbound = await readJson(await app.request(`/v1/inbound?from=${encodeURIComponent(Q)}`));
    expect(inbound.items.map((i: { text: string }) => i.text)).toEqual(['from Q']);
    const shared = await inboxBodies(cm.q1);
    expect(shared).toHaveLength(1);
    expect(JSON.parse(shared[0]!.body)).toEqual([
      { customerMessageId: '[erased]', status: 'delivered', to: '[erased]' },
      { customerMessageId: cm.q1, status: 'delivered', to: Q },
    ]);
    expect(await inboxBodies(`decoys: \\+${digitsP}9 and 1${digitsP}$`)).toHaveLength(1);
  });

  it('remembers the erased ids only as hashes', async () => {
    const rows = await db().select().from(erasedIds);
    const hashes = rows.map((r) => `${r.kind}:${r.hash}`);
    for (const id of [cm.m1, cm.m2, cm.x]) {
      expect(hashes).toContain(`customerMessageId:${hashId(id)}`);
    }
    expect(hashes).toContain(`providerMessageId:${hashId(pmidOfM2)}`);
    expect(JSON.stringify(rows)).not.toContain(cm.m1);
  });

  it('acknowledges and drops late callbacks about erased messages', async () => {
    const late = await deliver({ customerMessageId: cm.m1, status: 'read', to: P });
    expect(late).toMatchObject({ received: true, duplicate: false, matched: 0, pending: 0 });
    // by the provider's id alone, twice (a provider retry)
    for (let i = 0; i < 2; i++) {
      expect(await deliver({ messageId: pmidOfM2, status: 'delivered' })).toMatchObject({
        matched: 0,
        pending: 0,
      });
    }
    // nothing kept: no raw body, no pending event, nothing for a worker to attach
    expect(await inboxBodies(`(^|[^0-9])${digitsP}([^0-9]|$)`)).toEqual([]);
    expect(await inboxBodies(cm.m1)).toEqual([]);
    expect(await inboxBodies(pmidOfM2)).toEqual([]);
    expect(await attachPending(ingest)).toBe(0);
    expect((await app.request(`/v1/messages/${cm.m1}`)).status).toBe(404);
  });

  it('drops them in the one-callback ingestion path too', async () => {
    const raw = {
      contentType: 'application/json',
      body: JSON.stringify({ cmid: cm.x, stat: 'DELIVRD', to: P }),
    };
    expect(await ingestDelivery(ingest, raw)).toMatchObject({ matched: 0, pending: 0, dropped: 1 });
    expect(await inboxBodies(cm.x)).toEqual([]);
  });

  it('applies the rest of a late callback that also carries others', async () => {
    const mixed = await deliver([
      { customerMessageId: cm.m2, status: 'read' },
      { customerMessageId: cm.q1, status: 'read' },
    ]);
    expect(mixed).toMatchObject({ events: 2, matched: 1, pending: 0 });
    expect((await readJson(await app.request(`/v1/messages/${cm.q1}`))).status).toBe('read');
    const stored = await inboxBodies(`"read"`);
    expect(stored.map((r) => r.body).join('')).not.toContain(cm.m2);
  });

  it('lets a customerMessageId be used again, and then its callbacks count', async () => {
    const res = await app.request('/v1/messages', json({ messages: [sms(Q, cm.m1)] }));
    expect((await readJson(res)).messages[0].status).toBe('queued');
    expect(await deliver({ customerMessageId: cm.m1, status: 'delivered' })).toMatchObject({
      matched: 1,
    });
  });

  it('finds nothing the second time', async () => {
    const again = await readJson(await erase(P));
    expect(Object.values(again.removed).every((n) => n === 0)).toBe(true);
  });

  const inFlight = 'waits for a send in flight instead of deadlocking with it';
  it(onlyIf(ctx.engine === 'postgres', inFlight, ONE_CONNECTION), async (test) => {
    const url = ctx.url();
    if (!url) return test.skip(); // one connection on PGlite: nothing runs alongside
    const R = phone();
    const cmid = uniq('inflight');
    await app.request('/v1/messages', json({ messages: [sms(R, cmid)] }));
    const [m] = await db().select().from(messages).where(eq(messages.customerMessageId, cmid));
    // a dispatcher: holds the outbox row while it sends, then records the answer on the message
    const dispatcher = await openDatabase({ url, maxConnections: 1 });
    try {
      let erasing: Promise<Response> | undefined;
      await dispatcher.db.transaction(async (tx) => {
        await tx.execute(sql`select id from outbox where message_id = ${m!.id} for update`);
        const [holder] = rowsOf<{ pid: number }>(
          await tx.execute(sql`select pg_backend_pid() as pid`),
        );
        erasing = Promise.resolve(erase(R));
        // barrier: the erasure's backend waits on this transaction's lock (and no other does)
        await eventually(async () => {
          const waiting = rowsOf<{ n: number | string }>(
            await db().execute(sql`select count(*) as n from pg_stat_activity
              where ${holder!.pid}::int = any(pg_blocking_pids(pid))`),
          );
          return Number(waiting[0]?.n) === 1;
        });
        await tx.execute(
          sql`update messages set provider_message_id = ${uniq('sent')} where id = ${m!.id}`,
        );
        await tx.execute(sql`delete from outbox where message_id = ${m!.id}`);
      });
      const res = await erasing!;
      expect(res.status).toBe(200);
      expect((await readJson(res)).removed).toMatchObject({ messages: 1, outbox: 0 });
    } finally {
      await dispatcher.close();
    }
  });

  it('is documented in the OpenAPI document, with its answer', async () => {
    const doc = await readJson(await app.request('/openapi.json'));
    const op = doc.paths['/v1/subjects/{phone}'].delete;
    expect(op.tags).toEqual(['privacy']);
    expect(op.responses['200'].content['application/json'].schema).toEqual({
      $ref: '#/components/schemas/ErasureReport',
    });
    expect(Object.keys(doc.components.schemas.RemovedCounts.properties)).toContain('calls');
  });

  it('refuses what is not an E.164 number, naming the field', async () => {
    for (const bad of ['0501234567', '+380 50 123 4567', '380501234567', 'abc', '+1']) {
      const res = await erase(bad);
      expect(res.status, bad).toBe(400);
      const body = await readJson(res);
      expect(body.error.code).toBe('VALIDATION_ERROR');
      expect(body.error.details[0].path).toBe('phone');
    }
  });
});
