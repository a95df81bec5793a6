/**
 * `switchboard flows replay` against a running server (issue 24, point 4): calls are played by
 * the built-in sandbox from scripted keys, as a provider would, then replayed through a
 * changed flow file. The command prints each differing call (where its path parts, its
 * outcome, its follow-ups' text) and the totals, exits 1 when some call differs and 0 when
 * none does, prints the report with --json, and answers bad input (a draft that does not
 * compile, at its file:line; a bad --since; an unknown flow; no token) with exit 2.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runFlows } from '../../src/cli/flows.ts';
import { runFlowsReplay } from '../../src/cli/flows-replay.ts';
import type { RunningServer } from '../../src/server.ts';
import { phone, readJson } from '../support/app.ts';
import { capture } from '../support/cli.ts';
import { availableEngines, createTestDatabase, type TestDatabase } from '../support/db.ts';
import { eventually, startTestServer } from '../support/server.ts';

const FLOW = 'cli-replay';
const TOKEN = 'cli-replay-test-token';

const SOURCE = `title: CLI replay
params:
  name: string
assert: { outcomeOnEveryPath: false }
menus:
  main:
    intro: "Hello {{name}}: 1 to confirm, 2 to cancel"
    keys:
      "1": [ { outcome: confirmed }, { send: { type: sms, text: "Confirmed, {{name}}." } }, hangup ]
      "2": [ { outcome: cancelled }, hangup ]
`;

/** Key 2 now confirms too (and sends its SMS); key 1's text is unchanged. */
const CHANGED = SOURCE.replace(
  '"2": [ { outcome: cancelled }, hangup ]',
  '"2": [ { outcome: confirmed }, { send: { type: sms, text: "Confirmed, {{name}}." } }, hangup ]',
);

