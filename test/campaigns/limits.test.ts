/**
 * Plain sends that ask for a calling window or the frequency cap (`window`, `cap` on
 * POST /v1/calls, /v1/calls/batch and /v1/messages): outside the window the send is stored and
 * waits for it (its outbox row is due when the window opens); a window no time fits is
 * OUTSIDE_WINDOW; past CONTACT_CAP_PER_DAY it is OVER_CAP, per call or message in a list.
 */
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Clock } from '../../src/clock.ts';
import { outbox } from '../../src/db/schema/index.ts';
import { buildTestApp, json, phone, readJson } from '../support/app.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';

describe('windows and caps on plain sends [pglite]', () => {
  let db: TestDatabase;
  let app: ReturnType<typeof buildTestApp>;
  let now = new Date('2026-04-01T19:00:00Z'); // 22:00 in Kyiv
  const clock: Clock = { now: () => new Date(now) };

  beforeAll(async () => {
    db = await createTestDatabase('pglite');
    app = buildTestApp(db.database, {
      clock,
      env: {
        CONTACT_CAP_PER_DAY: '1',
        CALLING_WINDOW: '09:00-20:00',
        HOLIDAYS_DIR: '/nonexistent',
      },
    });
  }, 60_000);
  afterAll(async () => db?.drop());

  const call = (body: Record<string, unknown>) =>
    app.app.request(
      '/v1/calls',
      json({
        flow: 'appointment-reminder',
        from: 'Clinic',
        vars: { name: 'Ann', date: 'Mon' },
        ...body,
      }),
    );
  const dueOf = async (messageId: string) =>
    (
      await db.database.db
        .select({ at: outbox.availableAt })
        .from(outbox)
        .where(eq(outbox.messageId, messageId))
    )[0]!.at.toISOString();

  it('holds a call outside its window until the window opens, and sends one inside at once', async () => {
    const late = await call({ to: phone(), window: true });
    expect(late.status).toBe(202);
    // 09:00 tomorrow in Kyiv (UTC+3 in April)
    expect(await dueOf((await readJson(late)).messageId)).toBe('2026-04-02T06:00:00.000Z');
    const anyTime = await call({ to: phone(), window: { from: '00:00', to: '24:00' } });
    expect(await dueOf((await readJson(anyTime)).messageId)).toBe(now.toISOString());
    const plain = await call({ to: phone() });
    expect(await dueOf((await readJson(plain)).messageId)).toBe(now.toISOString());
  });

  it("refuses a window no time fits in all of the number's zones", async () => {
    // a toll-free +1 number spans zones from Guam to Newfoundland: nine to six fits none
    const res = await call({ to: '+18005550199', window: { from: '09:00', to: '18:00' } });
    expect(res.status).toBe(409);
    const body = await readJson(res);
    expect(body.error.code).toBe('OUTSIDE_WINDOW');
    expect(body.error.details[0].path).toBe('to');
  });

  it('holds the cap per number and local day, alone and in a list', async () => {
    const to = phone();
    expect((await call({ to, cap: true })).status).toBe(202);
    const again = await call({ to, cap: true });
    expect(again.status).toBe(409);
    expect((await readJson(again)).error.code).toBe('OVER_CAP');
    // without `cap` it is not counted, nor refused
    expect((await call({ to })).status).toBe(202);
    const other = phone();
    const batch = await app.app.request(
      '/v1/calls/batch',
      json({
        flow: 'appointment-reminder',
        from: 'Clinic',
        cap: true,
        calls: [
          { to: other, vars: { name: 'Ann', date: 'Mon' } },
          { to: other, vars: { name: 'Ann', date: 'Tue' } },
        ],
      }),
    );
    const results = (await readJson(batch)).calls;
    expect(results.map((r: { status: string }) => r.status)).toEqual(['queued', 'rejected']);
    expect(results[1].error.code).toBe('OVER_CAP');
    expect(results[1].error.details[0].path).toBe('calls[1].to');
    // the next local day, the number may be called again
    now = new Date('2026-04-02T07:00:00Z');
    expect((await call({ to, cap: true })).status).toBe(202);
  });

  it('applies them to messages, each on its own', async () => {
    now = new Date('2026-04-03T19:00:00Z');
    const to = phone();
    const sms = (text: string) => ({ type: 'sms', from: 'Acme', to, text });
    const res = await app.app.request(
      '/v1/messages',
      json({ window: true, cap: true, messages: [sms('first'), sms('second')] }),
    );
    expect(res.status).toBe(202);
    const [first, second] = (await readJson(res)).messages;
    expect(first.status).toBe('queued');
    expect(await dueOf(first.id)).toBe('2026-04-04T06:00:00.000Z');
    expect(second.status).toBe('rejected');
    expect(second.error.code).toBe('OVER_CAP');
  });
});
