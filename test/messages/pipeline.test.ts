/**
 * The messages pipeline end to end, over real HTTP: Switchboard's API -> outbox ->
 * dispatcher -> the sandbox -> delivery callbacks -> /hooks/delivery -> the timeline.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { RunningServer } from '../../src/server.ts';
import { phone, readJson, uniq } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';
import { postJson } from '../support/http.ts';
import { eventually, startTestServer } from '../support/server.ts';

const TOKEN = 'callback-secret-for-tests';

const post = postJson;

describeEachEngine('messages pipeline', (ctx) => {
  let server: RunningServer;
  const hook = (path: string) => `${server.url}${path}?token=${TOKEN}`;
  const submit = async (messages: unknown[]) => {
    const res = await post(`${server.url}/v1/messages`, { messages });
    expect(res.status).toBe(202);
    return (await readJson(res)).messages as { id: string; customerMessageId: string }[];
  };
  const view = async (ref: string) => readJson(await fetch(`${server.url}/v1/messages/${ref}`));

  beforeAll(async () => {
    // the condensed interface's sandbox: its callbacks name the channel and report `read`;
    // the docs' dialect is exercised in provider-docs.test.ts
    server = await startTestServer(ctx.database(), {
      env: { CALLBACK_TOKEN: TOKEN, SANDBOX_DIALECT: 'compact' },
    });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('sends, hears back, and shows the whole timeline', async () => {
    const cmid = uniq('flow');
    await submit([
      { from: 'Acme', to: phone(), type: 'viber_trans', text: 'Hi', customerMessageId: cmid },
    ]);
    const done = await eventually(
      async () => {
        const v = await view(cmid);
        return v.status === 'read' && v;
      },
      10_000,
      'read',
    );
    expect(
      done.timeline.map((e: { status: string; source: string }) => `${e.status}/${e.source}`),
    ).toEqual([
      'queued/api',
      'accepted/dispatch',
      'sent/callback',
      'delivered/callback',
      'read/callback',
    ]);
    expect(done.providerMessageId).toEqual(expect.any(String));
    expect(done.messagelistId).toEqual(expect.any(Number));
    // found by the provider's id too
    expect((await view(done.providerMessageId)).id).toBe(done.id);
  });

  it('shows which channel delivered when the primary failed and a fallback delivered', async () => {
    const to = phone();
    await post(`${server.url}/sandbox/_control/scripts`, { to, outcome: 'failed' });
    const cmid = uniq('fb');
    await submit([
      {
        from: 'Acme',
        to,
        type: 'viber_service',
        text: 'Hi',
        customerMessageId: cmid,
        fallbacks: [{ from: 'Acme', to, type: 'sms', text: 'Hi by SMS' }],
      },
    ]);
    const done = await eventually(
      async () => {
        const v = await view(cmid);
        return v.status === 'delivered' && v;
      },
      10_000,
      'delivered via fallback',
    );
    expect(done.deliveredVia).toBe('sms');
    expect(done.timeline.some((e: { status: string }) => e.status === 'failed')).toBe(true);
  });

  it('refuses a callback without the token, and stores nothing', async () => {
    const body = { customerMessageId: uniq('x'), status: 'delivered' };
    const res = await post(`${server.url}/hooks/delivery`, body);
    expect(res.status).toBe(401);
    expect((await readJson(res)).error.code).toBe('UNAUTHORIZED');
    const wrong = await post(`${server.url}/hooks/delivery`, body, {
      authorization: 'Bearer nope',
    });
    expect(wrong.status).toBe(401);
    const accepted: Record<string, string>[] = [
      { authorization: `Bearer ${TOKEN}` },
      { 'x-callback-token': TOKEN },
    ];
    for (const headers of accepted) {
      expect(
        (await post(`${server.url}/hooks/delivery`, { ...body, n: Math.random() }, headers)).status,
      ).toBe(200);
    }
  });

  it('an exact duplicate changes nothing', async () => {
    const [m] = await submit([{ from: 'Acme', to: phone(), type: 'sms', text: 'x' }]);
    const body = JSON.stringify({
      customerMessageId: m!.customerMessageId,
      status: 'HANDSET_ACK',
      timestamp: new Date().toISOString(),
    });
    const first = await readJson(await post(hook('/hooks/delivery'), body));
    const second = await readJson(await post(hook('/hooks/delivery'), body));
    expect(first).toMatchObject({ duplicate: false, matched: 1 });
    expect(second).toMatchObject({ duplicate: true, matched: 0 });
    const v = await view(m!.id);
    expect(v.timeline.filter((e: { status: string }) => e.status === 'HANDSET_ACK')).toHaveLength(
      1,
    );
  });

  it('every order of a four-event sequence ends in the same status', async () => {
    const steps = ['accepted', 'sent', 'delivered', 'read'];
    const orders: string[][] = [];
    const permute = (done: string[], rest: string[]) => {
      if (rest.length === 0) orders.push(done);
      for (const [i, s] of rest.entries()) {
        permute([...done, s], [...rest.slice(0, i), ...rest.slice(i + 1)]);
      }
    };
    permute([], steps);
    expect(orders).toHaveLength(24);
    // three minutes ahead: after the message is created (it is submitted last) and within 5
    // minutes of each callback's receipt, so every time is believed (event-time.ts)
    const t0 = Date.now() + 180_000;
    const results = await Promise.all(
      orders.map(async (order) => {
        const cmid = uniq('perm');
        await post(hook('/hooks/delivery'), []); // an empty array is stored and changes nothing
        for (const status of order) {
          const at = new Date(t0 + steps.indexOf(status) * 1000).toISOString();
          expect((await post(hook('/hooks/delivery'), { cmid, status, at })).status).toBe(200);
        }
        // the callbacks outran the message: it is submitted last, and they attach to it
        await submit([
          { from: 'Acme', to: phone(), type: 'viber_service', text: 'x', customerMessageId: cmid },
        ]);
        return eventually(
          async () => {
            const v = await view(cmid);
            return (
              v.timeline.filter((e: { source: string }) => e.source === 'callback').length >= 4 && v
            );
          },
          10_000,
          `callbacks attached to ${cmid}`,
        );
      }),
    );
    for (const v of results) {
      expect(v.status, JSON.stringify(v)).toBe('read');
      // this test's own events (dated from t0 on); the sandbox reports the real send as well
      const callbackStatuses = v.timeline
        .filter(
          (e: { source: string; at: string }) => e.source === 'callback' && Date.parse(e.at) >= t0,
        )
        .map((e: { status: string }) => e.status);
      // the timeline is ordered by event time, whatever the arrival order
      expect(callbackStatuses.filter((s: string) => steps.includes(s))).toEqual(steps);
    }
  });

  it('concurrent callbacks for one message all land, and the status ends at the highest rank', async () => {
    const [m] = await submit([{ from: 'Acme', to: phone(), type: 'viber_service', text: 'x' }]);
    const statuses = ['sent', 'delivered', 'read', 'sent', 'delivered'];
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        post(hook('/hooks/delivery'), {
          messageId: 'unknown',
          customerMessageId: m!.customerMessageId,
          status: statuses[i % 5],
          seq: i,
        }),
      ),
    );
    expect(answers.every((r) => r.status === 200)).toBe(true);
    const v = await view(m!.id);
    // this test's callbacks name messageId "unknown"; the sandbox's own carry the real one
    const ours = v.timeline.filter(
      (e: { source: string; detail?: { messageId?: string } }) =>
        e.source === 'callback' && e.detail?.messageId === 'unknown',
    );
    expect(ours).toHaveLength(20);
    expect(v.status).toBe('read');
  });

  it('keeps a callback before its message exists, and attaches it when the message appears', async () => {
    const cmid = uniq('early');
    // dated two minutes ahead, so it can be told apart from the sandbox's own callbacks: after
    // the message is created and within 5 minutes of its receipt, so the time is believed
    const at = new Date(Date.now() + 120_000).toISOString();
    const early = await readJson(
      await post(hook('/hooks/delivery'), { customerMessageId: cmid, status: 'DELIVRD', at }),
    );
    expect(early).toMatchObject({ matched: 0, pending: 1 });
    await submit([{ from: 'Acme', to: phone(), type: 'sms', text: 'x', customerMessageId: cmid }]);
    const v = await eventually(
      async () => {
        const got = await view(cmid);
        return got.timeline.some((e: { at: string }) => e.at === at) && got;
      },
      10_000,
      'early callback attached',
    );
    const attached = v.timeline.find((e: { at: string }) => e.at === at);
    expect(attached).toMatchObject({ status: 'delivered', source: 'callback' });
    expect(['delivered', 'read']).toContain(v.status);
  });

  it('keeps a body it cannot read, and says so', async () => {
    const res = await post(hook('/hooks/delivery'), 'this is not json at all');
    expect(res.status).toBe(200);
    expect((await readJson(res)).problems[0]).toMatch(/neither JSON/);
  });

  it('stores incoming Viber messages and lists them', async () => {
    const from = phone();
    const res = await post(`${server.url}/sandbox/_control/viber/inbound`, { from, text: 'STOP' });
    expect(res.status).toBe(202);
    const list = await eventually(
      async () => {
        const page = await readJson(
          await fetch(`${server.url}/v1/inbound?from=${encodeURIComponent(from)}`),
        );
        return page.items.length > 0 && page;
      },
      10_000,
      'inbound message',
    );
    expect(list.items[0]).toMatchObject({ from, text: 'STOP', channel: 'viber' });
  });

  it('reports callbacks, dispatches and the outbox in /metrics', async () => {
    const text = await (await fetch(`${server.url}/metrics`)).text();
    expect(text).toMatch(/switchboard_callbacks_total\{kind="delivery",outcome="stored"\} \d+/);
    expect(text).toMatch(
      /switchboard_callbacks_total\{kind="delivery",outcome="unauthorized"\} [1-9]/,
    );
    expect(text).toMatch(/switchboard_messages_dispatched_total\{result="accepted"\} [1-9]/);
    expect(text).toMatch(/switchboard_outbox_depth \d+/);
    expect(text).toContain('switchboard_provider_rate_limited_total');
  });
});

// in both dialects: the condensed interface's callbacks (per step, `read` included) and the
// docs' status webhook (status.md: `processing`, `delivered`, keyed by messageId alone)
for (const [dialect, callbacks, steps] of [
  ['compact', 3, ['queued', 'accepted', 'sent', 'delivered', 'read']],
  ['docs', 2, ['queued', 'accepted', 'sent', 'delivered']],
] as const) {
  describeEachEngine(`messages pipeline with a misbehaving provider (${dialect})`, (ctx) => {
    let server: RunningServer;
    beforeAll(async () => {
      server = await startTestServer(ctx.database(), {
        env: { SANDBOX_DIALECT: dialect },
        sandbox: {
          options: {
            duplicateCallbacks: true,
            shuffleCallbacks: true,
            failFirstCallback: true,
            retryBaseMs: 50,
            shuffleWindowMs: 300,
          },
        },
      });
    });
    afterAll(async () => {
      await server?.stop();
    });

    it('ends every message in its final status with one timeline entry per step', async () => {
      const messages = Array.from({ length: 20 }, () => ({
        from: 'Acme',
        to: phone(),
        type: 'viber_trans',
        text: 'x',
        customerMessageId: uniq('mis'),
      }));
      const res = await post(`${server.url}/v1/messages`, { messages });
      expect(res.status).toBe(202);
      for (const m of messages) {
        const v = await eventually(
          async () => {
            const got = await readJson(
              await fetch(`${server.url}/v1/messages/${m.customerMessageId}`),
            );
            return (
              got.timeline.filter((e: { source: string }) => e.source === 'callback').length >=
                callbacks && got
            );
          },
          20_000,
          `callbacks for ${m.customerMessageId}`,
        );
        expect(v.status).toBe(steps.at(-1));
        // duplicates were dropped, shuffled arrivals sorted by event time
        expect(v.timeline.map((e: { status: string }) => e.status)).toEqual(steps);
      }
    });
  });
}
