/**
 * Request body limits: every route has one. /v1/messages and the hooks take 5000 messages
 * (or events) of the largest kind, /v1/calls/batch 10 000 calls; everything else 1 MiB. Beyond
 * a limit: 413 in the error envelope, whether the size is announced (Content-Length) or only
 * found while reading.
 */
import { beforeAll, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import { buildTestApp, readJson, uniq } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';

const MiB = 1024 * 1024;
const LARGE = 32 * MiB;

function post(body: string, opts: { announce?: boolean; method?: string } = {}): RequestInit {
  return {
    method: opts.method ?? 'POST',
    headers: {
      'content-type': 'application/json',
      ...(opts.announce && { 'content-length': String(Buffer.byteLength(body)) }),
    },
    body,
  };
}

async function expectTooLarge(res: Response, what: string, limit = /larger than \d+ MiB/) {
  expect(res.status, what).toBe(413);
  expect((await readJson(res)).error, what).toMatchObject({
    code: 'PAYLOAD_TOO_LARGE',
    message: expect.stringMatching(limit),
  });
}

/** The largest SMS a message may be (10 parts of GSM text), with a fallback just as large. */
function largestMessage(i: number) {
  const text = 'x'.repeat(1530);
  return {
    from: 'Acme',
    to: `not-a-number-${i}`, // rejected at once: the test is about the body, not the sending
    type: 'sms',
    text,
    customerMessageId: `limits-${i}-${'c'.repeat(40)}`,
    fallbacks: [{ from: 'Acme', to: `not-a-number-${i}`, type: 'sms', text }],
  };
}

/** A delivery event as providers write them, with the usual extra fields. */
function deliveryEvent(i: number, prefix: string) {
  return {
    customerMessageId: `${prefix}-${i}`,
    messageId: `f3b0c2d4-6f0e-4c8e-9a55-${String(i).padStart(12, '0')}`,
    messagelistId: 1234567,
    status: 'delivered',
    timestamp: '2026-11-21T10:15:00.000Z',
    channel: 'sms',
    to: '+380501234567',
    parts: 1,
    price: { amount: '0.0123', currency: 'EUR' },
    operator: { mcc: '255', mnc: '01', name: 'Operator' },
    error: null,
  };
}

describeEachEngine('request body limits', (ctx) => {
  let app: App;
  beforeAll(() => {
    app = buildTestApp(ctx.database()).app;
  });

  it('takes 5000 of the largest messages on /v1/messages', async () => {
    const body = JSON.stringify({
      messages: Array.from({ length: 5000 }, (_, i) => largestMessage(i)),
    });
    expect(Buffer.byteLength(body)).toBeGreaterThan(15 * MiB);
    const res = await app.request('/v1/messages', post(body, { announce: true }));
    // read and judged message by message: a well-formed list gets 202 with a result per
    // message, and every one is rejected for its recipient
    expect(res.status).toBe(202);
    const answer = await readJson(res);
    expect(answer.messages).toHaveLength(5000);
    expect(answer.messages[4999]).toMatchObject({
      status: 'rejected',
      error: { code: 'INVALID_RECIPIENT' },
    });
  });

  it('takes a delivery callback of 5000 events on /hooks/delivery', async () => {
    const prefix = uniq('limits');
    const body = JSON.stringify(Array.from({ length: 5000 }, (_, i) => deliveryEvent(i, prefix)));
    expect(Buffer.byteLength(body)).toBeGreaterThan(1 * MiB);
    const res = await app.request('/hooks/delivery', post(body));
    expect(res.status).toBe(200);
    expect(await readJson(res)).toMatchObject({ events: 5000, pending: 5000 });
  });

  it('takes 10 000 calls on /v1/calls/batch', async () => {
    const vars = { name: 'n'.repeat(1400), date: 'd'.repeat(1400) };
    const body = JSON.stringify({
      flow: `no-such-flow-${uniq('f')}`,
      from: 'Clinic',
      calls: Array.from({ length: 10_000 }, (_, i) => ({ to: `+38050${i}`, vars })),
    });
    expect(Buffer.byteLength(body)).toBeGreaterThan(25 * MiB);
    const res = await app.request('/v1/calls/batch', post(body, { announce: true }));
    // read, validated, and refused for the flow (not for its size)
    expect(res.status).toBe(400);
    expect((await readJson(res)).error.code).toBe('UNKNOWN_FLOW');
  });

  it('answers 413 beyond the large limit, announced or found while reading', async () => {
    const big = `[${'"x",'.repeat(LARGE / 4)}"x"]`;
    for (const path of ['/v1/messages', '/hooks/delivery', '/hooks/viber', '/v1/calls/batch']) {
      await expectTooLarge(await app.request(path, post(big, { announce: true })), path);
      await expectTooLarge(await app.request(path, post(big)), `${path} (streamed)`);
    }
  });

  it('refuses a speech-call webhook over 64 KiB before reading it, announced or streamed', async () => {
    const over = JSON.stringify({ action: { token: 'x'.repeat(64 * 1024) } });
    await expectTooLarge(
      await app.request('/hooks/speechcall', post(over, { announce: true })),
      '/hooks/speechcall',
      /larger than 64 KiB/,
    );
    await expectTooLarge(
      await app.request('/hooks/speechcall', post(over)),
      '/hooks/speechcall (streamed)',
      /larger than 64 KiB/,
    );
    // under it, the hook reads the body and judges its token
    const under = JSON.stringify({ action: { token: 'x'.repeat(60 * 1024) } });
    const res = await app.request('/hooks/speechcall', post(under, { announce: true }));
    expect(res.status).toBe(401);
    expect((await readJson(res)).error.code).toBe('UNAUTHORIZED');
  });

  it('holds every other route, and paths no route answers, to 1 MiB', async () => {
    const over = JSON.stringify({ pad: 'x'.repeat(MiB) });
    const cases: [string, string][] = [
      ['/v1/calls', 'POST'],
      ['/v1/subjects/%2B380501234567', 'DELETE'],
      ['/v1/messages/some-ref', 'POST'],
      ['/v1/messages/', 'POST'],
      ['/hooks', 'POST'],
      ['/healthz', 'PUT'],
      ['/no-such-route', 'POST'],
    ];
    for (const [path, method] of cases) {
      await expectTooLarge(
        await app.request(path, post(over, { method, announce: true })),
        `${method} ${path}`,
      );
      await expectTooLarge(
        await app.request(path, post(over, { method })),
        `${method} ${path} (streamed)`,
      );
    }
    // just under it, the same route reads the body and judges it
    const under = JSON.stringify({ flow: 'x', to: 'y', from: 'z', pad: 'x'.repeat(MiB - 100) });
    const res = await app.request('/v1/calls', post(under));
    expect(res.status).toBe(400);
  });
});
