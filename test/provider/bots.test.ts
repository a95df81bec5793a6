import { Hono } from 'hono';
import { afterEach, describe, expect, it } from 'vitest';
import { type BotsClient, createBotsClient } from '../../src/provider/bots.ts';
import { type LocalServer, listen } from './helpers.ts';

const servers: LocalServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

/** Records every request and answers like the seed's bot endpoints. */
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

describe('bot users', () => {
  let bots: BotsClient;
  it('uploads a Telegram user with the token in the path, and no other auth', async () => {
    const p = await provider();
    bots = createBotsClient({ baseUrl: p.url });
    const user = { id: 42, userName: 'ann', firstName: 'Ann', languageCode: 'uk' };
    expect(await bots.uploadTelegramUser('123456:AA-bb_cc', user)).toEqual({ ok: true });
    expect(p.seen[0]?.path).toBe('/api/tg_bot/123456:AA-bb_cc');
    expect(p.seen[0]?.body).toEqual(user);
    expect(p.seen[0]?.headers.authorization).toBeUndefined();
  });

  it('uploads a Viber user; a token with a slash stays one segment', async () => {
    const p = await provider();
    bots = createBotsClient({ baseUrl: p.url });
    const user = { id: 'v-1', name: 'Ann', avatar: 'https://cdn.example.com/a.png' };
    await bots.uploadViberUser('tok/en', user);
    expect(p.seen[0]?.path).toBe('/api/viber_bot/tok/en'); // decoded by the test; %2F on the wire
    expect(p.seen[0]?.body).toEqual(user);
  });

  it('validates users and tokens before sending', async () => {
    const p = await provider();
    bots = createBotsClient({ baseUrl: p.url });
    await expect(
      bots.uploadTelegramUser('t', { id: 1.5, userName: '' } as never),
    ).rejects.toMatchObject({
      code: 'VALIDATION_ERROR',
      details: [
        expect.objectContaining({ path: 'id' }),
        expect.objectContaining({ path: 'userName' }),
      ],
    });
    await expect(bots.uploadViberUser('', { id: 'a', name: 'b' })).rejects.toThrow(/token/);
    await expect(
      bots.uploadViberUser('t', { id: 'a', name: 'b', avatar: 'not a url' }),
    ).rejects.toMatchObject({
      details: [expect.objectContaining({ path: 'avatar' })],
    });
    expect(p.seen).toHaveLength(0);
  });
});
