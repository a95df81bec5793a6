/**
 * Campaigns through the API and the scheduler, on a clock the test moves: accepted with bad
 * rows reported and duplicates kept once; nothing before `startAt` or outside the window (in
 * the recipient's own time zone, across a daylight-saving change); the pace and the cap on
 * calls at once; retries that wait and never fall outside the window; the best attempt's
 * result; a window closing mid-campaign; an opt-out arriving mid-campaign; a frequency cap held
 * by one atomic statement; pause, resume and cancel; results as JSON and CSV.
 *
 * A call's end is written to its row as the call runtime would leave it (state, outcome,
 * ended_at): the scheduler reads nothing else of it. test/e2e/campaigns.test.ts runs a
 * campaign end to end through the sandbox.
 */
import { randomBytes } from 'node:crypto';
import { eq, sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCampaigns, type SchedulerDeps } from '../../src/campaigns/scheduler.ts';
import { NO_HOLIDAYS } from '../../src/campaigns/windows.ts';
import type { Clock } from '../../src/clock.ts';
import { rowsOf } from '../../src/db/client.ts';
import {
  calls,
  campaignRecipients,
  endpoints,
  eventDeliveries,
  outgoingEvents,
} from '../../src/db/schema/index.ts';
import { subscriptionsOf } from '../../src/events/subscriptions.ts';
import { EVENT_CATALOG, type EventType } from '../../src/events/types.ts';
import { createLogger } from '../../src/logger.ts';
import { addOptOut } from '../../src/opt-outs/store.ts';
import { buildTestApp, json, phone, readJson } from '../support/app.ts';
import { availableEngines, createTestDatabase, type TestDatabase } from '../support/db.ts';

/** A clock the test moves. */
function manualClock(start: string) {
  let now = new Date(start);
  const clock: Clock & { set(at: string): void; advance(ms: number): void } = {
    now: () => new Date(now),
    set: (at) => {
      now = new Date(at);
    },
    advance: (ms) => {
      now = new Date(now.getTime() + ms);
    },
  };
  return clock;
}

const VARS = { name: 'Ann', date: 'Monday' };
const ALL_DAY = { from: '00:00', to: '23:59' };

