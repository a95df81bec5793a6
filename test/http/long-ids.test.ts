/**
 * An id longer than MAX_ID_LENGTH (src/provider/message.ts) is no id. Ids are indexed, and a
 * Postgres B-tree entry holds at most 2704 bytes: before, a callback naming a message, its
 * parent, an incoming message or its sender by 4000 random characters failed its statement,
 * answered 500 and lost its body (the provider retried it for ever). Now such a callback is
 * kept and answered 200, the id not read, with the reason in `problems`; an id of exactly
 * MAX_ID_LENGTH characters is read as any other.
 */
import { sql } from 'drizzle-orm';
import { beforeAll, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import { rowsOf } from '../../src/db/client.ts';
import { MAX_ID_LENGTH } from '../../src/provider/message.ts';
import { buildTestApp, json, phone, randomId, readJson } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';

const TOKEN = 'long-ids-callback-token';
const headers = { headers: { 'x-callback-token': TOKEN } };

describeEachEngine('ids longer than MAX_ID_LENGTH', (ctx) => {
  let app: App;
  beforeAll(() => {
    app = buildTestApp(ctx.database(), { env: { CALLBACK_TOKEN: TOKEN } }).app;
  });

  async function storedBodies(body: string): Promise<number> {
    const [row] = rowsOf<{ n: number }>(
      await ctx
        .database()
        .db.execute(sql`select count(*)::int as n from inbox where body = ${body}`),
    );
    return row!.n;
  }

  async function post(path: string, body: Record<string, unknown>) {
    const res = await app.request(path, json(body, headers));
    return { status: res.status, body: await readJson(res), raw: JSON.stringify(body) };
  }

  it('keeps a delivery callback with such an id, reads no event from it, and says why', async () => {
    const cmid = `c-${randomId(8)}`;
    const bodies = [
      { customerMessageId: randomId(4000), status: 'delivered' },
      { customerMessageId: randomId(MAX_ID_LENGTH + 1), status: 'delivered' },
      { messageId: randomId(4000), deliverystatus: 'delivered' },
      { customerMessageId: cmid, messageId: randomId(4000), status: 'delivered' },
      { customerMessageId: cmid, parentMessageId: randomId(4000), status: 'delivered' },
    ];
    for (const body of bodies) {
      const res = await post('/hooks/delivery', body);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body).toMatchObject({ received: true, events: 0, matched: 0, pending: 0 });
      expect(res.body.problems).toEqual([
        `event 0: a message id longer than ${MAX_ID_LENGTH} characters, which is no id: not read`,
      ]);
      expect(await storedBodies(res.raw)).toBe(1);
    }
  });

  it('reads an id of exactly MAX_ID_LENGTH characters', async () => {
    const res = await post('/hooks/delivery', {
      customerMessageId: randomId(MAX_ID_LENGTH),
      status: 'delivered',
    });
    expect(res.body).toMatchObject({ events: 1, pending: 1, problems: [] });
    const viber = await post('/hooks/viber', {
      phoneNumber: phone().slice(1),
      idUuid: randomId(MAX_ID_LENGTH),
      text: 'hello',
    });
    expect(viber.body).toMatchObject({ events: 1, matched: 1, problems: [] });
  });

  it('keeps an incoming message whose sender or id is longer, and does not list it', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ phoneNumber: randomId(4000), idUuid: randomId(8), text: 'hi' }, 'sender'],
      [{ phoneNumber: phone().slice(1), idUuid: randomId(4000), text: 'hi' }, 'id'],
    ];
    for (const [body, what] of cases) {
      const res = await post('/hooks/viber', body);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body).toMatchObject({ received: true, events: 0, matched: 0 });
      expect(res.body.problems).toEqual([
        `message 0: its ${what} is longer than ${MAX_ID_LENGTH} characters, which is no id: not read`,
      ]);
      expect(await storedBodies(res.raw)).toBe(1);
    }
  });

  it('rejects a message whose customerMessageId is longer, naming it, and takes the edge', async () => {
    const message = (customerMessageId: string) => ({
      type: 'sms',
      from: 'Acme',
      to: phone(),
      text: 'hi',
      customerMessageId,
    });
    const res = await app.request(
      '/v1/messages',
      json({ messages: [message(randomId(MAX_ID_LENGTH + 1)), message(randomId(MAX_ID_LENGTH))] }),
    );
    expect(res.status).toBe(202);
    const [long, edge] = (await readJson(res)).messages;
    expect(long).toMatchObject({
      status: 'rejected',
      error: {
        code: 'INVALID_MESSAGE',
        details: [{ path: 'messages[0].customerMessageId', code: 'TOO_BIG' }],
      },
    });
    expect(edge).toMatchObject({ status: 'queued' });
  });
});
