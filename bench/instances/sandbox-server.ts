/**
 * The provider sandbox for `npm run bench:instances`: bench/sandbox-server.ts's sandbox (the
 * real sandbox app, its auth, validation and 100 requests/s token bucket), except that it
 * calls back. Its callback URL is the round-robin proxy in front of the instances
 * (SANDBOX_CALLBACK_URL), so its delivery callbacks and the calls' speech webhooks (sent to
 * the URLs the flows rendered from PUBLIC_URL, the same proxy) spread over every instance;
 * the outbound policy lets it reach that loopback origin and no other. Messages are sent and
 * delivered after an hour at first, as in the single-server bench, so dispatch is measured
 * alone; the bench shortens the timings over /_control/options while calls are measured.
 * Env: PORT (0: a free one), SANDBOX_CALLBACK_URL, SANDBOX_CALLBACK_TOKEN, SANDBOX_KEEP_MESSAGES.
 *
 * @example
 * PORT=0 SANDBOX_CALLBACK_URL=http://127.0.0.1:8080/hooks/delivery node sandbox.mjs
 */
import { serve } from '@hono/node-server';
import { createSandbox } from '../../src/sandbox/app.ts';

const HOUR = 3_600_000;
const sandbox = createSandbox({
  ...(process.env.SANDBOX_CALLBACK_URL && { callbackUrl: process.env.SANDBOX_CALLBACK_URL }),
  ...(process.env.SANDBOX_CALLBACK_TOKEN && {
    callbackToken: process.env.SANDBOX_CALLBACK_TOKEN,
  }),
  keepMessages: Number(process.env.SANDBOX_KEEP_MESSAGES ?? 100_000),
  timings: { sentAfterMs: HOUR, deliveredAfterMs: 2 * HOUR },
});
const server = serve(
  { fetch: sandbox.app.fetch, port: Number(process.env.PORT ?? 0), hostname: '127.0.0.1' },
  (info) => console.log(JSON.stringify({ port: info.port, msg: 'listening' })),
);
process.once('SIGTERM', () => {
  server.close();
  void sandbox.close().then(() => process.exit(0));
});
