/**
 * Queued deliveries wake the delivery workers: the `event_deliveries_queued` trigger
 * (migration 0011) notifies DELIVERIES_QUEUED when a statement queues deliveries, and the
 * notification reaches a listener (`Database.listen`, what src/workers.ts uses) once the
 * transaction commits, on both engines; a rolled-back one notifies no one. Likewise a change
 * to the endpoints (made, deleted, enabled, their event types or name) notifies
 * ENDPOINTS_CHANGED, which every instance's events cache listens to.
 */

import { eq } from 'drizzle-orm';
import { expect, it } from 'vitest';
import { endpoints } from '../../src/db/schema/index.ts';
import { recordEvents } from '../../src/events/record.ts';
import { DELIVERIES_QUEUED, ENDPOINTS_CHANGED } from '../../src/workers.ts';
import { describeEachEngine } from '../support/db.ts';
import { insertEndpoint } from './delivery-helpers.ts';

describeEachEngine('waking the delivery workers', (ctx) => {
  it('notifies a listener when deliveries are queued, after their commit', async () => {
    const database = ctx.database();
    await insertEndpoint(database.db, { url: 'https://receiver.example.org/hook' });
    let notified = 0;
    let resolve: () => void = () => {};
    const arrived = new Promise<void>((r) => {
      resolve = r;
    });
    const stop = await database.listen(DELIVERIES_QUEUED, () => {
      notified++;
      resolve();
    });
    try {
      const event = { type: 'call.ended', subject: 'call:c1', data: { callId: 'c1' } };
      // rolled back: nothing queued, nobody told
      await expect(
        database.db.transaction(async (tx) => {
          expect(await recordEvents(tx, [{ ...event, at: new Date() }])).toBe(1);
          throw new Error('roll back');
        }),
      ).rejects.toThrow('roll back');
      await database.db.transaction(async (tx) => {
        expect(await recordEvents(tx, [{ ...event, at: new Date() }])).toBe(1);
        // not yet: a notification is sent at commit
        expect(notified).toBe(0);
      });
      await arrived;
      expect(notified).toBeGreaterThanOrEqual(1);
    } finally {
      await stop();
    }
  });

  it("tells every instance when an endpoint's wanted events change, at commit", async () => {
    const database = ctx.database();
    let notified = 0;
    let resolve: () => void = () => {};
    const arrived = new Promise<void>((r) => {
      resolve = r;
    });
    const stop = await database.listen(ENDPOINTS_CHANGED, () => {
      notified++;
      resolve();
    });
    try {
      const { id } = await insertEndpoint(database.db, { url: 'https://receiver.example.org/h' });
      await arrived;
      const afterInsert = notified;
      expect(afterInsert).toBeGreaterThanOrEqual(1);
      let again: () => void = () => {};
      const second = new Promise<void>((r) => {
        again = r;
      });
      const watch = await database.listen(ENDPOINTS_CHANGED, () => again());
      try {
        await database.db
          .update(endpoints)
          .set({ eventTypes: ['call.ended'] })
          .where(eq(endpoints.id, id));
        await second;
      } finally {
        await watch();
      }
    } finally {
      await stop();
    }
  });
});
