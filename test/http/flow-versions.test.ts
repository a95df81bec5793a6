/**
 * A flow's versions as a team uses them (issue 24, point 3): a call runs on version A, the
 * file changes, a call runs on version B; the API lists both with their sources, the diff
 * shows the change in the source and in the compiled menus, and the counters differ per
 * version and per language as the two calls did; the console shows the same.
 */
import { mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../../src/server.ts';
import { phone, readJson } from '../support/app.ts';
import { availableEngines, createTestDatabase, type TestDatabase } from '../support/db.ts';
import { postJson } from '../support/http.ts';
import { eventually, startTestServer } from '../support/server.ts';

const FLOW = 'versioned';

const A = `title: Versioned
languages: [en, uk]
menus:
  main:
    intro: { en: "https://cdn.example.com/en/main.mp3", uk: "https://cdn.example.com/uk/main.mp3" }
    retries: 0
    keys:
      "1": [ { outcome: confirmed }, hangup ]
      "2": [ { outcome: declined }, hangup ]
    wrong: [ { outcome: no-input }, hangup ]
`;

// key 2 now asks why before declining, and 1 there confirms after all
const B = A.replace(
  '"2": [ { outcome: declined }, hangup ]',
  '"2": [ { goto: why } ]',
).concat(`  why:
    intro: { en: "https://cdn.example.com/en/why.mp3", uk: "https://cdn.example.com/uk/why.mp3" }
    retries: 0
    keys:
      "1": [ { outcome: confirmed }, hangup ]
    wrong: [ { outcome: declined }, hangup ]
`);

const post = postJson;

for (const engine of availableEngines()) {
  describe(`flow versions: list, diff, stats per version and language [${engine}]`, () => {
    let db: TestDatabase;
    let server: RunningServer;
    let dir: string;
    let versionA: string;
    let versionB: string;
    const get = async (path: string) => {
      const res = await fetch(`${server.url}${path}`);
      return { status: res.status, body: await readJson(res) };
    };

    /** A call in `lang` that presses `keys`, once it has ended with `outcome`. */
    async function call(lang: string, keys: string[], outcome: string) {
      const to = phone();
      expect((await post(`${server.url}/sandbox/_control/scripts`, { to, keys })).status).toBe(201);
      const res = await post(`${server.url}/v1/calls`, { flow: FLOW, to, from: 'Acme', lang });
      expect(res.status, JSON.stringify(await readJson(res.clone()))).toBe(202);
      const { id, flowVersion } = await readJson(res);
      await eventually(
        async () => {
          const c = await readJson(await fetch(`${server.url}/v1/calls/${id}`));
          return c.state === 'ended' && c.outcome === outcome;
        },
        20_000,
        `the call pressing ${keys.join(',')} to end ${outcome}`,
      );
      return flowVersion as string;
    }

    const writeFlow = (text: string, mtime: Date) => {
      const file = join(dir, `${FLOW}.yaml`);
      writeFileSync(file, text);
      // a distinct modification time: the registry re-reads a file when it changes
      utimesSync(file, mtime, mtime);
    };

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'sb-versions-'));
      writeFlow(A, new Date('2026-01-01T00:00:00Z'));
      db = await createTestDatabase(engine);
      server = await startTestServer(db.database, { env: { FLOWS_DIR: dir } });
      versionA = await call('en', ['2'], 'declined');
      writeFlow(B, new Date('2026-01-02T00:00:00Z'));
      versionB = await call('uk', ['2', '1'], 'confirmed');
    });
    afterAll(async () => {
      await server?.stop();
      await db?.drop();
      rmSync(dir, { recursive: true, force: true });
    });

    it('lists both versions, newest first, with their calls and sources', async () => {
      expect(versionA).not.toBe(versionB);
      const { status, body } = await get(`/v1/flows/${FLOW}/versions`);
      expect(status).toBe(200);
      expect(body.current).toBe(versionB);
      expect(body.unversioned).toEqual({ started: 0 });
      expect(
        body.items.map((v: Record<string, unknown>) => [v.version, v.current, v.runs, v.hasSource]),
      ).toEqual([
        [versionB, true, true, true],
        [versionA, false, true, true],
      ]);
      const [b, a] = body.items;
      expect(a).toMatchObject({ started: 1, outcomes: { declined: 1 } });
      expect(b).toMatchObject({ started: 1, outcomes: { confirmed: 1 } });
      for (const v of body.items) {
        expect(Date.parse(v.firstRunAt)).not.toBeNaN();
        expect(Date.parse(v.lastCallAt)).toBeGreaterThanOrEqual(Date.parse(v.firstRunAt));
      }
      expect(Date.parse(b.firstRunAt)).toBeGreaterThanOrEqual(Date.parse(a.lastCallAt));
    });

    it('gives each version its own source and compiled menus', async () => {
      const a = await get(`/v1/flows/${FLOW}/versions/${versionA}`);
      expect(a.status).toBe(200);
      expect(a.body).toMatchObject({ version: versionA, current: false, source: A });
      expect(a.body.menus).toEqual(['main']);
      const current = await get(`/v1/flows/${FLOW}/versions/current`);
      expect(current.body).toMatchObject({ version: versionB, current: true, source: B });
      expect(current.body.menus).toEqual(['main', 'why']);
    });

    it('answers 404 UNKNOWN_FLOW_VERSION for a version the flow never had, 400 for a malformed one', async () => {
      const unknown = await get(`/v1/flows/${FLOW}/versions/0123456789abcdef`);
      expect(unknown.status).toBe(404);
      expect(unknown.body.error.code).toBe('UNKNOWN_FLOW_VERSION');
      const diff = await get(`/v1/flows/${FLOW}/diff?from=0123456789abcdef&to=current`);
      expect(diff.status).toBe(404);
      expect(diff.body.error.code).toBe('UNKNOWN_FLOW_VERSION');
      expect(diff.body.error.details[0].path).toBe('from');
      const bad = await get(`/v1/flows/${FLOW}/versions/not-a-version`);
      expect(bad.status).toBe(400);
      expect((await get('/v1/flows/no-such-flow/versions')).status).toBe(404);
    });

    it('diffs the two: the source lines, the menus, the counters side by side', async () => {
      const { status, body } = await get(`/v1/flows/${FLOW}/diff?from=${versionA}&to=current`);
      expect(status).toBe(200);
      expect(body.from).toMatchObject({ version: versionA, current: false, hasSource: true });
      expect(body.to).toMatchObject({ version: versionB, current: true, hasSource: true });
      expect(body.source.patch).toContain('-      "2": [ { outcome: declined }, hangup ]');
      expect(body.source.patch).toContain('+      "2": [ { goto: why } ]');
      expect(body.source.patch).toContain('+  why:');
      expect(body.source.removed).toBe(1);
      expect(body.source.added).toBe(7);

      expect(body.menus.added).toEqual(['why']);
      expect(body.menus.removed).toEqual([]);
      expect(body.menus.changed).toHaveLength(1);
      expect(body.menus.changed[0].node).toBe('main');
      expect(Object.keys(body.menus.changed[0].keys)).toEqual(['2']);
      expect(body.menus.changed[0].keys['2'].from).toContainEqual({
        type: 'outcome',
        name: 'declined',
      });

      const s = body.stats;
      expect(s.started).toEqual({ from: 1, to: 1 });
      expect(s.outcomes.declined).toEqual({
        from: { count: 1, share: 1 },
        to: { count: 0, share: 0 },
      });
      expect(s.outcomes.confirmed).toEqual({
        from: { count: 0, share: 0 },
        to: { count: 1, share: 1 },
      });
      expect(s.nodes.main.from).toMatchObject({ visits: 1, keys: { '2': 1 } });
      expect(s.nodes.main.to).toMatchObject({ visits: 1, keys: { '2': 1 } });
      // `why` is only in B: no side for A
      expect(s.nodes.why.from).toBeNull();
      expect(s.nodes.why.to).toMatchObject({ visits: 1, keys: { '1': 1 } });
      // per language: A's call was in English, B's in Ukrainian
      expect(s.languages.en.started).toEqual({ from: 1, to: 0 });
      expect(s.languages.uk.started).toEqual({ from: 0, to: 1 });
      expect(s.languages.en.outcomes.declined.from).toEqual({ count: 1, share: 1 });
      expect(s.languages.uk.outcomes.confirmed.to).toEqual({ count: 1, share: 1 });
      expect(s.languages.uk.outcomes.confirmed.from).toEqual({ count: 0, share: null });
    });

    it('filters the counters by version and language', async () => {
      const stats = (q: string) => get(`/v1/flows/${FLOW}/stats${q}`).then((r) => r.body);
      expect(await stats('')).toMatchObject({
        started: 2,
        outcomes: { declined: 1, confirmed: 1 },
      });
      const a = await stats(`?version=${versionA}`);
      expect(a).toMatchObject({ started: 1, outcomes: { declined: 1 } });
      expect(a.outcomes.confirmed).toBeUndefined();
      expect(await stats('?lang=uk')).toMatchObject({ started: 1, outcomes: { confirmed: 1 } });
      expect((await stats(`?version=${versionA}&lang=uk`)).started).toBe(0);
      expect((await get(`/v1/flows/${FLOW}/stats?version=nope`)).status).toBe(400);
    });

    it('shows the versions and the comparison in the console', async () => {
      const list = await fetch(`${server.url}/ui/flows/${FLOW}/versions`);
      expect(list.status).toBe(200);
      const html = await list.text();
      expect(html).toContain(`data-version="${versionA}"`);
      expect(html).toContain(`data-version="${versionB}"`);
      expect(html).toContain(`compare?from=${versionA}&amp;to=current`);
      const flowPage = await (await fetch(`${server.url}/ui/flows/${FLOW}`)).text();
      expect(flowPage).toContain(`/ui/flows/${FLOW}/versions`);

      const cmp = await fetch(`${server.url}/ui/flows/${FLOW}/compare?from=${versionA}&to=current`);
      expect(cmp.status).toBe(200);
      const page = await cmp.text();
      expect(page).toContain('+  why:');
      expect(page).toContain('node why added');
      expect(page).toContain('data-changed="main"');
      // actions in words, not JSON
      expect(page).toMatch(/key 2: (outcome|send|go to|hang up)/);
      expect(page).not.toContain('{&quot;type&quot;');
      // % of calls per outcome, per language too
      expect(page).toMatch(
        /outcome declined<\/th><td class="num">1 \(100\.0%\)<\/td><td class="num">0 \(0\.0%\)/,
      );
      expect(page).toContain('data-lang="uk"');
      const bad = await fetch(`${server.url}/ui/flows/${FLOW}/compare?from=x`);
      expect(bad.status).toBe(400);
    });
  });
}
