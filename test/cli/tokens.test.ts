/**
 * `switchboard tokens` against a real server over HTTP: create prints the token alone on
 * stdout and it works on /v1 with its scopes; list shows it without the token; revoke stops
 * it; refusals and unreachable servers exit 1 with the reason.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runTokens } from '../../src/cli/tokens.ts';
import type { RunningServer } from '../../src/server.ts';
import { uniq } from '../support/app.ts';
import { capture } from '../support/cli.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { startTestServer } from '../support/server.ts';

const ADMIN = 'cli-admin-token-9f3e';

describe('switchboard tokens', () => {
  let db: TestDatabase;
  let server: RunningServer;
  const run = async (argv: string[], env: Record<string, string> = { API_TOKEN: ADMIN }) => {
    const out = capture();
    const err = capture();
    const code = await runTokens([...argv, '--url', server.url], {
      stdout: out.stream,
      stderr: err.stream,
      env,
      cwd: process.cwd(),
    });
    return { code, out: out.text(), err: err.text() };
  };
  const get = (path: string, token: string) =>
    fetch(`${server.url}${path}`, { headers: { authorization: `Bearer ${token}` } });

  beforeAll(async () => {
    db = await createTestDatabase('pglite');
    server = await startTestServer(db.database, { env: { API_TOKEN: ADMIN } });
  });
  afterAll(async () => {
    await server?.stop();
    await db?.drop();
  });

  it('creates a token, lists it without the token, and revokes it', async () => {
    const name = uniq('ci');
    const created = await run(['create', '--name', name, '--scope', 'read']);
    expect(created.err).toMatch(new RegExp(`created tok_\\S+ "${name}" \\(read\\)`));
    expect(created.code).toBe(0);
    const token = created.out.trim();
    expect(token).toMatch(/^sb_[A-Za-z0-9_-]{43}$/);
    expect((await get('/v1/messages', token)).status).toBe(200);
    expect((await get('/v1/tokens', token)).status).toBe(403);

    const listed = await run(['list']);
    expect(listed.code).toBe(0);
    expect(listed.out).toMatch(/^ID\s+NAME\s+SCOPES/);
    const line = listed.out.split('\n').find((l) => l.includes(name));
    expect(line).toMatch(/^tok_\S+\s+\S+\s+read\s+\S+\s+API_TOKEN\s+\S+\s+-$/);
    expect(listed.out).not.toContain(token);
    const id = line?.split(/\s+/)[0] ?? '';

    const revoked = await run(['revoke', id]);
    expect(revoked.code).toBe(0);
    expect(revoked.out).toMatch(new RegExp(`revoked ${id} "${name}" \\(since \\d{4}-`));
    expect((await get('/v1/messages', token)).status).toBe(401);
  });

  it('takes several scopes, comma-separated or repeated, and prints JSON with --json', async () => {
    const r = await run(['create', '--name', uniq('multi'), '--scope', 'send,read', '--json']);
    expect(r.code).toBe(0);
    const made = JSON.parse(r.out);
    expect(made.scopes).toEqual(['read', 'send']);
    const again = await run([
      'create',
      '--name',
      uniq('rep'),
      '--scope',
      'admin',
      '--scope',
      'read',
    ]);
    expect(again.code).toBe(0);
    const list = JSON.parse((await run(['list', '--json'])).out);
    expect(list.find((t: { id: string }) => t.id === made.id)).toMatchObject({
      scopes: ['read', 'send'],
      revokedAt: null,
    });
  });

  it('exits 1 naming the reason: bad scope, no admin scope, wrong token, unknown id, usage', async () => {
    const bad = await run(['create', '--name', uniq('x'), '--scope', 'root']);
    expect(bad.code).toBe(1);
    expect(bad.err).toContain('VALIDATION_ERROR');
    expect(bad.err).toContain('scopes[0]');

    const reader = (await run(['create', '--name', uniq('reader'), '--scope', 'read'])).out.trim();
    const refused = await run(['list', '--token', reader]);
    expect(refused.code).toBe(1);
    expect(refused.err).toContain('INSUFFICIENT_SCOPE');

    const wrong = await run(['list'], { API_TOKEN: 'not-the-token' });
    expect(wrong.code).toBe(1);
    expect(wrong.err).toContain('UNAUTHORIZED');

    const missing = await run(['revoke', 'tok_nothing']);
    expect(missing.code).toBe(1);
    expect(missing.err).toContain('NOT_FOUND');

    for (const argv of [
      ['create', '--scope', 'read'],
      ['create', '--name', 'x'],
      ['revoke'],
      ['burn'],
    ]) {
      const r = await run(argv);
      expect(r.code, argv.join(' ')).toBe(1);
      expect(r.err, argv.join(' ')).toContain('Usage:');
    }
  });

  it('says when the server cannot be reached', async () => {
    const out = capture();
    const err = capture();
    const code = await runTokens(['list', '--url', 'http://127.0.0.1:9'], {
      stdout: out.stream,
      stderr: err.stream,
      env: {},
      cwd: process.cwd(),
    });
    expect(code).toBe(1);
    expect(err.text()).toContain('cannot reach Switchboard at http://127.0.0.1:9');
  });
});
