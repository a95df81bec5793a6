import { Hono } from 'hono';
import { afterEach, expect, test } from 'vitest';
import { createSandbox, deriveViberCallbackUrl, type Sandbox } from '../../src/sandbox/app.ts';
import { API_KEY, json, post, type Receiver, sms, startReceiver } from './helpers.ts';

let receiver: Receiver | undefined;
let sandbox: Sandbox | undefined;
afterEach(async () => {
  await sandbox?.close();
  await receiver?.close();
});

test('mounted under /sandbox, every route keeps its path and unknown ones keep the seed body', async () => {
  sandbox = createSandbox({ dialect: 'compact' });
  const root = new Hono();
  root.get('/healthz', (c) => c.json({ status: 'ok' }));
  root.route('/sandbox', sandbox.app);
  expect(
    (await post(root, '/sandbox/bat/messagelist', { messages: [sms('+380501234567')] })).status,
  ).toBe(200);
  expect((await root.request('/sandbox/_control')).status).toBe(200);
  expect(
    (
      await post(
        root,
        '/sandbox/chat/api/company/get-token',
        { login: 'sandbox', password: 'sandbox' },
        {},
      )
    ).status,
  ).toBe(200);
  const missing = await root.request('/sandbox/nowhere');
  expect(missing.status).toBe(404);
  expect(await json(missing)).toMatchObject({ error: 'NOT_FOUND', status: 404 });
  expect((await root.request('/healthz')).status).toBe(200);
});

test('on the real clock, a message goes through its whole lifecycle by itself', async () => {
  receiver = await startReceiver();
  sandbox = createSandbox({
    dialect: 'compact',
    callbackUrl: `${receiver.url}/hooks/delivery`,
    timings: { sentAfterMs: 5, deliveredAfterMs: 10, readAfterMs: 15 },
  });
  await post(
    sandbox.app,
    '/bat/messagelist',
    { messages: [{ from: 'Acme', to: '+380501234567', type: 'viber_service', text: 'hi' }] },
    API_KEY,
  );
  const r = receiver;
  await expect.poll(() => r.received.length, { timeout: 10_000 }).toBe(3);
  expect(r.received.map((x) => (x.body as { status: string }).status)).toEqual([
    'sent',
    'delivered',
    'read',
  ]);
});

test('the Viber callback URL sits next to the delivery one', () => {
  expect(deriveViberCallbackUrl('http://localhost:3000/hooks/delivery')).toBe(
    'http://localhost:3000/hooks/viber',
  );
  expect(deriveViberCallbackUrl('http://h/base/hooks/delivery?token=x')).toBe(
    'http://h/base/hooks/viber?token=x',
  );
  expect(deriveViberCallbackUrl('http://h/cb')).toBeUndefined();
  expect(deriveViberCallbackUrl(undefined)).toBeUndefined();
});
