/**
 * Silence and a key the menu does not handle, told apart in what a real call records (issue
 * 22, point 1): the sandbox plays the rendered menu as the provider does (a key with an entry
 * runs it, silence runs `wrong`), and the call's path, timeline, flow statistics and console
 * page say `timeout` for silence and the key for a wrong key, as `flows simulate` does.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { simulateFlow } from '../../src/flows/index.ts';
import type { RunningServer } from '../../src/server.ts';
import { loadExample, SAMPLE_VARS } from '../flows/helpers.ts';
import { phone, readJson } from '../support/app.ts';
import { availableEngines, createTestDatabase, type TestDatabase } from '../support/db.ts';
import { postJson } from '../support/http.ts';
import { eventually, startTestServer } from '../support/server.ts';

const FLOW = 'appointment-reminder';
const vars = SAMPLE_VARS[FLOW];

const post = postJson;

interface PathStep {
  node: string;
  menu: string;
  attempt: number;
  key: string;
  input?: string;
  at: string;
}

/** A call scripted with `keys` (then `1`, which confirms), once it has ended. */
async function call(server: RunningServer, keys: string[]) {
  const to = phone();
  const scripted = await post(`${server.url}/sandbox/_control/scripts`, { to, keys });
  expect(scripted.status).toBe(201);
  const res = await post(`${server.url}/v1/calls`, { flow: FLOW, to, from: 'Acme', vars });
  expect(res.status, JSON.stringify(await readJson(res.clone()))).toBe(202);
  const { id } = await readJson(res);
  return eventually(
    async () => {
      const c = await readJson(await fetch(`${server.url}/v1/calls/${id}`));
      return c.state === 'ended' && c.outcome === 'confirmed' && c;
    },
    20_000,
    `the call scripted with ${keys.join(',')} to end confirmed`,
  );
}

for (const engine of availableEngines()) {
  describe(`a real call records silence and a wrong key apart [${engine}]`, () => {
    let db: TestDatabase;
    let server: RunningServer;
    beforeAll(async () => {
      db = await createTestDatabase(engine);
      server = await startTestServer(db.database);
    });
    afterAll(async () => {
      await server?.stop();
      await db?.drop();
    });

    it('records the key 7 and silence differently, the same way simulate does', async () => {
      const pressed = await call(server, ['7', '1']);
      const silent = await call(server, ['timeout', '1']);
      const steps = (c: { path: PathStep[] }) =>
        c.path.map(({ node, key, input }) => ({ node, key, ...(input && { input }) }));
      expect(steps(pressed)).toEqual([
        { node: 'main', key: 'wrong', input: '7' },
        { node: 'main/r1', key: '1' },
      ]);
      expect(steps(silent)).toEqual([
        { node: 'main', key: 'wrong', input: 'timeout' },
        { node: 'main/r1', key: '1' },
      ]);
      // the same next state either way: the retry, then the same outcome
      expect(pressed.path[1].attempt).toBe(2);
      expect(silent.path[1].attempt).toBe(2);

      // `flows simulate` records the same input for the same keys
      const compiled = loadExample(FLOW);
      for (const [c, keys] of [
        [pressed, ['7', '1']],
        [silent, ['timeout', '1']],
      ] as const) {
        const sim = simulateFlow(compiled, { keys: [...keys], vars });
        expect(sim.differences).toEqual([]);
        expect(sim.machine.path).toEqual(steps(c));
      }

      // the timeline's key event carries the input too
      const keyEvent = pressed.timeline.find(
        (e: { kind: string; node: string }) => e.kind === 'key' && e.node === 'main',
      );
      expect(keyEvent).toMatchObject({ key: 'wrong', detail: { input: '7' } });
    });

    it('counts them apart in the flow statistics and labels them apart in the console', async () => {
      const pressed = await call(server, ['#', '1']);
      const stats = await readJson(await fetch(`${server.url}/v1/flows/${FLOW}/stats`));
      // this server's calls so far: 7 and # (wrong keys) and one silence at main
      expect(stats.nodes.main.keys.wrong).toBe(3);
      expect(stats.nodes.main.wrongInputs).toEqual({ '7': 1, '#': 1, timeout: 1 });
      expect(stats.nodes['main/r1'].wrongInputs).toBeUndefined();

      const page = await fetch(`${server.url}/ui/calls/${pressed.id}`);
      expect(page.status).toBe(200);
      const html = await page.text();
      expect(html).toContain('# (not handled here)');
      const flowPage = await (await fetch(`${server.url}/ui/flows/${FLOW}`)).text();
      expect(flowPage).toContain('timeout / wrong: 3 (silence: 1, key 7: 1, key #: 1)');
    });
  });
}
