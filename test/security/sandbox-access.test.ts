/**
 * The built-in sandbox is safe to leave on (issue 21, point 2): it answers this host (a
 * loopback socket peer naming a loopback Host; a forwarding header counts only from
 * TRUSTED_PROXIES) or SANDBOX_TOKEN in X-Sandbox-Token, on its provider routes and its control
 * API alike; the control API takes JSON bodies only and nothing from another site; nothing it
 * lists shows a secret. Tried on the real server over real sockets, and with a made-up socket
 * peer (`app.request(url, init, env)` with a fake Node request, which is what
 * src/http/client-address.ts reads) for peers a test cannot be.
 */
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { RunningServer } from '../../src/server.ts';
import { json, phone } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';
import { eventually, startTestServer } from '../support/server.ts';

const API_TOKEN = 'api-token-7f3a9c1e';
const CALLBACK_TOKEN = 'callback-token-5b8d2e40';
const SANDBOX_TOKEN = 'sandbox-token-c41f0a77';
const PASSWORD = 'sandbox-password-91e2d6';
/** Switchboard's own key for its sandbox (src/server.ts), and the sandbox's default one. */
const API_KEY = 'sandbox-key';
const TRUSTED_PROXY = '10.0.0.5';
const PUBLIC_CLIENT = '203.0.113.9';

/**
 * A proxy on this host that is not a trusted one: it forwards every request to `target()`
 * with `X-Forwarded-For` naming a public client, as nginx in front of Switchboard would.
 */
