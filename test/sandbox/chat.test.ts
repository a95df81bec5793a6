import { describe, expect, test } from 'vitest';
import { createSandbox } from '../../src/sandbox/app.ts';
import { createManualClock } from '../../src/sandbox/clock.ts';
import { json } from './helpers.ts';

const T0 = Date.parse('2030-01-01T00:00:00.000Z');

function make() {
  const clock = createManualClock(T0);
  const sandbox = createSandbox({ dialect: 'compact', clock });
  const call = (
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ) =>
    sandbox.app.request(`/chat${path}`, {
      method,
      headers: { 'content-type': 'application/json', ...headers },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
  const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });
  async function companyToken(): Promise<string> {
    const res = await call('POST', '/api/company/get-token', {
      login: 'sandbox',
      password: 'sandbox',
    });
    expect(res.status).toBe(200);
    return json(res);
  }
  async function operator(token: string, name = 'Olga', organizationId = 1): Promise<number> {
    const res = await call(
      'POST',
      '/api/operator/synchronize',
      [{ organizationId, name }],
      bearer(token),
    );
    return (await json(res))[0].id;
  }
  return { clock, sandbox, call, bearer, companyToken, operator };
}

describe('company token', () => {
  test('login and password give a JSON string holding a JWT', async () => {
    const { companyToken } = make();
    const token = await companyToken();
    expect(token.split('.')).toHaveLength(3);
    const payload = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString());
    expect(payload).toMatchObject({ typ: 'company', clientId: expect.any(Number) });
  });

  test('401 for a wrong password; 400 for a missing field', async () => {
    const { call } = make();
    const wrong = await call('POST', '/api/company/get-token', { login: 'sandbox', password: 'x' });
    expect(wrong.status).toBe(401);
    expect(await json(wrong)).toMatchObject({ error: 'UNAUTHORIZED', status: 401 });
    expect((await call('POST', '/api/company/get-token', { login: 'sandbox' })).status).toBe(400);
  });

  test('is accepted as Bearer or as X-Authorization-Key; 401 missing or bad', async () => {
    const { call, bearer, companyToken } = make();
    const token = await companyToken();
    expect((await call('GET', '/api/company/organization', undefined, bearer(token))).status).toBe(
      200,
    );
    expect(
      (await call('GET', '/api/company/organization', undefined, { 'X-Authorization-Key': token }))
        .status,
    ).toBe(200);
    expect((await call('GET', '/api/company/organization')).status).toBe(401);
    expect(
      (await call('GET', '/api/company/organization', undefined, bearer(`${token}x`))).status,
    ).toBe(401);
    expect(
      (await call('GET', '/api/company/organization', undefined, bearer('not.a.jwt'))).status,
    ).toBe(401);
  });
});

describe('operator token', () => {
  test('expiresAt at most 24 hours ahead, else 400; unknown operator 404', async () => {
    const { call, bearer, companyToken, operator } = make();
    const token = await companyToken();
    const id = await operator(token);
    const at = (ms: number) => new Date(T0 + ms).toISOString();
    const ok = await call(
      'POST',
      '/api/operator/get-token',
      { id, expiresAt: at(24 * 3600_000) },
      bearer(token),
    );
    expect(ok.status).toBe(200);
    expect(typeof (await json(ok))).toBe('string');
    for (const expiresAt of [at(24 * 3600_000 + 1000), at(-1000), 'tomorrow']) {
      const res = await call('POST', '/api/operator/get-token', { id, expiresAt }, bearer(token));
      expect(res.status).toBe(400);
      expect((await json(res)).error).toBe('INVALID_EXPIRES_AT');
    }
    expect((await call('POST', '/api/operator/get-token', { id }, bearer(token))).status).toBe(400);
    expect(
      (
        await call(
          'POST',
          '/api/operator/get-token',
          { id: 999, expiresAt: at(60_000) },
          bearer(token),
        )
      ).status,
    ).toBe(404);
  });

  test('validate-token answers isValid, operatorId, clientId, expiresAt, error; expiry follows the clock', async () => {
    const { call, bearer, companyToken, operator, clock } = make();
    const token = await companyToken();
    const id = await operator(token);
    const expiresAt = new Date(T0 + 3600_000).toISOString();
    const op = await json(
      call('POST', '/api/operator/get-token', { id, expiresAt }, bearer(token)),
    );
    const validate = async (t: string) =>
      json(call('POST', '/api/operator/validate-token', { token: t }, bearer(token)));
    expect(await validate(op)).toEqual({
      isValid: true,
      operatorId: id,
      clientId: expect.any(Number),
      expiresAt,
      error: null,
    });
    expect(await validate('garbage')).toMatchObject({
      isValid: false,
      operatorId: null,
      error: expect.any(String),
    });
    expect(await validate(token)).toMatchObject({ isValid: false, error: 'not an operator token' });
    await clock.advance(3600_000);
    expect(await validate(op)).toMatchObject({
      isValid: false,
      operatorId: id,
      expiresAt,
      error: 'the token has expired',
    });
  });

  test('an operator token where a company token is needed is 403', async () => {
    const { call, bearer, companyToken, operator } = make();
    const token = await companyToken();
    const id = await operator(token);
    const op = await json(
      call(
        'POST',
        '/api/operator/get-token',
        { id, expiresAt: new Date(T0 + 60_000).toISOString() },
        bearer(token),
      ),
    );
    const checks: [string, string, unknown][] = [
      ['GET', '/api/company/organization', undefined],
      ['POST', '/api/operator/synchronize', [{ organizationId: 1, name: 'x' }]],
      ['POST', '/api/operator/status', { id, status: 1 }],
      ['POST', '/api/operator/get-token', { id, expiresAt: new Date(T0 + 60_000).toISOString() }],
      ['POST', '/api/operator/validate-token', { token: op }],
    ];
    for (const [method, path, body] of checks) {
      const res = await call(method, path, body, bearer(op));
      expect(res.status, path).toBe(403);
      expect((await json(res)).error).toBe('FORBIDDEN');
    }
    const list = await call('GET', '/api/operator?organizationId=1', undefined, {
      ...bearer(op),
      Accept: 'text/plain',
    });
    expect(list.status).toBe(403);
  });
});

