/**
 * `switchboard campaign` against a real test server (in-process, over HTTP): a campaign
 * created from a CSV file (streamed, settings in the query, bad lines reported by line), its
 * status, pause / resume / cancel with a refusal said, `status --wait` following a campaign
 * the sandbox plays to its end, and the results exported as CSV to a file and to stdout.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { csvQuery, runCampaign } from '../../src/cli/campaign.ts';
import type { RunningServer } from '../../src/server.ts';
import { phone } from '../support/app.ts';
import { capture } from '../support/cli.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { startTestServer } from '../support/server.ts';

describe('switchboard campaign', () => {
  let db: TestDatabase;
  let server: RunningServer;
  const dir = mkdtempSync(join(tmpdir(), 'sb-campaign-'));
  const run = async (argv: string[]) => {
    const out = capture();
    const err = capture();
    const code = await runCampaign([...argv, '--url', server.url], {
      stdout: out.stream,
      stderr: err.stream,
      env: {},
      cwd: process.cwd(),
    });
    return { code, out: out.text(), err: err.text() };
  };
  const csv = (name: string, rows: string[]) => {
    const file = join(dir, name);
    writeFileSync(file, `${rows.join('\n')}\n`);
    return file;
  };

  beforeAll(async () => {
    db = await createTestDatabase('pglite');
    server = await startTestServer(db.database);
  });
  afterAll(async () => {
    await server?.stop();
    await db?.drop();
  });

  it('puts the flags in the query under the API names', () => {
    const q = csvQuery('reminder', {
      from: 'Clinic',
      'per-minute': '120',
      window: '09:00-20:00 mon-fri',
      'retry-on': 'failed,no-input',
      'retry-after': '2h',
      'max-attempts': '3',
    });
    expect(Object.fromEntries(q)).toEqual({
      flow: 'reminder',
      from: 'Clinic',
      perMinute: '120',
      window: '09:00-20:00 mon-fri',
      retryOn: 'failed,no-input',
      retryAfter: '2h',
      maxAttempts: '3',
    });
  });

  it('creates a campaign from a CSV file, then shows, pauses, resumes and cancels it', async () => {
    const file = csv('later.csv', [
      'to,name,date',
      `${phone()},Maria,Monday`,
      'not a number,Bo,Monday',
      `${phone()},"Taras, Jr.",Tuesday`,
    ]);
    const made = await run([
      'create',
      'appointment-reminder',
      '--from',
      'Clinic',
      '--file',
      file,
      '--name',
      'next week',
      '--start-at',
      '2099-01-01T08:00:00Z',
      '--per-minute',
      '30',
      '--window',
      '09:00-20:00 mon-fri',
      '--retry-on',
      'failed,no-input',
      '--retry-after',
      '2h',
      '--max-attempts',
      '3',
    ]);
    expect(made.err).toBe('');
    expect(made.code).toBe(2); // a row was rejected
    const id = made.out.match(/^campaign ([0-9a-f-]{36}) scheduled: /)?.[1];
    expect(id, made.out).toBeDefined();
    expect(made.out).toContain('2 recipients accepted, 0 duplicates, 1 rejected');
    expect(made.out).toMatch(/ {2}line 3\.to: .+/);

    const shown = await run(['status', id!]);
    expect(shown.code).toBe(0);
    expect(shown.out).toContain(`campaign ${id} (next week): scheduled, flow appointment-reminder`);
    expect(shown.out).toContain('progress 0 of 2 done, 0 calls made');
    expect(shown.out).toContain('recipients pending 2');
    const json = JSON.parse((await run(['status', id!, '--json'])).out);
    expect(json).toMatchObject({
      id,
      perMinute: 30,
      window: { from: '09:00', to: '20:00', days: ['mon', 'tue', 'wed', 'thu', 'fri'] },
      retry: { on: ['failed', 'no-input'], after: '2h', maxAttempts: 3 },
    });

    expect(await run(['pause', id!])).toMatchObject({ code: 0, out: `campaign ${id} paused\n` });
    const again = await run(['pause', id!]);
    expect(again.code).toBe(1);
    expect(again.err).toContain('CONFLICT');
    expect(await run(['resume', id!])).toMatchObject({ code: 0, out: `campaign ${id} running\n` });
    expect(await run(['cancel', id!])).toMatchObject({
      code: 0,
      out: `campaign ${id} cancelled\n`,
    });
    // waiting on a cancelled campaign ends at once, with exit 2
    const waited = await run(['status', id!, '--wait', '--progress']);
    expect(waited.code).toBe(2);
    expect(waited.out).toContain('progress 2 of 2 done');
    expect(waited.err).toMatch(/campaign cancelled \[.*\] 100% \| 2\/2 done/);
  });

  it('waits for a campaign to end with a progress bar, then exports its results', async () => {
    const file = csv('now.csv', ['to,name,date', `${phone()},Ann,Monday`, `${phone()},Bo,Friday`]);
    const made = await run([
      'create',
      'appointment-reminder',
      '--from',
      'Clinic',
      '--file',
      file,
      '--window',
      '00:00-23:59',
      '--per-minute',
      '600',
    ]);
    expect(made.code).toBe(0);
    const id = made.out.match(/^campaign ([0-9a-f-]{36}) /)![1]!;
    // the sandbox plays each call; nobody presses a key, so each ends when the menu times out
    const waited = await run(['status', id, '--wait', '--progress']);
    expect(waited.code).toBe(0);
    expect(waited.out).toContain(`campaign ${id}: done`);
    expect(waited.out).toContain('progress 2 of 2 done, 2 calls made');
    expect(waited.err).toMatch(/campaign done \[.*\] 100% \| 2\/2 done/);

    const out = join(dir, 'results.csv');
    const exported = await run(['export', id, '--out', out]);
    expect(exported.code).toBe(0);
    expect(exported.err).toContain(`written to ${out}`);
    const lines = readFileSync(out, 'utf8').split('\r\n').filter(Boolean);
    expect(lines[0]).toBe('line,to,state,attempts,outcome,status,path,followUps,reason,history');
    expect(lines).toHaveLength(3);
    expect(lines.slice(1).every((l) => /,done,1,/.test(l))).toBe(true);
    // to stdout, byte for byte the same
    const toStdout = await run(['export', id]);
    expect(toStdout.out).toBe(readFileSync(out, 'utf8'));
  }, 60_000);

  it('says what is wrong: usage, an unknown campaign, an unreadable file', async () => {
    expect((await run(['create', 'appointment-reminder', '--file', 'x.csv'])).err).toContain(
      '--from is required',
    );
    expect((await run(['create', 'appointment-reminder', '--from', 'C'])).err).toContain(
      '--file is required',
    );
    const missing = await run([
      'create',
      'appointment-reminder',
      '--from',
      'C',
      '--file',
      join(dir, 'nope.csv'),
    ]);
    expect(missing).toMatchObject({ code: 1 });
    expect(missing.err).toContain('cannot read');
    expect((await run(['frobnicate'])).err).toContain('unknown subcommand "frobnicate"');
    expect((await run(['status'])).err).toContain('name the campaign');
    const unknown = await run(['status', '019a0000-0000-7000-8000-000000000000']);
    expect(unknown.code).toBe(1);
    expect(unknown.err).toContain('NOT_FOUND');
    const badQuery = await run([
      'create',
      'appointment-reminder',
      '--from',
      'C',
      '--file',
      csv('one.csv', ['to', phone()]),
      '--per-minute',
      'fast',
    ]);
    expect(badQuery.code).toBe(1);
    expect(badQuery.err).toContain('query.perMinute');
  });
});
