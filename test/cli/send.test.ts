import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { Hono } from 'hono';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { parseFile, runSend } from '../../src/cli/send.ts';
import { validateMessage } from '../../src/provider/message.ts';
import type { RunningServer } from '../../src/server.ts';
import { type LocalServer, listen } from '../provider/helpers.ts';
import { readJson } from '../support/app.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { eventually, startTestServer } from '../support/server.ts';

const servers: LocalServer[] = [];
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'switchboard-send-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

/** Mimics Switchboard's POST /v1/messages: per-message validation, 202, 400 when none is valid. */
async function switchboard(opts: { token?: string } = {}) {
  const requests: Array<{
    count: number;
    auth: string | undefined;
    body: { messages: unknown[] };
  }> = [];
  let id = 0;
  const app = new Hono();
  app.post('/v1/messages', async (c) => {
    const auth = c.req.header('authorization');
    if (opts.token && auth !== `Bearer ${opts.token}`) {
      return c.json({ error: { code: 'UNAUTHORIZED', message: 'bad token', details: [] } }, 401);
    }
    const body = (await c.req.json()) as { messages: unknown[] };
    requests.push({ count: body.messages.length, auth, body });
    if (body.messages.length > 5000) {
      return c.json(
        { error: { code: 'PAYLOAD_TOO_LARGE', message: 'at most 5000', details: [] } },
        413,
      );
    }
    const results = body.messages.map((m) => {
      const v = validateMessage(m);
      const cmid = (m as { customerMessageId?: string }).customerMessageId ?? `gen-${++id}`;
      return v.ok
        ? {
            id: `msg_${++id}`,
            customerMessageId: cmid,
            status: 'queued',
            ...(v.parts ? { parts: v.parts } : {}),
          }
        : { id: null, customerMessageId: cmid, status: 'rejected', error: v.error };
    });
    if (results.every((r) => r.status === 'rejected')) {
      const details = results.flatMap((r, i) =>
        (r.error?.details ?? []).map((d) => ({ ...d, path: `messages[${i}].${d.path}` })),
      );
      return c.json(
        { error: { code: 'VALIDATION_ERROR', message: 'no valid message', details } },
        400,
      );
    }
    return c.json({ messages: results }, 202);
  });
  const s = await listen(app);
  servers.push(s);
  return { url: s.url, requests };
}

function io(env: Record<string, string | undefined> = {}) {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = '';
  let err = '';
  stdout.on('data', (d) => {
    out += String(d);
  });
  stderr.on('data', (d) => {
    err += String(d);
  });
  return { io: { stdout, stderr, env }, out: () => out, err: () => err };
}

const TO = '+380501234567';
const good = (i: number) => ({
  from: 'Acme',
  to: TO,
  type: 'sms',
  text: `Hello ${i}`,
  customerMessageId: `c-${i}`,
});