for (const engine of availableEngines())
  describe(`campaigns [${engine}]`, () => {
    let db: TestDatabase;
    let app: ReturnType<typeof buildTestApp>;
    const clock = manualClock('2026-03-27T08:00:00Z'); // a Friday, 10:00 in Kyiv (UTC+2)
    let deps: SchedulerDeps;

    beforeAll(async () => {
      db = await createTestDatabase(engine);
      app = buildTestApp(db.database, { clock });
      deps = {
        ...app.calls,
        logger: createLogger('silent'),
        window: { from: '09:00', to: '20:00' },
        holidays: NO_HOLIDAYS,
        capPerDay: undefined,
      };
    }, 60_000);
    afterAll(async () => db?.drop());

    const create = async (body: Record<string, unknown>) => {
      const res = await app.app.request(
        '/v1/campaigns',
        json({ flow: 'appointment-reminder', from: 'Clinic', ...body }),
      );
      return { status: res.status, body: await readJson(res) };
    };
    const recipients = (id: string) =>
      db.database.db
        .select()
        .from(campaignRecipients)
        .where(eq(campaignRecipients.campaignId, id))
        .orderBy(campaignRecipients.line);
    const endCall = async (callId: string, state: 'ended' | 'failed', outcome: string | null) => {
      await db.database.db
        .update(calls)
        .set({ state, outcome, endedAt: clock.now() })
        .where(eq(calls.id, callId));
    };
    /** Rounds until the scheduler has nothing to do now. */
    const settle = async () => {
      for (let i = 0; i < 20 && (await runCampaigns(deps)); i++);
    };

    it('accepts the good rows, reports the bad ones by index and field, and keeps a number once', async () => {
      const a = phone();
      const { status, body } = await create({
        recipients: [
          { to: a, vars: VARS },
          { to: 'not a number', vars: VARS },
          { to: phone(), vars: { name: 'Bo' } },
          { to: a, vars: VARS },
        ],
        window: ALL_DAY,
      });
      expect(status).toBe(201);
      expect(body.accepted).toBe(1);
      expect(body.duplicates).toBe(1);
      expect(body.rejected.map((r: { row: number; code: string }) => [r.row, r.code])).toEqual([
        [1, 'INVALID_RECIPIENT'],
        [2, 'INVALID_VARS'],
      ]);
      expect(body.rejected[1].details[0].path).toBe('recipients[2].vars.date');
      expect(body.state).toBe('scheduled');
      const got = await app.app.request(`/v1/campaigns/${body.id}`);
      expect((await readJson(got)).progress.byState).toEqual({ pending: 1 });
    });

    it('starts nothing before startAt, then paces calls and holds the cap on calls at once', async () => {
      const { body } = await create({
        recipients: Array.from({ length: 6 }, () => ({ to: phone(), vars: VARS })),
        startAt: new Date(clock.now().getTime() + 60_000).toISOString(),
        perMinute: 2,
        maxConcurrent: 3,
        window: ALL_DAY,
      });
      await settle();
      expect((await recipients(body.id)).every((r) => r.state === 'pending')).toBe(true);
      clock.advance(60_000); // startAt: running, and its first call goes at once
      await settle();
      let rows = await recipients(body.id);
      expect(rows.filter((r) => r.state === 'calling')).toHaveLength(1);
      clock.advance(30_000); // half a minute at 2 a minute: one more
      await settle();
      rows = await recipients(body.id);
      expect(rows.filter((r) => r.state === 'calling')).toHaveLength(2);
      clock.advance(120_000); // 4 more, but only 1 more may be in progress
      await settle();
      rows = await recipients(body.id);
      expect(rows.filter((r) => r.state === 'calling')).toHaveLength(3);
      // one ends: its slot frees, and the pace allows another
      await endCall(rows.find((r) => r.state === 'calling')!.callId!, 'ended', 'confirmed');
      await settle();
      rows = await recipients(body.id);
      expect(rows.filter((r) => r.state === 'calling')).toHaveLength(3);
      expect(rows.filter((r) => r.state === 'done').map((r) => r.outcome)).toEqual(['confirmed']);
    });

    it('holds the pace and the cap with two schedulers at once (a resumed leader beside the new one)', async () => {
      const { body } = await create({
        recipients: Array.from({ length: 12 }, () => ({ to: phone(), vars: VARS })),
        perMinute: 6,
        maxConcurrent: 4,
        window: ALL_DAY,
      });
      await settle(); // running, and its first call goes at once
      expect((await recipients(body.id)).filter((r) => r.state === 'calling')).toHaveLength(1);
      clock.advance(20_000); // two calls' worth of pace at 6 a minute
      // three rounds at once: on Postgres each in a transaction of its own, side by side
      await Promise.all([runCampaigns(deps), runCampaigns(deps), runCampaigns(deps)]);
      expect((await recipients(body.id)).filter((r) => r.state === 'calling')).toHaveLength(3);
      clock.advance(120_000); // a minute's worth more, but only one more may be in progress
      await Promise.all([runCampaigns(deps), runCampaigns(deps), runCampaigns(deps)]);
      expect((await recipients(body.id)).filter((r) => r.state === 'calling')).toHaveLength(4);
    });

    it("waits for the window in the recipient's time zone, across the change to summer time", async () => {
      // Sunday 29 March 2026, 00:30 UTC: 02:30 in Kyiv; at 03:00 local the clocks go to 04:00
      clock.set('2026-03-29T00:30:00Z');
      const { body } = await create({
        recipients: [{ to: phone(), vars: VARS }],
        window: { from: '09:00', to: '20:00' },
        perMinute: 60,
      });
      await settle();
      const [r] = await recipients(body.id);
      expect(r!.state).toBe('waiting');
      // 09:00 in Kyiv, now UTC+3: 06:00 UTC (not 07:00, as before the change)
      expect(r!.nextAt!.toISOString()).toBe('2026-03-29T06:00:00.000Z');
      clock.set('2026-03-29T05:59:00Z');
      await settle();
      expect((await recipients(body.id))[0]!.state).toBe('waiting');
      clock.set('2026-03-29T06:01:00Z');
      await settle();
      expect((await recipients(body.id))[0]!.state).toBe('calling');
    });

    it('stops starting calls when the window closes mid-campaign, and goes on when it opens', async () => {
      // Thursday 2 April 2026, 19:58 in Kyiv (UTC+3): two minutes of the window left
      clock.set('2026-04-02T16:58:00Z');
      const { body } = await create({
        recipients: [1, 2, 3, 4].map(() => ({ to: phone(), vars: VARS })),
        window: { from: '09:00', to: '20:00' },
        perMinute: 1,
      });
      await settle();
      clock.set('2026-04-02T16:59:00Z');
      await settle();
      expect((await recipients(body.id)).map((r) => r.state)).toEqual([
        'calling',
        'calling',
        'pending',
        'pending',
      ]);
      // 20:00 in Kyiv: the pace would allow another, the window does not
      clock.set('2026-04-02T17:00:30Z');
      await settle();
      const closed = await recipients(body.id);
      expect(closed.map((r) => r.state)).toEqual(['calling', 'calling', 'waiting', 'pending']);
      expect(closed[2]!.nextAt!.toISOString()).toBe('2026-04-03T06:00:00.000Z');
      // through the night nothing starts, however long the pace has been saving up
      clock.set('2026-04-03T05:59:00Z');
      await settle();
      expect((await recipients(body.id)).filter((r) => r.state === 'calling')).toHaveLength(2);
      // 09:00 the next morning: it goes on, at its pace (a minute's worth at most at once)
      clock.set('2026-04-03T06:00:00Z');
      await settle();
      expect((await recipients(body.id)).filter((r) => r.state === 'calling').length).toBe(3);
    });

    it('retries what the policy names, never outside the window, and keeps the best result', async () => {
      clock.set('2026-04-01T16:00:00Z'); // 19:00 in Kyiv: an hour of the window left
      const { body } = await create({
        recipients: [{ to: phone(), vars: VARS }],
        window: { from: '09:00', to: '20:00' },
        retry: { on: ['failed', 'no-outcome', 'no-input'], after: '2h', maxAttempts: 3 },
      });
      await settle();
      let [r] = await recipients(body.id);
      expect(r!.state).toBe('calling');
      await endCall(r!.callId!, 'ended', 'no-input');
      await settle();
      [r] = await recipients(body.id);
      // 2 h later is 21:00 in Kyiv, after the window: the retry waits for 09:00 tomorrow
      expect(r!.state).toBe('retry');
      expect(r!.outcome).toBe('no-input');
      clock.set('2026-04-01T18:00:00Z');
      await settle();
      [r] = await recipients(body.id);
      expect(r!.state).toBe('waiting');
      expect(r!.nextAt!.toISOString()).toBe('2026-04-02T06:00:00.000Z');
      clock.set('2026-04-02T06:00:00Z');
      await settle();
      [r] = await recipients(body.id);
      expect(r!.state).toBe('calling');
      expect(r!.attempts).toBe(2);
      // the second attempt fails to get through: the first one's outcome stays the result
      await endCall(r!.callId!, 'failed', null);
      clock.advance(2 * 3_600_000);
      await settle();
      [r] = await recipients(body.id);
      expect(r!.state).toBe('calling');
      expect(r!.attempts).toBe(3);
      await endCall(r!.callId!, 'ended', 'no-input');
      await settle();
      [r] = await recipients(body.id);
      expect(r!.state).toBe('done');
      expect(r!.outcome).toBe('no-input');
      const results = await readJson(await app.app.request(`/v1/campaigns/${body.id}/results`));
      expect(results.items[0].history.map((c: { outcome: string | null }) => c.outcome)).toEqual([
        'no-input',
        null,
        'no-input',
      ]);
      const campaign = await readJson(await app.app.request(`/v1/campaigns/${body.id}`));
      expect(campaign.state).toBe('done');
      expect(campaign.progress.byOutcome).toEqual({ 'no-input': 1 });
    });

    it('honours an opt-out that arrives while the campaign runs, on the recipient row', async () => {
      clock.set('2026-04-03T08:00:00Z');
      const late = phone();
      const { body } = await create({
        recipients: [
          { to: phone(), vars: VARS },
          { to: late, vars: VARS },
        ],
        perMinute: 1,
        window: ALL_DAY,
      });
      await settle(); // running: the first is called at once
      await addOptOut(db.database.db, late, 'api', null, clock.now());
      clock.advance(60_000);
      await settle();
      const rows = await recipients(body.id);
      expect(rows[1]!.state).toBe('skipped');
      expect(rows[1]!.reason).toMatch(/opted out/);
      const csv = await app.app.request(`/v1/campaigns/${body.id}/results`, {
        headers: { accept: 'text/csv' },
      });
      expect(csv.headers.get('content-type')).toContain('text/csv');
      const lines = (await csv.text()).trim().split('\r\n');
      expect(lines[0]).toBe('line,to,state,attempts,outcome,status,path,followUps,reason,history');
      expect(lines[2]).toContain(`1,${late},skipped,0,,,,,opted out`);
    });

    it('holds a frequency cap across campaigns with one atomic statement per round', async () => {
      clock.set('2026-04-06T08:00:00Z');
      const capped = { ...deps, capPerDay: 1 };
      const shared = phone();
      const a = await create({ recipients: [{ to: shared, vars: VARS }], window: ALL_DAY });
      const b = await create({ recipients: [{ to: shared, vars: VARS }], window: ALL_DAY });
      // two schedulers (two instances) at once (on Postgres, two connections racing): the cap
      // lets one call through
      clock.advance(60_000);
      await Promise.all([runCampaigns(capped), runCampaigns(capped)]);
      clock.advance(60_000);
      await Promise.all([runCampaigns(capped), runCampaigns(capped)]);
      const states = [...(await recipients(a.body.id)), ...(await recipients(b.body.id))].map(
        (r) => r.state,
      );
      expect(states.sort()).toEqual(['calling', 'waiting']);
      const [count] = rowsOf<{ count: number }>(
        await db.database.db.execute(sql`select count from contact_counts where phone = ${shared}`),
      );
      expect(count!.count).toBe(1);
    });

    it('tells endpoints: started, each recipient done or skipped, and done', async () => {
      clock.set('2026-04-08T08:00:00Z');
      await db.database.db.insert(endpoints).values({
        id: `ep_${randomBytes(6).toString('hex')}`,
        url: 'https://receiver.example.org/hook',
        eventTypes: ['campaign.started', 'campaign.recipient.done', 'campaign.done'],
        secrets: [{ secret: `whsec_${randomBytes(24).toString('base64')}`, expiresAt: null }],
      });
      subscriptionsOf(db.database.db).changed();
      await subscriptionsOf(db.database.db).ready();
      const opted = phone();
      await addOptOut(db.database.db, opted, 'api', null, clock.now());
      const { body } = await create({
        name: 'told',
        recipients: [
          { to: phone(), vars: VARS },
          { to: opted, vars: VARS },
        ],
        window: ALL_DAY,
      });
      await settle(); // the first is called at once
      const [r] = (await recipients(body.id)).filter((x) => x.state === 'calling');
      clock.advance(60_000); // the pace allows the next: opted out, skipped
      await endCall(r!.callId!, 'ended', 'confirmed');
      await settle();
      // in the order they were recorded: their deliveries' (one subject's order to an endpoint)
      const told = await db.database.db
        .select({ type: outgoingEvents.type, data: outgoingEvents.data })
        .from(outgoingEvents)
        .innerJoin(eventDeliveries, eq(eventDeliveries.eventId, outgoingEvents.id))
        .where(eq(outgoingEvents.subject, `campaign:${body.id}`))
        .orderBy(eventDeliveries.id);
      expect(told.map((e) => e.type)).toEqual([
        'campaign.started',
        'campaign.recipient.done',
        'campaign.recipient.done',
        'campaign.done',
      ]);
      const done = told.filter((e) => e.type === 'campaign.recipient.done').map((e) => e.data);
      expect(done).toContainEqual(expect.objectContaining({ to: opted, state: 'skipped' }));
      expect(done).toContainEqual(
        expect.objectContaining({ state: 'done', outcome: 'confirmed', callId: r!.callId }),
      );
      expect(told[3]!.data).toMatchObject({
        state: 'done',
        byState: { done: 1, skipped: 1 },
        byOutcome: { confirmed: 1 },
      });
      for (const e of told) {
        const parsed = EVENT_CATALOG[e.type as EventType].data.safeParse(e.data);
        expect(parsed.error?.issues ?? []).toEqual([]);
      }
    });

    it('pauses, resumes and cancels, refusing what the state does not allow', async () => {
      clock.set('2026-04-07T08:00:00Z');
      const { body } = await create({
        recipients: Array.from({ length: 3 }, () => ({ to: phone(), vars: VARS })),
        window: ALL_DAY,
        perMinute: 1,
      });
      const post = (action: string) =>
        app.app.request(`/v1/campaigns/${body.id}/${action}`, { method: 'POST' });
      expect((await readJson(await post('pause'))).state).toBe('paused');
      clock.advance(5 * 60_000);
      await settle();
      expect((await recipients(body.id)).every((r) => r.state === 'pending')).toBe(true);
      expect((await post('resume')).status).toBe(200);
      expect((await post('resume')).status).toBe(409);
      await settle(); // resumed with one call's worth of pace
      expect((await recipients(body.id)).filter((r) => r.state === 'calling')).toHaveLength(1);
      const cancelled = await readJson(await post('cancel'));
      expect(cancelled.state).toBe('cancelled');
      expect(cancelled.progress.byState).toEqual({ calling: 1, cancelled: 2 });
      expect((await app.app.request('/v1/campaigns/nope/pause', { method: 'POST' })).status).toBe(
        404,
      );
    });
  });
