/**
 * `npm run sandbox`: the provider sandbox on its own, for trying the provider interface by
 * hand or pointing another service at it. Its own process entry, so it reads its own
 * environment:
 *
 * | Variable | Default |
 * |---|---|
 * | SANDBOX_PORT | 4010 |
 * | SANDBOX_HOST | 127.0.0.1 |
 * | SANDBOX_CALLBACK_URL | http://localhost:3000/hooks/delivery |
 * | SANDBOX_VIBER_CALLBACK_URL | the callback URL with /hooks/delivery -> /hooks/viber |
 * | SANDBOX_CALLBACK_TOKEN | unset (sent as X-Callback-Token when set) |
 * | SANDBOX_LOGIN, SANDBOX_PASSWORD, SANDBOX_API_KEY | sandbox, sandbox, sandbox-key |
 * | SANDBOX_DIALECT | docs (as the provider's public docs show); or compact (the condensed interface) |
 */
import { serve } from '@hono/node-server';
import { createSandbox } from './app.ts';
import { DEFAULT_DIALECT, SandboxDialect } from './dialect.ts';

const env = process.env;
const port = Number(env.SANDBOX_PORT ?? 4010);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(`SANDBOX_PORT: must be a port between 0 and 65535, got "${env.SANDBOX_PORT}"`);
  process.exit(1);
}
const hostname = env.SANDBOX_HOST ?? '127.0.0.1';
const callbackUrl = env.SANDBOX_CALLBACK_URL ?? 'http://localhost:3000/hooks/delivery';
const dialectEnv = env.SANDBOX_DIALECT?.trim() || DEFAULT_DIALECT;
const dialect = SandboxDialect.safeParse(dialectEnv);
if (!dialect.success) {
  console.error(`SANDBOX_DIALECT: must be "docs" or "compact", got "${env.SANDBOX_DIALECT}"`);
  process.exit(1);
}

const sandbox = createSandbox({
  dialect: dialect.data,
  callbackUrl,
  ...(env.SANDBOX_VIBER_CALLBACK_URL !== undefined && {
    viberCallbackUrl: env.SANDBOX_VIBER_CALLBACK_URL,
  }),
  ...(env.SANDBOX_CALLBACK_TOKEN !== undefined && { callbackToken: env.SANDBOX_CALLBACK_TOKEN }),
  credentials: {
    ...(env.SANDBOX_LOGIN !== undefined && { login: env.SANDBOX_LOGIN }),
    ...(env.SANDBOX_PASSWORD !== undefined && { password: env.SANDBOX_PASSWORD }),
    ...(env.SANDBOX_API_KEY !== undefined && { apiKey: env.SANDBOX_API_KEY }),
  },
  logger: {
    info: (obj, msg) => console.log(msg ?? '', JSON.stringify(obj)),
    warn: (obj, msg) => console.warn(msg ?? '', JSON.stringify(obj)),
    error: (obj, msg) => console.error(msg ?? '', obj),
    debug: () => {},
  },
});

const server = serve({ fetch: sandbox.app.fetch, port, hostname }, (info) => {
  const base = `http://${hostname.includes(':') ? `[${hostname}]` : hostname}:${info.port}`;
  const { login, password, apiKey } = sandbox.credentials;
  console.log(
    [
      `provider sandbox listening at ${base}`,
      `  {base_url}:   ${base}`,
      `  {chat_url}:   ${base}/chat`,
      `  control API:  ${base}/_control`,
      `  credentials:  login "${login}", password "${password}", API key "${apiKey}"`,
      `  callbacks to: ${callbackUrl}`,
      `  dialect:      ${sandbox.dialect}`,
    ].join('\n'),
  );
});

async function shutdown(): Promise<void> {
  server.close();
  await sandbox.close();
  process.exit(0);
}
process.once('SIGINT', () => void shutdown());
process.once('SIGTERM', () => void shutdown());
