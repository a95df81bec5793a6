/**
 * The console's endpoint pages in-process (src/ui/endpoints.tsx): the list, one endpoint with
 * its recent attempts (status, code, duration, time, event type), a replay button per event
 * and the "replay failed since" form, posted same-origin only, each answered with a redirect
 * that says what was queued; the queue row is checked. (No Chromium here: server-side.)
 */
import { eq } from 'drizzle-orm';
import { beforeAll, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import type { Db } from '../../src/db/client.ts';
import { deliveryAttempts, eventDeliveries } from '../../src/db/schema/index.ts';
import { webhookId } from '../../src/events/sign.ts';
import { deliveryRow, insertEvent } from '../events/delivery-helpers.ts';
import { buildTestApp, json, readJson, uniq } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';
import { attrs, expectConsolePage, text } from './html.ts';

const FORM = { 'content-type': 'application/x-www-form-urlencoded', origin: 'http://localhost' };

describeEachEngine('console endpoint pages', (ctx) => {
  let app: App;
  let db: Db;
  let id: string;
  let name: string;
  let eventId: string;
  let deliveryId: number;

  const form = (path: string, fields: Record<string, string>, headers = FORM) =>
    app.request(path, {
      method: 'POST',
      headers,
      body: new URLSearchParams(fields).toString(),
    });

  beforeAll(async () => {
    db = ctx.database().db;
    app = buildTestApp(ctx.database()).app;
    name = uniq('crm').toLowerCase();
    const made = await app.request(
      '/v1/endpoints',
      json({ url: 'https://crm.example.com/hooks', name, events: ['call.ended'] }),
    );
    expect(made.status).toBe(201);
    id = (await readJson(made)).id;
    const at = new Date(Date.now() - 3_600_000);
    const event = await insertEvent(db, [id], { at, type: 'call.ended' });
    eventId = event.eventId;
    deliveryId = event.deliveryIds[0]!;
    await db
      .update(eventDeliveries)
      .set({ state: 'exhausted', attempts: 8, lastAttemptAt: at })
      .where(eq(eventDeliveries.id, deliveryId));
    await db.insert(deliveryAttempts).values({
      deliveryId,
      eventId,
      endpointId: id,
      at,
      status: 'failed',
      responseStatus: 503,
      responseBody: 'down for maintenance',
      durationMs: 42,
    });
  });

  it('lists the endpoints, linked from the navigation', async () => {
    const res = await app.request('/ui/endpoints');
    expect(res.status).toBe(200);
    const html = await res.text();
    expectConsolePage(html, 'Endpoints');
    expect(html).toMatch(/<a href="\/ui\/endpoints" aria-current="page">Endpoints<\/a>/);
    expect(attrs(html, 'href')).toContain(`/ui/endpoints/${id}`);
    expect(text(html)).toContain('https://crm.example.com/hooks');
    expect(text(html)).toContain('call.ended');
    // the nav link is on every page
    expect(await (await app.request('/ui/calls')).text()).toContain('href="/ui/endpoints"');
  });

  it('shows an endpoint with its attempts and a replay form per event; no secret', async () => {
    const res = await app.request(`/ui/endpoints/${id}`);
    expect(res.status).toBe(200);
    const html = await res.text();
    expectConsolePage(html, `Endpoint ${name}`);
    const page = text(html);
    for (const shown of [
      'call.ended',
      webhookId(eventId),
      'failed',
      '503',
      '42 ms',
      'down for maintenance',
    ]) {
      expect(page, shown).toContain(shown);
    }
    expect(html).not.toContain('whsec_');
    expect(attrs(html, 'action')).toEqual(
      expect.arrayContaining([
        `/ui/endpoints/${id}/replay`,
        `/ui/events/${webhookId(eventId)}/replay`,
      ]),
    );
    expect(html).toContain(`name="endpoint" value="${id}"`);
    expect(html).toMatch(/<input id="replay-since" name="since" type="datetime-local"/);
    // by name too; an unknown one is the console's 404 page
    expect((await app.request(`/ui/endpoints/${name}`)).status).toBe(200);
    const missing = await app.request('/ui/endpoints/ep_nope');
    expect(missing.status).toBe(404);
    expectConsolePage(await missing.text(), 'Not found');
  });

  it("replays one event from its button, and says so on the endpoint's page", async () => {
    const res = await form(`/ui/events/${webhookId(eventId)}/replay`, { endpoint: id });
    expect(res.status).toBe(303);
    const location = res.headers.get('location')!;
    expect(location).toBe(`/ui/endpoints/${id}?replayed=1`);
    expect(await deliveryRow(db, deliveryId)).toMatchObject({ state: 'pending', attempts: 0 });
    const page = text(await (await app.request(location)).text());
    expect(page).toContain('Queued 1 delivery again');
  });

  it('replays what failed since a time from the form; a bad time is said, not a 500', async () => {
    await db
      .update(eventDeliveries)
      .set({ state: 'exhausted', attempts: 8 })
      .where(eq(eventDeliveries.id, deliveryId));
    const since = new Date(Date.now() - 2 * 3_600_000).toISOString().slice(0, 16);
    const res = await form(`/ui/endpoints/${id}/replay`, { since });
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe(`/ui/endpoints/${id}?replayed=1`);
    expect((await deliveryRow(db, deliveryId)).state).toBe('pending');

    const bad = await form(`/ui/endpoints/${id}/replay`, { since: 'last tuesday' });
    expect(bad.status).toBe(303);
    expect(bad.headers.get('location')).toBe(`/ui/endpoints/${id}?error=since`);
    const page = await app.request(bad.headers.get('location')!);
    expect(text(await page.text())).toContain('Give the time');
  });

  it('takes replay posts from its own origin only', async () => {
    await db
      .update(eventDeliveries)
      .set({ state: 'exhausted', attempts: 8 })
      .where(eq(eventDeliveries.id, deliveryId));
    const forged = await form(
      `/ui/events/${webhookId(eventId)}/replay`,
      { endpoint: id },
      { ...FORM, origin: 'https://evil.example' },
    );
    expect(forged.status).toBe(403);
    expect((await deliveryRow(db, deliveryId)).state).toBe('exhausted');
  });
});
