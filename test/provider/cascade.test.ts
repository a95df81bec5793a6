import { Hono } from 'hono';
import { afterEach, describe, expect, it } from 'vitest';
import { AppError } from '../../src/errors.ts';
import {
  CASCADE_PATHS,
  createCascadeClient,
  parseCascadeResponse,
  placeholders,
  validateCascade,
} from '../../src/provider/cascade.ts';
import { type LocalServer, listen } from './helpers.ts';

const servers: LocalServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

/** Records every request and answers like the seed's cascade and bot endpoints. */
async function provider() {
  const seen: Array<{ path: string; headers: Record<string, string>; body: unknown }> = [];
  const app = new Hono();
  app.post('*', async (c) => {
    const body = await c.req.json();
    seen.push({
      path: decodeURIComponent(new URL(c.req.url).pathname),
      headers: c.req.header(),
      body,
    });
    if (c.req.path.startsWith('/api/CascadeMessage')) {
      return c.json({ messageId: '6f1c2b1e-8d4a-4a43-9b5e-0a0d2f1c9e11', trackinId: 't-1' });
    }
    return c.json({ ok: true });
  });
  const s = await listen(app);
  servers.push(s);
  return { url: s.url, seen };
}

const msg = {
  recipient: '+380501234567',
  text: 'Hi %name=1%, your link: %short_url=2%',
  variables: [
    { id: 1, value: 'Ann' },
    { id: 2, value: 'https://example.com/x' },
  ],
};

describe('cascade', () => {
  it.each([
    [{ apiKey: 'k1' }, 'x-authorization-key', 'k1'],
    [{ viberBotToken: 'v1' }, 'x-viber-auth-token', 'v1'],
    [{ tgBotKey: 't1' }, 'x-tg-bot-key', 't1'],
  ] as const)('sends with auth %j as header %s', async (auth, header, value) => {
    const p = await provider();
    const client = createCascadeClient({ baseUrl: p.url, auth });
    const res = await client.send([msg]);
    expect(res).toEqual([{ messageId: '6f1c2b1e-8d4a-4a43-9b5e-0a0d2f1c9e11', trackingId: 't-1' }]);
    expect(p.seen[0]?.headers[header]).toBe(value);
    expect(p.seen[0]?.path).toBe(CASCADE_PATHS.general);
    expect(p.seen[0]?.body).toEqual({ messages: [msg] });
  });

  it('uses the Telegram-prioritised endpoint on request, with variables defaulted', async () => {
    const p = await provider();
    const client = createCascadeClient({ baseUrl: p.url, auth: { apiKey: 'k' } });
    await client.send([{ recipient: '+380501234567', text: 'plain, 50% off' }], {
      endpoint: 'tg-viber',
    });
    expect(p.seen[0]?.path).toBe('/api/CascadeMessage/send_message/tg-viber/async');
    expect(p.seen[0]?.body).toEqual({
      messages: [{ recipient: '+380501234567', text: 'plain, 50% off', variables: [] }],
    });
  });

  it('checks placeholders against the variables before sending', async () => {
    const p = await provider();
    const client = createCascadeClient({ baseUrl: p.url, auth: { apiKey: 'k' } });
    const bad = [
      msg,
      {
        ...msg,
        text: 'Hi %name=3% %url=x% %phone=1%',
        variables: [
          { id: 1, value: 'a' },
          { id: 1, value: 'b' },
        ],
      },
    ];
    const err = await client.send(bad).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AppError);
    expect((err as AppError).details.map((d) => [d.path, d.code])).toEqual([
      ['messages[1].variables[1].id', 'DUPLICATE_VARIABLE'],
      ['messages[1].text', 'UNKNOWN_VARIABLE'],
      ['messages[1].text', 'INVALID_PLACEHOLDER'],
      ['messages[1].text', 'UNKNOWN_PLACEHOLDER'],
    ]);
    expect(p.seen).toHaveLength(0);
  });

  it('refuses a bad recipient with the seed code and an empty list', () => {
    expect(() => validateCascade([{ ...msg, recipient: '0501234567' }])).toThrow(
      expect.objectContaining({ code: 'INVALID_RECIPIENT' }),
    );
    expect(() => validateCascade([])).toThrow(
      expect.objectContaining({ code: 'VALIDATION_ERROR' }),
    );
  });

  it('finds placeholders and parses every response spelling', () => {
    expect(placeholders('a %name=1% b %short_url=22% 100% c')).toEqual([
      { kind: 'name', id: '1', raw: '%name=1%' },
      { kind: 'short_url', id: '22', raw: '%short_url=22%' },
    ]);
    expect(parseCascadeResponse([{ messageId: 'a', trackinId: 1 }])).toEqual([
      { messageId: 'a', trackingId: '1' },
    ]);
    expect(parseCascadeResponse({ messages: [{ messageId: 'b' }] })).toEqual([{ messageId: 'b' }]);
    expect(parseCascadeResponse({ ok: true })).toBeUndefined();
  });

  it('a 200 without messageId is an invalid_response', async () => {
    const app = new Hono();
    app.post('*', (c) => c.json({ ok: true }));
    const s = await listen(app);
    servers.push(s);
    const client = createCascadeClient({ baseUrl: s.url, auth: { apiKey: 'k' } });
    await expect(client.send([msg])).rejects.toMatchObject({ kind: 'invalid_response' });
  });
});
