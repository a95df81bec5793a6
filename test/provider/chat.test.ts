import { Hono } from 'hono';
import { afterEach, describe, expect, it } from 'vitest';
import { AppError } from '../../src/errors.ts';
import {
  type ChatAuth,
  checkOperatorExpiry,
  createChatClient,
  MAX_OPERATOR_TOKEN_MS,
  parseTokenResponse,
} from '../../src/provider/chat.ts';
import { type LocalServer, listen } from './helpers.ts';

const servers: LocalServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

const JWT = (n: number) => `eyJhbGciOiJIUzI1NiJ9.eyJuIjo${n}fQ.sig${n}`;

/** A chat operator API after seed 4 and 5, with revocable company tokens. */
async function chatServer() {
  const valid = new Set<string>();
  const seen: Array<{
    method: string;
    path: string;
    headers: Record<string, string>;
    body: unknown;
  }> = [];
  let issued = 0;
  const operators = [{ id: 1, name: 'Ann', status: 0, organization: { id: 10, name: 'Acme' } }];
  let organizations: () => unknown = () => [{ id: 10, name: 'Acme' }];
  const app = new Hono();
  app.use('*', async (c, next) => {
    const text = c.req.method === 'POST' ? await c.req.text() : '';
    seen.push({
      method: c.req.method,
      path: c.req.path,
      headers: c.req.header(),
      body: text ? JSON.parse(text) : undefined,
    });
    await next();
  });
  const companyAuth = (h: Record<string, string>) => {
    const token = h.authorization?.replace(/^Bearer /, '') ?? h['x-authorization-key'];
    return token !== undefined && valid.has(token);
  };
  app.post('/api/company/get-token', async (c) => {
    const { login, password } = await c.req.json();
    if (login !== 'acme' || password !== 'secret') return c.json({ error: 'bad credentials' }, 401);
    const token = JWT(++issued);
    valid.add(token);
    return c.json(token); // "JSON string holding a JWT"
  });
  app.post('/api/operator/get-token', async (c) => {
    if (!companyAuth(c.req.header())) return c.body(null, 401);
    const { id } = await c.req.json();
    return id === 99 ? c.body(null, 403) : c.json(`op.${id}.token`);
  });
  app.post('/api/operator/validate-token', async (c) => {
    if (!companyAuth(c.req.header())) return c.body(null, 401);
    const { token } = await c.req.json();
    return c.json(
      token === 'op.1.token'
        ? {
            isValid: true,
            operatorId: 1,
            clientId: 5,
            expiresAt: '2030-01-01T00:00:00Z',
            error: null,
          }
        : {
            isValid: false,
            operatorId: null,
            clientId: null,
            expiresAt: null,
            error: 'invalid token',
          },
    );
  });
  app.get('/api/operator', (c) => {
    if (!c.req.header('authorization')?.startsWith('Bearer ') || !companyAuth(c.req.header()))
      return c.body(null, 401);
    if (c.req.header('accept') !== 'text/plain') return c.body(null, 406);
    const org = Number(c.req.query('organizationId'));
    return c.text(JSON.stringify(operators.filter((o) => o.organization.id === org)));
  });
  app.post('/api/operator/synchronize', async (c) => {
    if (!companyAuth(c.req.header())) return c.body(null, 401);
    const list = (await c.req.json()) as Array<{ organizationId: number; name: string }>;
    return c.json(list.map((o, i) => ({ id: 100 + i, name: o.name, status: 0 })));
  });
  app.post('/api/operator/status', async (c) => {
    if (!companyAuth(c.req.header())) return c.body(null, 401);
    return c.body(null, 200);
  });
  app.get('/api/company/organization', (c) => {
    if (!companyAuth(c.req.header())) return c.body(null, 401);
    // organizations.md: `[{id, name}]`, asked for with Accept: text/plain
    if (c.req.header('accept') !== 'text/plain') return c.body(null, 406);
    return c.text(JSON.stringify(organizations()));
  });
  const s = await listen(app);
  servers.push(s);
  return {
    url: s.url,
    seen,
    revokeAll: () => valid.clear(),
    issued: () => issued,
    answerOrganizations: (body: unknown) => {
      organizations = () => body;
    },
  };
}

