/**
 * Erasure of a person who was called: the real server, calls played by the sandbox over
 * HTTP. The call, its path and events, its own message and its follow-up SMS go; the flow's
 * statistics stay as they were; a webhook of the erased call arriving late changes nothing.
 */
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { rowsOf } from '../../src/db/client.ts';
import type { RunningServer } from '../../src/server.ts';
import { phone, readJson } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';
import { eventually, startTestServer } from '../support/server.ts';

const FLOW = 'appointment-reminder';

describeEachEngine('erasing a person who was called', (ctx) => {
  let server: RunningServer;
  const P = phone();
  const Q = phone();
  const mentionsP = `(^|[^0-9])${P.slice(1)}([^0-9]|$)`;
  const api = async (path: string, init: RequestInit = {}) =>
    fetch(`${server.url}${path}`, {
      ...init,
      headers: { 'content-type': 'application/json', ...(init.headers ?? {}) },
    });
  const stats = async () => readJson(await api(`/v1/flows/${FLOW}/stats`));
  const inboxMentioningP = async () =>
    rowsOf<{ id: number; kind: string; body: string }>(
      await ctx
        .database()
        .db.execute(sql`select id, kind, body from inbox where body ~ ${mentionsP}`),
    );

  /** Calls `to`, who presses 1 (confirmed, and a thank-you SMS follows); waits for the end. */
  async function confirmedCall(to: string) {
    const scripted = await api('/sandbox/_control/scripts', {
      method: 'POST',
      body: JSON.stringify({ to, keys: ['1'] }),
    });
    expect(scripted.status).toBeLessThan(300);
    const res = await api('/v1/calls', {
      method: 'POST',
      body: JSON.stringify({
        flow: FLOW,
        to,
        from: 'Clinic',
        vars: { name: 'Ann', date: 'Monday 10:00' },
      }),
    });
    expect(res.status).toBe(202);
    const { id } = await readJson(res);
    return eventually(
      async () => {
        const call = await readJson(await api(`/v1/calls/${id}`));
        const followUp = call.messages?.find((m: { role: string }) => m.role === 'follow-up');
        return call.outcome === 'confirmed' && followUp?.status === 'delivered' && call;
      },
      15_000,
      `call to ${to} confirmed and its SMS delivered`,
    );
  }

  /**
   * Barrier: the sandbox has nothing more to send about `to`: its calls are over, its messages
   * at a final status, and every callback about them answered (so stored). Returns the
   * callbacks about `to`.
   */
  async function sandboxDoneWith(to: string) {
    const q = encodeURIComponent(to);
    return eventually(
      async () => {
        const sbCalls: { state: string }[] = await readJson(
          await api(`/sandbox/_control/calls?to=${q}`),
        );
        const sbMessages: { messageId: string; status: string }[] = await readJson(
          await api(`/sandbox/_control/messages?to=${q}`),
        );
        const ids = new Set(sbMessages.map((m) => m.messageId));
        const callbacks: { messageId?: string; kind: string; state: string }[] = (
          await readJson(await api('/sandbox/_control/callbacks'))
        ).filter((r: { messageId?: string }) => r.messageId && ids.has(r.messageId));
        const done =
          sbCalls.length > 0 &&
          sbCalls.every((c) => c.state === 'ended' || c.state === 'not-answered') &&
          sbMessages.every((m) => ['delivered', 'read', 'failed', 'expired'].includes(m.status)) &&
          callbacks.every((r) => r.state === 'delivered');
        return done && callbacks;
      },
      15_000,
      `the sandbox done with ${to}`,
    );
  }

  beforeAll(async () => {
    server = await startTestServer(ctx.database());
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('removes the call, its path, events and messages, and leaves the statistics', async () => {
    const callP = await confirmedCall(P);
    const callQ = await confirmedCall(Q);
    // P pressed 1 once
    expect(callP.path).toHaveLength(1);
    const callbacksP = await sandboxDoneWith(P);
    await sandboxDoneWith(Q);
    // every webhook the sandbox sent about P's call is stored, once
    const webhooks = (await inboxMentioningP()).filter((r) => r.kind === 'speechcall');
    expect(webhooks.length).toBeGreaterThan(0);
    expect(webhooks).toHaveLength(callbacksP.filter((r) => r.kind === 'webhook').length);
    const [eventsP] = rowsOf<{ n: string }>(
      await ctx
        .database()
        .db.execute(sql`select count(*) as n from call_events where call_id = ${callP.id}`),
    );
    const before = await stats();

    const res = await api(`/v1/subjects/${encodeURIComponent(P)}`, { method: 'DELETE' });
    expect(res.status).toBe(200);
    const { removed } = await readJson(res);
    expect(removed.calls).toBe(1);
    // exactly P's: the sandbox is done with P, so nothing about P came in meanwhile
    expect(removed.callEvents).toBe(Number(eventsP!.n));
    expect(removed.callEvents).toBeGreaterThanOrEqual(callP.timeline.length);
    expect(removed.messages).toBe(2); // the call's own speechcall message and the SMS
    // every callback the sandbox sent about P (statuses of both messages, the call's webhooks)
    expect(removed.rawCallbacks).toBe(callbacksP.length);

    expect((await api(`/v1/calls/${callP.id}`)).status).toBe(404);
    for (const m of callP.messages) expect((await api(`/v1/messages/${m.id}`)).status).toBe(404);
    expect(await inboxMentioningP()).toEqual([]);
    // the other person's call is whole, and the counters did not move
    const q = await readJson(await api(`/v1/calls/${callQ.id}`));
    expect(q).toMatchObject({ outcome: 'confirmed', path: callQ.path });
    expect(await stats()).toEqual(before);

    lateWebhook = webhooks[0]!.body;
    erasedCall = callP.id;
    statsAfter = before;
  });

  let lateWebhook: string | undefined;
  let erasedCall: string | undefined;
  let statsAfter: unknown;
  const replayLate = async () => {
    const late = await fetch(`${server.url}/hooks/speechcall`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: lateWebhook,
    });
    expect(late.status).toBe(200);
  };

  it('acknowledges a late webhook of the erased call and changes nothing', async () => {
    expect(lateWebhook).toBeDefined();
    await replayLate();
    expect((await api(`/v1/calls/${erasedCall}`)).status).toBe(404);
    expect(await stats()).toEqual(statsAfter);
  });

  // FAILS until /hooks/speechcall drops the raw body of a call that is gone (src/calls/events.ts,
  // the lead's): today it is stored before the call is looked up, and kept. Turn `it.fails`
  // into `it` with that fix.
  it('keeps no raw body of a late webhook of the erased call', async () => {
    await replayLate();
    expect(await inboxMentioningP()).toEqual([]);
  });
});
