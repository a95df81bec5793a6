/**
 * A campaign end to end over real HTTP: the server's scheduler starts each recipient's call
 * through the sandbox, which plays it (keys, or a failed call) and calls back; a failed first
 * attempt is retried and its second attempt's outcome is the recipient's result; a number on
 * the opt-out list is skipped with the reason on its row; the campaign ends `done`, and its
 * results come as JSON and CSV.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../../src/server.ts';
import { phone, readJson } from '../support/app.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { eventually, startTestServer } from '../support/server.ts';

const post = (url: string, body: unknown) =>
  fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

describe('a campaign through the sandbox (pglite)', () => {
  let db: TestDatabase;
  let server: RunningServer;
  let noHolidays: string;

  beforeAll(async () => {
    // no public holidays, so the test does not depend on the date it runs
    noHolidays = mkdtempSync(join(tmpdir(), 'sb-holidays-'));
    db = await createTestDatabase('pglite');
    server = await startTestServer(db.database, { env: { HOLIDAYS_DIR: noHolidays } });
  }, 60_000);

  afterAll(async () => {
    await server?.stop();
    await db?.drop();
    rmSync(noHolidays, { recursive: true, force: true });
  });

  it('calls, retries, skips the opted-out, and ends done with its results', async () => {
    const [ann, bob, eve] = [phone(), phone(), phone()];
    // the sandbox plays each number's messages in turn: Bob's first call fails (and the flow's
    // `on: failed` texts him), his second answers
    const scripted = await post(`${server.url}/sandbox/_control/scripts`, [
      { to: ann, keys: ['1'] },
      { to: bob, outcome: 'failed' },
      { to: bob, outcome: 'delivered' },
      { to: bob, keys: ['1'] },
    ]);
    expect(scripted.status).toBe(201);
    expect((await post(`${server.url}/v1/opt-outs`, { phone: eve })).status).toBe(201);
    const res = await post(`${server.url}/v1/campaigns`, {
      flow: 'appointment-reminder',
      from: 'Clinic',
      recipients: [ann, bob, eve].map((to) => ({ to, vars: { name: 'Ann', date: 'Monday' } })),
      perMinute: 600,
      window: { from: '00:00', to: '24:00' },
      retry: { on: ['failed'], after: '1s', maxAttempts: 2 },
    });
    expect(res.status).toBe(201);
    const { id } = await readJson(res);
    const done = await eventually(
      async () => {
        const c = await readJson(await fetch(`${server.url}/v1/campaigns/${id}`));
        return c.state === 'done' && c;
      },
      40_000,
      'the campaign to finish',
    );
    expect(done.progress.byState).toEqual({ done: 2, skipped: 1 });
    expect(done.progress.byOutcome).toEqual({ confirmed: 2 });
    expect(done.progress.attempts).toBe(3);

    const results = await readJson(await fetch(`${server.url}/v1/campaigns/${id}/results`));
    const [a, b, e] = results.items;
    expect(a).toMatchObject({ to: ann, state: 'done', attempts: 1, outcome: 'confirmed' });
    expect(b).toMatchObject({ to: bob, state: 'done', attempts: 2, outcome: 'confirmed' });
    expect(b.history.map((c: { state: string }) => c.state)).toEqual(['failed', 'ended']);
    // the best attempt's way through the flow, and the text its key 1 sent, with its status
    expect(b).toMatchObject({ status: 'ended', path: [{ node: 'main', key: '1' }] });
    expect(b.followUps).toEqual([{ id: expect.any(String), type: 'sms', status: 'delivered' }]);
    expect(e).toMatchObject({ to: eve, state: 'skipped', attempts: 0 });
    expect(e.reason).toMatch(/opted out/);
    // each attempt is a real call, with its own path
    const call = await readJson(await fetch(`${server.url}/v1/calls/${b.history[1].callId}`));
    expect(call.outcome).toBe('confirmed');
    expect(call.path.map((p: { menu: string; key: string }) => `${p.menu}:${p.key}`)).toEqual([
      'main:1',
    ]);
    const csv = await fetch(`${server.url}/v1/campaigns/${id}/results`, {
      headers: { accept: 'text/csv' },
    });
    const lines = (await csv.text()).trim().split('\r\n');
    expect(lines).toHaveLength(4);
    expect(lines[2]).toMatch(
      new RegExp(
        `^1,\\${bob},done,2,confirmed,ended,main:1,sms:delivered,,1:[0-9a-f-]+:failed: 2:`,
      ),
    );
  }, 60_000);

  it('sends a message template filled per recipient, retries a failed one, and reports a row without its var', async () => {
    const [ann, bob, eve, zed] = [phone(), phone(), phone(), phone()];
    // Bob's first message fails, his second is delivered
    const scripted = await post(`${server.url}/sandbox/_control/scripts`, [
      { to: bob, outcome: 'failed' },
      { to: bob, outcome: 'delivered' },
    ]);
    expect(scripted.status).toBe(201);
    expect((await post(`${server.url}/v1/opt-outs`, { phone: eve })).status).toBe(201);
    const res = await post(`${server.url}/v1/campaigns`, {
      message: { type: 'sms', text: 'Hi {{name}}, parcel {{parcel}} arrives tomorrow.' },
      from: 'Shop',
      recipients: [
        { to: ann, vars: { name: 'Ann', parcel: 'P-1' } },
        { to: bob, vars: { name: 'Bob', parcel: 'P-2' } },
        { to: eve, vars: { name: 'Eve', parcel: 'P-3' } },
        { to: zed, vars: { name: 'Zed' } },
      ],
      perMinute: 600,
      window: { from: '00:00', to: '24:00' },
      retry: { on: ['failed'], after: '1s', maxAttempts: 2 },
    });
    expect(res.status).toBe(201);
    const made = await readJson(res);
    expect(made).toMatchObject({ flow: null, accepted: 3, rejectedCount: 1 });
    expect(made.message).toEqual({
      type: 'sms',
      text: 'Hi {{name}}, parcel {{parcel}} arrives tomorrow.',
    });
    expect(made.rejected[0]).toMatchObject({
      row: 3,
      code: 'INVALID_VARS',
      details: [{ path: 'recipients[3].vars.parcel', code: 'REQUIRED' }],
    });
    const done = await eventually(
      async () => {
        const c = await readJson(await fetch(`${server.url}/v1/campaigns/${made.id}`));
        return c.state === 'done' && c;
      },
      40_000,
      'the message campaign to finish',
    );
    expect(done.progress.byState).toEqual({ done: 2, skipped: 1 });
    expect(done.progress.byOutcome).toEqual({ delivered: 2 });
    expect(done.progress.attempts).toBe(3);
    const results = await readJson(await fetch(`${server.url}/v1/campaigns/${made.id}/results`));
    const [a, b, e] = results.items;
    expect(a).toMatchObject({ to: ann, state: 'done', outcome: 'delivered', status: 'delivered' });
    expect(b).toMatchObject({ to: bob, state: 'done', attempts: 2, outcome: 'delivered' });
    expect(b.history.map((h: { state: string }) => h.state)).toEqual(['failed', 'delivered']);
    expect(b.history.every((h: { callId: unknown }) => h.callId === null)).toBe(true);
    expect(e).toMatchObject({ to: eve, state: 'skipped', attempts: 0 });
    expect(e.reason).toMatch(/opted out/);
    // each attempt is a real message with its own timeline, its text filled from the row
    const sent = await readJson(await fetch(`${server.url}/v1/messages/${b.history[1].messageId}`));
    expect(sent).toMatchObject({ to: bob, type: 'sms', status: 'delivered' });
    expect(JSON.stringify(sent)).toContain('Hi Bob, parcel P-2 arrives tomorrow.');
    expect(sent.timeline.map((t: { status: string }) => t.status)).toContain('delivered');
  }, 60_000);
});
