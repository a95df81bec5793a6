/**
 * Claimed event times (issue 21, point 3): a callback may claim any year. A time before the
 * message was created, or more than 5 minutes after the callback was received, is recorded at
 * the time it was received, with the claimed time and the reason on the timeline; a plausible
 * time is kept as it is. Over HTTP on each engine, with the clock held so times are exact.
 */
import { beforeAll, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import { attachPending, type IngestDeps } from '../../src/messages/ingest.ts';
import { buildTestApp, json, phone, readJson, uniq } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';

const TOKEN = 'event-times-callback-token';
const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;
const T0 = Date.parse('2026-06-01T10:00:00.000Z');
const iso = (ms: number) => new Date(ms).toISOString();

describeEachEngine('claimed event times', (ctx) => {
  let app: App;
  let ingest: IngestDeps;
  let now = T0;
  beforeAll(() => {
    ({ app, ingest } = buildTestApp(ctx.database(), {
      env: { CALLBACK_TOKEN: TOKEN },
      clock: { now: () => new Date(now) },
    }));
  });

  const submit = async (customerMessageId: string) => {
    const res = await app.request(
      '/v1/messages',
      json({
        messages: [{ from: 'Acme', to: phone(), type: 'sms', text: 'x', customerMessageId }],
      }),
    );
    expect(res.status).toBe(202);
  };
  const hook = async (path: string, body: unknown) => {
    const res = await app.request(path, json(body, { headers: { 'x-callback-token': TOKEN } }));
    expect(res.status).toBe(200);
    return readJson(res);
  };
  const view = async (ref: string) => readJson(await app.request(`/v1/messages/${ref}`));

  it('records a time in 1999 and one a day ahead at receipt, flagged; a plausible one as it is', async () => {
    const cmid = uniq('times');
    now = T0;
    await submit(cmid);
    const received = T0 + 10 * MINUTE;
    now = received;
    // one callback: the delivery at a plausible time, a failure claiming 1999; at its claimed
    // time the failure would come first and end the message, and the delivery would be noise
    await hook('/hooks/delivery', [
      { customerMessageId: cmid, status: 'delivered', timestamp: iso(T0 + MINUTE) },
      { customerMessageId: cmid, status: 'failed', timestamp: '1999-12-31T23:59:59Z' },
    ]);
    await hook('/hooks/delivery', {
      customerMessageId: cmid,
      status: 'read',
      timestamp: iso(received + DAY),
    });

    const v = await view(cmid);
    expect(
      v.timeline.map((e: Record<string, unknown>) => [
        e.status,
        e.source,
        e.at,
        e.claimedAt,
        e.timeRejected,
      ]),
    ).toEqual([
      ['queued', 'api', iso(T0), undefined, undefined],
      ['delivered', 'callback', iso(T0 + MINUTE), undefined, undefined],
      ['failed', 'callback', iso(received), '1999-12-31T23:59:59.000Z', 'before-created'],
      ['read', 'callback', iso(received), iso(received + DAY), 'future'],
    ]);
    for (const e of v.timeline) expect(e.receivedAt).toBe(iso(e.source === 'api' ? T0 : received));
    // the claim is kept in the stored event too
    expect(v.timeline[2].detail).toMatchObject({
      claimedAt: '1999-12-31T23:59:59.000Z',
      timeRejected: 'before-created',
    });
    // delivered, a failure after it (noise, status.ts), then read: never failed
    expect(v.status).toBe('read');
  });

  it('keeps a time within 5 minutes ahead of receipt', async () => {
    const cmid = uniq('margin');
    now = T0;
    await submit(cmid);
    now = T0 + MINUTE;
    await hook('/hooks/delivery', {
      customerMessageId: cmid,
      status: 'sent',
      timestamp: iso(T0 + 5 * MINUTE + MINUTE),
    });
    const sent = (await view(cmid)).timeline.find((e: { status: string }) => e.status === 'sent');
    expect(sent.at).toBe(iso(T0 + 6 * MINUTE));
    expect(sent).not.toHaveProperty('claimedAt');
  });

  it('judges a callback that came before its message when it is attached', async () => {
    const cmid = uniq('early');
    const received = T0 + 20 * MINUTE;
    now = received;
    expect(
      await hook('/hooks/delivery', [
        { customerMessageId: cmid, status: 'sent', timestamp: '1999-01-01T00:00:00Z' },
        { customerMessageId: cmid, status: 'delivered', timestamp: iso(received + DAY) },
      ]),
    ).toMatchObject({ matched: 0, pending: 2 });
    now = received + MINUTE;
    await submit(cmid);
    now = received + 2 * MINUTE;
    expect(await attachPending(ingest)).toBeGreaterThanOrEqual(2);
    const events = (await view(cmid)).timeline.filter(
      (e: { source: string }) => e.source === 'callback',
    );
    expect(events.map((e: Record<string, unknown>) => [e.status, e.at, e.timeRejected])).toEqual([
      ['sent', iso(received), 'before-created'],
      ['delivered', iso(received), 'future'],
    ]);
    expect(events[1].claimedAt).toBe(iso(received + DAY));
  });

  it('lists an incoming Viber message dated a day ahead at the time it came, and says so', async () => {
    const from = phone();
    const received = T0 + 30 * MINUTE;
    now = received;
    const answer = await hook('/hooks/viber', [
      {
        idUuid: uniq('in'),
        alphaName: 'Acme',
        phoneNumber: from.slice(1),
        text: 'a',
        dt: iso(received + DAY),
      },
      {
        idUuid: uniq('in'),
        alphaName: 'Acme',
        phoneNumber: from.slice(1),
        text: 'b',
        dt: iso(received - MINUTE),
      },
    ]);
    expect(answer.problems).toEqual([
      expect.stringMatching(/^message 0: its time .* is more than 5 minutes after it was received/),
    ]);
    const page = await readJson(await app.request(`/v1/inbound?from=${encodeURIComponent(from)}`));
    const byText = Object.fromEntries(
      page.items.map((m: { text: string; at: string }) => [m.text, m.at]),
    );
    expect(byText).toEqual({ a: iso(received), b: iso(received - MINUTE) });
  });
});