const NOW = Date.parse('2025-06-01T12:00:00Z');
const clock = { now: () => NOW };
const creds: ChatAuth = { login: 'acme', password: 'secret' };

describe('chat operator client', () => {
  it('logs in once for a company token and uses it as Bearer', async () => {
    const s = await chatServer();
    const chat = createChatClient({ baseUrl: s.url, auth: creds, clock });
    expect(await chat.companyToken()).toBe(JWT(1));
    await chat.synchronizeOperators([{ organizationId: 10, name: 'Bob' }]);
    await chat.setOperatorStatus(100, 1);
    expect(s.issued()).toBe(1);
    const login = s.seen[0];
    expect(login).toMatchObject({
      path: '/api/company/get-token',
      body: { login: 'acme', password: 'secret' },
    });
    expect(login?.headers.authorization).toBeUndefined();
    expect(s.seen[1]?.headers.authorization).toBe(`Bearer ${JWT(1)}`);
    expect(s.seen[2]).toMatchObject({ path: '/api/operator/status', body: { id: 100, status: 1 } });
  });

  it('can send the company token as X-Authorization-Key instead', async () => {
    const s = await chatServer();
    const chat = createChatClient({
      baseUrl: s.url,
      auth: creds,
      clock,
      tokenHeader: 'x-authorization-key',
    });
    expect(await chat.getOrganization()).toEqual([{ id: 10, name: 'Acme' }]);
    expect(s.seen[1]?.headers['x-authorization-key']).toBe(JWT(1));
    expect(s.seen[1]?.headers.authorization).toBeUndefined();
  });

  it('gets an operator token with expiresAt at most 24 hours ahead', async () => {
    const s = await chatServer();
    const chat = createChatClient({ baseUrl: s.url, auth: creds, clock });
    const at = new Date(NOW + MAX_OPERATOR_TOKEN_MS);
    expect(await chat.getOperatorToken(7, at)).toBe('op.7.token');
    expect(s.seen.at(-1)?.body).toEqual({ id: 7, expiresAt: '2025-06-02T12:00:00.000Z' });
  });

  it.each([
    ['25 hours ahead', new Date(NOW + MAX_OPERATOR_TOKEN_MS + 1)],
    ['in the past', '2025-06-01T11:59:59Z'],
    ['now', new Date(NOW)],
    ['not a date', 'tomorrow'],
    ['without a zone', '2025-06-01T13:00:00'],
  ])('refuses an expiry %s before sending anything', async (_label, at) => {
    const s = await chatServer();
    const chat = createChatClient({ baseUrl: s.url, auth: creds, clock });
    const err = await chat.getOperatorToken(7, at).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AppError);
    expect((err as AppError).details[0]?.path).toBe('expiresAt');
    expect(s.seen).toHaveLength(0);
  });

  it('validates tokens', async () => {
    const s = await chatServer();
    const chat = createChatClient({ baseUrl: s.url, auth: creds, clock });
    expect(await chat.validateToken('op.1.token')).toMatchObject({
      isValid: true,
      operatorId: 1,
      clientId: 5,
    });
    expect(await chat.validateToken('junk')).toMatchObject({
      isValid: false,
      error: 'invalid token',
    });
  });

  it('lists operators with Bearer and Accept: text/plain', async () => {
    const s = await chatServer();
    const chat = createChatClient({
      baseUrl: s.url,
      auth: creds,
      clock,
      tokenHeader: 'x-authorization-key',
    });
    expect(await chat.listOperators(10)).toEqual([
      { id: 1, name: 'Ann', status: 0, organization: { id: 10, name: 'Acme' } },
    ]);
    const list = s.seen.find((r) => r.path === '/api/operator');
    expect(list?.headers.accept).toBe('text/plain');
    expect(list?.headers.authorization).toBe(`Bearer ${JWT(1)}`);
  });

  it('lists organizations as organizations.md shows them, asking with Accept: text/plain', async () => {
    const s = await chatServer();
    const chat = createChatClient({ baseUrl: s.url, auth: creds, clock });
    expect(await chat.getOrganization()).toEqual([{ id: 10, name: 'Acme' }]);
    const asked = s.seen.find((r) => r.path === '/api/company/organization');
    expect(asked?.headers.accept).toBe('text/plain');
    expect(asked?.headers.authorization).toBe(`Bearer ${JWT(1)}`);
    // anything but a list of {id, name} is not read as one
    s.answerOrganizations({ id: 10 });
    await expect(chat.getOrganization()).rejects.toMatchObject({
      name: 'ProviderError',
      kind: 'invalid_response',
    });
  });

  it('synchronizes operators, created with status 0', async () => {
    const s = await chatServer();
    const chat = createChatClient({ baseUrl: s.url, auth: creds, clock });
    expect(
      await chat.synchronizeOperators([
        { organizationId: 10, name: 'Bob' },
        { organizationId: 10, name: 'Eve' },
      ]),
    ).toEqual([
      { id: 100, name: 'Bob', status: 0 },
      { id: 101, name: 'Eve', status: 0 },
    ]);
    await expect(
      chat.synchronizeOperators([{ organizationId: 10, name: ' ' }]),
    ).rejects.toMatchObject({
      code: 'VALIDATION_ERROR',
      details: [expect.objectContaining({ path: '[0].name' })],
    });
    await expect(chat.setOperatorStatus(1, 3 as 0)).rejects.toMatchObject({
      code: 'VALIDATION_ERROR',
    });
  });

  it('logs in again once when the company token stops working', async () => {
    const s = await chatServer();
    const chat = createChatClient({ baseUrl: s.url, auth: creds, clock });
    await chat.getOrganization();
    s.revokeAll();
    expect(await chat.getOrganization()).toEqual([{ id: 10, name: 'Acme' }]);
    expect(s.issued()).toBe(2);
  });

  it('401 and 403 are typed errors', async () => {
    const s = await chatServer();
    const wrong = createChatClient({
      baseUrl: s.url,
      auth: { login: 'acme', password: 'nope' },
      clock,
    });
    await expect(wrong.companyToken()).rejects.toMatchObject({ kind: 'unauthorized', status: 401 });
    const fixed = createChatClient({ baseUrl: s.url, auth: { companyToken: 'revoked' }, clock });
    await expect(fixed.listOperators(10)).rejects.toMatchObject({
      kind: 'unauthorized',
      status: 401,
    });
    const chat = createChatClient({ baseUrl: s.url, auth: creds, clock });
    await expect(chat.getOperatorToken(99, new Date(NOW + 1000))).rejects.toMatchObject({
      name: 'ProviderError',
      kind: 'forbidden',
      status: 403,
    });
  });

  it('reads tokens in each spelling and checks expiry bounds', () => {
    expect(parseTokenResponse('a.b.c', '"a.b.c"')).toBe('a.b.c');
    expect(parseTokenResponse({ token: 't' }, '')).toBe('t');
    expect(parseTokenResponse(undefined, 'aaa.bbb.ccc\n')).toBe('aaa.bbb.ccc');
    expect(parseTokenResponse(undefined, '<html>')).toBeUndefined();
    expect(checkOperatorExpiry('2025-06-01T14:00:00+01:00', NOW)).toBe('2025-06-01T13:00:00.000Z');
    expect(() => checkOperatorExpiry('2025-06-01T13:00:00+01:00', NOW)).toThrow(/future/);
  });
});