describe('operators', () => {
  test('synchronize creates Active operators, listed per organization with Bearer and Accept: text/plain', async () => {
    const { call, bearer, companyToken } = make();
    const token = await companyToken();
    const created = await call(
      'POST',
      '/api/operator/synchronize',
      [
        { organizationId: 1, name: 'Olga' },
        { organizationId: 2, name: 'Petro' },
      ],
      bearer(token),
    );
    expect(created.status).toBe(200);
    expect(await json(created)).toEqual([
      { id: 1, name: 'Olga', status: 0 },
      { id: 2, name: 'Petro', status: 0 },
    ]);
    const list = await call('GET', '/api/operator?organizationId=1', undefined, {
      ...bearer(token),
      Accept: 'text/plain',
    });
    expect(list.status).toBe(200);
    expect(await json(list)).toEqual([
      { id: 1, name: 'Olga', status: 0, organization: { id: 1, name: 'Sandbox organization' } },
    ]);
  });

  test('listing needs Accept: text/plain and an organizationId; synchronize needs JSON and known organizations', async () => {
    const { sandbox, call, bearer, companyToken } = make();
    const token = await companyToken();
    expect(
      (
        await call('GET', '/api/operator?organizationId=1', undefined, {
          ...bearer(token),
          Accept: 'application/json',
        })
      ).status,
    ).toBe(400);
    expect(
      (await call('GET', '/api/operator', undefined, { ...bearer(token), Accept: 'text/plain' }))
        .status,
    ).toBe(400);
    expect(
      (
        await call('GET', '/api/operator?organizationId=77', undefined, {
          ...bearer(token),
          Accept: 'text/plain',
        })
      ).status,
    ).toBe(404);
    expect(
      (
        await call(
          'POST',
          '/api/operator/synchronize',
          [{ organizationId: 77, name: 'x' }],
          bearer(token),
        )
      ).status,
    ).toBe(400);
    expect(
      (
        await call(
          'POST',
          '/api/operator/synchronize',
          [{ organizationId: 1, name: '' }],
          bearer(token),
        )
      ).status,
    ).toBe(400);
    const text = await sandbox.app.request('/chat/api/operator/synchronize', {
      method: 'POST',
      headers: { ...bearer(token), 'content-type': 'text/plain' },
      body: JSON.stringify([{ organizationId: 1, name: 'x' }]),
    });
    expect(text.status).toBe(400);
    expect(sandbox.chat.operators()).toHaveLength(0);
  });

  test("status moves follow the seed's table; Deleted is final", async () => {
    const { call, bearer, companyToken, operator, sandbox } = make();
    const token = await companyToken();
    const id = await operator(token);
    const move = (status: number) =>
      call('POST', '/api/operator/status', { id, status }, bearer(token));
    const ok = await move(1);
    expect(ok.status).toBe(200);
    expect(await ok.text()).toBe('');
    expect(sandbox.chat.operators()[0]?.status).toBe(1);
    // Inactive -> Deleted is not in the table
    const skip = await move(2);
    expect(skip.status).toBe(400);
    expect((await json(skip)).message).toMatch(/Inactive.*Active/);
    expect((await move(0)).status).toBe(200);
    expect((await move(0)).status).toBe(200); // same status: a no-op
    expect((await move(2)).status).toBe(200);
    for (const status of [0, 1, 2]) {
      const refused = await move(status);
      expect(refused.status).toBe(400);
      expect(await json(refused)).toMatchObject({
        error: 'INVALID_STATUS_MOVE',
        message: expect.stringMatching(/Deleted is final/),
      });
    }
    expect((await move(5)).status).toBe(400);
    expect(
      (await call('POST', '/api/operator/status', { id: 99, status: 1 }, bearer(token))).status,
    ).toBe(404);
    // a Deleted operator gets no token, and its tokens are no longer valid
    const res = await call(
      'POST',
      '/api/operator/get-token',
      { id, expiresAt: new Date(T0 + 60_000).toISOString() },
      bearer(token),
    );
    expect(res.status).toBe(400);
  });

  test("a Deleted operator's earlier token stops validating", async () => {
    const { call, bearer, companyToken, operator } = make();
    const token = await companyToken();
    const id = await operator(token);
    const op = await json(
      call(
        'POST',
        '/api/operator/get-token',
        { id, expiresAt: new Date(T0 + 60_000).toISOString() },
        bearer(token),
      ),
    );
    await call('POST', '/api/operator/status', { id, status: 2 }, bearer(token));
    const result = await json(
      call('POST', '/api/operator/validate-token', { token: op }, bearer(token)),
    );
    expect(result).toMatchObject({ isValid: false, error: 'the operator is Deleted' });
  });
});
