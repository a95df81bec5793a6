/**
 * The provider sandbox as the benchmark's provider: the real sandbox app (auth, validation of
 * every message, the 100 requests/s token bucket), but sending no delivery callbacks, so that
 * the dispatch figure measures outbox -> acceptance and nothing else. Calls are answered
 * after an hour, so the speech-webhook figure is driven by the bench alone.
 * `npm run bench:instances` sets SANDBOX_CALLBACK_URL (its round-robin proxy) and
 * SANDBOX_CALLBACK_TOKEN: then it calls back, its delivery callbacks and the calls' speech
 * webhooks spread over every instance, and the bench shortens the timings over
 * /_control/options while calls are measured.
 * Env: PORT (0: a free one; printed as the server prints it), SANDBOX_KEEP_MESSAGES,
 * SANDBOX_CALLBACK_URL, SANDBOX_CALLBACK_TOKEN.
 */
import { serve } from '@hono/node-server';
import { createSandbox } from '../src/sandbox/app.ts';

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
