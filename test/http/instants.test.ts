/**
 * Every time a request gives is one Postgres can store (src/instants.ts): years 0001 to 9999
 * in UTC. Before, a time zod took as ISO 8601 but outside them (`0000-06-01T00:00:00Z`, or
 * `9999-12-31T23:00:00-05:00`, 10000 in UTC) reached a statement and answered 500: the list
 * filters, a message's dtExpire, a campaign's start, the replays' `since`. Now each is a 4xx
 * naming its field with INVALID_DATETIME, and the edges of the span are taken.
 */
import { sql } from 'drizzle-orm';
import { beforeAll, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import { rowsOf } from '../../src/db/client.ts';
import { EARLIEST_INSTANT, LATEST_INSTANT } from '../../src/instants.ts';
import { buildTestApp, json, phone, readJson, uniq } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';

const OUTSIDE = ['0000-06-01T00:00:00Z', '0001-01-01T00:30:00+01:00', '9999-12-31T23:00:00-05:00'];

interface Detail {
  path: string;
  code: string;
  message: string;
}

describeEachEngine('times outside years 0001 to 9999', (ctx) => {
  let app: App;
  beforeAll(() => {
    app = buildTestApp(ctx.database()).app;
  });

  /** A 400 whose details name `field` with `code`. */
  async function refused(res: Response, field: string, code = 'INVALID_DATETIME') {
    const body = await readJson(res);
    expect(res.status, JSON.stringify(body)).toBe(400);
    expect(body.error.code).toBe('VALIDATION_ERROR');
    const detail = (body.error.details as Detail[]).find((d) => d.path === field);
    expect(detail, JSON.stringify(body.error.details)).toMatchObject({ code });
  }

  it('refuses them in the lists, naming the filter, and takes the edges', async () => {
    const lists: [string, string][] = [
      ['/v1/messages', 'since'],
      ['/v1/messages', 'until'],
      ['/v1/calls', 'since'],
      ['/v1/inbound', 'since'],
      ['/v1/audit', 'since'],
      ['/v1/audit', 'until'],
    ];
    for (const [path, field] of lists) {
      for (const at of OUTSIDE) {
        await refused(await app.request(`${path}?${field}=${encodeURIComponent(at)}`), field);
      }
      for (const at of [EARLIEST_INSTANT, LATEST_INSTANT]) {
        const res = await app.request(`${path}?${field}=${encodeURIComponent(at)}`);
        expect(res.status, `${path} ${field}=${at}`).toBe(200);
      }
    }
  });

  it('rejects a message whose dtExpire is outside, and stores its neighbours', async () => {
    const to = phone();
    for (const at of OUTSIDE) {
      const ok = uniq('ok');
      const res = await app.request(
        '/v1/messages',
        json({
          messages: [
            {
              from: 'Acme',
              to,
              type: 'sms',
              text: 'x',
              customerMessageId: uniq('far'),
              dtExpire: at,
            },
            { from: 'Acme', to, type: 'sms', text: 'x', customerMessageId: ok },
          ],
        }),
      );
      const body = await readJson(res);
      expect(res.status, JSON.stringify(body)).toBe(202);
      expect(body.messages[0].status).toBe('rejected');
      expect(body.messages[0].error.details).toContainEqual(
        expect.objectContaining({ path: 'messages[0].dtExpire', code: 'INVALID_DATETIME' }),
      );
      expect(body.messages[1]).toMatchObject({ customerMessageId: ok, status: 'queued' });
    }
  });

  it('keeps a life that would end past year 9999 at its last instant, not a 500', async () => {
    const to = phone();
    const far = [
      { dtSend: '9999-12-31T23:59:59Z' },
      { ttl: 9_000_000_000_000_000 },
      { dtSend: '9999-12-31T00:00:00Z', fallbacks: [{ type: 'sms', text: 'y', ttl: 172_800 }] },
    ];
    for (const extra of far) {
      const cmid = uniq('far');
      const res = await app.request(
        '/v1/messages',
        json({
          messages: [
            { from: 'Acme', to, type: 'sms', text: 'x', customerMessageId: cmid, ...extra },
          ],
        }),
      );
      const body = await readJson(res);
      expect(res.status, JSON.stringify(body)).toBe(202);
      expect(body.messages[0], JSON.stringify(extra)).toMatchObject({ status: 'queued' });
      const [row] = rowsOf<{ expires_at: Date | string }>(
        await ctx
          .database()
          .db.execute(sql`select expires_at from messages where customer_message_id = ${cmid}`),
      );
      expect(new Date(row!.expires_at).toISOString(), JSON.stringify(extra)).toBe(LATEST_INSTANT);
    }
  });

  it('refuses an opt-out cursor that names a time outside them', async () => {
    for (const at of ['0000-06-01T00:00:00.000Z', '+010000-01-01T00:00:00.000Z']) {
      const cursor = Buffer.from(`${at}|+380501234567`, 'utf8').toString('base64url');
      await refused(await app.request(`/v1/opt-outs?cursor=${cursor}`), 'cursor', 'INVALID_CURSOR');
    }
  });

  it("refuses a campaign's start and a replay's since outside them", async () => {
    for (const at of OUTSIDE) {
      await refused(
        await app.request(
          '/v1/campaigns',
          json({
            flow: 'appointment-reminder',
            from: 'Clinic',
            recipients: [{ to: phone() }],
            startAt: at,
          }),
        ),
        'startAt',
      );
      await refused(
        await app.request(
          '/v1/endpoints/00000000-0000-7000-8000-000000000000/replay',
          json({ since: at }),
        ),
        'since',
      );
    }
    const replay = await app.request(
      '/v1/flows/appointment-reminder/replay',
      json({ source: 'menus: []', since: '0000-06-01' }),
    );
    const body = await readJson(replay);
    expect(replay.status, JSON.stringify(body)).toBe(400);
    expect((body.error.details as Detail[]).map((d) => d.path)).toContain('since');
  });
});
