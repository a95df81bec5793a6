/**
 * The outbound policy (src/http/outbound.ts), as an attacker would try it (issue 21, point 1):
 * a speech menu posted to the sandbox, or a flow, whose webhook points at this host or its
 * network. Real HTTP throughout: receivers on 127.0.0.1 that record every request, so "refused"
 * is shown by a receiver that was never reached.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  createOutboundPolicy,
  type OutboundPolicy,
  OutboundRefusedError,
  OutboundUnreachableError,
  type ResolvedAddress,
  refusedAddressKind,
} from '../../src/http/outbound.ts';
import { CallbackOptions, createCallbackSender } from '../../src/sandbox/callbacks.ts';
import { createManualClock, Scheduler } from '../../src/sandbox/clock.ts';
import { createRandom } from '../../src/sandbox/random.ts';
import type { RunningServer } from '../../src/server.ts';
import { spawnProcess } from '../faults/helpers.ts';
import { phone, readJson } from '../support/app.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { eventually, startTestServer } from '../support/server.ts';

interface Hit {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
}

interface Recorder {
  url: string;
  port: number;
  hits: Hit[];
  close(): Promise<void>;
}

/** A server on 127.0.0.1 that records every request and answers `answer` (default 200). */
async function recorder(
  answer: (hit: Hit) => { status: number; headers?: Record<string, string> } = () => ({
    status: 200,
  }),
): Promise<Recorder> {
  const hits: Hit[] = [];
  const server: Server = createServer((req, res) => {
    const hit = { method: req.method ?? '', path: req.url ?? '', headers: req.headers };
    hits.push(hit);
    req.resume();
    req.on('end', () => {
      const { status, headers } = answer(hit);
      res.writeHead(status, headers).end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    hits,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** A resolver that answers from `table` (one answer per call, the last one repeated). */
function fakeDns(table: Record<string, (readonly ResolvedAddress[])[]>) {
  const calls: string[] = [];
  const lookup = async (hostname: string) => {
    calls.push(hostname);
    const answers = table[hostname];
    if (answers === undefined) throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
    const n = calls.filter((h) => h === hostname).length;
    return answers[Math.min(n, answers.length) - 1] ?? [];
  };
  return { lookup, calls };
}

const v4 = (address: string): ResolvedAddress => ({ address, family: 4 });
const v6 = (address: string): ResolvedAddress => ({ address, family: 6 });
/** Some public address; nothing in these tests connects to it. */
const PUBLIC = v4('93.184.215.14');

async function refusal(promise: Promise<unknown>): Promise<OutboundRefusedError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(OutboundRefusedError);
  return error as OutboundRefusedError;
}

const policies: OutboundPolicy[] = [];
const recorders: Recorder[] = [];
function policy(opts: Parameters<typeof createOutboundPolicy>[0]): OutboundPolicy {
  const p = createOutboundPolicy(opts);
  policies.push(p);
  return p;
}
async function receiver(answer?: Parameters<typeof recorder>[0]): Promise<Recorder> {
  const r = await recorder(answer);
  recorders.push(r);
  return r;
}
afterEach(async () => {
  await Promise.all([...policies.splice(0), ...recorders.splice(0)].map((x) => x.close()));
});

describe('addresses', () => {
  // [address, what is refused about it]; both families, mapped and NAT64 forms included
  const REFUSED: [string, RegExp][] = [
    ['127.0.0.1', /loopback/],
    ['127.255.0.9', /loopback/],
    ['::1', /loopback/],
    ['::ffff:127.0.0.1', /loopback/],
    ['::ffff:7f00:1', /loopback/],
    ['0:0:0:0:0:ffff:7f00:1', /loopback/],
    ['64:ff9b::127.0.0.1', /loopback/],
    ['10.1.2.3', /private/],
    ['172.16.0.1', /private/],
    ['172.31.255.254', /private/],
    ['192.168.1.1', /private/],
    ['::ffff:192.168.1.1', /private/],
    ['169.254.169.254', /link-local/],
    ['fe80::1', /link-local/],
    ['fe80::1%eth0', /link-local/],
    ['100.64.0.1', /carrier-grade NAT/],
    ['100.127.255.254', /carrier-grade NAT/],
    ['fc00::1', /unique-local/],
    ['fd12:3456::1', /unique-local/],
    ['224.0.0.1', /multicast/],
    ['239.255.255.250', /multicast/],
    ['ff02::1', /multicast/],
    ['0.0.0.0', /unspecified/],
    ['::', /unspecified/],
    ['192.0.2.10', /reserved/],
    ['198.18.0.1', /reserved/],
    ['198.51.100.7', /reserved/],
    ['203.0.113.9', /reserved/],
    ['240.0.0.1', /reserved/],
    ['255.255.255.255', /reserved/],
    ['2001:db8::1', /reserved/],
    ['::7f00:1', /reserved/],
    ['2002:7f00:1::1', /reserved/],
    ['fec0::1', /reserved/],
  ];
  const PUBLIC_ADDRESSES = [
    '93.184.215.14',
    '8.8.8.8',
    '100.63.255.255',
    '100.128.0.0',
    '172.32.0.1',
    '2606:4700:4700::1111',
    '::ffff:8.8.8.8',
    '64:ff9b::808:808',
  ];

  it.each(REFUSED)('%s is refused (%s)', (address, what) => {
    expect(refusedAddressKind(address)).toMatch(what);
  });

  it.each(PUBLIC_ADDRESSES)('%s is allowed', (address) => {
    expect(refusedAddressKind(address)).toBeUndefined();
  });

  it('refuses an IP-literal URL of every refused kind, in any spelling the URL parser takes', async () => {
    const p = policy({ allowPrivate: false });
    for (const url of [
      'http://127.0.0.1/',
      'http://2130706433/', // 127.0.0.1 as one number
      'http://0x7f.1/',
      'http://[::1]:8080/',
      'http://[::ffff:127.0.0.1]/',
      'https://169.254.169.254/latest/meta-data/',
      'http://[fd00::1]/',
      'http://0.0.0.0:5432/',
    ]) {
      const verdict = await p.check(url);
      expect(verdict.ok, url).toBe(false);
    }
    expect(await p.check('http://127.0.0.1:6379/')).toEqual({
      ok: false,
      reason: '127.0.0.1 is a loopback address',
    });
    expect((await p.check('http://93.184.215.14/')).ok).toBe(true);
  });
});

describe('sending', () => {
  it('refuses a name that resolves to loopback, and never connects', async () => {
    const r = await receiver();
    const dns = fakeDns({ 'svc.test': [[v4('127.0.0.1')]] });
    const p = policy({ allowPrivate: false, lookup: dns.lookup });
    const error = await refusal(p.send(`http://svc.test:${r.port}/x`, { method: 'POST' }));
    expect(error.message).toBe(
      'refused by the outbound policy: svc.test resolves to 127.0.0.1, a loopback address',
    );
    expect(r.hits).toEqual([]);
    // the same name with the address rule lifted: it is the lookup the connection uses
    const open = policy({ allowPrivate: true, lookup: dns.lookup });
    expect((await open.send(`http://svc.test:${r.port}/x`, { method: 'POST' })).status).toBe(200);
    expect(r.hits.map((h) => h.path)).toEqual(['/x']);
  });

  it('refuses localhost, resolved by the system', async () => {
    const r = await receiver();
    const p = policy({ allowPrivate: false });
    const error = await refusal(p.send(`http://localhost:${r.port}/`, { method: 'POST' }));
    expect(error.reason).toMatch(/^localhost resolves to (127\.0\.0\.1|::1), a loopback address$/);
    expect(r.hits).toEqual([]);
  });

  it('checks every address a name resolves to', async () => {
    const dns = fakeDns({ 'mixed.test': [[PUBLIC, v4('10.0.0.7')]], 'six.test': [[v6('::1')]] });
    const p = policy({ allowPrivate: false, lookup: dns.lookup });
    expect(await p.check('https://mixed.test/')).toEqual({
      ok: false,
      reason: 'mixed.test resolves to 10.0.0.7, a private address',
    });
    expect((await refusal(p.send('https://mixed.test/'))).reason).toMatch(/10\.0\.0\.7/);
    expect((await refusal(p.send('http://six.test/'))).reason).toMatch(/::1, a loopback/);
  });

  it('resolves again on every attempt: a name that turns private after a check is refused', async () => {
    const r = await receiver();
    // DNS rebinding: public when checked, this host when the request goes out
    const dns = fakeDns({ 'rebind.test': [[PUBLIC], [v4('127.0.0.1')]] });
    const p = policy({ allowPrivate: false, lookup: dns.lookup });
    expect((await p.check(`http://rebind.test:${r.port}/`)).ok).toBe(true);
    await refusal(p.send(`http://rebind.test:${r.port}/`, { method: 'POST' }));
    await refusal(p.send(`http://rebind.test:${r.port}/`, { method: 'POST' }));
    expect(dns.calls).toEqual(['rebind.test', 'rebind.test', 'rebind.test']);
    expect(r.hits).toEqual([]);
  });

  it('does not follow a redirect: the 3xx is the answer', async () => {
    const second = await receiver();
    const first = await receiver(() => ({
      status: 302,
      headers: { location: `${second.url}/next` },
    }));
    const p = policy({ allowPrivate: true });
    const res = await p.send(`${first.url}/start`, { method: 'POST', body: '{}' });
    expect(res.status).toBe(302);
    expect(res.headers.get('location')).toBe(`${second.url}/next`);
    expect(first.hits).toHaveLength(1);
    expect(second.hits).toEqual([]);
  });

  it('refuses credentials in the URL, even with private addresses allowed', async () => {
    const r = await receiver();
    const p = policy({ allowPrivate: true });
    for (const url of [
      `http://user:pass@127.0.0.1:${r.port}/`,
      `http://user@127.0.0.1:${r.port}/`,
      `http://:pass@127.0.0.1:${r.port}/`,
    ]) {
      expect((await refusal(p.send(url))).reason, url).toBe(
        'credentials in the URL are not allowed',
      );
    }
    expect(r.hits).toEqual([]);
  });

  it('refuses every scheme but http and https', async () => {
    const p = policy({ allowPrivate: true });
    for (const url of [
      'file:///etc/passwd',
      'ftp://example.com/x',
      'gopher://127.0.0.1:6379/_INFO',
      'data:text/plain,hi',
      'javascript:alert(1)',
      'ws://example.com/',
      'not a url',
    ]) {
      expect((await p.check(url)).ok, url).toBe(false);
      await refusal(p.send(url));
    }
  });

  it("drops the caller's hop-by-hop, forwarding and secret headers; its own pass", async () => {
    const r = await receiver();
    const p = policy({ allowPrivate: true });
    const res = await p.send(`${r.url}/h`, {
      method: 'POST',
      body: '{"a":1}',
      headers: {
        Authorization: 'Bearer stolen',
        Cookie: 'sid=1',
        'X-Callback-Token': 'caller-chose-this',
        'X-API-Key': 'k',
        'X-Sandbox-Token': 't',
        'Proxy-Authorization': 'Basic eA==',
        Connection: 'keep-alive, x-custom',
        'Keep-Alive': 'timeout=5',
        Upgrade: 'websocket',
        Host: 'internal.example',
        'Content-Length': '999',
        'Transfer-Encoding': 'chunked',
        TE: 'trailers',
        Trailer: 'x',
        'X-Forwarded-For': '127.0.0.1',
        'X-Custom': 'kept',
        'X-Split': 'a\r\nInjected: yes',
      },
      ownHeaders: { 'Content-Type': 'application/json', 'X-Callback-Token': 'own-token' },
    });
    expect(res.status).toBe(200);
    const [hit] = r.hits;
    expect(hit?.headers).toMatchObject({
      'x-custom': 'kept',
      'x-callback-token': 'own-token',
      'content-type': 'application/json',
      host: `127.0.0.1:${r.port}`,
      'content-length': '7',
    });
    for (const name of [
      'authorization',
      'cookie',
      'x-api-key',
      'x-sandbox-token',
      'proxy-authorization',
      'keep-alive',
      'upgrade',
      'transfer-encoding',
      'te',
      'trailer',
      'x-forwarded-for',
      'x-split',
      'injected',
    ]) {
      expect(hit?.headers[name], name).toBeUndefined();
    }
  });

  it("allows Switchboard's own origin (PUBLIC_URL) without allowPrivate, and only that origin", async () => {
    const own = await receiver();
    const other = await receiver();
    const p = policy({ allowPrivate: false, ownOrigins: [`${own.url}/`] });
    expect((await p.send(`${own.url}/hooks/delivery`, { method: 'POST' })).status).toBe(200);
    expect((await p.check(`${own.url}/anything`)).ok).toBe(true);
    await refusal(p.send(`${other.url}/hooks/delivery`, { method: 'POST' }));
    // the same host on another scheme is another origin
    await refusal(p.send(`https://127.0.0.1:${own.port}/`, { method: 'POST' }));
    expect(own.hits).toHaveLength(1);
    expect(other.hits).toEqual([]);
  });

  it('reports an allowed host that does not answer generically, not how it failed', async () => {
    const gone = await recorder();
    await gone.close(); // its port is now closed
    const p = policy({ allowPrivate: true });
    const error = await p.send(`${gone.url}/`, { method: 'POST' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OutboundUnreachableError);
    expect((error as Error).message).toBe('no answer: the connection failed or timed out');
  });
});

describe("the sandbox's callback sender", () => {
  function sender(p: OutboundPolicy) {
    const options = CallbackOptions.parse({ maxAttempts: 3, retryBaseMs: 10 });
    const clock = createManualClock(0);
    const s = createCallbackSender({
      scheduler: new Scheduler(clock),
      send: p.send,
      options: () => options,
      random: createRandom(1),
    });
    return { clock, s };
  }

  it('fails a refused webhook at once with the reason: one attempt, not maxAttempts', async () => {
    const r = await receiver();
    const { clock, s } = sender(policy({ allowPrivate: false }));
    await s.send({
      kind: 'webhook',
      url: `${r.url}/scan`,
      body: {},
      headers: { Authorization: 'Bearer x', 'X-Source': 'menu' },
    });
    await clock.advance(60_000);
    const [record] = s.list();
    expect(record).toMatchObject({
      state: 'failed',
      // what the policy would pass on, not what the menu asked for
      headers: { 'x-source': 'menu' },
      attempts: [
        {
          attempt: 1,
          error: 'refused by the outbound policy: 127.0.0.1 is a loopback address',
        },
      ],
    });
    expect(record?.attempts).toHaveLength(1);
    expect(record?.headers).not.toHaveProperty('authorization');
    expect(r.hits).toEqual([]);
  });

  it("does not read a webhook receiver's answer: an endless body cannot hold an attempt", async () => {
    const server: Server = createServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'text/plain' });
      const more = () => {
        if (!res.destroyed) res.write('x'.repeat(64 * 1024), () => setImmediate(more));
      };
      more();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { s } = sender(policy({ allowPrivate: true }));
      // resolves once the first attempt is made; reading the body would end only at the
      // attempt's timeout, with an error instead of the status
      await s.send({
        kind: 'webhook',
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`,
        body: {},
      });
      const [record] = s.list();
      expect(record?.state).toBe('delivered');
      expect(record?.attempts).toEqual([expect.objectContaining({ attempt: 1, status: 200 })]);
      expect(record?.attempts[0]).not.toHaveProperty('error');
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it('retries an allowed host that does not answer, and lists each attempt generically', async () => {
    const gone = await recorder();
    await gone.close();
    const { clock, s } = sender(policy({ allowPrivate: true }));
    await s.send({ kind: 'webhook', url: `${gone.url}/`, body: {} });
    await clock.advance(60_000);
    const [record] = s.list();
    expect(record?.state).toBe('failed');
    expect(record?.attempts.map((a) => a.error)).toEqual(
      Array(3).fill('no answer: the connection failed or timed out'),
    );
  });
});

/** A speech call whose menu's key 1 runs each of `webhooks` (a URL, or a whole action), then hangs up. */
function menuCall(to: string, webhooks: (string | Record<string, unknown>)[]) {
  const actions = webhooks.map((w) => (typeof w === 'string' ? { action: 'webhook', url: w } : w));
  return {
    messages: [
      {
        from: 'Acme',
        to,
        type: 'speechcall',
        text: 'probe',
        menu: [
          {
            introUrl: 'https://cdn.example.com/probe.mp3',
            dtmfActions: { d1: [...actions, { action: 'hangup' }] },
          },
        ],
      },
    ],
  };
}

describe('end to end: the server with its built-in sandbox, default settings', () => {
  let dir: string;
  let db: TestDatabase;
  let server: RunningServer;
  let target: Recorder;

  beforeAll(async () => {
    target = await recorder();
    dir = await mkdtemp(join(tmpdir(), 'switchboard-flows-'));
    // a flow author's webhook to another port on this host, beside the flow's own hooks
    await writeFile(
      join(dir, 'probe.yaml'),
      `title: Probe
assert: { outcomeOnEveryPath: false }
menus:
  main:
    intro: "https://cdn.example.com/ivr/en/probe.mp3"
    keys:
      "1":
        - outcome: pressed
        - webhook:
            url: "${target.url}/from-flow"
            headers: { Authorization: "Bearer flow-secret", X-Source: probe }
        - hangup
`,
    );
    db = await createTestDatabase('pglite');
    // no OUTBOUND_ALLOW_PRIVATE: PUBLIC_URL (http://localhost:<port>) is the only private origin allowed
    server = await startTestServer(db.database, { env: { FLOWS_DIR: dir } });
  });
  afterAll(async () => {
    await server?.stop();
    await db?.drop();
    await target?.close();
    await rm(dir, { recursive: true, force: true });
  });

  const records = () => server.sandbox!.callbacks.list();

  it("a flow's webhook to this host is refused once; its own hooks to PUBLIC_URL still work", async () => {
    const to = phone();
    const scripted = await fetch(`${server.url}/sandbox/_control/scripts`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ to, keys: ['1'] }),
    });
    expect(scripted.status).toBe(201);
    const res = await fetch(`${server.url}/v1/calls`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ flow: 'probe', to, from: 'Acme', vars: {} }),
    });
    expect(res.status, JSON.stringify(await readJson(res.clone()))).toBe(202);
    const { id } = await readJson(res);
    // the key reached Switchboard through /hooks/speechcall (PUBLIC_URL, a loopback name)
    await eventually(
      async () => (await readJson(await fetch(`${server.url}/v1/calls/${id}`))).outcome,
      20_000,
      'the call outcome',
    );
    const refused = await eventually(
      async () =>
        records().find((r) => r.url === `${target.url}/from-flow` && r.state === 'failed'),
      20_000,
      'the refused webhook',
    );
    expect(refused.attempts).toHaveLength(1);
    expect(refused.attempts[0]?.error).toBe(
      'refused by the outbound policy: 127.0.0.1 is a loopback address',
    );
    expect(refused.headers).toEqual({ 'x-source': 'probe' });
    // the call's status callbacks and key webhooks, to PUBLIC_URL/hooks/*, all delivered
    const own = await eventually(
      async () => {
        const mine = records().filter((r) => r.url.startsWith(`${server.publicUrl}/hooks/`));
        return mine.length > 0 && mine.every((r) => r.state !== 'pending') && mine;
      },
      20_000,
      'the callbacks to PUBLIC_URL settled',
    );
    expect(own.map((r) => [r.url, r.state])).toEqual(own.map((r) => [r.url, 'delivered']));
    expect(own.some((r) => r.kind === 'webhook')).toBe(true);
    expect(target.hits).toEqual([]);
  });

  it('a menu posted straight to the sandbox cannot reach this host or probe its ports', async () => {
    const to = phone();
    const scripted = await fetch(`${server.url}/sandbox/_control/scripts`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ to, keys: ['1'] }),
    });
    expect(scripted.status).toBe(201);
    const hook = (url: string) => ({
      action: 'webhook',
      url,
      headers: { 'X-Callback-Token': 'forged', Host: 'internal' },
    });
    const urls = [
      `${target.url}/direct`,
      `http://[::ffff:127.0.0.1]:${target.port}/mapped`,
      `http://localhost:${target.port}/by-name`,
      `http://user:pw@127.0.0.1:${target.port}/creds`,
    ];
    const sent = await fetch(`${server.url}/sandbox/bat/messagelist`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'X-Authorization-Key': 'sandbox-key' },
      body: JSON.stringify(menuCall(to, urls.map(hook))),
    });
    expect(sent.status, await sent.clone().text()).toBeLessThan(300);
    const failed = await eventually(
      async () => {
        const mine = records().filter((r) => urls.includes(r.url));
        return mine.length === urls.length && mine.every((r) => r.state === 'failed') && mine;
      },
      20_000,
      'every webhook of the menu refused',
    );
    for (const r of failed) {
      expect(r.attempts, r.url).toHaveLength(1);
      expect(r.attempts[0]?.error, r.url).toMatch(/^refused by the outbound policy: /);
      expect(r.headers, r.url).toEqual({});
    }
    expect(target.hits).toEqual([]);
  });
});

describe('the standalone sandbox (npm run sandbox)', () => {
  it.each([
    ['unset', 'refused', {}],
    ['true', 'delivered', { OUTBOUND_ALLOW_PRIVATE: 'true' }],
  ] as const)(
    'with OUTBOUND_ALLOW_PRIVATE %s, a webhook to another local port is %s',
    async (_, fate, env) => {
      const own = await receiver();
      const other = await receiver();
      const sandbox = await spawnProcess({
        entry: 'src/sandbox/main.ts',
        env: { SANDBOX_PORT: '0', SANDBOX_CALLBACK_URL: `${own.url}/hooks/delivery`, ...env },
        ready: /listening at http:\/\/127\.0\.0\.1:(\d+)/,
      });
      try {
        const to = phone();
        const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
          fetch(`${sandbox.url}${path}`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', ...headers },
            body: JSON.stringify(body),
          });
        expect((await post('/_control/scripts', { to, keys: ['1'] })).status).toBe(201);
        const urls = [`${own.url}/own-origin`, `${other.url}/other-port`];
        const sent = await post('/bat/messagelist', menuCall(to, urls), {
          'X-Authorization-Key': 'sandbox-key',
        });
        expect(sent.status).toBeLessThan(300);
        type Listed = { url: string; state: string; attempts: { error?: string }[] };
        const settled = await eventually(
          async () => {
            const all: Listed[] = await readJson(await fetch(`${sandbox.url}/_control/callbacks`));
            const mine = all.filter((r) => urls.includes(r.url));
            return mine.length === 2 && mine.every((r) => r.state !== 'pending') && mine;
          },
          20_000,
          'both webhooks settled',
        );
        const byUrl = new Map(settled.map((r) => [r.url, r]));
        // the callback URL's origin is the sandbox's own: allowed either way
        expect(byUrl.get(urls[0]!)?.state).toBe('delivered');
        expect(own.hits.map((h) => h.path)).toContain('/own-origin');
        const toOther = byUrl.get(urls[1]!);
        if (fate === 'refused') {
          expect(toOther?.state).toBe('failed');
          expect(toOther?.attempts).toEqual([
            expect.objectContaining({
              error: 'refused by the outbound policy: 127.0.0.1 is a loopback address',
            }),
          ]);
          expect(other.hits).toEqual([]);
        } else {
          expect(toOther?.state).toBe('delivered');
          expect(other.hits.map((h) => h.path)).toEqual(['/other-port']);
        }
      } finally {
        await sandbox.kill();
      }
    },
  );

  it('refuses to start with an OUTBOUND_ALLOW_PRIVATE it cannot read', async () => {
    const started = spawnProcess({
      entry: 'src/sandbox/main.ts',
      env: { SANDBOX_PORT: '0', OUTBOUND_ALLOW_PRIVATE: 'perhaps' },
      ready: /listening at http:\/\/127\.0\.0\.1:(\d+)/,
    });
    await expect(started).rejects.toThrow(/OUTBOUND_ALLOW_PRIVATE: /);
  });
});
