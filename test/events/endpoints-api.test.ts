/**
 * /v1/endpoints through the app (src/http/routes/endpoints.ts, src/events/endpoints.ts): the
 * secret shown once and never again, validation (bad URL, an address the outbound policy
 * refuses, unknown event types), names, file endpoints read-only, rotation with an overlap in
 * which both secrets sign (checked with standardwebhooks, and through the delivery worker to
 * a real receiver), and the attempts and queue listings.
 */
import { eq } from 'drizzle-orm';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import { beforeAll, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import type { Db } from '../../src/db/client.ts';
import { deliveryAttempts, endpoints } from '../../src/db/schema/index.ts';
import { deliverOnce } from '../../src/events/deliver.ts';
import { liveSecrets } from '../../src/events/endpoints.ts';
import { newEndpointSecret, signatureHeaders, webhookId } from '../../src/events/sign.ts';
import { subscriptionsOf } from '../../src/events/subscriptions.ts';
import { createOutboundPolicy } from '../../src/http/outbound.ts';
import { buildTestApp, type Json, json, readJson, uniq } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';
import {
  deliveryRow,
  endpointRow,
  insertEndpoint,
  insertEvent,
  receiver,
  stillClock,
} from './delivery-helpers.ts';

const URL = 'https://crm.example.com/hooks/switchboard';
const body = JSON.stringify({ type: 'call.ended', timestamp: '2030-01-01T00:00:00Z', data: {} });

/** Polls `check` until it holds or `ms` pass. */
async function until(check: () => boolean | Promise<boolean>, ms = 1000): Promise<boolean> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 10));
  }
}

