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
 * | SANDBOX_TOKEN | unset: only this host may use it; set, others may with header X-Sandbox-Token |
 * | TRUSTED_PROXIES | none (peers whose X-Forwarded-For is believed; IPs or CIDR ranges) |
 * | OUTBOUND_ALLOW_PRIVATE | false: webhooks and callbacks to private or loopback addresses are refused, except to the callback URLs' own origins |
 *
 * The banner names the login, never the password or API key unless they are the defaults.
 */
import { serve } from '@hono/node-server';
import { EnvSchema } from '../config.ts';
import { createOutboundPolicy } from '../http/outbound.ts';
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

// the same rules as Switchboard's own SANDBOX_TOKEN and TRUSTED_PROXIES (src/config.ts)
const access = EnvSchema.pick({ SANDBOX_TOKEN: true, TRUSTED_PROXIES: true }).safeParse(env);
if (!access.success) {
  for (const issue of access.error.issues)
    console.error(`${String(issue.path[0])}: ${issue.message}`);
  process.exit(1);
}

// read as Switchboard reads it (src/config.ts); the callback URLs are the sandbox's own
const outboundEnv = EnvSchema.pick({ OUTBOUND_ALLOW_PRIVATE: true }).safeParse(env);
if (!outboundEnv.success) {
  console.error(`OUTBOUND_ALLOW_PRIVATE: ${outboundEnv.error.issues[0]?.message}`);
  process.exit(1);
}
const outbound = createOutboundPolicy({
  allowPrivate: outboundEnv.data.OUTBOUND_ALLOW_PRIVATE,
  ownOrigins: [callbackUrl, env.SANDBOX_VIBER_CALLBACK_URL],
});

const sandbox = createSandbox({
  dialect: dialect.data,
  outbound,
  access: { token: access.data.SANDBOX_TOKEN, trustedProxies: access.data.TRUSTED_PROXIES },
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
  const { login } = sandbox.credentials;
  const secrets = [
    env.SANDBOX_PASSWORD === undefined ? 'password "sandbox"' : 'password of SANDBOX_PASSWORD',
    env.SANDBOX_API_KEY === undefined ? 'API key "sandbox-key"' : 'API key of SANDBOX_API_KEY',
  ].join(', ');
  console.log(
    [
      `provider sandbox listening at ${base}`,
      `  {base_url}:   ${base}`,
      `  {chat_url}:   ${base}/chat`,
      `  control API:  ${base}/_control`,
      `  credentials:  login "${login}", ${secrets}`,
      `  answers:      this host only${access.data.SANDBOX_TOKEN ? ', and clients sending X-Sandbox-Token' : ' (set SANDBOX_TOKEN to let others in)'}`,
      `  callbacks to: ${callbackUrl}`,
      `  dialect:      ${sandbox.dialect}`,
    ].join('\n'),
  );
});

async function shutdown(): Promise<void> {
  server.close();
  await sandbox.close();
  await outbound.close();
  process.exit(0);
}
process.once('SIGINT', () => void shutdown());
process.once('SIGTERM', () => void shutdown());