describe('switchboard send', () => {
  it('sends one message from flags', async () => {
    const sb = await switchboard();
    const t = io();
    const code = await runSend(
      ['--url', sb.url, '--to', TO, '--from', 'Acme', '--text', 'hi'],
      t.io,
    );
    expect(code).toBe(0);
    expect(sb.requests[0]?.body).toEqual({
      messages: [{ type: 'sms', from: 'Acme', to: TO, text: 'hi' }],
    });
    expect(t.out()).toContain('Sent 1 message to');
    expect(t.out()).toContain('1 accepted, 0 rejected');
    expect(t.out()).toMatch(/id msg_\d+, 1 SMS part/);
  });

  it('uses PORT for the default url and API_TOKEN as bearer', async () => {
    const sb = await switchboard({ token: 'tok' });
    const port = new URL(sb.url).port;
    const t = io({ PORT: port, API_TOKEN: 'tok,old' });
    // localhost may resolve to ::1 first; the server listens on 127.0.0.1, so say so
    const code = await runSend(
      ['--url', `http://127.0.0.1:${port}`, '--to', TO, '--from', 'Acme', '--text', 'x'],
      t.io,
    );
    expect(code).toBe(0);
    expect(sb.requests[0]?.auth).toBe('Bearer tok');
  });

  it('a refused token is a clear failure', async () => {
    const sb = await switchboard({ token: 'right' });
    const t = io();
    const code = await runSend(
      ['--url', sb.url, '--token', 'wrong', '--to', TO, '--from', 'A', '--text', 'x'],
      t.io,
    );
    expect(code).toBe(1);
    expect(t.err()).toContain('refused the token');
  });

  it('sends a large JSON file in requests of at most 5000, with a progress bar and a summary', async () => {
    const sb = await switchboard();
    const messages = Array.from({ length: 12_000 }, (_, i) => good(i));
    messages[3] = { ...good(3), to: '0501234567' };
    messages[7000] = { ...good(7000), from: 'Acme Shop Ltd' };
    const file = join(dir, 'big.json');
    await writeFile(file, JSON.stringify({ messages }));
    const t = io();
    const code = await runSend(['--url', sb.url, '--file', file, '--progress'], t.io);
    expect(code).toBe(2);
    expect(sb.requests.map((r) => r.count)).toEqual([5000, 5000, 2000]);
    expect(t.err()).toContain('12000/12000');
    expect(t.out()).toContain('Sent 12000 messages');
    expect(t.out()).toContain('11998 accepted, 2 rejected');
    expect(t.out()).toContain(`#4 0501234567: INVALID_RECIPIENT`);
    expect(t.out()).toContain('#7001 +380501234567: INVALID_SENDER');
  });

  it('lists only the first rejections', async () => {
    const sb = await switchboard();
    const messages = [
      good(0),
      ...Array.from({ length: 30 }, (_, i) => ({ ...good(i + 1), to: 'x' })),
    ];
    const file = join(dir, 'bad.json');
    await writeFile(file, JSON.stringify(messages));
    const t = io();
    expect(await runSend(['--url', sb.url, '--file', file], t.io)).toBe(2);
    expect(t.out()).toContain('Rejected (first 10 of 30):');
    expect(t.out().match(/INVALID_RECIPIENT/g)).toHaveLength(10);
    expect(t.err()).not.toContain('messages |'); // no bar for a small file off a terminal
  });

  it('maps a 400 for a request with no valid message onto each message', async () => {
    const sb = await switchboard();
    const file = join(dir, 'allbad.json');
    await writeFile(
      file,
      JSON.stringify([
        { ...good(0), to: '1' },
        { ...good(1), text: '' },
      ]),
    );
    const t = io();
    expect(await runSend(['--url', sb.url, '--file', file, '--json'], t.io)).toBe(2);
    const out = JSON.parse(t.out()) as {
      queued: number;
      rejected: number;
      results: Array<{ error: { code: string; message: string } }>;
    };
    expect(out.queued).toBe(0);
    expect(out.rejected).toBe(2);
    expect(out.results[0]?.error.code).toBe('INVALID_RECIPIENT');
    expect(out.results[1]?.error.message).toMatch(/^text: /);
  });

  it('reads CSV with flag defaults, dotted headers and JSON cells', async () => {
    const sb = await switchboard();
    const file = join(dir, 'list.csv');
    await writeFile(
      file,
      [
        'to,text,type,ttl,messageData.templateId,messageData.templateLang,messageData.templateParams',
        `${TO},Hello "one",,60,,,`,
        `${TO},,viber_otp,,otp_1,uk,"{""pin"":""1234""}"`,
      ].join('\n'),
    );
    const t = io();
    expect(await runSend(['--url', sb.url, '--file', file, '--from', 'Acme'], t.io)).toBe(0);
    expect(sb.requests[0]?.body.messages).toEqual([
      { type: 'sms', from: 'Acme', to: TO, text: 'Hello "one"', ttl: 60 },
      {
        type: 'viber_otp',
        from: 'Acme',
        to: TO,
        messageData: { templateId: 'otp_1', templateLang: 'uk', templateParams: { pin: '1234' } },
      },
    ]);
  });

  it('parses JSON Lines and sniffs a file without an extension', () => {
    expect(
      parseFile('x.jsonl', `${JSON.stringify(good(1))}\n\n${JSON.stringify(good(2))}\n`),
    ).toHaveLength(2);
    expect(parseFile('x', JSON.stringify([good(1)]))).toHaveLength(1);
    expect(parseFile('x', 'to,text\n+380501234567,hi\n')).toEqual([{ to: TO, text: 'hi' }]);
    expect(() => parseFile('x.json', '{nope')).toThrow(/not valid JSON/);
  });

  it('fails clearly when Switchboard is not running', async () => {
    const gone = await listen(new Hono());
    await gone.close();
    const t = io();
    expect(await runSend(['--url', gone.url, '--to', TO, '--from', 'A', '--text', 'x'], t.io)).toBe(
      1,
    );
    expect(t.err()).toContain('cannot reach Switchboard');
  });

  it.each([
    [[], /give --to/],
    [['--to', TO, '--batch-size', '6000'], /--batch-size/],
    [['--to', TO, '--message-data', '{'], /--message-data is not valid JSON/],
    [['--bogus'], /Unknown option/],
    [['--file', '/nonexistent/x.json'], /cannot read/],
  ])('refuses bad usage %j', async (argv, message) => {
    const t = io();
    expect(await runSend(argv, t.io)).toBe(1);
    expect(t.err()).toMatch(message);
  });

  it('prints help', async () => {
    const t = io();
    expect(await runSend(['--help'], t.io)).toBe(0);
    expect(t.out()).toContain('switchboard send --file');
  });
});