for (const engine of availableEngines()) {
  describe(`switchboard flows replay [${engine}]`, () => {
    let db: TestDatabase;
    let server: RunningServer;
    let dir: string;
    const ids: Record<string, string> = {};

    const run = async (argv: string[], env: Record<string, string> = { API_TOKEN: TOKEN }) => {
      const out = capture();
      const err = capture();
      const code = await runFlowsReplay([...argv, '--url', server.url], {
        stdout: out.stream,
        stderr: err.stream,
        cwd: dir,
        env,
      });
      return { code, out: out.text(), err: err.text() };
    };
    const file = (name: string, text: string) => {
      writeFileSync(join(dir, name), text);
      return name;
    };

    /** A call played by the sandbox with `keys`, once it has ended. */
    const played = async (keys: string[], name: string) => {
      const to = phone();
      const post = (path: string, body: unknown) =>
        fetch(`${server.url}${path}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` },
          body: JSON.stringify(body),
        });
      expect((await post('/sandbox/_control/scripts', { to, keys })).status).toBe(201);
      const res = await post('/v1/calls', { flow: FLOW, to, from: 'Shop', vars: { name } });
      expect(res.status).toBe(202);
      const { id } = await readJson(res);
      await eventually(
        async () => {
          const c = await readJson(
            await fetch(`${server.url}/v1/calls/${id}`, {
              headers: { authorization: `Bearer ${TOKEN}` },
            }),
          );
          return c.state === 'ended' && c.outcome !== null;
        },
        20_000,
        `the call with keys ${keys.join(',')} to end`,
      );
      return id as string;
    };

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'sb-cli-replay-'));
      const flows = join(dir, 'flows');
      mkdirSync(flows);
      writeFileSync(join(flows, `${FLOW}.yaml`), SOURCE);
      db = await createTestDatabase(engine);
      server = await startTestServer(db.database, {
        env: { FLOWS_DIR: flows, API_TOKEN: TOKEN },
      });
      ids.one = await played(['1'], 'Ann');
      ids.two = await played(['2'], 'Bo');
    }, 60_000);
    afterAll(async () => {
      await server?.stop();
      await db?.drop();
      rmSync(dir, { recursive: true, force: true });
    });

    it('prints nothing but the totals and exits 0 when no call differs', async () => {
      const r = await run([FLOW, '--file', file('same.yaml', SOURCE), '--since', '1h']);
      expect(r.err).toBe('');
      expect(r.code).toBe(0);
      expect(r.out).toMatch(/^2 calls since \S+ through version \w+: 2 replayed, 2 same, 0 differ/);
      expect(r.out).toContain(
        'outcomes: was cancelled 1, confirmed 1; would be cancelled 1, confirmed 1',
      );
    });

    it('prints each differing call and the totals, and exits 1', async () => {
      const r = await run([FLOW, '--file', file('changed.yaml', CHANGED), '--since', '1h']);
      expect(r.err).toBe('');
      expect(r.code).toBe(1);
      // only the call that pressed 2 differs: its outcome and its follow-ups
      expect(r.out).toContain(`${ids.two} (`);
      expect(r.out).not.toContain(ids.one);
      expect(r.out).toContain('  outcome: was cancelled, would be confirmed');
      expect(r.out).toContain('  follow-ups: was (none)');
      expect(r.out).toContain('would be sms "Confirmed, Bo."');
      expect(r.out).toContain(
        '2 replayed, 1 same, 1 differ (path 0, outcome 1, follow-ups 1), 0 skipped',
      );
      expect(r.out).toContain('would be confirmed 2');
    });

    it('prints the report as JSON with --json', async () => {
      const r = await run([FLOW, '--file', 'changed.yaml', '--since', '1h', '--json']);
      expect(r.code).toBe(1);
      const report = JSON.parse(r.out);
      expect(report).toMatchObject({ flowId: FLOW, replayed: 2, same: 1, differing: 1 });
      expect(report.items).toEqual([
        expect.objectContaining({ id: ids.two, inputs: ['2'], differs: ['outcome', 'followUps'] }),
      ]);
    });

    it('is dispatched by `switchboard flows replay`', async () => {
      const out = capture();
      const err = capture();
      const code = await runFlows(['replay', '--help'], {
        stdout: out.stream,
        stderr: err.stream,
        cwd: dir,
      });
      expect(code).toBe(0);
      expect(out.text()).toContain('Usage: switchboard flows replay <id> --file changed.yaml');
      const usage = capture();
      await runFlows(['--help'], { stdout: usage.stream, stderr: err.stream, cwd: dir });
      expect(usage.text()).toMatch(/^ {2}replay <id> --file/m);
    });

    it('shows a draft that does not compile at its own file and line, exit 2', async () => {
      const broken = CHANGED.replace('hangup ]\n', 'hangup, { goto: nowhere } ]\n');
      const line = broken.split('\n').findIndex((l) => l.includes('nowhere')) + 1;
      const r = await run([FLOW, '--file', file('broken.yaml', broken), '--since', '1h']);
      expect(r.code).toBe(2);
      expect(r.out).toBe('');
      expect(r.err).toContain(`INVALID_FLOW: the changed flow "${FLOW}" does not compile`);
      expect(r.err).toMatch(new RegExp(`^ {2}broken\\.yaml:${line}:\\d+ `, 'm'));
    });

    it('refuses a bad --since, an unknown flow, a missing file and no token, exit 2', async () => {
      const since = await run([FLOW, '--file', 'changed.yaml', '--since', 'last week']);
      expect(since.code).toBe(2);
      expect(since.err).toContain('VALIDATION_ERROR');
      expect(since.err).toMatch(/since: must be a time back from now \(30m, 12h, 7d, 2w\)/);

      const unknown = await run(['no-such-flow', '--file', 'changed.yaml']);
      expect(unknown.code).toBe(2);
      expect(unknown.err).toContain('NOT_FOUND: no flow "no-such-flow"');

      const missing = await run([FLOW, '--file', 'nope.yaml']);
      expect(missing.code).toBe(2);
      expect(missing.err).toContain('cannot read --file nope.yaml');

      const noFile = await run([FLOW]);
      expect(noFile.code).toBe(2);
      expect(noFile.err).toContain('--file is required');

      const anonymous = await run([FLOW, '--file', 'changed.yaml'], {});
      expect(anonymous.code).toBe(2);
      expect(anonymous.err).toContain('UNAUTHORIZED');
      // --token stands in for API_TOKEN
      expect((await run([FLOW, '--file', 'changed.yaml', '--token', TOKEN], {})).code).toBe(1);
    });
  });
}