describeEachEngine('endpoints API', (ctx) => {
  let app: App;
  let open: App;
  let db: Db;
  const clock = stillClock(new Date());

  const send = (path: string, method: string, payload?: unknown, to: App = app) =>
    to.request(path, payload === undefined ? { method } : json(payload, { method }));
  const create = async (payload: Json, to: App = app) => {
    const res = await send('/v1/endpoints', 'POST', payload, to);
    return { status: res.status, body: await readJson(res) };
  };

  beforeAll(() => {
    db = ctx.database().db;
    app = buildTestApp(ctx.database(), { clock }).app;
    open = buildTestApp(ctx.database(), { clock, env: { OUTBOUND_ALLOW_PRIVATE: 'true' } }).app;
  });

  it('answers the secret once on creation; no read shows it again', async () => {
    const name = uniq('crm').toLowerCase();
    const made = await create({ url: URL, name, events: ['call.ended'], rateLimit: 5 });
    expect(made.status).toBe(201);
    expect(made.body.secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    expect(made.body).toMatchObject({
      name,
      url: URL,
      events: ['call.ended'],
      enabled: true,
      rateLimit: 5,
      ordered: false,
      source: 'api',
      secrets: [{ expiresAt: null }],
    });
    expect(made.body.id).toMatch(/^ep_/);
    // what the worker signs with is what was answered
    expect((await endpointRow(db, made.body.id)).secrets).toEqual([
      { secret: made.body.secret, expiresAt: null },
    ]);

    for (const path of [
      `/v1/endpoints/${made.body.id}`,
      `/v1/endpoints/${name}`,
      '/v1/endpoints',
    ]) {
      const res = await app.request(path);
      expect(res.status).toBe(200);
      const text = await res.text();
      expect(text).not.toContain(made.body.secret);
      expect(text).not.toContain('whsec_');
      expect(text).toContain(made.body.id);
    }
  });

  it('refuses a URL that is not http(s), or holds credentials, naming the field', async () => {
    for (const url of ['ftp://crm.example.com/x', 'https://u:p@crm.example.com/x', 'not a url']) {
      const res = await create({ url });
      expect(res.status, url).toBe(400);
      expect(res.body.error.code).toBe('VALIDATION_ERROR');
      expect(res.body.error.details).toEqual([
        expect.objectContaining({ path: 'url', code: 'INVALID_URL' }),
      ]);
    }
  });

  it('refuses a private or loopback address unless OUTBOUND_ALLOW_PRIVATE=true', async () => {
    for (const url of ['http://127.0.0.1:8080/hook', 'http://10.1.2.3/hook', 'http://[::1]/x']) {
      const res = await create({ url });
      expect(res.status, url).toBe(400);
      expect(res.body.error.code).toBe('VALIDATION_ERROR');
      expect(res.body.error.details).toEqual([
        expect.objectContaining({ path: 'url', code: 'ADDRESS_NOT_ALLOWED' }),
      ]);
      expect(res.body.error.message).toMatch(/OUTBOUND_ALLOW_PRIVATE/);
    }
    // a name is resolved: localhost is loopback
    const named = await create({ url: 'http://localhost:9/hook' });
    expect(named.body.error?.details?.[0]?.code).toBe('ADDRESS_NOT_ALLOWED');
    // a change is held to the same rule
    const made = await create({ url: URL });
    const patched = await send(`/v1/endpoints/${made.body.id}`, 'PATCH', {
      url: 'http://192.168.1.10/x',
    });
    expect(patched.status).toBe(400);
    expect((await readJson(patched)).error.details[0]).toMatchObject({
      path: 'url',
      code: 'ADDRESS_NOT_ALLOWED',
    });
    expect((await endpointRow(db, made.body.id)).url).toBe(URL);

    const allowed = await create({ url: 'http://127.0.0.1:8080/hook' }, open);
    expect(allowed.status).toBe(201);
  });

  it('refuses an unknown event type, naming the item', async () => {
    const res = await create({ url: URL, events: ['call.ended', 'call.teleported'] });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('VALIDATION_ERROR');
    expect(res.body.error.details).toEqual([
      expect.objectContaining({ path: 'events[1]', code: 'UNKNOWN_EVENT_TYPE' }),
    ]);
    expect(res.body.error.details[0].message).toContain('call.ended');
  });

  it('validates the other fields: a slug name, a positive rate, booleans, no unknown fields', async () => {
    const cases: [Json, string, string][] = [
      [{ url: URL, name: 'Not A Slug' }, 'name', 'INVALID_FORMAT'],
      [{ url: URL, rateLimit: 0 }, 'rateLimit', 'TOO_SMALL'],
      [{ url: URL, rateLimit: 1.5 }, 'rateLimit', 'INVALID_TYPE'],
      [{ url: URL, ordered: 'yes' }, 'ordered', 'INVALID_TYPE'],
      [{ url: URL, event: ['call.ended'] }, 'event', 'UNKNOWN_FIELD'],
      [{ url: URL, events: [] }, 'events', 'TOO_SMALL'],
    ];
    for (const [payload, path, code] of cases) {
      const res = await create(payload);
      expect(res.status, JSON.stringify(payload)).toBe(400);
      expect(res.body.error.details[0], JSON.stringify(payload)).toMatchObject({ path, code });
    }
  });

  it('keeps names unique: 409 CONFLICT naming the field', async () => {
    const name = uniq('dup').toLowerCase();
    expect((await create({ url: URL, name })).status).toBe(201);
    const again = await create({ url: URL, name });
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('CONFLICT');
    expect(again.body.error.details[0]).toMatchObject({ path: 'name', code: 'DUPLICATE' });
    const other = await create({ url: URL });
    const renamed = await send(`/v1/endpoints/${other.body.id}`, 'PATCH', { name });
    expect(renamed.status).toBe(409);
  });

  it('changes only the fields given; enabling clears a disabling by Switchboard', async () => {
    const made = await create({ url: URL, events: ['call.ended'], description: 'd' });
    await db
      .update(endpoints)
      .set({ enabled: false, disabledReason: 'kept failing', failingSince: new Date(0) })
      .where(eq(endpoints.id, made.body.id));
    const res = await send(`/v1/endpoints/${made.body.id}`, 'PATCH', {
      enabled: true,
      events: null,
      ordered: true,
    });
    expect(res.status).toBe(200);
    expect(await readJson(res)).toMatchObject({
      enabled: true,
      events: null,
      ordered: true,
      description: 'd',
      url: URL,
      disabledReason: null,
      failingSince: null,
    });
    expect((await send('/v1/endpoints/ep_nope', 'PATCH', { enabled: false })).status).toBe(404);
  });

  it('tells the subscription cache at once: a disabled endpoint stops being wanted', async () => {
    const type = 'inbound.viber';
    const made = await create({ url: URL, events: [type] });
    const subs = subscriptionsOf(db);
    expect(await until(() => subs.wants(type))).toBe(true);
    // every other endpoint of these tests wants other types, or is disabled here
    const others = await db
      .select({ id: endpoints.id, types: endpoints.eventTypes })
      .from(endpoints);
    for (const o of others) {
      if (o.id !== made.body.id && (o.types === null || o.types.includes(type))) {
        await db.update(endpoints).set({ enabled: false }).where(eq(endpoints.id, o.id));
      }
    }
    await send(`/v1/endpoints/${made.body.id}`, 'PATCH', { enabled: false });
    // well inside the background refresh (5 s): changed() made it read the table again
    expect(await until(() => !subs.wants(type), 1500)).toBe(true);
  });

  it('deletes an endpoint with its queue and attempts', async () => {
    const made = await create({ url: URL });
    const { deliveryIds } = await insertEvent(db, [made.body.id], { at: clock.now() });
    const res = await send(`/v1/endpoints/${made.body.id}`, 'DELETE');
    expect(res.status).toBe(200);
    expect((await readJson(res)).id).toBe(made.body.id);
    expect((await app.request(`/v1/endpoints/${made.body.id}`)).status).toBe(404);
    await expect(deliveryRow(db, deliveryIds[0]!)).rejects.toThrow(/no delivery/);
    expect((await send(`/v1/endpoints/${made.body.id}`, 'DELETE')).status).toBe(404);
  });

  it('keeps ENDPOINTS_FILE endpoints read-only: 409 ENDPOINT_READ_ONLY, reads still work', async () => {
    const { id } = await insertEndpoint(db, { url: URL });
    await db.update(endpoints).set({ source: 'file' }).where(eq(endpoints.id, id));
    const before = await endpointRow(db, id);
    const tries: [string, string, unknown][] = [
      [`/v1/endpoints/${id}`, 'PATCH', { enabled: false }],
      [`/v1/endpoints/${id}`, 'DELETE', undefined],
      [`/v1/endpoints/${id}/secret/rotate`, 'POST', {}],
    ];
    for (const [path, method, payload] of tries) {
      const res = await send(path, method, payload);
      expect(res.status, `${method} ${path}`).toBe(409);
      const answer = await readJson(res);
      expect(answer.error.code).toBe('ENDPOINT_READ_ONLY');
      expect(answer.error.message).toMatch(/ENDPOINTS_FILE/);
    }
    expect(await endpointRow(db, id)).toEqual(before);
    const read = await readJson(await app.request(`/v1/endpoints/${id}`));
    expect(read.source).toBe('file');
  });

  it('rotates: the new secret is answered once, and both sign until the overlap ends', async () => {
    const made = await create({ url: URL });
    const old = made.body.secret as string;
    const res = await send(`/v1/endpoints/${made.body.id}/secret/rotate`, 'POST', {
      overlapSeconds: 3600,
    });
    expect(res.status).toBe(200);
    const rotated = await readJson(res);
    const fresh = rotated.secret as string;
    expect(fresh).toMatch(/^whsec_/);
    expect(fresh).not.toBe(old);
    const ends = new Date(clock.now().getTime() + 3600_000).toISOString();
    expect(rotated.secrets).toEqual([{ expiresAt: null }, { expiresAt: ends }]);
    expect(
      JSON.stringify(await readJson(await app.request(`/v1/endpoints/${made.body.id}`))),
    ).not.toMatch(/whsec_/);

    // during the overlap: what the endpoint is signed with verifies under either secret
    const row = await endpointRow(db, made.body.id);
    const during = liveSecrets(row.secrets, clock.now()).map((s) => s.secret);
    expect(during).toEqual([fresh, old]);
    const headers = signatureHeaders(during, 'evt_rotation', new Date(), body);
    expect(new Webhook(fresh).verify(body, headers)).toBeTruthy();
    expect(new Webhook(old).verify(body, headers)).toBeTruthy();

    // after it: the old one no longer signs
    const after = liveSecrets(row.secrets, new Date(clock.now().getTime() + 3601_000)).map(
      (s) => s.secret,
    );
    expect(after).toEqual([fresh]);
    const later = signatureHeaders(after, 'evt_x', new Date(), body);
    expect(() => new Webhook(old).verify(body, later)).toThrow(WebhookVerificationError);

    // without a body: the default overlap (24 h); the overlapping ones are kept
    const again = await readJson(await send(`/v1/endpoints/${made.body.id}/secret/rotate`, 'POST'));
    expect(again.secrets).toHaveLength(3);
    expect(again.secrets[2].expiresAt).toBe(ends); // an earlier end is kept
    // 0: the old ones stop at once
    const now = await readJson(
      await send(`/v1/endpoints/${made.body.id}/secret/rotate`, 'POST', { overlapSeconds: 0 }),
    );
    expect(now.secrets).toEqual([{ expiresAt: null }]);
    expect((await endpointRow(db, made.body.id)).secrets).toEqual([
      { secret: now.secret, expiresAt: null },
    ]);
    const bad = await send(`/v1/endpoints/${made.body.id}/secret/rotate`, 'POST', {
      overlapSeconds: -1,
    });
    expect(bad.status).toBe(400);
  });

  it('rotates under the worker: a real receiver verifies a request with the old and the new secret', async () => {
    const got = await receiver(() => newEndpointSecret(), clock);
    try {
      const made = await create({ url: got.url }, open);
      expect(made.status).toBe(201);
      const rotated = await readJson(
        await send(`/v1/endpoints/${made.body.id}/secret/rotate`, 'POST', {}, open),
      );
      await insertEvent(db, [made.body.id], { at: clock.now() });
      const outbound = createOutboundPolicy({ allowPrivate: true });
      try {
        for (let i = 0; i < 50 && got.received.length === 0; i++) {
          await deliverOnce({ db, clock: { now: () => new Date() }, outbound: outbound.send });
        }
      } finally {
        await outbound.close();
      }
      expect(got.received.length).toBeGreaterThan(0);
      const r = got.received[0]!;
      const headers = r.headers as Record<string, string>;
      expect(headers['webhook-signature']!.split(' ')).toHaveLength(2);
      expect(new Webhook(made.body.secret).verify(r.body, headers)).toBeTruthy();
      expect(new Webhook(rotated.secret).verify(r.body, headers)).toBeTruthy();
    } finally {
      await got.close();
    }
  });

  it('lists attempts newest first, a page at a time, with the event as the receiver saw it', async () => {
    const made = await create({ url: URL });
    const id = made.body.id as string;
    const t0 = clock.now();
    const first = await insertEvent(db, [id], { at: t0, type: 'call.ended' });
    const second = await insertEvent(db, [id], { at: t0, type: 'call.key' });
    await db.insert(deliveryAttempts).values([
      {
        deliveryId: first.deliveryIds[0]!,
        eventId: first.eventId,
        endpointId: id,
        at: new Date(t0.getTime() + 1000),
        status: 'failed',
        responseStatus: 500,
        responseBody: 'boom',
        durationMs: 12,
      },
      {
        deliveryId: second.deliveryIds[0]!,
        eventId: second.eventId,
        endpointId: id,
        at: new Date(t0.getTime() + 2000),
        status: 'succeeded',
        responseStatus: 204,
        durationMs: 7,
        trigger: 'replay',
      },
    ]);
    const page1 = await readJson(await app.request(`/v1/endpoints/${id}/attempts?limit=1`));
    expect(page1.items).toEqual([
      expect.objectContaining({
        eventId: webhookId(second.eventId),
        type: 'call.key',
        status: 'succeeded',
        responseStatus: 204,
        durationMs: 7,
        trigger: 'replay',
      }),
    ]);
    expect(page1.nextCursor).toEqual(expect.any(String));
    const page2 = await readJson(
      await app.request(`/v1/endpoints/${id}/attempts?limit=1&cursor=${page1.nextCursor}`),
    );
    expect(page2.items).toEqual([
      expect.objectContaining({
        eventId: webhookId(first.eventId),
        type: 'call.ended',
        status: 'failed',
        responseStatus: 500,
        responseBody: 'boom',
        trigger: 'scheduled',
      }),
    ]);
    expect(page2.nextCursor).toBeNull();
    const failed = await readJson(await app.request(`/v1/endpoints/${id}/attempts?status=failed`));
    expect(failed.items.map((a: Json) => a.eventId)).toEqual([webhookId(first.eventId)]);

    const bad = await app.request(`/v1/endpoints/${id}/attempts?cursor=nope`);
    expect(bad.status).toBe(400);
    expect((await readJson(bad)).error.details[0].code).toBe('INVALID_CURSOR');
    expect((await app.request('/v1/endpoints/ep_unknown/attempts')).status).toBe(404);
  });

  it('lists the queue, filtered by state', async () => {
    const made = await create({ url: URL });
    const id = made.body.id as string;
    const a = await insertEvent(db, [id], { at: clock.now() });
    const b = await insertEvent(db, [id], { at: clock.now() });
    const { eventDeliveries } = await import('../../src/db/schema/index.ts');
    await db
      .update(eventDeliveries)
      .set({ state: 'exhausted', attempts: 8 })
      .where(eq(eventDeliveries.id, a.deliveryIds[0]!));
    const all = await readJson(await app.request(`/v1/endpoints/${id}/deliveries`));
    expect(all.items.map((d: Json) => d.eventId)).toEqual([
      webhookId(b.eventId),
      webhookId(a.eventId),
    ]);
    const exhausted = await readJson(
      await app.request(`/v1/endpoints/${id}/deliveries?state=exhausted`),
    );
    expect(exhausted.items).toEqual([
      expect.objectContaining({ eventId: webhookId(a.eventId), state: 'exhausted', attempts: 8 }),
    ]);
  });
});
