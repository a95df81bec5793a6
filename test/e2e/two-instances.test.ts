/**
 * Two Switchboard instances on one Postgres database behind a round-robin balancer: calls
 * are started through both, webhooks and callbacks land on both, one dispatcher leads.
 * No follow-up is sent twice and no event is lost.
 */
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Database, openDatabase } from '../../src/db/client.ts';
import type { RunningServer } from '../../src/server.ts';
import { phone, readJson } from '../support/app.ts';
import { availableEngines, createTestDatabase, type TestDatabase } from '../support/db.ts';
import { eventually, startTestServer } from '../support/server.ts';
import { NO_POSTGRES, onlyIf } from '../support/skip.ts';

/**
 * Forwards /sandbox/* to the instance that hosts the sandbox, the rest round-robin. When the
 * instance cannot be reached it answers 502, as a proxy does, and counts it: the sender's
 * retry is what then has to bring the request through.
 */
function balancer(targets: () => string[], failures: string[]) {
  let next = 0;
  const app = new Hono();
  app.all('*', async (c) => {
    const all = targets();
    const url = new URL(c.req.url);
    const target = url.pathname.startsWith('/sandbox/') ? all[0]! : all[next++ % all.length]!;
    try {
      const res = await fetch(`${target}${url.pathname}${url.search}`, {
        method: c.req.method,
        headers: c.req.raw.headers,
        ...(c.req.method !== 'GET' &&
          c.req.method !== 'HEAD' && { body: await c.req.arrayBuffer() }),
      });
      return new Response(res.body, { status: res.status, headers: res.headers });
    } catch (err) {
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      failures.push(`${c.req.method} ${url.pathname}: ${cause?.code ?? cause?.message ?? err}`);
      return c.text('bad gateway', 502);
    }
  });
  return app;
}

/** How long the 24 calls may take in all, on a loaded machine (they take 2-8 s alone). */
const CALLS_BUDGET_MS = 90_000;

const onPostgres = availableEngines().includes('postgres');

describe.runIf(onPostgres)(onlyIf(onPostgres, 'two instances on one database', NO_POSTGRES), () => {
  let db: TestDatabase;
  let second: Database;
  let a: RunningServer;
  let b: RunningServer;
  let lb: ReturnType<typeof serve>;
  let lbUrl: string;
  const proxyFailures: string[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    // as the first is opened (through PgBouncer when TEST_PGBOUNCER is set)
    second = await openDatabase({ ...db.open!, maxConnections: 5 });
    let targets: string[] = [];
    lb = await new Promise((resolve) => {
      const s = serve(
        { fetch: balancer(() => targets, proxyFailures).fetch, port: 0, hostname: '127.0.0.1' },
        () => resolve(s),
      );
    });
    lbUrl = `http://127.0.0.1:${(lb.address() as AddressInfo).port}`;
    // both instances tell the provider to call back through the balancer, with one token:
    // a's sandbox sends it, and either instance may get the callback
    const CALLBACK_TOKEN = 'two-instances-callback-token';
    a = await startTestServer(db.database, { env: { PUBLIC_URL: lbUrl, CALLBACK_TOKEN } });
    b = await startTestServer(second, {
      env: { PUBLIC_URL: lbUrl, PROVIDER_BASE_URL: `${lbUrl}/sandbox`, CALLBACK_TOKEN },
    });
    targets = [a.url, b.url];
  });
  afterAll(async () => {
    await b?.stop();
    await a?.stop();
    await new Promise((r) => lb?.close(r));
    await second?.close();
    await db?.drop();
  });

  it('runs calls through both with no duplicate send and no lost event', {
    timeout: CALLS_BUDGET_MS + 30_000,
  }, async () => {
    const deadline = Date.now() + CALLS_BUDGET_MS;
    const started: { id: string; to: string; key: string }[] = [];
    for (let i = 0; i < 24; i++) {
      const to = phone();
      const key = i % 3 === 0 ? '2' : '1';
      await fetch(`${lbUrl}/sandbox/_control/scripts`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ to, keys: key === '2' ? ['2', '1'] : ['1'] }),
      });
      const res = await fetch(`${lbUrl}/v1/calls`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          flow: 'appointment-reminder',
          to,
          from: 'Clinic',
          vars: { name: `N${i}`, date: 'Friday' },
        }),
      });
      expect(res.status).toBe(202);
      started.push({ id: (await readJson(res)).id, to, key });
    }
    for (const s of started) {
      // what was seen of the call last, for the failure's message
      let seen: unknown;
      const call = await eventually(
        async () => {
          const c = await readJson(await fetch(`${lbUrl}/v1/calls/${s.id}`));
          seen = {
            state: c.state,
            path: c.path,
            messages: c.messages?.map((m: { role: string; status: string }) => [m.role, m.status]),
          };
          const done = c.state === 'ended';
          const followUpsSettled = c.messages
            .filter((m: { role: string }) => m.role === 'follow-up')
            .every((m: { status: string }) => m.status === 'delivered');
          return done && followUpsSettled && c;
        },
        Math.max(500, deadline - Date.now()),
        `call ${s.id}`,
      ).catch((err) => {
        const unsettled = a
          .sandbox!.callbacks.list()
          .filter((r) => r.state !== 'delivered')
          .map((r) => ({ kind: r.kind, state: r.state, attempts: r.attempts }));
        throw new Error(
          `${err.message}; last seen ${JSON.stringify(seen)}; proxy failures ${JSON.stringify(proxyFailures)}; sandbox callbacks not delivered ${JSON.stringify(unsettled)}`,
        );
      });
      const path = call.path.map((p: { menu: string; key: string }) => `${p.menu}:${p.key}`);
      if (s.key === '1') {
        expect(path).toEqual(['main:1']);
        expect(call.outcome).toBe('confirmed');
        const followUp = call.messages.find((m: { role: string }) => m.role === 'follow-up');
        expect(
          a.sandbox!.messages.list({ customerMessageId: followUp.customerMessageId }),
        ).toHaveLength(1);
      } else {
        expect(path).toEqual(['main:2', 'reschedule:1']);
        expect(call.outcome).toBe('reschedule-requested');
      }
      // the call message itself went to the provider once
      const callMessage = call.messages.find((m: { role: string }) => m.role === 'call');
      expect(
        a.sandbox!.messages.list({ customerMessageId: callMessage.customerMessageId }),
      ).toHaveLength(1);
    }
    // both instances took webhooks and callbacks
    for (const server of [a, b]) {
      const metrics = await (await fetch(`${server.url}/metrics`)).text();
      expect(metrics).toMatch(
        /switchboard_callbacks_total\{kind="speechcall",outcome="stored"\} [1-9]/,
      );
      expect(metrics).toMatch(
        /switchboard_callbacks_total\{kind="delivery",outcome="stored"\} [1-9]/,
      );
    }
  });
});
