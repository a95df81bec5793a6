/**
 * The in-memory set of wanted event types (src/events/subscriptions.ts): true while not known
 * (before its first load, and after `changed()` until read again), then exactly the types
 * enabled endpoints want; a change made by another instance (no `changed()` here) is seen
 * within REFRESH_MS.
 */
import { randomBytes } from 'node:crypto';
import { eq } from 'drizzle-orm';
import { beforeEach, expect, it } from 'vitest';
import type { Db } from '../../src/db/client.ts';
import { endpoints } from '../../src/db/schema/index.ts';
import { REFRESH_MS, subscriptionsOf } from '../../src/events/subscriptions.ts';
import { EVENT_TYPES } from '../../src/events/types.ts';
import { describeEachEngine } from '../support/db.ts';

async function insertEndpoint(db: Db, eventTypes: string[] | null, enabled = true) {
  const id = `ep_${randomBytes(6).toString('hex')}`;
  await db.insert(endpoints).values({
    id,
    url: 'https://receiver.example.org/hook',
    eventTypes,
    enabled,
    secrets: [{ secret: `whsec_${randomBytes(24).toString('base64')}`, expiresAt: null }],
  });
  return id;
}

/** Waits until `check` holds, failing after `ms`. */
async function until(check: () => boolean, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describeEachEngine('event subscriptions', (ctx) => {
  const db = () => ctx.database().db;
  const wanted = () => EVENT_TYPES.filter((t) => subscriptionsOf(db()).wants(t));

  beforeEach(async () => {
    await db().delete(endpoints);
  });

  it('is one cache per database handle, true until loaded, then what enabled endpoints want', async () => {
    const subs = subscriptionsOf(db());
    expect(subscriptionsOf(db())).toBe(subs);
    subs.changed();
    // not known yet: the statement decides (nothing is lost right after a change)
    expect(subs.wants('call.key')).toBe(true);
    await subs.ready();
    expect(wanted()).toEqual([]);

    await insertEndpoint(db(), ['call.key', 'message.status']);
    await insertEndpoint(db(), null, false);
    subs.changed();
    await subs.ready();
    expect(wanted()).toEqual(['message.status', 'call.key']);

    // event_types null: every type
    const all = await insertEndpoint(db(), null);
    subs.changed();
    await subs.ready();
    expect(wanted()).toEqual(EVENT_TYPES);

    await db().update(endpoints).set({ enabled: false }).where(eq(endpoints.id, all));
    subs.changed();
    await subs.ready();
    expect(wanted()).toEqual(['message.status', 'call.key']);
  });

  it(`sees another instance's new endpoint within REFRESH_MS (${REFRESH_MS} ms)`, async () => {
    const subs = subscriptionsOf(db());
    subs.changed();
    await subs.ready();
    expect(subs.wants('inbound.viber')).toBe(false);
    // written as another process would: this one is not told
    await insertEndpoint(db(), ['inbound.viber']);
    await until(() => subs.wants('inbound.viber'), REFRESH_MS + 3_000);
    expect(subs.wants('call.started')).toBe(false);
  }, 20_000);
});
