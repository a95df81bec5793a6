import { describe, expect, test } from 'vitest';
import { createSandbox } from '../../src/sandbox/app.ts';
import { createManualClock } from '../../src/sandbox/clock.ts';
import { json, post, sms } from './helpers.ts';

const TO = '+380501234567';
const T0 = Date.parse('2030-01-01T00:00:00.000Z');

function make() {
  const clock = createManualClock(T0);
  const sandbox = createSandbox({ dialect: 'compact', clock });
  return { clock, sandbox };
}

describe('control API', () => {
  test('scripts are queued per number (any spelling), listed, used once each, and cleared', async () => {
    const { sandbox } = make();
    const res = await post(
      sandbox.app,
      '/_control/scripts',
      [
        { to: '380 50 123 4567', outcome: 'failed' },
        { to: TO, keys: ['d1', 'timeout'] },
      ],
      {},
    );
    expect(res.status).toBe(201);
    expect(await json(res)).toMatchObject({ queued: 2 });
    const listed = await json(sandbox.app.request('/_control/scripts'));
    expect(listed).toEqual([
      { to: TO, outcome: 'failed' },
      { to: TO, keys: ['1', 'timeout'] },
    ]);
    await post(sandbox.app, '/bat/messagelist', { messages: [sms(TO)] });
    expect(sandbox.scripts.list()).toHaveLength(1);
    expect(sandbox.messages.list()[0]).toMatchObject({ outcome: 'failed', scripted: true });
    await sandbox.app.request(`/_control/scripts?to=${encodeURIComponent(TO)}`, {
      method: 'DELETE',
    });
    expect(sandbox.scripts.list()).toHaveLength(0);
  });

  test('a bad script is 400 naming the field', async () => {
    const { sandbox } = make();
    const res = await post(
      sandbox.app,
      '/_control/scripts',
      { to: TO, keys: ['x'], outcome: 'lost' },
      {},
    );
    expect(res.status).toBe(400);
    const paths = (await json(res)).details.map((d: { path: string }) => d.path);
    expect(paths).toEqual(expect.arrayContaining(['keys[0]', 'outcome']));
  });

  test('the clock can be read and advanced through the API', async () => {
    const { sandbox } = make();
    await post(sandbox.app, '/bat/messagelist', { messages: [sms(TO)] });
    const res = await post(sandbox.app, '/_control/clock/advance', { ms: 2000 }, {});
    expect(await json(res)).toEqual({ now: new Date(T0 + 2000).toISOString(), manual: true });
    expect(sandbox.messages.list()[0]?.status).toBe('delivered');
    expect(await json(sandbox.app.request('/_control/clock'))).toMatchObject({ manual: true });
  });

  test('advancing a real clock is refused with 409', async () => {
    const sandbox = createSandbox({ dialect: 'compact' });
    const res = await post(sandbox.app, '/_control/clock/advance', { ms: 1 }, {});
    expect(res.status).toBe(409);
    await sandbox.close();
  });

  test('messages are listed with filters and looked up by id', async () => {
    const { sandbox } = make();
    await post(sandbox.app, '/bat/messagelist', {
      messages: [
        sms(TO, { customerMessageId: 'l-1' }),
        sms('+380671234567'),
        { from: 'Acme', to: TO, type: 'viber_service', text: 'v' },
      ],
    });
    const all = await json(sandbox.app.request('/_control/messages'));
    expect(all).toHaveLength(3);
    const byTo = await json(
      sandbox.app.request(`/_control/messages?to=${encodeURIComponent(TO)}&type=sms`),
    );
    expect(byTo.map((m: { customerMessageId: string }) => m.customerMessageId)).toEqual(['l-1']);
    const one = await json(sandbox.app.request(`/_control/messages/${all[1].messageId}`));
    expect(one.to).toBe('+380671234567');
    expect((await sandbox.app.request('/_control/messages/none')).status).toBe(404);
  });

  test('reset forgets everything and cancels lifecycles in progress', async () => {
    const { sandbox, clock } = make();
    await post(sandbox.app, '/_control/scripts', { to: TO, outcome: 'failed' }, {});
    await post(sandbox.app, '/bat/messagelist', {
      messages: [sms(TO, { customerMessageId: 'r-1' })],
    });
    await post(sandbox.app, '/api/tg_bot/t', { id: 1, userName: 'u' }, {});
    await post(sandbox.app, '/_control/options', { duplicateCallbacks: true }, {});
    const res = await post(sandbox.app, '/_control/reset', {}, {});
    expect(res.status).toBe(200);
    expect(sandbox.messages.list()).toHaveLength(0);
    expect(sandbox.bots.users()).toHaveLength(0);
    expect(sandbox.scripts.list()).toHaveLength(0);
    expect((await json(sandbox.app.request('/_control/options'))).duplicateCallbacks).toBe(false);
    await clock.advance(10_000);
    expect(sandbox.messages.list()).toHaveLength(0);
    // the customerMessageId is free again
    const again = await json(
      post(sandbox.app, '/bat/messagelist', { messages: [sms(TO, { customerMessageId: 'r-1' })] }),
    );
    expect(again.messages[0].status).toBe('accepted');
  });

  test('the summary shows which credentials there are (not their secrets), clock and counts', async () => {
    const { sandbox } = make();
    await post(sandbox.app, '/bat/messagelist', { messages: [sms(TO)] });
    const summary = await json(sandbox.app.request('/_control'));
    expect(summary).toMatchObject({
      credentials: { login: 'sandbox', password: '[redacted]', apiKey: '[redacted]' },
      clock: { manual: true },
      counts: { messages: 1 },
    });
  });

  test('timings can be changed through the options', async () => {
    const { sandbox, clock } = make();
    const res = await post(
      sandbox.app,
      '/_control/options',
      { timings: { sentAfterMs: 10, deliveredAfterMs: 20 } },
      {},
    );
    expect((await json(res)).timings).toMatchObject({ sentAfterMs: 10, deliveredAfterMs: 20 });
    await post(sandbox.app, '/bat/messagelist', { messages: [sms(TO)] });
    await clock.advance(20);
    expect(sandbox.messages.list()[0]?.status).toBe('delivered');
  });
});

test('a full store forgets the oldest messages, whose lifecycles still finish', async () => {
  const clock = createManualClock(T0);
  const sandbox = createSandbox({ dialect: 'compact', clock, keepMessages: 4 });
  await post(sandbox.app, '/_control/scripts', { to: TO, outcome: 'failed' }, {});
  const first = await json(
    post(sandbox.app, '/bat/messagelist', {
      messages: [
        sms(TO, {
          customerMessageId: 'old',
          fallbacks: [{ from: 'Acme', to: TO, type: 'sms', text: 'fb' }],
        }),
      ],
    }),
  );
  const id = first.messages[0].messageId;
  await post(sandbox.app, '/bat/messagelist', {
    messages: Array.from({ length: 5 }, () => sms('+380671234567')),
  });
  expect(sandbox.messages.get(id)).toBeUndefined();
  expect(sandbox.messages.list()).toHaveLength(4);
  await clock.advance(10_000);
  // the forgotten message failed, and its fallback went out and was delivered
  expect(sandbox.messages.list().find((m) => m.parentMessageId === id)?.status).toBe('delivered');
  // and its customerMessageId is free again
  const again = await json(
    post(sandbox.app, '/bat/messagelist', { messages: [sms(TO, { customerMessageId: 'old' })] }),
  );
  expect(again.messages[0].status).toBe('accepted');
});