describe('switchboard send --direct', () => {
  async function provider() {
    const lists: Array<{ auth: string | undefined; key: string | undefined; count: number }> = [];
    const app = new Hono();
    app.post('/bat/messagelist', async (c) => {
      const body = (await c.req.json()) as {
        messages: Array<{ customerMessageId?: string; to: string }>;
      };
      lists.push({
        auth: c.req.header('authorization'),
        key: c.req.header('x-authorization-key'),
        count: body.messages.length,
      });
      return c.json({
        messagelistId: lists.length,
        messages: body.messages.map((m, i) => ({
          messageId: `p-${i}`,
          status: i === 1 ? 'rejected' : 'accepted',
          parts: 1,
          customerMessageId: m.customerMessageId,
          to: m.to,
          ...(i === 1 ? { error: 'INVALID_SENDER' } : {}),
        })),
      });
    });
    const s = await listen(app);
    servers.push(s);
    return { url: s.url, lists };
  }

  it('validates locally, then sends to the provider with the env credentials', async () => {
    const p = await provider();
    const file = join(dir, 'direct.json');
    await writeFile(file, JSON.stringify([good(0), good(1), { ...good(2), to: 'nope' }, good(3)]));
    const t = io({ PROVIDER_BASE_URL: p.url, PROVIDER_API_KEY: 'key-1' });
    expect(await runSend(['--direct', '--file', file, '--json'], t.io)).toBe(2);
    expect(p.lists).toEqual([{ auth: undefined, key: 'key-1', count: 3 }]);
    const out = JSON.parse(t.out()) as {
      results: Array<{ index: number; status: string; id?: string; error?: { code: string } }>;
    };
    expect(out.results.map((r) => [r.index, r.status, r.error?.code])).toEqual([
      [0, 'queued', undefined],
      [1, 'rejected', 'INVALID_SENDER'],
      [2, 'rejected', 'INVALID_RECIPIENT'],
      [3, 'queued', undefined],
    ]);
  });

  it('uses login and password when given, and needs a base url', async () => {
    const p = await provider();
    const t = io({ PROVIDER_BASE_URL: p.url, PROVIDER_LOGIN: 'acme', PROVIDER_PASSWORD: 'pw' });
    expect(await runSend(['--direct', '--to', TO, '--from', 'Acme', '--text', 'x'], t.io)).toBe(0);
    expect(p.lists[0]?.auth).toBe(`Basic ${Buffer.from('acme:pw').toString('base64')}`);
    const none = io({});
    expect(await runSend(['--direct', '--to', TO, '--from', 'Acme', '--text', 'x'], none.io)).toBe(
      1,
    );
    expect(none.err()).toContain('PROVIDER_BASE_URL');
  });
});

describe('switchboard send, to a running Switchboard and its sandbox', () => {
  let db: TestDatabase;
  let server: RunningServer;
  beforeAll(async () => {
    db = await createTestDatabase('pglite');
    server = await startTestServer(db.database);
  });
  afterAll(async () => {
    await server?.stop();
    await db?.drop();
  });

  it('sends RCS with its fallback and a cascade message from flags, each to delivered', async () => {
    const t = io();
    const rcs = await runSend(
      [
        '--url',
        server.url,
        '--to',
        TO,
        '--from',
        'Acme',
        '--type',
        'rcs',
        '--text',
        'Your order is ready',
        '--customer-message-id',
        'cli-rcs-1',
        '--message-data',
        '{"buttons":[{"text":"Track","action":{"type":"openUrl","url":"https://example.com/t"}}]}',
        '--fallback',
        '{"type":"sms","text":"Your order is ready: https://example.com/t"}',
      ],
      t.io,
    );
    expect(rcs, t.err()).toBe(0);
    const cascade = await runSend(
      [
        '--url',
        server.url,
        '--to',
        TO,
        '--from',
        'Acme',
        '--type',
        'cascade',
        '--message-type',
        'transaction',
        '--text',
        'Hi %name=1%',
        '--variables',
        '[{"id":1,"type":"name","value":"Ann"}]',
        '--customer-message-id',
        'cli-cascade-1',
      ],
      t.io,
    );
    expect(cascade, t.err()).toBe(0);
    for (const ref of ['cli-rcs-1', 'cli-cascade-1']) {
      const v = await eventually(
        async () => {
          const m = await readJson(await fetch(`${server.url}/v1/messages/${ref}`));
          return m.status === 'delivered' && m;
        },
        15_000,
        `${ref} delivered`,
      );
      expect(v.customerMessageId).toBe(ref);
    }
    // what the provider was sent: the RCS message with its one fallback as the docs write it
    const [sent] = server.sandbox!.messages.list({ customerMessageId: 'cli-rcs-1' });
    expect(sent).toMatchObject({ type: 'rcs', text: 'Your order is ready' });
  });
});
