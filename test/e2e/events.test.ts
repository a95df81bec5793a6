/**
 * Events to the user's own systems, as a new user meets them: the real server started as
 * `npm start` starts it (test/support/process.ts: built dist/main.js, the built-in sandbox),
 * a receiver of the user's own on 127.0.0.1 (so OUTBOUND_ALLOW_PRIVATE=true, as docs/events.md
 * says for local development) that checks every request with the `standardwebhooks` package,
 * and nothing but the HTTP API: an endpoint is made, a sandbox call is answered with key 1, and
 * the receiver gets the call's events in order with the data `GET /v1/calls/{id}` shows, the
 * follow-up SMS's statuses, a replay with the same `webhook-id`, and a retry of an event it
 * refused, again with the same `webhook-id`, before the later events of that message.
 *
 * On every engine available: the embedded database in a temporary DATA_DIR, and real Postgres
 * (DATABASE_URL) when TEST_DATABASE_URL is set, where a queued delivery wakes the worker through
 * LISTEN/NOTIFY rather than the poll.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newEndpointSecret } from '../../src/events/sign.ts';
import { type Json, json, phone, readJson, uniq } from '../support/app.ts';
import { availableEngines, createTestDatabase, type TestDatabase } from '../support/db.ts';
import { type ServerProcess, startServerProcess } from '../support/process.ts';
import { eventually } from '../support/server.ts';

/** One request the receiver got, in arrival order. */
interface Received {
  id: string;
  body: string;
  headers: Record<string, string>;
  event: Json;
  /** why `Webhook.verify` refused it; null: verified */
  refused: string | null;
  answered: number;
  at: number;
}

/**
 * The user's receiver: verifies each request as docs/events.md shows (raw body, before
 * parsing) and answers 200, or what `answer` says for it.
 */