async function startForwardingProxy(target: () => number): Promise<Server> {
  const proxy = createServer((req, res) => {
    const upstream = httpRequest(
      {
        host: '127.0.0.1',
        port: target(),
        method: req.method,
        path: req.url,
        headers: { ...req.headers, 'x-forwarded-for': PUBLIC_CLIENT },
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on('error', () => res.writeHead(502).end());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  return proxy;
}

/** What @hono/node-server passes as `env` for a request from `address` (header names lower-case). */
function fromPeer(address: string, headers: Record<string, string>) {
  const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
  return { incoming: { socket: { remoteAddress: address }, headers: lower } };
}

describeEachEngine('the sandbox, left on', (ctx) => {
  let server: RunningServer;
  let proxy: Server;
  let proxyUrl: string;

  beforeAll(async () => {
    let port = 0;
    proxy = await startForwardingProxy(() => port);
    proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
    server = await startTestServer(ctx.database(), {
      env: {
        API_TOKEN,
        UI_TOKEN: 'ui-token-0d9e',
        CALLBACK_TOKEN,
        SANDBOX_TOKEN,
        TRUSTED_PROXIES: TRUSTED_PROXY,
        // Switchboard reaches its sandbox, and is called back, through the proxy
        PUBLIC_URL: proxyUrl,
      },
      sandbox: { credentials: { password: PASSWORD } },
    });
    port = server.port;
  });
  afterAll(async () => {
    await server?.stop();
    await new Promise((resolve) => proxy?.close(resolve));
  });

  /** The mounted sandbox asked as if from `peer`, with `headers` on the request and the socket. */
  const asPeer = (path: string, peer: string, headers: Record<string, string>, init = {}) => {
    const all = { host: 'localhost:3000', ...headers };
    return server.sandbox?.app.request(path, { ...init, headers: all }, fromPeer(peer, all)) as
      | Response
      | Promise<Response>;
  };
  const sandbox = () => {
    if (!server.sandbox) throw new Error('no sandbox');
    return server.sandbox;
  };

  it('answers a loopback client over a real socket: the control API and a provider route', async () => {
    const control = await fetch(`${server.url}/sandbox/_control`);
    expect(control.status).toBe(200);
    expect(await control.json()).toMatchObject({ dialect: 'docs' });
    const status = await fetch(`${server.url}/sandbox/bat/message/no-such-id`, {
      headers: { 'X-Authorization-Key': API_KEY },
    });
    // through the guard to the provider's own answer
    expect(status.status).toBe(404);
  });

  it('refuses a loopback proxy forwarding someone else (not a trusted proxy), on both', async () => {
    const control = await fetch(`${proxyUrl}/sandbox/_control`);
    expect(control.status).toBe(403);
    const body = await control.text();
    expect(body).toContain('X-Sandbox-Token');
    expect(body).not.toContain('sandbox-key');
    const status = await fetch(`${proxyUrl}/sandbox/bat/message/no-such-id`, {
      headers: { 'X-Authorization-Key': API_KEY },
    });
    expect(status.status).toBe(403);
    // with the token, the same proxy gets through
    const withToken = await fetch(`${proxyUrl}/sandbox/_control`, {
      headers: { 'X-Sandbox-Token': SANDBOX_TOKEN },
    });
    expect(withToken.status).toBe(200);
  });

  it("Switchboard's own client reaches its sandbox through a PUBLIC_URL that is not loopback", async () => {
    const ref = `access-${phone().slice(-7)}`;
    const res = await fetch(`${server.url}/v1/messages`, {
      ...json({
        messages: [{ type: 'sms', from: 'Shop', to: phone(), text: 'hi', customerMessageId: ref }],
      }),
      headers: { 'content-type': 'application/json', authorization: `Bearer ${API_TOKEN}` },
    });
    expect(res.status).toBe(202);
    // the dispatcher sent it to `${PUBLIC_URL}/sandbox`: the proxy, which makes it not local
    await eventually(
      async () => sandbox().messages.list({ customerMessageId: ref }).length === 1,
      10_000,
      'the message at the sandbox',
    );
  });

  it('refuses a client that is not on this host, on the control API and a provider route', async () => {
    const control = await asPeer('/_control', PUBLIC_CLIENT, {});
    expect(control.status).toBe(403);
    expect(await control.json()).toMatchObject({ error: 'FORBIDDEN', status: 403 });
    const provider = await asPeer('/bat/message/no-such-id', PUBLIC_CLIENT, {
      'x-authorization-key': API_KEY,
    });
    expect(provider.status).toBe(403);
    // nothing ran: a fault queued for the route is still there after the refusal
    sandbox().reset();
    const queued = await sandbox().app.request(
      '/_control/faults',
      json({ path: '/bat/message/no-such-id', status: 503 }),
    );
    expect(queued.status).toBe(201);
    expect((await asPeer('/bat/message/no-such-id', PUBLIC_CLIENT, {})).status).toBe(403);
    expect(await (await sandbox().app.request('/_control/faults')).json()).toHaveLength(1);
    sandbox().reset();
  });

  it('lets that client in with the right X-Sandbox-Token, and refuses a wrong one', async () => {
    const right = { 'x-sandbox-token': SANDBOX_TOKEN };
    expect((await asPeer('/_control', PUBLIC_CLIENT, right)).status).toBe(200);
    expect(
      (
        await asPeer('/bat/message/no-such-id', PUBLIC_CLIENT, {
          ...right,
          'x-authorization-key': API_KEY,
        })
      ).status,
    ).toBe(404);
    for (const token of ['wrong', `${SANDBOX_TOKEN}x`, SANDBOX_TOKEN.slice(0, -1)]) {
      const res = await asPeer('/_control', PUBLIC_CLIENT, { 'x-sandbox-token': token });
      expect(res.status, token).toBe(403);
    }
    // a wrong token is refused from loopback too: it is a misconfigured client
    expect((await asPeer('/_control', '127.0.0.1', { 'x-sandbox-token': 'wrong' })).status).toBe(
      403,
    );
  });

  it('counts forwarding headers only from a trusted proxy', async () => {
    // a loopback peer forwarding someone: a proxy on this host that is not trusted
    expect(
      (await asPeer('/_control', '127.0.0.1', { 'x-forwarded-for': PUBLIC_CLIENT })).status,
    ).toBe(403);
    expect((await asPeer('/_control', '::1', { 'x-forwarded-for': '127.0.0.1' })).status).toBe(403);
    // a public peer cannot claim loopback
    expect(
      (await asPeer('/_control', PUBLIC_CLIENT, { 'x-forwarded-for': '127.0.0.1' })).status,
    ).toBe(403);
    // the trusted proxy forwarding a client on this host, and forwarding a public one
    expect(
      (await asPeer('/_control', TRUSTED_PROXY, { 'x-forwarded-for': '127.0.0.1' })).status,
    ).toBe(200);
    expect(
      (await asPeer('/_control', TRUSTED_PROXY, { 'x-forwarded-for': PUBLIC_CLIENT })).status,
    ).toBe(403);
  });

  it('refuses a loopback peer whose Host is not loopback (a page that rebound its name to 127.0.0.1)', async () => {
    expect((await asPeer('/_control', '127.0.0.1', { host: 'evil.example:3000' })).status).toBe(
      403,
    );
    for (const host of ['localhost:3000', '127.0.0.1:3000', '[::1]:3000', 'app.localhost']) {
      expect((await asPeer('/_control', '127.0.0.1', { host })).status, host).toBe(200);
    }
  });

  it('takes JSON bodies only on the control API: text/plain, forms and untyped bodies are 415 and change nothing', async () => {
    const base = `${server.url}/sandbox/_control`;
    sandbox().reset();
    // something for a reset to forget
    await fetch(`${base}/scripts`, json({ to: '+380501234567', keys: ['1'] }));
    expect(sandbox().scripts.list()).toHaveLength(1);
    const fault = JSON.stringify({ path: '/bat/messagelist', status: 503, count: 100 });
    const script = JSON.stringify({ to: '+380507654321', keys: ['2'] });
    const form = new URLSearchParams({ path: '/bat/messagelist' });
    const multipart = new FormData();
    multipart.set('path', '/bat/messagelist');
    const bodies: [string, RequestInit][] = [
      ['text/plain', { body: fault, headers: { 'content-type': 'text/plain' } }],
      ['a form', { body: form }],
      ['multipart', { body: multipart }],
      ['no type', { body: new TextEncoder().encode(fault) }],
      [
        'a form whose parameter says json',
        { body: fault, headers: { 'content-type': 'application/x-www-form-urlencoded; a=b+json' } },
      ],
    ];
    for (const path of ['/faults', '/reset', '/scripts']) {
      for (const [what, init] of bodies) {
        const body = path === '/scripts' && typeof init.body === 'string' ? script : init.body;
        const res = await fetch(`${base}${path}`, { method: 'POST', ...init, body });
        expect(res.status, `${path} with ${what}`).toBe(415);
        expect(await res.json()).toMatchObject({ error: 'UNSUPPORTED_MEDIA_TYPE' });
      }
    }
    expect(await (await fetch(`${base}/faults`)).json()).toEqual([]);
    expect(sandbox().scripts.list()).toEqual([{ to: '+380501234567', keys: ['1'] }]);
    // JSON is taken, and a POST without a body (curl -X POST) still resets
    const added = await fetch(`${base}/faults`, json({ path: '/nowhere', status: 503 }));
    expect(added.status).toBe(201);
    const reset = await fetch(`${base}/reset`, { method: 'POST' });
    expect(reset.status).toBe(200);
    expect(sandbox().scripts.list()).toEqual([]);
    expect(await (await fetch(`${base}/faults`)).json()).toEqual([]);
  });

  it('refuses a request from another site on the control API, before it runs', async () => {
    const base = `${server.url}/sandbox/_control`;
    const own = new URL(server.url).host;
    const fault = { path: '/bat/messagelist', status: 503 };
    for (const headers of <Record<string, string>[]>[
      { origin: 'http://evil.example' },
      { origin: 'null' },
      { origin: `http://${own}.evil.example` },
      { 'sec-fetch-site': 'cross-site' },
      // another port of localhost is the same site, not the same origin
      { 'sec-fetch-site': 'same-site' },
    ]) {
      const res = await fetch(`${base}/faults`, json(fault, { headers }));
      expect(res.status, JSON.stringify(headers)).toBe(403);
      expect(await res.json()).toMatchObject({ error: 'CROSS_SITE' });
      const read = await fetch(`${base}/messages`, { headers });
      expect(read.status, JSON.stringify(headers)).toBe(403);
    }
    expect(await (await fetch(`${base}/faults`)).json()).toEqual([]);
    // the sandbox's own origin, and a typed address (Sec-Fetch-Site: none), are let through
    const same = await fetch(
      `${base}/faults`,
      json(fault, { headers: { origin: `http://${own}`, 'sec-fetch-site': 'same-origin' } }),
    );
    expect(same.status).toBe(201);
    expect((await fetch(base, { headers: { 'sec-fetch-site': 'none' } })).status).toBe(200);
    await fetch(`${base}/faults`, { method: 'DELETE' });
  });

  it('never shows the callback token, the password or the API key', async () => {
    const base = `${server.url}/sandbox/_control`;
    // an incoming Viber message: a callback with X-Callback-Token, made at once
    const inbound = await fetch(`${base}/viber/inbound`, json({ from: phone(), text: 'hello' }));
    expect(inbound.status).toBe(202);
    const answers = [
      await inbound.text(),
      await (await fetch(base)).text(),
      await (await fetch(`${base}/callbacks`)).text(),
      await (await fetch(`${base}/callbacks?kind=viber`)).text(),
    ];
    for (const text of answers) {
      expect(text).not.toContain(CALLBACK_TOKEN);
      expect(text).not.toContain(PASSWORD);
      expect(text).not.toContain(API_KEY);
      expect(text).not.toContain(SANDBOX_TOKEN);
    }
    // the header is listed, its value is not
    const callbacks = JSON.parse(answers[2] as string) as { headers: Record<string, string> }[];
    expect(callbacks.at(-1)?.headers).toEqual({ 'x-callback-token': '[redacted]' });
    expect(JSON.parse(answers[1] as string).credentials).toEqual({
      login: 'sandbox',
      password: '[redacted]',
      apiKey: '[redacted]',
    });
  });
});
