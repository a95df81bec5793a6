/**
 * The flow editor's console routes and `PUT /v1/flows/{id}` in-process: the check route
 * answers a broken draft with file:line:column problems and a good one with its Mermaid
 * diagram (JSON for the page's script, the page again without it); tests run against the
 * draft, and a stored call (started and answered through the app) is replayed through it; the
 * download is an attachment. Saving is refused while FLOWS_WRITABLE is off, from another
 * site, without a token, with a token that is not an administrator's, and for a draft that
 * does not compile (the file untouched); with both, the file is replaced whole (a new
 * inode: written beside it and renamed) and the next `GET /v1/flows/{id}` serves it. Each
 * app has its own flows directory, never the repository's.
 */
import {
  copyFileSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { beforeAll, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import { rowsOf } from '../../src/db/client.ts';
import { signNodeToken } from '../../src/flows/index.ts';
import { buildTestApp, json, phone, readJson, uniq } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';
import { expectConsolePage, text } from './html.ts';

const ADMIN = 'flow-edit-api-token-5f0e';
const UI = 'flow-edit-ui-token-77c1';
const FLOW = uniq('reminder');
const ORIGINAL = readFileSync('flows/appointment-reminder.yaml', 'utf8');
/** Line 19 (`"9": [ { goto: main } ]`) with a key that is no key. */
const BROKEN = ORIGINAL.replace('"9": [ { goto: main } ]', '"9x": [ { goto: main } ]');
/**
 * The same flow with another outcome for key 1 (its `assert:` paths follow, so it compiles)
 * and another title.
 */
const CHANGED = ORIGINAL.replaceAll('outcome: confirmed', 'outcome: accepted').replace(
  'title: Appointment reminder',
  'title: Appointment reminder, edited',
);
const TESTS = `vars: { name: Ann, date: Monday }
cases:
  - name: confirms with 1
    keys: [1]
    expect:
      outcome: confirmed
`;

function flowsDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'sb-flow-edit-'));
  copyFileSync('flows/appointment-reminder.yaml', join(dir, `${FLOW}.yaml`));
  writeFileSync(join(dir, `${FLOW}.test.yaml`), TESTS);
  return dir;
}

const form = (fields: Record<string, string>, headers: Record<string, string> = {}) => ({
  method: 'POST',
  headers: {
    origin: 'http://localhost',
    authorization: `Bearer ${UI}`,
    'content-type': 'application/x-www-form-urlencoded',
    ...headers,
  },
  body: new URLSearchParams(fields).toString(),
});
const bearer = (token: string, init: RequestInit = {}): RequestInit => ({
  ...init,
  headers: { ...(init.headers as Record<string, string>), authorization: `Bearer ${token}` },
});
const edit = (path = '') => `/ui/flows/${FLOW}${path}`;