async function startReceiver() {
  const got: Received[] = [];
  let secret: string | undefined;
  let answer: (event: Json, id: string) => number = () => 200;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const headers = headersOf(req.headers);
      const id = headers['webhook-id']!;
      let event: Json = null;
      let refused: string | null = null;
      try {
        if (!secret) throw new Error('no secret yet');
        event = new Webhook(secret).verify(body, headers);
      } catch (err) {
        refused = String(err);
        event = JSON.parse(body);
      }
      const status = refused ? 401 : answer(event, id);
      got.push({ id, body, headers, event, refused, answered: status, at: Date.now() });
      res.writeHead(status, { 'content-type': 'text/plain' }).end(status === 200 ? 'ok' : 'no');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/switchboard`,
    got,
    useSecret: (s: string) => {
      secret = s;
    },
    answerWith: (fn: typeof answer) => {
      answer = fn;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

function headersOf(h: IncomingHttpHeaders): Record<string, string> {
  return Object.fromEntries(Object.entries(h).map(([k, v]) => [k, String(v)]));
}

const EVENTS = ['call.started', 'call.key', 'call.outcome', 'call.ended', 'message.status'];

describe.each(availableEngines())('events to a receiver of the user (%s)', (engine) => {
  let server: ServerProcess;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let db: TestDatabase | undefined;
  let dataDir: string | undefined;
  let endpointId: string;
  const get = async (path: string) => {
    const res = await fetch(`${server.url}${path}`);
    expect(res.status, `GET ${path}`).toBe(200);
    return readJson(res);
  };
  const post = (path: string, body?: unknown) =>
    fetch(`${server.url}${path}`, body === undefined ? { method: 'POST' } : json(body));
  const ofCall = (callId: string) =>
    receiver.got.filter((r) => r.event.type.startsWith('call.') && r.event.data.callId === callId);
  const statusesOf = (messageId: string) =>
    receiver.got.filter(
      (r) => r.event.type === 'message.status' && r.event.data.messageId === messageId,
    );

  beforeAll(async () => {
    receiver = await startReceiver();
    const env: Record<string, string> = { OUTBOUND_ALLOW_PRIVATE: 'true' };
    if (engine === 'postgres') {
      db = await createTestDatabase('postgres');
      env.DATABASE_URL = db.url!;
    } else {
      dataDir = mkdtempSync(join(tmpdir(), 'switchboard-events-'));
      env.DATA_DIR = dataDir;
    }
    server = await startServerProcess(env);

    // ordered: one subject's events arrive in the order they happened (docs/events.md)
    const res = await post('/v1/endpoints', {
      url: receiver.url,
      name: 'receiver',
      events: EVENTS,
      ordered: true,
    });
    expect(res.status).toBe(201);
    const made = await readJson(res);
    expect(made.secret).toMatch(/^whsec_/);
    endpointId = made.id;
    receiver.useSecret(made.secret);
  }, 90_000);

  afterAll(async () => {
    await server?.stop();
    await receiver?.close();
    await db?.drop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  let callId: string;
  let followUpId: string;

  it("sends a call's events in order, signed, with what GET /v1/calls/{id} shows", async () => {
    const to = phone();
    expect((await post('/sandbox/_control/scripts', { to, keys: ['1'] })).status).toBeLessThan(300);
    const started = await post('/v1/calls', {
      flow: 'appointment-reminder',
      to,
      from: 'Clinic',
      vars: { name: 'Ann', date: 'Monday 10:00' },
    });
    expect(started.status).toBe(202);
    callId = (await readJson(started)).id;

    await eventually(
      async () => ofCall(callId).some((r) => r.event.type === 'call.ended'),
      20_000,
      'call.ended at the receiver',
    );
    const call = await get(`/v1/calls/${callId}`);
    expect(call.outcome).toBe('confirmed');

    // every request verified with the secret the endpoint was made with, and no other
    expect(receiver.got.length).toBeGreaterThan(0);
    expect(receiver.got.filter((r) => r.refused)).toEqual([]);
    const first = receiver.got[0]!;
    expect(() => new Webhook(newEndpointSecret()).verify(first.body, first.headers)).toThrow();

    // the call's subject: each type once, in the order it happened
    const events = ofCall(callId);
    expect(events.map((r) => r.event.type)).toEqual([
      'call.started',
      'call.key',
      'call.outcome',
      'call.ended',
    ]);
    expect(new Set(events.map((r) => r.id)).size).toBe(4);
    for (const r of events) expect(r.id).toMatch(/^evt_[0-9a-f]{32}$/);
    const [start, key, outcome, ended] = events.map((r) => r.event);
    expect(start.data).toMatchObject({ flow: 'appointment-reminder', to, from: 'Clinic' });
    expect(key.data).toMatchObject({ node: 'main', key: '1', input: '1' });
    expect(outcome.data.outcome).toBe('confirmed');
    // call.ended says what the API says
    expect(ended.data.state).toBe(call.state);
    expect(ended.data.outcome).toBe(call.outcome);
    expect(ended.data.path).toEqual(call.path);
    const followUp = call.messages.find((m: Json) => m.role === 'follow-up');
    expect(followUp).toBeDefined();
    followUpId = followUp.id;
    expect(ended.data.followUps.map((f: Json) => f.id)).toEqual([followUpId]);
  }, 30_000);

  it("sends the follow-up SMS's statuses: the steps of its timeline", async () => {
    await eventually(
      async () => statusesOf(followUpId).some((r) => r.event.data.status === 'delivered'),
      15_000,
      "the follow-up's delivered at the receiver",
    );
    const message = await get(`/v1/messages/${followUpId}`);
    expect(message.status).toBe('delivered');
    const sent = statusesOf(followUpId).map((r) => r.event.data);
    for (const s of sent) expect(s.callId).toBe(callId);
    // one event per step of the timeline, in the timeline's order (ordered endpoint, and the
    // sandbox reports the steps one after another)
    expect(sent.map((s) => s.status)).toEqual(message.timeline.map((t: Json) => t.status));
    expect(sent.map((s) => s.status)).toEqual(['queued', 'accepted', 'sent', 'delivered']);
  }, 20_000);

  it('lists each request as a succeeded attempt with its 2xx', async () => {
    const page = await get(`/v1/endpoints/${endpointId}/attempts?limit=500`);
    const byId = new Map<string, Json>(page.items.map((a: Json) => [a.eventId, a]));
    for (const r of [...ofCall(callId), ...statusesOf(followUpId)]) {
      const attempt = byId.get(r.id);
      expect(attempt, r.event.type).toBeDefined();
      expect(attempt).toMatchObject({
        status: 'succeeded',
        type: r.event.type,
        trigger: 'scheduled',
      });
      expect(attempt.responseStatus).toBeGreaterThanOrEqual(200);
      expect(attempt.responseStatus).toBeLessThan(300);
    }
    // the attempts show neither the URL nor the secret
    expect(JSON.stringify(page)).not.toContain(receiver.url);
    expect(JSON.stringify(page)).not.toContain('whsec_');
  });

  it('replays an event with the same webhook-id and body', async () => {
    const ended = ofCall(callId).find((r) => r.event.type === 'call.ended')!;
    const res = await post(`/v1/events/${ended.id}/replay`);
    expect(res.status).toBe(202);
    expect((await readJson(res)).requeued).toEqual([
      { endpointId, deliveryId: expect.any(Number) },
    ]);
    const twice = await eventually(
      async () => {
        const seen = receiver.got.filter((r) => r.id === ended.id);
        return seen.length === 2 && seen;
      },
      10_000,
      'the replayed call.ended',
    );
    expect(twice[1]!.body).toBe(twice[0]!.body);
    expect(twice[1]!.refused).toBeNull();
    // the receiver answers before the sender records its attempt: wait for the record
    const triggers = await eventually(
      async () => {
        const page = await get(`/v1/endpoints/${endpointId}/attempts?limit=500`);
        const mine = page.items.filter((a: Json) => a.eventId === ended.id);
        return mine.length === 2 && mine.map((a: Json) => a.trigger);
      },
      10_000,
      'the replay recorded as an attempt',
    );
    expect(triggers).toEqual(['replay', 'scheduled']);
  });

  it('retries an event the receiver refused, with the same webhook-id, before the later ones', async () => {
    const cmid = uniq('events-e2e');
    let refusedId: string | undefined;
    receiver.answerWith((event, id) => {
      if (
        !refusedId &&
        event.type === 'message.status' &&
        event.data.customerMessageId === cmid &&
        event.data.status === 'queued'
      ) {
        refusedId = id;
        return 500;
      }
      return 200;
    });
    const res = await post('/v1/messages', {
      messages: [
        { type: 'sms', from: 'Acme', to: phone(), text: 'hello', customerMessageId: cmid },
      ],
    });
    expect(res.status).toBe(202);
    const messageId = (await readJson(res)).messages[0].id as string;

    await eventually(
      async () => statusesOf(messageId).some((r) => r.event.data.status === 'delivered'),
      20_000,
      'the message delivered at the receiver, after the retry',
    );
    const seen = statusesOf(messageId);
    // the refused one first, then its retry (same id, same body, about 5 s later), then the rest:
    // the endpoint is ordered, so the message's later steps waited for the retry
    expect(seen.map((r) => [r.event.data.status, r.answered])).toEqual([
      ['queued', 500],
      ['queued', 200],
      ['accepted', 200],
      ['sent', 200],
      ['delivered', 200],
    ]);
    expect(seen[0]!.id).toBe(refusedId);
    expect(seen[1]!.id).toBe(refusedId);
    expect(seen[1]!.body).toBe(seen[0]!.body);
    expect(seen[1]!.at - seen[0]!.at).toBeGreaterThanOrEqual(3_500); // 5 s, -20 % jitter at most

    const failed = await get(`/v1/endpoints/${endpointId}/attempts?status=failed`);
    expect(failed.items).toEqual([
      expect.objectContaining({ eventId: refusedId, status: 'failed', responseStatus: 500 }),
    ]);
    const all = await get(`/v1/endpoints/${endpointId}/attempts?limit=500`);
    expect(
      all.items.filter((a: Json) => a.eventId === refusedId).map((a: Json) => a.status),
    ).toEqual(['succeeded', 'failed']);
  }, 30_000);
});
