/**
 * A flow's own retry policy for campaigns (`campaign.retry`, docs/campaigns.md): a campaign
 * calling with the flow and giving no `retry` takes it, one that gives its own keeps its own;
 * a policy naming an outcome the flow never records is refused at file:line (RETRY_OUTCOME).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import { parseFlowSource } from '../../src/flows/loader.ts';
import { buildTestApp, json, phone, readJson } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';

const FLOW = `title: Reminder with its retries
params:
  name: string
menus:
  main:
    intro: "https://cdn.example.com/en/main.mp3"
    keys:
      "1": [ { outcome: confirmed }, hangup ]
    wrong: [ { outcome: no-input }, hangup ]
campaign:
  retry: { on: [failed, no-input], after: 2h, maxAttempts: 3 }
`;

it('refuses a retry on an outcome the flow never records, at its line', () => {
  const bad = FLOW.replace('on: [failed, no-input]', 'on: [failed, no-answer]');
  const loaded = parseFlowSource(bad, 'reminder.yaml');
  expect(loaded.compiled).toBeNull();
  expect(loaded.errors.map((e) => [e.rule, `${e.line}:${e.column}`, e.message])).toEqual([
    [
      'RETRY_OUTCOME',
      '11:25', // no-answer, in the list on line 11
      expect.stringContaining('no key or reaction of this flow records that outcome'),
    ],
  ]);
  // the good one compiles, and its policy is no part of the compiled flow (its version)
  const good = parseFlowSource(FLOW, 'reminder.yaml');
  expect(good.errors).toEqual([]);
  const without = parseFlowSource(FLOW.slice(0, FLOW.indexOf('campaign:')), 'reminder.yaml');
  expect(good.compiled!.version).toBe(without.compiled!.version);
});

describeEachEngine("a flow's retry policy", (ctx) => {
  let app: App;
  let dir: string;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'sb-flow-retry-'));
    writeFileSync(join(dir, 'reminder.yaml'), FLOW);
    app = buildTestApp(ctx.database(), { env: { FLOWS_DIR: dir } }).app;
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const create = async (extra: Record<string, unknown>) => {
    const res = await app.request(
      '/v1/campaigns',
      json({
        flow: 'reminder',
        from: 'Clinic',
        recipients: [{ to: phone(), vars: { name: 'Ann' } }],
        ...extra,
      }),
    );
    expect(res.status).toBe(201);
    return readJson(res);
  };

  it("is a campaign's when it gives none; a campaign's own wins", async () => {
    expect((await create({})).retry).toEqual({
      on: ['failed', 'no-input'],
      after: '2h',
      maxAttempts: 3,
    });
    const own = { on: ['failed'], after: '30m', maxAttempts: 2 };
    expect((await create({ retry: own })).retry).toEqual(own);
  });
});
