/**
 * GET /v1/messages/{ref} shows what was sent: text, messageData and fallbacks in the canonical
 * form, a cascade in Switchboard's field names, a call's follow-up with its rendered text; and
 * says so when retention removed the texts or an erasure removed the message.
 */
import { sql } from 'drizzle-orm';
import { beforeAll, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import { signNodeToken } from '../../src/flows/index.ts';
import { runRetention } from '../../src/privacy/retention.ts';
import { buildTestApp, json, phone, readJson, uniq } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';

describeEachEngine('GET /v1/messages/{ref}: what was sent', (ctx) => {
  let app: App;
  let built: ReturnType<typeof buildTestApp>;
  const submit = async (message: Record<string, unknown>) => {
    const customerMessageId = uniq('sent');
    const res = await app.request(
      '/v1/messages',
      json({ messages: [{ customerMessageId, ...message }] }),
    );
    const body = await readJson(res);
    expect(body.messages[0]).toMatchObject({ status: 'queued' });
    return { id: body.messages[0].id as string, customerMessageId };
  };
  const read = async (ref: string) => {
    const res = await app.request(`/v1/messages/${encodeURIComponent(ref)}`);
    return { status: res.status, body: await readJson(res) };
  };

  beforeAll(() => {
    built = buildTestApp(ctx.database());
    app = built.app;
  });

  it('an SMS: its type, sender, recipient, text and TTL', async () => {
    const to = phone();
    const m = await submit({ from: 'Acme', to, type: 'sms', text: 'Your order 42 has shipped' });
    const { status, body } = await read(m.customerMessageId);
    expect(status).toBe(200);
    expect(body.sent).toEqual({
      type: 'sms',
      from: 'Acme',
      to,
      text: 'Your order 42 has shipped',
      ttl: 86_400,
    });
    expect(body).not.toHaveProperty('contentRemoved');
  });

  it('a Viber message with one fallback: messageData, and the fallback with its from and to', async () => {
    const to = phone();
    const m = await submit({
      from: 'Acme',
      to,
      type: 'viber_trans',
      text: 'Your invoice',
      messageData: { fileUrl: 'https://example.com/invoice-42.pdf', fileName: 'invoice-42.pdf' },
      fallback: { type: 'sms', text: 'Your invoice: https://example.com/i/42' },
    });
    const { body } = await read(m.id);
    expect(body.sent).toEqual({
      type: 'viber_trans',
      from: 'Acme',
      to,
      text: 'Your invoice',
      messageData: { fileUrl: 'https://example.com/invoice-42.pdf', fileName: 'invoice-42.pdf' },
      ttl: 345_600,
      fallbacks: [
        {
          type: 'sms',
          from: 'Acme',
          to,
          text: 'Your invoice: https://example.com/i/42',
          ttl: 86_400,
        },
      ],
    });
    // the console shows the same, one row per channel
    const html = await (await app.request(`/ui/messages/${m.id}`)).text();
    expect(html).toContain('<h2 id="sent-heading">Sent</h2>');
    expect(html).toContain('<td>sms (fallback 1)</td>');
    expect(html).toContain('<td>Your invoice: https://example.com/i/42</td>');
  });

  it('several fallbacks, in order, one with a sender of its own', async () => {
    const to = phone();
    const m = await submit({
      from: 'Acme Shop',
      to,
      type: 'viber_trans',
      text: 'Hi',
      fallbacks: [
        { type: 'rcs', text: 'Hi over RCS' },
        { type: 'sms', from: 'AcmeSMS', text: 'Hi over SMS' },
      ],
    });
    const { body } = await read(m.customerMessageId);
    expect(body.sent.fallbacks).toEqual([
      { type: 'rcs', from: 'Acme Shop', to, text: 'Hi over RCS' },
      { type: 'sms', from: 'AcmeSMS', to, text: 'Hi over SMS', ttl: 86_400 },
    ]);
  });

  it('a flash call: its code and caller id', async () => {
    const to = phone();
    const m = await submit({
      from: 'Acme',
      to,
      type: 'flashcall',
      text: '4321',
      messageData: { callerId: '+380123454321' },
    });
    const { body } = await read(m.customerMessageId);
    expect(body.sent).toEqual({
      type: 'flashcall',
      from: 'Acme',
      to,
      text: '4321',
      messageData: { callerId: '+380123454321' },
      ttl: 60,
    });
  });

  it("a cascade: in Switchboard's field names, with its variables and fallback", async () => {
    const to = phone();
    const m = await submit({
      type: 'cascade',
      from: 'Acme',
      to,
      messageType: 'transaction',
      text: 'Hi %name=1%, order 42 has shipped',
      variables: [{ id: 1, type: 'name', value: 'Ann' }],
      fallback: { messageType: 'transaction', text: 'Order 42 has shipped' },
    });
    const { body } = await read(m.customerMessageId);
    expect(body.sent).toMatchObject({
      type: 'cascade',
      from: 'Acme',
      to,
      text: 'Hi %name=1%, order 42 has shipped',
      messageType: 'transaction',
      variables: [{ id: 1, type: 'name', value: 'Ann' }],
      fallback: { messageType: 'transaction', text: 'Order 42 has shipped' },
    });
    for (const endpointName of ['id', 'fromName', 'toPhone', 'customerMessageId']) {
      expect(body.sent).not.toHaveProperty(endpointName);
    }
  });

  it("a call's follow-up shows its rendered text; the call's own message leaves out its menu", async () => {
    const res = await app.request(
      '/v1/calls',
      json({
        flow: 'appointment-reminder',
        from: 'Clinic',
        to: phone(),
        vars: { name: 'Ann', date: 'Monday 10:00' },
      }),
    );
    const callBody = await readJson(res);
    const token = signNodeToken(
      { callId: callBody.id, node: 'main', key: '1' },
      built.calls.signingSecret,
    );
    const hook = await app.request(
      '/hooks/speechcall',
      json({ from: 'Clinic', mid: 'm', action: { token } }),
    );
    expect(hook.status).toBe(200);
    const call = await readJson(await app.request(`/v1/calls/${callBody.id}`));
    const followUp = call.messages.find((m: { role: string }) => m.role === 'follow-up');
    const { body } = await read(followUp.id);
    expect(body.sent).toMatchObject({
      type: 'sms',
      from: 'Clinic',
      to: call.to,
      text: 'Thanks Ann, see you on Monday 10:00.',
    });
    const own = await read(callBody.messageId);
    expect(own.body.sent).toMatchObject({ type: 'speechcall', from: 'Clinic', to: call.to });
    expect(own.body.sent).not.toHaveProperty('menu');
  });

  it('after retention: no texts, and when they went', async () => {
    const m = await submit({ from: 'Acme', to: phone(), type: 'sms', text: 'old words' });
    // sent: retention keeps the texts of messages still waiting in the outbox
    await ctx.database().db.execute(sql`delete from outbox where message_id = ${m.id}::uuid`);
    const later = new Date(Date.now() + 40 * 86_400_000);
    let round = await runRetention(ctx.database().db, { now: () => later }, 30, 500);
    while (round.more) round = await runRetention(ctx.database().db, { now: () => later }, 30, 500);
    const { status, body } = await read(m.customerMessageId);
    expect(status).toBe(200);
    expect(body).toMatchObject({ id: m.id, type: 'sms', status: 'queued' });
    expect(body.sent).toBeNull();
    expect(body.contentRemoved).toEqual({ reason: 'retention', at: later.toISOString() });
    expect(JSON.stringify(body)).not.toContain('old words');
    const html = await (await app.request(`/ui/messages/${m.id}`)).text();
    expect(html).toContain('Its texts were removed by retention at');
    expect(html).not.toContain('old words');
  });

  it('after an erasure: not found, saying erased and when, by any of its ids', async () => {
    const to = phone();
    const m = await submit({ from: 'Acme', to, type: 'sms', text: 'private words' });
    const erased = await app.request(`/v1/subjects/${encodeURIComponent(to)}`, {
      method: 'DELETE',
    });
    expect(erased.status).toBe(200);
    const { erasedAt } = await readJson(erased);
    for (const ref of [m.id, m.customerMessageId]) {
      const { status, body } = await read(ref);
      expect(status).toBe(404);
      expect(body.error).toMatchObject({
        code: 'NOT_FOUND',
        details: [{ path: 'ref', code: 'ERASED' }],
      });
      expect(body.error.message).toContain('erased at');
      expect(JSON.stringify(body)).not.toContain('private words');
      const at = Date.parse(body.error.details[0].message.replace('erased at ', ''));
      expect(Math.abs(at - Date.parse(erasedAt))).toBeLessThan(60_000);
    }
    // a message that never was: no such detail
    for (const ref of [uniq('never-sent'), '00000000-0000-7000-8000-000000000000']) {
      const { status, body } = await read(ref);
      expect(status).toBe(404);
      expect(body.error).toMatchObject({ code: 'NOT_FOUND', details: [] });
    }
  });
});
