/**
 * Switchboard against a provider that speaks as its public docs show (the sandbox's docs
 * dialect, docs/api/smsbat/*.md at bc0d114), over real HTTP: status webhooks keyed by
 * messageId alone, one status for a message and its fallbacks, per-channel statuses in the
 * status record, incoming Viber messages in their own shape, flash-call answers, RCS and the
 * cascade, sent through POST /v1/messages.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { RunningServer } from '../../src/server.ts';
import { phone, readJson, uniq } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';
import { postJson } from '../support/http.ts';
import { eventually, startTestServer } from '../support/server.ts';

const post = postJson;

interface Event {
  status: string;
  source: string;
  detail?: Record<string, unknown>;
}

describeEachEngine("the provider's documented interface", (ctx) => {
  let server: RunningServer;
  const submit = async (messages: unknown[]) => {
    const res = await post(`${server.url}/v1/messages`, { messages });
    const body = await readJson(res);
    expect(res.status, JSON.stringify(body)).toBe(202);
    return body.messages as { id: string; customerMessageId: string; status: string }[];
  };
  const view = async (ref: string) => readJson(await fetch(`${server.url}/v1/messages/${ref}`));
  const until = (ref: string, done: (v: { status: string; timeline: Event[] }) => boolean) =>
    eventually(
      async () => {
        const v = await view(ref);
        return done(v) && v;
      },
      20_000,
      `${ref} to settle`,
    );

  beforeAll(async () => {
    // the status poller runs every few seconds: the fallback's channels come from it
    server = await startTestServer(ctx.database(), { env: { SANDBOX_DIALECT: 'docs' } });
    expect(server.sandbox?.dialect).toBe('docs');
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("moves a message by the webhook's deliverystatus, matched by the provider's messageId", async () => {
    const [m] = await submit([{ from: 'Acme', to: phone(), type: 'sms', text: 'Hello' }]);
    const done = await until(m!.id, (v) => v.status === 'delivered');
    expect(done.timeline.map((e: Event) => `${e.status}/${e.source}`)).toEqual([
      'queued/api',
      'accepted/dispatch',
      'sent/callback',
      'delivered/callback',
    ]);
    // the provider's word beside the canonical one (status.md, "Delivery Status Values")
    expect(done.timeline[2].detail).toMatchObject({ providerStatus: 'processing' });
    // what the sandbox sent: status.md's webhook, with no customerMessageId to match by
    const sent = (await readJson(
      await fetch(
        `${server.url}/sandbox/_control/callbacks?kind=delivery&messageId=${done.providerMessageId}`,
      ),
    )) as { body: Record<string, unknown> }[];
    expect(sent.map((c) => Object.keys(c.body).sort())).toContainEqual([
      'cost',
      'deliverystatus',
      'messageId',
      'timestamp',
    ]);
  });

  it('fails a message only once every channel failed, and keeps each channel on its timeline', async () => {
    const to = phone();
    // the primary fails, its SMS fallback delivers
    await post(`${server.url}/sandbox/_control/scripts`, [{ to, outcome: 'failed' }]);
    const [m] = await submit([
      {
        from: 'Acme',
        to,
        type: 'viber_trans',
        text: 'Hi',
        fallback: { type: 'sms', text: 'Hi by SMS' },
      },
    ]);
    const done = await until(
      m!.id,
      (v) => v.status === 'delivered' && v.timeline.some((e) => e.source === 'poll'),
    );
    // the webhook said delivered for the whole message; the record said which channel
    expect(done.deliveredVia).toBe('sms');
    const channels = done.timeline
      .filter((e: Event) => e.detail?.perChannel)
      .map((e: Event) => `${e.detail?.channel}:${e.status}`);
    expect(channels).toEqual(expect.arrayContaining(['viber:failed', 'sms:delivered']));
    // no failure of the whole message ever reached the timeline
    expect(
      done.timeline.filter((e: Event) => e.status === 'failed' && !e.detail?.perChannel),
    ).toEqual([]);

    const lost = phone();
    await post(`${server.url}/sandbox/_control/scripts`, [
      { to: lost, outcome: 'failed' },
      { to: lost, outcome: 'failed' },
    ]);
    const [gone] = await submit([
      {
        from: 'Acme',
        to: lost,
        type: 'viber_trans',
        text: 'Hi',
        fallback: { type: 'sms', text: 'x' },
      },
    ]);
    const failed = await until(gone!.id, (v) => v.status === 'failed');
    expect(failed.timeline.at(-1)).toMatchObject({
      status: 'failed',
      detail: { providerStatus: 'undeliverable' },
    });
  });

  it('sends RCS with buttons, a flash call with its caller id, and shows the flash answer', async () => {
    const [rcs, flash] = await submit([
      {
        from: 'Acme',
        to: phone(),
        type: 'rcs',
        text: 'Your order #12345 is ready for pickup',
        messageData: {
          buttons: [
            {
              text: 'Track Order',
              action: { type: 'openUrl', url: 'https://example.com/track/12345' },
            },
            { text: 'Contact Support', action: { type: 'dial', phoneNumber: '+380501234567' } },
          ],
        },
      }, // rcs.md, "Text + Multiple Buttons"
      {
        from: 'YourApp',
        to: phone(),
        type: 'flashcall',
        messageData: { callerId: '+380123456789' },
        ttl: 60,
      }, // flashcall.md, "Request Flash Call"
    ]);
    await until(rcs!.id, (v) => v.status === 'delivered');
    const f = await until(flash!.id, (v) => v.status !== 'queued');
    // flashcall.md, "Response Format"
    expect(f.flashcall).toEqual({ callerId: '+380123456789', pattern: '***456789', ttl: 60 });
  });

  it('stores an incoming Viber message in its own shape once, listed by /v1/inbound', async () => {
    const from = phone();
    const res = await post(`${server.url}/sandbox/_control/viber/inbound`, {
      from,
      text: 'Hello, I need help with my order',
      to: 'ViberBotName',
    });
    expect(res.status).toBe(202);
    const { callback } = await readJson(res);
    // the incoming-messages page's shape: the number without its +
    expect(callback.body).toMatchObject({ phoneNumber: from.slice(1), alphaName: 'ViberBotName' });
    const listed = await eventually(
      async () => {
        const page = await readJson(
          await fetch(`${server.url}/v1/inbound?from=${encodeURIComponent(from)}`),
        );
        return page.items.length > 0 && page.items;
      },
      10_000,
      'the incoming message',
    );
    expect(listed).toEqual([
      expect.objectContaining({
        from,
        to: 'ViberBotName',
        text: 'Hello, I need help with my order',
        providerMessageId: callback.body.idUuid,
        at: callback.body.dt,
      }),
    ]);
    // the provider sends it again, differently laid out: still one message
    const again = await post(`${server.url}/hooks/viber`, { ...callback.body, extra: 1 });
    expect(await readJson(again)).toMatchObject({ duplicate: true, matched: 0 });
    const page = await readJson(
      await fetch(`${server.url}/v1/inbound?from=${encodeURIComponent(from)}`),
    );
    expect(page.items).toHaveLength(1);
  });

  it('sends a cascade message through the cascade API, variables uploaded first', async () => {
    const to = phone();
    const cmid = uniq('cascade');
    const [m] = await submit([
      {
        type: 'cascade',
        from: 'YourStore',
        to,
        customerMessageId: cmid,
        messageType: 'transaction',
        text: 'Hi %name=1%! Order %name=2% shipped.',
        variables: [
          { id: 1, type: 'name', value: 'Sarah' },
          { id: 2, type: 'name', value: 'ORD-789' },
        ],
      },
    ]);
    const done = await until(m!.id, (v) => v.status === 'delivered');
    expect(done.type).toBe('cascade');
    expect(done.providerMessageId).toMatch(/^[0-9a-f-]{36}$/);
    // what the provider received: send.md's form, the text resolved as variables.md shows
    const [sent] = (await readJson(await fetch(`${server.url}/sandbox/_control/cascade`))).filter(
      (c: { trackinId?: string }) => c.trackinId === cmid,
    );
    expect(sent).toMatchObject({ messageId: done.providerMessageId });
    expect(JSON.stringify(sent)).toContain('Hi Sarah! Order ORD-789 shipped.');
  });
});
