import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callsFromCsv, runCall } from '../../src/cli/call.ts';
import type { RunningServer } from '../../src/server.ts';
import { phone } from '../support/app.ts';
import { capture } from '../support/cli.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { startTestServer } from '../support/server.ts';

describe('switchboard call', () => {
  let db: TestDatabase;
  let server: RunningServer;
  const run = async (argv: string[]) => {
    const out = capture();
    const err = capture();
    const code = await runCall([...argv, '--url', server.url], {
      stdout: out.stream,
      stderr: err.stream,
      env: {},
      cwd: process.cwd(),
    });
    return { code, out: out.text(), err: err.text() };
  };

  beforeAll(async () => {
    db = await createTestDatabase('pglite');
    server = await startTestServer(db.database);
  });
  afterAll(async () => {
    await server?.stop();
    await db?.drop();
  });

  it('starts one call from flags and waits for its outcome', async () => {
    const to = phone();
    await fetch(`${server.url}/sandbox/_control/scripts`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ to, keys: ['1'] }),
    });
    const r = await run([
      'appointment-reminder',
      '--to',
      to,
      '--from',
      'Clinic',
      '--var',
      'name=Ann',
      '--var',
      'date=Monday 10:00',
      '--wait',
    ]);
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/call [0-9a-f-]{36} queued \(appointment-reminder@/);
    expect(r.out).toContain('outcome confirmed');
    expect(r.out).toContain('path main:1');
    expect(r.out).toContain('follow-ups sms');
  });

  it('names the missing var and exits 2', async () => {
    const r = await run([
      'appointment-reminder',
      '--to',
      phone(),
      '--from',
      'Clinic',
      '--var',
      'name=Ann',
    ]);
    expect(r.code).toBe(2);
    expect(r.err).toContain('vars.date');
  });

  it('refuses bad usage with exit 1', async () => {
    expect((await run(['appointment-reminder', '--to', phone()])).err).toContain(
      '--from is required',
    );
    expect((await run(['--from', 'Clinic'])).code).toBe(1);
    expect((await run(['appointment-reminder', '--from', 'C', '--var', 'oops'])).err).toContain(
      'name=value',
    );
  });

  it('starts thousands of calls from a CSV with a summary of what was rejected', async () => {
    // a provider that is not there: the calls stay queued, so nothing plays them meanwhile
    const quietDb = await createTestDatabase('pglite');
    const quiet = await startTestServer(quietDb.database, {
      env: { PROVIDER_BASE_URL: 'http://127.0.0.1:9', CALLBACK_TOKEN: 'call-test-callback-token' },
    });
    const dir = mkdtempSync(join(tmpdir(), 'sb-call-'));
    const rows = ['to,name,date'];
    for (let i = 0; i < 1500; i++) rows.push(`${phone()},Patient ${i},Friday`);
    rows.push('not-a-number,Broken,Friday');
    rows.push(`${phone()},,Friday`);
    const file = join(dir, 'calls.csv');
    writeFileSync(file, `${rows.join('\n')}\n`);
    const out = capture();
    const err = capture();
    const code = await runCall(
      [
        'appointment-reminder',
        '--file',
        file,
        '--from',
        'Clinic',
        '--progress',
        '--batch-size',
        '500',
        '--url',
        quiet.url,
      ],
      { stdout: out.stream, stderr: err.stream, env: {}, cwd: process.cwd() },
    );
    const page = await (
      await fetch(`${quiet.url}/v1/calls?flow=appointment-reminder&state=queued&limit=500`)
    ).json();
    await quiet.stop();
    await quietDb.drop();
    expect((page as { items: unknown[] }).items).toHaveLength(500);
    expect(code).toBe(2);
    expect(out.text()).toContain('1500 of 1502 calls queued, 2 rejected');
    expect(out.text()).toMatch(/row 1502 \(not-a-number\): .*calls\[0\]\.to/);
    expect(out.text()).toMatch(/row 1503 .*vars\.name/);
    expect(err.text()).toContain('1502/1502 calls');
  }, 120_000);

  it('reads CSV columns as vars, with --var for every row', () => {
    expect(callsFromCsv('to,vars.name,lang\n+380501234567,Ann,uk\n', { date: 'Fri' })).toEqual([
      { to: '+380501234567', vars: { name: 'Ann', date: 'Fri' }, lang: 'uk' },
    ]);
  });
});
