/**
 * Every example flow end to end over real HTTP: Switchboard starts the call, the sandbox plays
 * the menu with the scripted keys (or fails the call) and posts the webhooks and callbacks,
 * and the call ends with its path, outcome and delivered follow-up. Then the same with a
 * provider that duplicates and shuffles its callbacks.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { phone, readJson } from '../support/app.ts';
import {
  availableEngines,
  createTestDatabase,
  type Engine,
  type TestDatabase,
} from '../support/db.ts';
import { diagnose, stopAndDrop } from '../support/diagnose.ts';
import { eventually, startTestServer, type TestServer } from '../support/server.ts';

interface Scenario {
  flow: string;
  vars: Record<string, string>;
  script: { keys?: string[]; outcome?: 'failed' | 'expired' };
  path: string[];
  outcome: string | null;
  followUp: { type: string; text: RegExp } | null;
  lang?: string;
}

const SCENARIOS: Scenario[] = [
  {
    flow: 'appointment-reminder',
    vars: { name: 'Ann', date: 'Monday 10:00' },
    script: { keys: ['1'] },
    path: ['main:1'],
    outcome: 'confirmed',
    followUp: { type: 'sms', text: /Thanks Ann, see you on Monday 10:00/ },
  },
  {
    flow: 'appointment-reminder',
    vars: { name: 'Ann', date: 'Monday 10:00' },
    script: { keys: ['timeout', '2', '1'] },
    path: ['main:wrong(timeout)', 'main:2', 'reschedule:1'],
    outcome: 'reschedule-requested',
    followUp: null,
  },
  {
    flow: 'appointment-reminder',
    vars: { name: 'Ann', date: 'Monday 10:00' },
    script: { outcome: 'failed' },
    path: [],
    outcome: null, // on: failed sends an SMS and records no outcome (expired would)
    followUp: { type: 'sms', text: /could not reach you about Monday 10:00/ },
  },
  {
    flow: 'order-confirmation',
    vars: {
      customerName: 'Ann',
      orderId: 'A-42',
      total: '1 250 UAH',
      trackingUrl: 'https://t.example.com/A-42',
    },
    script: { keys: ['1'] },
    path: ['confirm:1'],
    outcome: 'confirmed',
    followUp: { type: 'sms', text: /order A-42 \(1 250 UAH\) is confirmed/ },
  },
  {
    flow: 'order-confirmation',
    vars: {
      customerName: 'Ann',
      orderId: 'A-43',
      total: '99 UAH',
      trackingUrl: 'https://t.example.com/A-43',
    },
    script: { keys: ['2', '1'] },
    path: ['confirm:2', 'cancel:1'],
    outcome: 'cancelled',
    followUp: { type: 'sms', text: /замовлення A-43 скасовано/ },
    lang: 'uk',
  },
  {
    flow: 'satisfaction-survey',
    vars: { name: 'Ann', ticketId: 'T-7' },
    script: { keys: ['5'] },
    path: ['rate:5'],
    outcome: 'score-5',
    followUp: { type: 'viber_trans', text: /Thank you for your rating, Ann! Ticket T-7/ },
  },
  {
    flow: 'satisfaction-survey',
    vars: { name: 'Ann', ticketId: 'T-8' },
    script: { keys: ['timeout', 'timeout', 'timeout'] },
    path: ['rate:wrong(timeout)', 'rate:wrong(timeout)', 'rate:wrong(timeout)'],
    outcome: 'no-score',
    followUp: null,
  },
  {
    flow: 'satisfaction-survey',
    vars: { name: 'Ann', ticketId: 'T-9' },
    script: { keys: ['7', 'timeout', '#'] },
    path: ['rate:wrong(7)', 'rate:wrong(timeout)', 'rate:wrong(#)'],
    outcome: 'no-score',
    followUp: null,
  },
  {
    flow: 'delivery-failure',
    vars: {
      name: 'Ann',
      parcelId: 'P-1',
      branchAddress: '1 Main St',
      manageUrl: 'https://m.example.com/P-1',
    },
    script: { keys: ['2'] },
    path: ['main:2'],
    outcome: 'pickup-chosen',
    followUp: { type: 'sms', text: /Посилка P-1 чекає на вас: 1 Main St/ },
  },
  {
    flow: 'delivery-failure',
    vars: {
      name: 'Ann',
      parcelId: 'P-2',
      branchAddress: '1 Main St',
      manageUrl: 'https://m.example.com/P-2',
    },
    script: { outcome: 'failed' },
    path: [],
    outcome: 'call-failed',
    followUp: { type: 'sms', text: /не вдалося доставити посилку P-2/ },
  },
];

async function post(url: string, body: unknown) {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

async function runScenario(server: TestServer, s: Scenario, url: string | undefined) {
  const to = phone();
  const scripted = await post(`${server.url}/sandbox/_control/scripts`, { to, ...s.script });
  expect(scripted.status).toBe(201);
  const res = await post(`${server.url}/v1/calls`, {
    flow: s.flow,
    to,
    from: 'Acme',
    vars: s.vars,
    ...(s.lang && { lang: s.lang }),
  });
  expect(res.status, JSON.stringify(await readJson(res.clone()))).toBe(202);
  const { id } = await readJson(res);
  // what the last poll saw, and what the sandbox holds for the number: said when it times out
  let seen: unknown;
  const done = await eventually(
    async () => {
      const call = await readJson(await fetch(`${server.url}/v1/calls/${id}`));
      seen = {
        state: call.state,
        outcome: call.outcome,
        messages: call.messages?.map((m: { role: string; status: string }) => [m.role, m.status]),
        sandbox: server.sandbox?.messages.list({ to }).map((m) => [m.type, m.status]),
      };
      const settled = call.state === 'ended' || call.state === 'failed';
      const followUps = call.messages.filter((m: { role: string }) => m.role === 'follow-up');
      const delivered = followUps.every(
        (m: { status: string }) => m.status === 'delivered' || m.status === 'read',
      );
      // shuffled callbacks may bring `delivered` before `sent`, or `read` before `delivered`:
      // wait for every step asserted below
      for (const f of followUps) {
        const timeline = (await readJson(await fetch(`${server.url}/v1/messages/${f.id}`)))
          .timeline;
        const seen = (status: string) =>
          timeline.some((e: { status: string }) => e.status === status);
        if (!seen('sent') || !seen('delivered')) return false;
      }
      return (
        settled &&
        call.outcome === s.outcome &&
        (s.followUp ? followUps.length > 0 && delivered : true) &&
        call
      );
    },
    20_000,
    `${s.flow} ${JSON.stringify(s.script)} to end with ${s.outcome}`,
  ).catch(async (err: Error) => {
    throw new Error(
      `${err.message}; last seen ${JSON.stringify(seen)}; the server's last warnings:\n${server.warnings().join('')}\n${await diagnose(url)}`,
    );
  });
  // a `wrong` step names what the caller did: `timeout` (silence) or the unhandled key
  const step = (p: { menu: string; key: string; input?: string }) =>
    `${p.menu}:${p.key}${p.input ? `(${p.input})` : ''}`;
  expect(done.path.map(step)).toEqual(s.path);
  const followUps = done.messages.filter((m: { role: string }) => m.role === 'follow-up');
  if (!s.followUp) {
    expect(followUps).toEqual([]);
    return done;
  }
  expect(followUps).toHaveLength(1);
  expect(followUps[0].type).toBe(s.followUp.type);
  expect(followUps[0].to).toBe(to);
  // the follow-up's own timeline, through the messages API
  const message = await readJson(
    await fetch(`${server.url}/v1/messages/${followUps[0].customerMessageId}`),
  );
  expect(message.timeline.map((e: { status: string }) => e.status)).toEqual(
    expect.arrayContaining(['queued', 'accepted', 'sent', 'delivered']),
  );
  // what the provider received: exactly one copy, with the rendered text
  const sandboxCopies = server.sandbox!.messages.list({
    customerMessageId: followUps[0].customerMessageId,
  });
  expect(sandboxCopies).toHaveLength(1);
  expect(sandboxCopies[0]!.text).toMatch(s.followUp.text);
  return done;
}

// the sandbox speaks as the provider's docs show (status webhooks keyed by messageId alone,
// one status for a message and its fallbacks) or as the condensed interface: both end alike
for (const engine of availableEngines()) {
  for (const dialect of ['docs', 'compact'] as const)
    for (const misbehaving of [false, true]) {
      describe(`every example flow end to end [${engine}, ${dialect}]${misbehaving ? ' with duplicated and shuffled callbacks' : ''}`, () => {
        let db: TestDatabase;
        let server: TestServer;
        beforeAll(async () => {
          db = await createTestDatabase(engine as Engine);
          server = await startTestServer(db.database, {
            env: { SANDBOX_DIALECT: dialect },
            ...(misbehaving && {
              sandbox: {
                options: {
                  duplicateCallbacks: true,
                  shuffleCallbacks: true,
                  failFirstCallback: true,
                  retryBaseMs: 50,
                  shuffleWindowMs: 200,
                },
              },
            }),
          });
        });
        afterAll(() => stopAndDrop(server, db));

        for (const s of SCENARIOS) {
          it(`${s.flow}: ${JSON.stringify(s.script)} -> ${s.outcome}`, async () => {
            await runScenario(server, s, db.url);
          });
        }
      });
    }
}
