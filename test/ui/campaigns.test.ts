/**
 * The console's campaign pages in-process (src/ui/pages/campaigns.tsx): the list with each
 * campaign's progress, one campaign with its recipients by state, its outcomes as a chart with
 * the numbers as text, the buttons its state allows, its results linked to their calls, the
 * pause / resume / cancel posts (same-origin only, answered with a redirect that says what
 * happened), the results CSV, and unknown or malformed ids answered with the 404 page.
 *
 * The scheduler runs by hand on a clock the test holds, and a call's end is written to its row
 * as the call runtime would (as test/campaigns/scheduler.test.ts does).
 */
import { eq } from 'drizzle-orm';
import { beforeAll, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import { runCampaigns, type SchedulerDeps } from '../../src/campaigns/scheduler.ts';
import { NO_HOLIDAYS } from '../../src/campaigns/windows.ts';
import type { Clock } from '../../src/clock.ts';
import { calls, campaignRecipients, campaigns } from '../../src/db/schema/index.ts';
import { createLogger } from '../../src/logger.ts';
import { buildTestApp, json, phone, readJson, uniq } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';
import { attrs, expectConsolePage, text } from './html.ts';

const FORM = { 'content-type': 'application/x-www-form-urlencoded', origin: 'http://localhost' };
const VARS = { name: 'Ann', date: 'Monday' };
const ALL_DAY = { from: '00:00', to: '23:59' };

describeEachEngine('console campaign pages', (ctx) => {
  let app: App;
  let deps: SchedulerDeps;
  // a Friday, 10:00 in Kyiv: inside any window
  const now = new Date('2026-03-27T08:00:00Z');
  const clock: Clock = { now: () => new Date(now) };
  let running: { id: string; name: string };
  let paused: { id: string; name: string };
  let callId: string;

  const post = (path: string, headers: Record<string, string> = FORM) =>
    app.request(path, { method: 'POST', headers, body: '' });
  const create = async (recipients: number) => {
    const name = uniq('reminders');
    const res = await app.request(
      '/v1/campaigns',
      json({
        name,
        flow: 'appointment-reminder',
        from: 'Clinic',
        recipients: Array.from({ length: recipients }, () => ({ to: phone(), vars: VARS })),
        window: ALL_DAY,
      }),
    );
    expect(res.status).toBe(201);
    return { id: (await readJson(res)).id as string, name };
  };
  const stateOf = async (id: string) =>
    (await ctx.database().db.select().from(campaigns).where(eq(campaigns.id, id)))[0]?.state;

  beforeAll(async () => {
    const built = buildTestApp(ctx.database(), { clock });
    app = built.app;
    deps = {
      ...built.calls,
      logger: createLogger('silent'),
      window: ALL_DAY,
      holidays: NO_HOLIDAYS,
      capPerDay: undefined,
    };
    running = await create(3);
    // its first call goes at once (the pace allows one now); it ends confirmed and is settled
    for (let i = 0; i < 20 && (await runCampaigns(deps)); i++);
    const db = ctx.database().db;
    const started = (
      await db
        .select()
        .from(campaignRecipients)
        .where(eq(campaignRecipients.campaignId, running.id))
    ).find((r) => r.callId !== null);
    expect(started).toBeDefined();
    callId = started!.callId!;
    await db
      .update(calls)
      .set({ state: 'ended', outcome: 'confirmed', endedAt: clock.now() })
      .where(eq(calls.id, callId));
    for (let i = 0; i < 20 && (await runCampaigns(deps)); i++);
    paused = await create(2);
    expect((await app.request(`/v1/campaigns/${paused.id}/pause`, { method: 'POST' })).status).toBe(
      200,
    );
  });

  it('lists the campaigns with their progress, linked from the navigation', async () => {
    const res = await app.request('/ui/campaigns');
    expect(res.status).toBe(200);
    const html = await res.text();
    expectConsolePage(html, 'Campaigns');
    expect(html).toMatch(/<a href="\/ui\/campaigns" aria-current="page">Campaigns<\/a>/);
    expect(attrs(html, 'href')).toEqual(
      expect.arrayContaining([`/ui/campaigns/${running.id}`, `/ui/campaigns/${paused.id}`]),
    );
    const page = text(html);
    expect(page).toContain(running.name);
    expect(page).toContain('appointment-reminder');
    expect(page).toContain('1 of 3 done');
    expect(page).toContain('0 of 2 done');
    expect(html).toMatch(/<progress max="3" value="1" aria-label="1 of 3 done"/);
    // the nav link is on every page
    expect(await (await app.request('/ui/calls')).text()).toContain('href="/ui/campaigns"');
  });

  it('shows a campaign: facts, recipients by state, outcomes, buttons, results with calls', async () => {
    const res = await app.request(`/ui/campaigns/${running.id}`);
    expect(res.status).toBe(200);
    const html = await res.text();
    expectConsolePage(html, `Campaign ${running.name}`);
    const page = text(html);
    expect(page).toContain('running');
    expect(page).toContain('60 calls a minute');
    // every bar has its number as text: 1 done, 2 pending (the clock stands: the pace holds
    // them); one confirmed
    expect(html).toMatch(/<tr data-key="done"><th scope="row">done<\/th><td class="num">1<\/td>/);
    expect(html).toMatch(/<tr data-key="pending"><th scope="row">pending<\/th><td class="num">2</);
    expect(html).toMatch(
      /<tr data-key="confirmed"><th scope="row">confirmed<\/th><td class="num">1</,
    );
    expect(attrs(html, 'action')).toEqual([
      `/ui/campaigns/${running.id}/pause`,
      `/ui/campaigns/${running.id}/cancel`,
    ]);
    expect(page).not.toContain('Resume');
    expect(attrs(html, 'href')).toEqual(
      expect.arrayContaining([`/ui/calls/${callId}`, `/ui/campaigns/${running.id}/results.csv`]),
    );
  });

  it("shows a message campaign: its template, its pace in messages, each attempt's message", async () => {
    const made = await app.request(
      '/v1/campaigns',
      json({
        message: { type: 'sms', text: 'Hi {{name}}' },
        from: 'Shop',
        recipients: [{ to: phone(), vars: { name: 'Ann' } }],
        window: ALL_DAY,
      }),
    );
    const { id } = await readJson(made);
    for (let i = 0; i < 20 && (await runCampaigns(deps)); i++);
    const [row] = await ctx
      .database()
      .db.select()
      .from(campaignRecipients)
      .where(eq(campaignRecipients.campaignId, id));
    expect(row).toMatchObject({ state: 'sending' });
    const html = await (await app.request(`/ui/campaigns/${id}`)).text();
    // no name and no flow: the page is named by its id
    expectConsolePage(html, `Campaign ${id}`);
    const page = text(html);
    expect(page).toContain('sms: Hi {{name}}');
    expect(page).toContain('60 messages a minute');
    expect(attrs(html, 'href')).toContain(`/ui/messages/${row!.messageId}`);
  });

  it('shows Resume, not Pause, on a paused campaign', async () => {
    const html = await (await app.request(`/ui/campaigns/${paused.id}`)).text();
    expectConsolePage(html, `Campaign ${paused.name}`);
    expect(attrs(html, 'action')).toEqual(
      expect.arrayContaining([
        `/ui/campaigns/${paused.id}/resume`,
        `/ui/campaigns/${paused.id}/cancel`,
      ]),
    );
    expect(attrs(html, 'action')).not.toContain(`/ui/campaigns/${paused.id}/pause`);
    expect(text(html)).toContain('No recipient is done yet.');
  });

  it('pauses from the button and says so; a refused change is said, not a 500', async () => {
    const res = await post(`/ui/campaigns/${running.id}/pause`);
    expect(res.status).toBe(303);
    const location = res.headers.get('location')!;
    expect(location).toBe(`/ui/campaigns/${running.id}?changed=pause`);
    expect(await stateOf(running.id)).toBe('paused');
    const html = await (await app.request(location)).text();
    expect(text(html)).toContain('Paused: no new calls start (or messages go)');
    expect(attrs(html, 'action')).toContain(`/ui/campaigns/${running.id}/resume`);

    const again = await post(`/ui/campaigns/${running.id}/pause`);
    expect(again.status).toBe(303);
    const refused = again.headers.get('location')!;
    expect(refused).toBe(`/ui/campaigns/${running.id}?refused=paused&action=pause`);
    expect(text(await (await app.request(refused)).text())).toContain(
      'A campaign that is paused cannot pause.',
    );

    const resumed = await post(`/ui/campaigns/${running.id}/resume`);
    expect(resumed.headers.get('location')).toBe(`/ui/campaigns/${running.id}?changed=resume`);
    expect(await stateOf(running.id)).toBe('running');

    // each is an audit row, as POST /v1/campaigns/{id}/{action} would be: the refusal too
    const audit = await readJson(await app.request('/v1/audit?limit=10'));
    const rows = audit.items
      .filter((r: { route: string }) => r.route.startsWith('/ui/campaigns/'))
      .reverse()
      .map((r: { token: string; route: string; status: number; changes: unknown }) => [
        r.token,
        r.route,
        r.status,
        r.changes,
      ]);
    const changed = { changed: { campaigns: { count: 1, ids: [running.id] } } };
    expect(rows).toEqual([
      ['console', '/ui/campaigns/{id}/pause', 200, changed],
      ['console', '/ui/campaigns/{id}/pause', 409, {}],
      ['console', '/ui/campaigns/{id}/resume', 200, changed],
    ]);
  });

  it('takes posts from this origin only', async () => {
    const res = await post(`/ui/campaigns/${paused.id}/cancel`, {
      ...FORM,
      origin: 'https://evil.example',
    });
    expect(res.status).toBe(403);
    expect(await stateOf(paused.id)).toBe('paused');
  });

  it('streams the results as CSV', async () => {
    const res = await app.request(`/ui/campaigns/${running.id}/results.csv`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/csv/);
    expect(res.headers.get('content-disposition')).toBe(
      `attachment; filename="campaign-${running.id}.csv"`,
    );
    const lines = (await res.text()).split('\r\n').filter((l) => l !== '');
    expect(lines[0]).toBe('line,to,state,attempts,outcome,status,path,followUps,reason,history');
    expect(lines).toHaveLength(4);
    expect(lines.some((l) => l.includes(`1:${callId}:ended:confirmed`))).toBe(true);
  });

  it('answers an unknown or malformed id with the 404 page', async () => {
    for (const path of [
      '/ui/campaigns/019a0000-0000-7000-8000-000000000000',
      '/ui/campaigns/not-a-uuid',
      '/ui/campaigns/not-a-uuid/results.csv',
      "/ui/campaigns/'%20or%201=1",
    ]) {
      const res = await app.request(path);
      expect(res.status, path).toBe(404);
      expectConsolePage(await res.text(), 'Not found');
    }
    expect((await post('/ui/campaigns/not-a-uuid/pause')).status).toBe(404);
    expect((await post('/ui/campaigns/019a0000-0000-7000-8000-000000000000/cancel')).status).toBe(
      404,
    );
  });

  it('ignores notices it did not send', async () => {
    const html = await (
      await app.request(`/ui/campaigns/${paused.id}?refused=<b>x</b>&action=pause&changed=nope`)
    ).text();
    expect(html).not.toContain('<b>x</b>');
    expect(html).not.toContain('class="notice');
  });
});
