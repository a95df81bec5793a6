/**
 * Logs never carry tokens, passwords or message texts, and phone numbers only masked (last
 * four digits) unless LOG_PII=true. Checked on the logger itself, and on everything the real
 * server logs at trace level while it takes messages, sends them through the sandbox, hears
 * the delivery callbacks back, takes a Viber message and erases a person.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { createLogger, maskPhone, rewriteLogLine, scrubLogLine } from '../../src/logger.ts';
import { type RunningServer, startServer } from '../../src/server.ts';
import { phone, readJson, uniq } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';
import { captureLog } from '../support/log-capture.ts';
import { eventually, FAST_TIMINGS } from '../support/server.ts';

const digits = (p: string) => p.slice(1);

describe('the logger', () => {
  it('masks phone numbers to their last four digits, wherever they are in the line', () => {
    const out = captureLog();
    const log = createLogger('info', out.stream);
    const to = '+380501234567';
    log.child({ phone: to }).info(
      {
        to,
        from: '380671112233',
        path: '/v1/subjects/%2B380509876543',
        nested: [{ recipient: to }],
        err: new Error(`duplicate key (to)=(${to})`),
      },
      `sent to ${to}`,
    );
    const line = out.text();
    expect(line).not.toMatch(/380501234567|380671112233|380509876543/);
    expect(line).toContain('+********4567');
    expect(line).toContain('********2233');
    expect(line).toContain('%2B********6543');
    expect(JSON.parse(line)).toMatchObject({
      phone: '+********4567',
      to: '+********4567',
      nested: [{ recipient: '+********4567' }],
      err: { message: 'duplicate key (to)=(+********4567)' },
      msg: 'sent to +********4567',
    });
  });

  it('removes secrets and message texts at any depth, in objects, bindings and strings', () => {
    const out = captureLog();
    const log = createLogger('info', out.stream).child({ apiToken: 'tok-in-binding' });
    log.info(
      {
        text: 'Your code is 1234, tell no one',
        headers: { authorization: 'Bearer tok-header-123', 'x-callback-token': 'cb-tok-456' },
        provider: { login: 'acme', password: 'hunter2hunter2', apiKey: 'key-789' },
        message: { payload: { text: 'words' }, messageData: { templateParams: { pin: '9911' } } },
        raw: { body: '{"to":"+380501234567","text":"hello there"}' },
        webhookSecret: 'whsec-abc',
        url: 'http://x/hooks/delivery?token=cb-tok-456&x=1',
        vars: { name: 'Ann' },
      },
      'calling with Authorization: Bearer tok-message-999',
    );
    const line = out.text();
    for (const secret of [
      'tok-in-binding',
      'tok-header-123',
      'cb-tok-456',
      'hunter2hunter2',
      'key-789',
      'Your code is',
      'words',
      '9911',
      'hello there',
      'whsec-abc',
      'tok-message-999',
      'Ann',
    ]) {
      expect(line, secret).not.toContain(secret);
    }
    const parsed = JSON.parse(line);
    expect(parsed.text).toBe('[redacted]');
    expect(parsed.provider).toEqual({
      login: 'acme',
      password: '[redacted]',
      apiKey: '[redacted]',
    });
    expect(parsed.url).toBe('http://x/hooks/delivery?token=[redacted]&x=1');
  });

  it('cuts the values out of a failed query, which a database error carries', () => {
    const out = captureLog();
    const log = createLogger('info', out.stream);
    const err = Object.assign(
      new Error(
        'Failed query: insert into "messages" ("payload") values ($1)\nparams: {"text":"secret words"}',
      ),
      {
        query: 'insert into "messages" ("payload") values ($1)',
        params: ['{"text":"secret words"}'],
      },
    );
    log.error({ err }, 'unhandled error');
    const line = out.text();
    expect(line).not.toContain('secret words');
    expect(JSON.parse(line).err).toMatchObject({
      message: 'Failed query: insert into "messages" ("payload") values ($1)\nparams: [redacted]',
      query: 'insert into "messages" ("payload") values ($1)',
      params: '[redacted]',
    });
  });

  it("cuts them out of the error's message alone too, as the workers' warnings log it", () => {
    const out = captureLog();
    const log = createLogger('info', out.stream);
    const message =
      'Failed query: insert into "messages" ("text") values ($1)\nparams: Your code is 4821';
    log.warn({ err: { message }, worker: 'dispatcher' }, 'worker step failed');
    const line = out.text();
    expect(line).not.toContain('Your code is 4821');
    expect(JSON.parse(line).err.message).toBe(
      'Failed query: insert into "messages" ("text") values ($1)\nparams: [redacted]',
    );
  });

  it('keeps numbers whole with LOG_PII, and still removes texts and secrets', () => {
    const out = captureLog();
    const log = createLogger({ level: 'info', logPii: true }, out.stream);
    log.info({ to: '+380501234567', text: 'hi there', token: 'abc' }, 'to +380501234567');
    const parsed = JSON.parse(out.text());
    expect(parsed).toMatchObject({
      to: '+380501234567',
      text: '[redacted]',
      token: '[redacted]',
      msg: 'to +380501234567',
    });
  });

  it('writes a line unparsed only when the full scrub would not change it', () => {
    // keys and values drawn from what the scrubbers look for, and from what they leave alone
    const key = fc.constantFrom(
      'msg',
      'path',
      'status',
      'apiToken',
      'x-callback-token',
      'text',
      'body',
      'to',
      'from',
      'phone',
      'note',
      'authorization',
      'params',
      'vars',
      'id',
      'url',
    );
    const value = fc.oneof(
      fc.constantFrom(
        '+380501234567',
        '380501234567',
        '%2B380501234567',
        'Bearer abcdefgh12345678',
        'https://x.test/cb?token=s3cret&a=1',
        'Failed query: select 1\nparams: +380501234567',
        // drizzle's parameters with nothing else that looks sensitive: message words, a code
        'Failed query: insert into x values ($1, $2)\nparams: Your code is 4821,42',
        // a credential at the start of a line inside a string
        'the request headers:\nBearer abcdefgh12345678',
        '/v1/messages/order-42',
        'delivered',
        '12345',
        'Basic dXNlcjpwYXNz',
      ),
      fc.string(),
      fc.integer(),
    );
    const tree = fc.letrec((tie) => ({
      node: fc.oneof(
        { depthSize: 'small' },
        value,
        fc.array(tie('node'), { maxLength: 3 }),
        fc.dictionary(key, tie('node'), { maxKeys: 4 }),
      ),
    })).node;
    fc.assert(
      fc.property(fc.dictionary(key, tree, { maxKeys: 6 }), fc.boolean(), (obj, logPii) => {
        const line = `${JSON.stringify({ level: 30, ...obj })}\n`;
        const out = scrubLogLine(line, logPii);
        expect(JSON.parse(out)).toEqual(JSON.parse(rewriteLogLine(line, logPii)));
      }),
      { numRuns: 5000 },
    );
  });

  it('leaves what is not a phone number alone', () => {
    expect(maskPhone('at 2026-11-21T10:15:00+02:00, id 1234567890123, +12')).toBe(
      'at 2026-11-21T10:15:00+02:00, id 1234567890123, +12',
    );
  });
});

describeEachEngine('what the running server logs', (ctx) => {
  const API_TOKEN = 'api-token-for-log-test-0001';
  const CALLBACK_TOKEN = 'callback-token-for-log-test-0002';
  const TEXT = `Distinctive message words ${uniq('t')}`;
  const VIBER_TEXT = `Distinctive viber words ${uniq('v')}`;
  const to = phone();
  const viberFrom = phone();
  const out = captureLog();
  let server: RunningServer;
  const auth = { authorization: `Bearer ${API_TOKEN}`, 'content-type': 'application/json' };

  beforeAll(async () => {
    const config = loadConfig({
      PORT: '0',
      HOST: '127.0.0.1',
      API_TOKEN,
      CALLBACK_TOKEN,
      LOG_LEVEL: 'trace',
    });
    server = await startServer(config, createLogger('trace', out.stream), {
      database: ctx.database(),
      sandbox: { timings: FAST_TIMINGS },
    });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('carries no number, text or token through a send, its callbacks, a Viber message and an erasure', async () => {
    const cmid = uniq('log');
    const sent = await fetch(`${server.url}/v1/messages`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({
        messages: [{ from: 'Acme', to, type: 'sms', text: TEXT, customerMessageId: cmid }],
      }),
    });
    expect(sent.status).toBe(202);
    // the sandbox calls /hooks/delivery back over HTTP until the message is delivered
    await eventually(async () => {
      const res = await fetch(`${server.url}/v1/messages/${cmid}`, { headers: auth });
      return (await readJson(res)).status === 'delivered';
    });
    // a callback of our own, carrying the token in the query string and in a header
    const hook = await fetch(`${server.url}/hooks/delivery?token=${CALLBACK_TOKEN}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-callback-token': CALLBACK_TOKEN },
      body: JSON.stringify({ customerMessageId: cmid, status: 'read', to, text: TEXT }),
    });
    expect(hook.status).toBe(200);
    const refused = await fetch(`${server.url}/hooks/delivery?token=wrong-${CALLBACK_TOKEN}`, {
      method: 'POST',
      body: JSON.stringify({ customerMessageId: cmid, status: 'read' }),
    });
    expect(refused.status).toBe(401);
    const viber = await fetch(`${server.url}/hooks/viber`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${CALLBACK_TOKEN}` },
      body: JSON.stringify({ messageId: uniq('vm'), from: viberFrom, text: VIBER_TEXT }),
    });
    expect(viber.status).toBe(200);
    const erased = await fetch(`${server.url}/v1/subjects/${encodeURIComponent(to)}`, {
      method: 'DELETE',
      headers: auth,
    });
    expect(erased.status).toBe(200);
    const unauthorized = await fetch(`${server.url}/v1/messages/${cmid}`, {
      headers: { authorization: 'Bearer not-the-token-at-all' },
    });
    expect(unauthorized.status).toBe(401);

    const logged = out.text();
    // the log is real: requests, the dispatcher and the erasure all wrote to it
    expect(logged).toContain('"path":"/v1/messages"');
    expect(logged).toContain('"path":"/hooks/delivery"');
    expect(logged).toContain('subject erased');
    expect(logged).toContain(`+${'*'.repeat(to.length - 5)}${to.slice(-4)}`);
    for (const secret of [
      digits(to),
      digits(viberFrom),
      TEXT,
      VIBER_TEXT,
      API_TOKEN,
      CALLBACK_TOKEN,
      'not-the-token-at-all',
    ]) {
      expect(logged, secret).not.toContain(secret);
    }
  });

  it('warns at start when API_TOKEN is not set', async () => {
    const out = captureLog();
    const server = await startServer(
      loadConfig({ PORT: '0', HOST: '127.0.0.1' }),
      createLogger('info', out.stream),
      { database: ctx.database() },
    );
    await server.stop();
    const warning = out.lines.map((l) => JSON.parse(l)).find((l) => /API_TOKEN/.test(l.msg));
    expect(warning).toMatchObject({ level: 40 });
  });
});
