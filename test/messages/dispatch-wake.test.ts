/**
 * An idle leader's dispatcher sleeps until the outbox's next row is due (DISPATCH_IDLE_MAX_MS
 * at most) instead of asking every 200 ms (src/workers.ts), so whatever queues messages must
 * wake it: this instance's API, calls and flows (Workers.wake), and on another instance its
 * NOTIFY on OUTBOX_QUEUED, sent because it does not lead, which the leader listens to. Here
 * the most is an hour, so a message is sent only if a wake reached the leader.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { phone, readJson, uniq } from '../support/app.ts';
import { createTestDatabase, describeEachEngine, type TestDatabase } from '../support/db.ts';
import { postJson } from '../support/http.ts';
import { eventually, startTestServer, type TestServer } from '../support/server.ts';
import { NO_POSTGRES, onlyIf } from '../support/skip.ts';

const HOUR = { DISPATCH_IDLE_MAX_MS: String(3_600_000) };

const post = postJson;

/** The leader's idle rounds so far (switchboard_dispatch_rounds_total{result="idle"}). */
async function idleRounds(server: TestServer): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const m = /switchboard_dispatch_rounds_total\{result="idle"\} (\d+)/.exec(text);
  return m ? Number(m[1]) : 0;
}

/**
 * Waits until `server` leads and has found nothing due since its last send (or its start):
 * it now sleeps its hour. Answers the count, for the next wait.
 */
async function asleep(server: TestServer, idleBefore = 0): Promise<number> {
  return eventually(
    async () => {
      const n = await idleRounds(server);
      return n > idleBefore && n;
    },
    10_000,
    'an idle round',
  );
}

/** What `server`'s sandbox received for `customerMessageId`, once it has. */
async function received(server: TestServer, customerMessageId: string) {
  return eventually(
    async () => {
      const copies = server.sandbox!.messages.list({ customerMessageId });
      return copies.length > 0 && copies;
    },
    10_000,
    `${customerMessageId} at the sandbox`,
  );
}

describeEachEngine('an idle dispatcher, woken', (ctx) => {
  let server: TestServer;
  // the idle rounds seen so far: after each test's send the leader finds nothing once more
  let idle = 0;
  beforeAll(async () => {
    server = await startTestServer(ctx.database(), { env: HOUR });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('sends a message submitted to this instance', async () => {
    idle = await asleep(server, idle);
    const cmid = uniq('wake');
    const res = await post(`${server.url}/v1/messages`, {
      messages: [{ from: 'Acme', to: phone(), type: 'sms', text: 'Hi', customerMessageId: cmid }],
    });
    expect(res.status).toBe(202);
    expect(await received(server, cmid)).toHaveLength(1);
  });

  it('sends the follow-up a flow queues when its call fails', async () => {
    idle = await asleep(server, idle);
    // the call fails: the flow queues its SMS from the call's webhook or status, and wakes
    // the dispatcher (a status hook wakes it inside the callback's transaction, before its
    // commit: a woken round that finds nothing looks again soon instead of sleeping)
    const to = phone();
    const scripted = await post(`${server.url}/sandbox/_control/scripts`, {
      to,
      outcome: 'failed',
    });
    expect(scripted.status).toBe(201);
    const res = await post(`${server.url}/v1/calls`, {
      flow: 'appointment-reminder',
      to,
      from: 'Acme',
      vars: { name: 'Ann', date: 'Monday 10:00' },
    });
    expect(res.status).toBe(202);
    const { id } = await readJson(res);
    const followUp = await eventually(
      async () => {
        const call = await readJson(await fetch(`${server.url}/v1/calls/${id}`));
        return call.messages?.find((m: { role: string }) => m.role === 'follow-up');
      },
      10_000,
      'the follow-up',
    );
    const copies = await received(server, followUp.customerMessageId);
    expect(copies[0]!.text).toMatch(/could not reach you about Monday 10:00/);
  });
});

const onPostgres = Boolean(process.env.TEST_DATABASE_URL);

describe.runIf(onPostgres)(
  onlyIf(onPostgres, 'an idle leader, woken by another instance', NO_POSTGRES),
  () => {
    let db: TestDatabase;
    let leader: TestServer;
    let follower: TestServer;
    beforeAll(async () => {
      db = await createTestDatabase('postgres');
      leader = await startTestServer(db.database, { env: HOUR });
      // the first to take the lock leads: only the leader counts dispatch rounds
      await asleep(leader);
      follower = await startTestServer(db.database, { env: HOUR });
    });
    afterAll(async () => {
      await follower?.stop();
      await leader?.stop();
      await db?.drop();
    });

    it('sends what the other instance queued as soon as it is queued', async () => {
      const cmid = uniq('wake');
      const res = await post(`${follower.url}/v1/messages`, {
        messages: [{ from: 'Acme', to: phone(), type: 'sms', text: 'Hi', customerMessageId: cmid }],
      });
      expect(res.status).toBe(202);
      // the follower leads nothing: its NOTIFY woke the leader, which sent it to its provider
      expect(await received(leader, cmid)).toHaveLength(1);
      expect(await idleRounds(follower)).toBe(0);
    });
  },
);
