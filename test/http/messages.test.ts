import { beforeAll, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import { buildTestApp, json, phone, readJson, uniq } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';

const sms = (over: Record<string, unknown> = {}) => ({
  from: 'Acme',
  to: phone(),
  type: 'sms',
  text: 'Your order has shipped',
  ...over,
});

describeEachEngine('POST /v1/messages', (ctx) => {
  let app: App;
  beforeAll(() => {
    app = buildTestApp(ctx.database()).app;
  });

  it('stores an accepted message as queued with a timeline event and reads it back', async () => {
    const cmid = uniq('order');
    const res = await app.request(
      '/v1/messages',
      json({ messages: [sms({ customerMessageId: cmid })] }),
    );
    expect(res.status).toBe(202);
    const body = await readJson(res);
    expect(body.messages).toHaveLength(1);
    expect(body.messages[0]).toMatchObject({ customerMessageId: cmid, status: 'queued', parts: 1 });

    for (const ref of [cmid, body.messages[0].id]) {
      const got = await app.request(`/v1/messages/${ref}`);
      expect(got.status).toBe(200);
      const view = await readJson(got);
      expect(view).toMatchObject({
        id: body.messages[0].id,
        customerMessageId: cmid,
        status: 'queued',
        type: 'sms',
      });
      expect(view.timeline).toHaveLength(1);
      expect(view.timeline[0]).toMatchObject({ status: 'queued', source: 'api' });
    }
  });

  it('answers per message in request order, rejecting the bad ones with the field named', async () => {
    const res = await app.request(
      '/v1/messages',
      json({
        messages: [
          sms(),
          sms({ to: '0501234567' }),
          sms({ type: 'telepathy' }),
          { to: phone(), type: 'sms' },
          sms(),
        ],
      }),
    );
    expect(res.status).toBe(202);
    const { messages } = await readJson(res);
    expect(messages.map((m: { status: string }) => m.status)).toEqual([
      'queued',
      'rejected',
      'rejected',
      'rejected',
      'queued',
    ]);
    expect(messages[1].error.code).toBe('INVALID_RECIPIENT');
    expect(messages[1].error.details[0].path).toBe('messages[1].to');
    expect(messages[2].error.details.map((d: { path: string }) => d.path)).toContain(
      'messages[2].type',
    );
    expect(messages[3].error.details.map((d: { path: string }) => d.path)).toContain(
      'messages[3].from',
    );
    expect(messages[1].id).toBeUndefined();
  });

  it('generates a customerMessageId when absent, and rejects one reused with other content without storing it twice', async () => {
    const first = await readJson(await app.request('/v1/messages', json({ messages: [sms()] })));
    expect(first.messages[0].customerMessageId).toEqual(expect.any(String));

    const cmid = uniq('dup');
    const a = await app.request(
      '/v1/messages',
      json({ messages: [sms({ customerMessageId: cmid })] }),
    );
    expect(a.status).toBe(202);
    const b = await app.request(
      '/v1/messages',
      json({ messages: [sms({ customerMessageId: cmid }), sms()] }),
    );
    const bBody = await readJson(b);
    expect(bBody.messages[0]).toMatchObject({
      status: 'rejected',
      error: { code: 'DUPLICATE_CUSTOMER_MESSAGE_ID' },
    });
    expect(bBody.messages[1].status).toBe('queued');

    // the same id twice inside one request with other content (another number): the second
    // is rejected
    const cmid2 = uniq('dup2');
    const c = await readJson(
      await app.request(
        '/v1/messages',
        json({ messages: [sms({ customerMessageId: cmid2 }), sms({ customerMessageId: cmid2 })] }),
      ),
    );
    expect(c.messages.map((m: { status: string }) => m.status)).toEqual(['queued', 'rejected']);

    const view = await readJson(await app.request(`/v1/messages/${cmid}`));
    expect(view.timeline).toHaveLength(1);
  });

  it('answers 202 per message when no message is valid: one bad number has the same code alone and in a batch', async () => {
    const alone = await app.request('/v1/messages', json({ messages: [sms({ to: 'nobody' })] }));
    expect(alone.status).toBe(202);
    const one = (await readJson(alone)).messages;
    expect(one).toHaveLength(1);
    expect(one[0]).toMatchObject({ status: 'rejected', error: { code: 'INVALID_RECIPIENT' } });
    expect(one[0].error.details[0]).toMatchObject({ path: 'messages[0].to' });

    const batch = await app.request(
      '/v1/messages',
      json({ messages: [sms({ to: 'nobody' }), sms({ type: 'telepathy' })] }),
    );
    expect(batch.status).toBe(202);
    const both = (await readJson(batch)).messages;
    expect(both.map((m: { status: string }) => m.status)).toEqual(['rejected', 'rejected']);
    expect(both[0].error.code).toBe(one[0].error.code);
    expect(both[0].error.details[0].path).toBe('messages[0].to');
  });

  it('refuses more than 5000 messages, an empty list and a body without messages', async () => {
    const many = Array.from({ length: 5001 }, () => sms());
    const over = await app.request('/v1/messages', json({ messages: many }));
    expect(over.status).toBe(400);
    expect((await readJson(over)).error.details[0].path).toBe('messages');
    const empty = await app.request('/v1/messages', json({ messages: [] }));
    expect(empty.status).toBe(400);
    const none = await app.request('/v1/messages', json({ nothing: true }));
    expect(none.status).toBe(400);
    expect((await readJson(none)).error.details[0].path).toBe('messages');
  });

  it('takes 5000 messages in one request', async () => {
    const tag = phone();
    const res = await app.request(
      '/v1/messages',
      json({
        messages: Array.from({ length: 5000 }, (_, i) =>
          sms({ to: tag, customerMessageId: uniq(`bulk${i}`) }),
        ),
      }),
    );
    expect(res.status).toBe(202);
    const { messages } = await readJson(res);
    expect(messages.filter((m: { status: string }) => m.status === 'queued')).toHaveLength(5000);
    const page = await readJson(
      await app.request(`/v1/messages?to=${encodeURIComponent(tag)}&limit=500`),
    );
    expect(page.items).toHaveLength(500);
  });
});

describeEachEngine('GET /v1/messages', (ctx) => {
  let app: App;
  beforeAll(() => {
    app = buildTestApp(ctx.database()).app;
  });

  it('lists newest first, filters, and pages with a cursor without repeats or gaps', async () => {
    const to = phone();
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) {
      const body = await readJson(
        await app.request('/v1/messages', json({ messages: [sms({ to })] })),
      );
      ids.push(body.messages[0].id);
    }
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const q = new URLSearchParams({ to, limit: '3', ...(cursor && { cursor }) });
      const res = await app.request(`/v1/messages?${q}`);
      expect(res.status).toBe(200);
      const page = await readJson(res);
      seen.push(...page.items.map((m: { id: string }) => m.id));
      cursor = page.nextCursor;
      pages++;
      // a message inserted while paging is newer than the cursor: it never shifts later pages
      if (pages === 1) await app.request('/v1/messages', json({ messages: [sms({ to })] }));
    } while (cursor);
    expect(pages).toBe(3);
    expect(seen).toEqual([...ids].reverse());

    const byStatus = await readJson(
      await app.request(`/v1/messages?to=${encodeURIComponent(to)}&status=delivered`),
    );
    expect(byStatus.items).toEqual([]);
    const byType = await readJson(
      await app.request(`/v1/messages?to=${encodeURIComponent(to)}&type=sms&limit=1`),
    );
    expect(byType.items).toHaveLength(1);
    const later = encodeURIComponent(new Date(Date.now() + 3600_000).toISOString());
    const future = await readJson(
      await app.request(`/v1/messages?to=${encodeURIComponent(to)}&since=${later}`),
    );
    expect(future.items).toEqual([]);
  });

  it('refuses a bad filter with the parameter named', async () => {
    for (const [q, path] of [
      ['status=lost', 'status'],
      ['limit=0', 'limit'],
      ['callId=nope', 'callId'],
      ['since=yesterday', 'since'],
      ['cursor=zzz', 'cursor'],
    ] as const) {
      const res = await app.request(`/v1/messages?${q}`);
      expect(res.status, q).toBe(400);
      expect((await readJson(res)).error.details[0].path, q).toBe(path);
    }
  });

  it('answers 404 in the envelope for an unknown ref', async () => {
    const res = await app.request(`/v1/messages/${uniq('missing')}`);
    expect(res.status).toBe(404);
    expect((await readJson(res)).error.code).toBe('NOT_FOUND');
  });
});
