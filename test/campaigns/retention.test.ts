/**
 * Retention of campaigns (src/privacy/retention.ts, `campaignRecipients`): the recipients of a
 * campaign that finished before the limit go, with their attempts (their vars hold people's
 * details), a batch at a time; the campaign's row stays with its count; a campaign that
 * finished since, or is still running, keeps its recipients; contact counts of days before
 * the limit go.
 */
import { eq, sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rowsOf } from '../../src/db/client.ts';
import { campaignAttempts, campaignRecipients, campaigns } from '../../src/db/schema/index.ts';
import { runRetention } from '../../src/privacy/retention.ts';
import { buildTestApp, json, phone, readJson } from '../support/app.ts';
import { availableEngines, createTestDatabase, type TestDatabase } from '../support/db.ts';

const NOW = new Date('2026-06-01T00:00:00Z');
const DAY = 86_400_000;

for (const engine of availableEngines())
  describe(`campaign retention [${engine}]`, () => {
    let db: TestDatabase;
    let app: ReturnType<typeof buildTestApp>;
    const ids = { old: '', recent: '', running: '' };

    beforeAll(async () => {
      db = await createTestDatabase(engine);
      app = buildTestApp(db.database, { clock: { now: () => NOW } });
      const create = async () => {
        const res = await app.app.request(
          '/v1/campaigns',
          json({
            message: { type: 'sms', text: 'Hi {{name}}' },
            from: 'Shop',
            startAt: '2099-01-01T00:00:00Z',
            recipients: [0, 1, 2].map((i) => ({ to: phone(), vars: { name: `N${i}` } })),
          }),
        );
        expect(res.status).toBe(201);
        return (await readJson(res)).id as string;
      };
      ids.old = await create();
      ids.recent = await create();
      ids.running = await create();
      const finish = (id: string, at: Date) =>
        db.database.db
          .update(campaigns)
          .set({ state: 'done', finishedAt: at })
          .where(eq(campaigns.id, id));
      await finish(ids.old, new Date(NOW.getTime() - 40 * DAY));
      await finish(ids.recent, new Date(NOW.getTime() - 10 * DAY));
      // an attempt of the old campaign's first recipient
      const [first] = await db.database.db
        .select()
        .from(campaignRecipients)
        .where(eq(campaignRecipients.campaignId, ids.old))
        .limit(1);
      await db.database.db.insert(campaignAttempts).values({
        recipientId: first!.id,
        campaignId: ids.old,
        attempt: 1,
        startedAt: new Date(NOW.getTime() - 41 * DAY),
      });
      await db.database.db.execute(sql`insert into contact_counts (phone, day, count) values
        ('+380500000001', '2026-04-01', 1), ('+380500000002', '2026-05-31', 1)`);
    }, 60_000);
    afterAll(async () => db?.drop());

    const left = async (id: string) =>
      (
        await db.database.db
          .select()
          .from(campaignRecipients)
          .where(eq(campaignRecipients.campaignId, id))
      ).length;

    it('removes the recipients of a campaign finished before the limit, a batch at a time', async () => {
      const first = await runRetention(db.database.db, { now: () => NOW }, 30, 2);
      expect(first.removed.campaignRecipients).toBe(2);
      expect(first.more).toBe(true);
      const second = await runRetention(db.database.db, { now: () => NOW }, 30, 2);
      expect(second.removed.campaignRecipients).toBe(1);
      expect(await left(ids.old)).toBe(0);
      const attempts = await db.database.db
        .select()
        .from(campaignAttempts)
        .where(eq(campaignAttempts.campaignId, ids.old));
      expect(attempts).toEqual([]);
      // the campaign itself stays, with how many it had
      const view = await readJson(await app.app.request(`/v1/campaigns/${ids.old}`));
      expect(view).toMatchObject({ state: 'done', recipients: 3 });
    });

    it('keeps the recipients of a campaign finished since, or still to run', async () => {
      expect(await left(ids.recent)).toBe(3);
      expect(await left(ids.running)).toBe(3);
    });

    it('removes contact counts of days before the limit', async () => {
      const rows = rowsOf<{ phone: string }>(
        await db.database.db.execute(sql`select phone from contact_counts order by phone`),
      );
      expect(rows.map((r) => r.phone)).toEqual(['+380500000002']);
    });
  });