describeEachEngine('the flow editor', (ctx) => {
  let readOnly: App;
  let readOnlyDir: string;
  /** a call of the flow, key 1 pressed: confirmed, replayed by the editor's replay */
  let storedCall: string;
  let writable: App;
  let writableDir: string;
  let readToken: { name: string; token: string };
  let adminToken: { name: string; token: string };

  const makeToken = async (app: App, scopes: string[]) => {
    const name = uniq('editor');
    const res = await app.request('/v1/tokens', bearer(ADMIN, json({ name, scopes })));
    expect(res.status).toBe(201);
    return { name, token: (await readJson(res)).token as string };
  };

  beforeAll(async () => {
    readOnlyDir = flowsDir();
    writableDir = flowsDir();
    const env = { API_TOKEN: ADMIN, UI_TOKEN: UI };
    const built = buildTestApp(ctx.database(), { env: { ...env, FLOWS_DIR: readOnlyDir } });
    readOnly = built.app;
    const started = await readOnly.request(
      '/v1/calls',
      bearer(
        ADMIN,
        json({ flow: FLOW, from: 'Clinic', to: phone(), vars: { name: 'Ann', date: 'Monday' } }),
      ),
    );
    expect(started.status).toBe(202);
    storedCall = (await readJson(started)).id as string;
    const token = signNodeToken(
      { callId: storedCall, node: 'main', key: '1' },
      built.calls.signingSecret,
    );
    const pressed = await readOnly.request(
      '/hooks/speechcall',
      json({ from: 'Clinic', mid: 'm', action: { token } }),
    );
    expect(pressed.status).toBe(200);
    writable = buildTestApp(ctx.database(), {
      env: { ...env, FLOWS_DIR: writableDir, FLOWS_WRITABLE: 'true' },
    }).app;
    readToken = await makeToken(writable, ['read']);
    adminToken = await makeToken(writable, ['admin']);
  });

  it('shows the flow in an editor with its diagram, tests and buttons; no save while writing is off', async () => {
    const res = await readOnly.request(edit('/edit'), bearer(UI));
    expect(res.status).toBe(200);
    const html = await res.text();
    expectConsolePage(html, `Edit flow ${FLOW}`);
    const area = html.match(/<textarea[^>]*id="source"[^>]*>([\s\S]*?)<\/textarea>/)?.[1];
    // the textarea's first newline is dropped by browsers: the draft follows it whole
    expect(text(area ?? '').trim()).toBe(text(ORIGINAL).trim());
    expect(html).toMatch(/<textarea[^>]*id="tests"[^>]*>\n[\s\S]*confirms with 1/);
    expect(html).toMatch(/data-edit-diagram="folded"[^>]*><pre>flowchart TD/);
    expect(html).toContain('src="/ui/assets/flow-edit.js"');
    for (const name of ['Check', 'Download', 'Run tests', 'Replay']) {
      expect(html).toMatch(new RegExp(`<button[^>]*>\\s*${name}\\s*</button>`));
    }
    expect(html).not.toContain('Save to flows/');
    expect(text(html)).toContain('Saving is off on this instance (FLOWS_WRITABLE)');
    // the script is served with the console's assets
    const script = await readOnly.request('/ui/assets/flow-edit.js');
    expect(script.status).toBe(200);
    expect(await script.text()).toContain('data-flow-edit');
    // the flow page links to its editor
    expect(await (await readOnly.request(`/ui/flows/${FLOW}`, bearer(UI))).text()).toContain(
      `href="/ui/flows/${FLOW}/edit"`,
    );
  });

  it('checks a draft as JSON: file:line:column for a broken one, the Mermaid diagram for a good one', async () => {
    const accept = { accept: 'application/json' };
    const broken = await readJson(
      await readOnly.request(edit('/check'), form({ source: BROKEN }, accept)),
    );
    expect(broken).toMatchObject({ ok: false, version: null, diagram: null, warnings: [] });
    expect(broken.errors).toEqual([
      {
        file: `flows/${FLOW}.yaml`,
        line: 22,
        column: 7,
        rule: 'INVALID_KEY',
        severity: 'error',
        message: '"9x" is not a key: keys are 0-9, * and # (quote * and # in YAML)',
        path: 'menus.main.keys.9x',
      },
    ]);

    // a browser sends a textarea's lines with CRLF: read as the file's LF
    const good = await readJson(
      await readOnly.request(
        edit('/check'),
        form({ source: CHANGED.replace(/\n/g, '\r\n') }, accept),
      ),
    );
    expect(good.ok).toBe(true);
    expect(good.errors).toEqual([]);
    expect(good.version).toMatch(/^[0-9a-f]{16,}$/);
    expect(good.diagram.folded.split('\n')[0]).toBe('flowchart TD');
    expect(good.diagram.folded).toContain('accepted');
    expect(good.diagram.folded).not.toContain('confirmed');
    expect(good.diagram.unrolled).toContain('flowchart TD');
  });

  it('checks a draft without JavaScript: the page again, with the draft and its problems', async () => {
    const res = await readOnly.request(edit('/check'), form({ source: BROKEN }));
    expect(res.status).toBe(200);
    const html = await res.text();
    expectConsolePage(html, `Edit flow ${FLOW}`);
    const area = html.match(/<textarea[^>]*id="source"[^>]*>([\s\S]*?)<\/textarea>/)?.[1];
    expect(text(area ?? '')).toContain('"9x": [ { goto: main } ]');
    expect(html).toMatch(
      new RegExp(`data-line="22" data-column="7">flows/${FLOW}\\.yaml:22:7</a>`),
    );
    expect(text(html)).toContain('1 error: the draft does not compile.');
    expect(html).toMatch(/data-edit-diagram="folded"[^>]*><pre><\/pre>/);
  });

  it('runs the tests against the draft and replays stored calls through it', async () => {
    const passing = await (
      await readOnly.request(edit('/test'), form({ source: ORIGINAL, tests: TESTS }))
    ).text();
    expect(passing).toContain('data-test-report');
    expect(text(passing)).toContain('1 passed, 0 failed');

    const failing = await (
      await readOnly.request(edit('/test'), form({ source: CHANGED, tests: TESTS }))
    ).text();
    expect(text(failing)).toContain('0 passed, 1 failed');
    expect(failing).toMatch(/<tr data-ok="false">[\s\S]*confirms with 1[\s\S]*outcome/);

    // a draft that does not compile runs nothing
    const refused = await readOnly.request(edit('/test'), form({ source: BROKEN, tests: TESTS }));
    expect(refused.status).toBe(400);
    expect(await refused.text()).not.toContain('data-test-report');

    const replay = await readOnly.request(edit('/replay'), form({ source: CHANGED, since: '7d' }));
    expect(replay.status).toBe(200);
    const replayed = await replay.text();
    expect(replayed).toContain('data-replay-report');
    expectConsolePage(replayed, `Edit flow ${FLOW}`);
    // the stored call pressed 1: confirmed then, accepted with the draft
    expect(text(replayed)).toContain('1 replayed, 0 the same, 1 differing, 0 skipped.');
    expect(replayed).toContain(`<li data-call="${storedCall}">`);
    expect(text(replayed)).toContain('outcome confirmed → accepted');
    const badSince = await readOnly.request(
      edit('/replay'),
      form({ source: CHANGED, since: 'last tuesday' }),
    );
    expect(badSince.status).toBe(400);
    expect(text(await badSince.text())).toContain('"Calls since" must be like 7d');
  });

  it('downloads the draft, or its tests, as an attachment', async () => {
    const res = await readOnly.request(
      edit('/download'),
      form({ source: CHANGED.replace(/\n/g, '\r\n'), tests: TESTS }),
    );
    expect(res.status).toBe(200);
    expect(res.headers.get('content-disposition')).toBe(`attachment; filename="${FLOW}.yaml"`);
    expect(await res.text()).toBe(CHANGED);
    const tests = await readOnly.request(
      edit('/download'),
      form({ source: CHANGED, tests: TESTS, what: 'tests' }),
    );
    expect(tests.headers.get('content-disposition')).toBe(
      `attachment; filename="${FLOW}.test.yaml"`,
    );
    expect(await tests.text()).toBe(TESTS);
  });

  it('refuses to save while FLOWS_WRITABLE is off, in the console and the API', async () => {
    const file = join(readOnlyDir, `${FLOW}.yaml`);
    const res = await readOnly.request(edit('/save'), form({ source: CHANGED, token: ADMIN }));
    expect(res.status).toBe(403);
    expect(text(await res.text())).toContain('Saving is off on this instance');
    const put = await readOnly.request(
      `/v1/flows/${FLOW}`,
      bearer(ADMIN, json({ source: CHANGED }, { method: 'PUT' })),
    );
    expect(put.status).toBe(403);
    expect((await readJson(put)).error.code).toBe('FLOWS_READ_ONLY');
    expect(readFileSync(file, 'utf8')).toBe(ORIGINAL);
  });

  it('saves from the console only with an admin token and a draft that compiles', async () => {
    const file = join(writableDir, `${FLOW}.yaml`);
    const page = await (await writable.request(edit('/edit'), bearer(UI))).text();
    expect(page).toContain('Save to flows/');
    expect(page).toMatch(/<input[^>]*id="token"[^>]*type="password"/);

    const save = (token: string, source = CHANGED) =>
      writable.request(edit('/save'), form({ source, token }));
    // a form posted from another site is refused before the token is looked at (CSRF)
    const crossSite = await writable.request(
      edit('/save'),
      form({ source: CHANGED, token: adminToken.token }, { origin: 'https://elsewhere.example' }),
    );
    expect(crossSite.status).toBe(403);
    expect(readFileSync(file, 'utf8')).toBe(ORIGINAL);
    const none = await save('');
    expect(none.status).toBe(401);
    expect(text(await none.text())).toContain('Saving needs an administration token');
    // the console's own token opens the console, not the flows directory
    expect((await save(UI)).status).toBe(401);
    const read = await save(readToken.token);
    expect(read.status).toBe(403);
    expect(text(await read.text())).toContain('has no admin scope');
    const invalid = await save(adminToken.token, BROKEN);
    expect(invalid.status).toBe(400);
    expect(await invalid.text()).toMatch(new RegExp(`flows/${FLOW}\\.yaml:22:7`));
    expect(readFileSync(file, 'utf8')).toBe(ORIGINAL);

    const inode = statSync(file).ino;
    const saved = await save(adminToken.token);
    expect(saved.status).toBe(303);
    const location = saved.headers.get('location') ?? '';
    expect(location).toMatch(new RegExp(`^/ui/flows/${FLOW}/edit\\?saved=[0-9a-f]+$`));
    expect(readFileSync(file, 'utf8')).toBe(CHANGED);
    expect(statSync(file).ino).not.toBe(inode);
    expect(readdirSync(writableDir).filter((n) => n.endsWith('.tmp'))).toEqual([]);

    const flow = await readJson(await writable.request(`/v1/flows/${FLOW}`, bearer(ADMIN)));
    expect(flow.title).toBe('Appointment reminder, edited');
    expect(location).toContain(`saved=${flow.version}`);
    const after = await (await writable.request(location, bearer(UI))).text();
    expect(text(after)).toContain(
      `Saved flows/${FLOW}.yaml (version ${flow.version.slice(0, 12)})`,
    );

    // the audit log names the token and the flow: the refused attempts, then the save
    const rows = rowsOf<{ token: string; status: number; changes: unknown }>(
      await ctx
        .database()
        .db.execute(
          sql`select token, status, changes from audit_log where route = ${'/ui/flows/{id}/save'} order by id`,
        ),
    );
    expect(rows).toEqual([
      { token: readToken.name, status: 403, changes: {} },
      { token: adminToken.name, status: 400, changes: {} },
      {
        token: adminToken.name,
        status: 200,
        changes: { changed: { flows: { count: 1, ids: [FLOW] } } },
      },
    ]);
  });

  it('writes through PUT /v1/flows/{id}: admin only, never an invalid draft, new flows with 201', async () => {
    const file = join(writableDir, `${FLOW}.yaml`);
    const put = (token: string, id: string, source: string) =>
      writable.request(`/v1/flows/${id}`, bearer(token, json({ source }, { method: 'PUT' })));
    const before = readFileSync(file, 'utf8');

    const read = await put(readToken.token, FLOW, ORIGINAL);
    expect(read.status).toBe(403);
    expect((await readJson(read)).error.code).toBe('INSUFFICIENT_SCOPE');

    const invalid = await put(adminToken.token, FLOW, BROKEN);
    expect(invalid.status).toBe(400);
    const body = await readJson(invalid);
    expect(body.error.code).toBe('INVALID_FLOW');
    expect(body.error.details).toEqual([
      {
        path: 'source',
        code: 'INVALID_KEY',
        message: `${file}:22:7 "9x" is not a key: keys are 0-9, * and # (quote * and # in YAML)`,
      },
    ]);
    expect(readFileSync(file, 'utf8')).toBe(before);

    const ok = await put(adminToken.token, FLOW, ORIGINAL);
    expect(ok.status).toBe(200);
    const written = await readJson(ok);
    expect(written).toMatchObject({ id: FLOW, file, created: false });
    expect(readFileSync(file, 'utf8')).toBe(ORIGINAL);
    const served = await readJson(await writable.request(`/v1/flows/${FLOW}`, bearer(ADMIN)));
    expect(served.version).toBe(written.version);
    expect(served.title).toBe('Appointment reminder');

    const fresh = uniq('new-flow');
    const created = await put(ADMIN, fresh, ORIGINAL);
    expect(created.status).toBe(201);
    expect(await readJson(created)).toMatchObject({ id: fresh, created: true });
    expect(readFileSync(join(writableDir, `${fresh}.yaml`), 'utf8')).toBe(ORIGINAL);
    expect((await writable.request(`/v1/flows/${fresh}`, bearer(ADMIN))).status).toBe(200);

    // an id is a file name, never a path
    const outside = await put(ADMIN, '..%2Fescape', ORIGINAL);
    expect(outside.status).toBe(400);
    expect((await readJson(outside)).error.code).toBe('VALIDATION_ERROR');
    expect(readdirSync(writableDir).filter((n) => n.endsWith('.tmp'))).toEqual([]);
  });
});
