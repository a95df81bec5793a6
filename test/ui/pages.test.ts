/**
 * The console's pages in-process (`app.request`): each page's HTML (one h1, landmarks,
 * labelled controls, nothing from another origin), searches, counts and paths drawn on the
 * diagram, the live stream, and the "try a flow" form. Each file gets its own flows
 * directory, so the flow's counters start at zero.
 */
import { copyFileSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import { createFlowRegistry } from '../../src/calls/registry.ts';
import { signNodeToken } from '../../src/flows/index.ts';
import { createSandbox, type Sandbox } from '../../src/sandbox/app.ts';
import { buildTestApp, json, phone, readJson, uniq } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';
import { attrs, expectConsolePage, text } from './html.ts';

const dir = mkdtempSync(join(tmpdir(), 'sb-ui-flows-'));
const FLOW = uniq('reminder');
const BROKEN = uniq('broken');
copyFileSync('flows/appointment-reminder.yaml', join(dir, `${FLOW}.yaml`));
writeFileSync(
  join(dir, `${BROKEN}.yaml`),
  'title: Broken\nmenus:\n  main:\n    intro: "x"\n    keys:\n      "1": [ { goto: nowhere } ]\n',
);
const VARS = { name: 'Ann', date: 'Monday 10:00' };

/** The Mermaid sources on a page: one box per menu, and every unrolled node. */
function diagramsOf(html: string) {
  const of = (name: string) =>
    text(html.match(new RegExp(`data-diagram="${name}"[^>]*><pre>([\\s\\S]*?)</pre>`))![1]!);
  return { folded: of('folded'), unrolled: of('unrolled') };
}
const ORIGIN = { origin: 'http://localhost' };

describeEachEngine('console pages', (ctx) => {
  let app: App;
  let built: ReturnType<typeof buildTestApp>;
  let bare: App;
  let sandbox: Sandbox;

  const get = async (path: string, headers: Record<string, string> = {}) => {
    const res = await app.request(path, { headers });
    return { res, html: await res.text() };
  };
  const start = async (to = phone()) => {
    const res = await app.request(
      '/v1/calls',
      json({ flow: FLOW, from: 'Clinic', to, vars: VARS }),
    );
    expect(res.status).toBe(202);
    return readJson(res);
  };
  const press = (callId: string, node: string, key: string) =>
    app.request(
      '/hooks/speechcall',
      json({
        from: 'Clinic',
        mid: 'm',
        action: { token: signNodeToken({ callId, node, key }, built.calls.signingSecret) },
      }),
    );

  beforeAll(() => {
    sandbox = createSandbox({});
    const flows = createFlowRegistry(dir);
    built = buildTestApp(ctx.database(), { flows, sandbox: sandbox.app });
    app = built.app;
    bare = buildTestApp(ctx.database(), { flows }).app;
  });
  afterAll(async () => {
    await sandbox.close();
  });

  it('every page has one h1, landmarks, labelled controls and nothing from another origin', async () => {
    const call = await start();
    const msg = call.customerMessageId;
    const pages: [string, RegExp][] = [
      ['/ui', /Switchboard console/],
      ['/ui/flows', /^Flows$/],
      [`/ui/flows/${FLOW}`, /Flow Appointment reminder/],
      [`/ui/flows/${BROKEN}`, /Flow Broken/],
      ['/ui/calls', /^Calls$/],
      [`/ui/calls/${call.id}`, /Call to \+380/],
      [`/ui/calls/${call.id}/keypad`, new RegExp(`Trying ${FLOW}`)],
      ['/ui/messages', /^Messages$/],
      [`/ui/messages/${msg}`, /Message to \+380/],
      ['/ui/inbound', /Incoming Viber messages/],
      ['/ui/try', /Try a flow/],
      [`/ui/try/${FLOW}`, new RegExp(`Try ${FLOW}`)],
      ['/ui/login', /Sign in/],
    ];
    for (const [path, title] of pages) {
      const { res, html } = await get(path);
      expect(res.status, path).toBe(200);
      expect(res.headers.get('content-type'), path).toMatch(/text\/html/);
      expectConsolePage(html, title);
    }
  });

  it('serves the Mermaid bundle and its own assets from this process', async () => {
    const { html } = await get(`/ui/flows/${FLOW}`);
    // scripts: ours alone (the page's other srcs are its prompts' audio, /prompts/…)
    expect(attrs(html, 'src').filter((s) => !s.startsWith('/prompts/'))).toEqual([
      '/ui/assets/mermaid.min.js',
      '/ui/assets/console.js',
    ]);
    expect(attrs(html, 'href')).toContain('/ui/assets/console.css');
    const bundle = await app.request('/ui/assets/mermaid.min.js');
    expect(bundle.status).toBe(200);
    expect(bundle.headers.get('content-type')).toMatch(/javascript/);
    const body = await bundle.text();
    expect(body.length).toBeGreaterThan(1_000_000);
    expect(body).toContain('flowchart');
    expect((await app.request('/ui/assets/console.js')).status).toBe(200);
    expect((await app.request('/ui/assets/../../package.json')).status).toBe(404);
    expect((await app.request('/ui/assets/secrets.txt')).status).toBe(404);
    // a page without a diagram does not load the bundle
    expect(attrs((await get('/ui/calls')).html, 'src')).toEqual(['/ui/assets/console.js']);
  });

  it('lists flows with version, menus, params and checks; a broken flow shows its problems', async () => {
    const list = text((await get('/ui/flows')).html);
    expect(list).toMatch(
      new RegExp(
        `${FLOW} Appointment reminder [0-9a-f]{12} 2 \\(12 unrolled\\) clinicPhone, date, name 0 errors, 1 warning`,
      ),
    );
    expect(list).toMatch(new RegExp(`${BROKEN} Broken not compiled .* 1 error`));

    const flow = text((await get(`/ui/flows/${FLOW}`)).html);
    expect(flow).toContain('name string yes');
    expect(flow).toContain('clinicPhone phone no');
    expect(flow).toMatch(/warning .*\.yaml:\d+:\d+/);
    const broken = await get(`/ui/flows/${BROKEN}`);
    expect(broken.html).not.toContain('data-diagram');
    expect(text(broken.html)).toMatch(/does not compile/);
    expect(text(broken.html)).toMatch(/error .*\.yaml:6:\d+ .*nowhere/);
  });

  it('draws visit, drop-off and key counts on the diagram, and the same in the table', async () => {
    const a = await start();
    await start(); // answered by nobody yet: a drop-off at the first menu
    expect((await press(a.id, 'main', '2')).status).toBe(200);
    expect((await press(a.id, 'reschedule', '*')).status).toBe(200);

    const { html } = await get(`/ui/flows/${FLOW}`);
    const { folded, unrolled } = diagramsOf(html);
    // every call of this file so far: the first test started one, this one two
    // the spoken menus show their words too (src/flows/mermaid.ts)
    const spoken = '<br/>🔊 #quot;Hello {{name}}. This is a reminder of y…#quot;';
    expect(unrolled).toContain(`n0["0: main${spoken}<br/>visits 3 · dropped 2"]`);
    expect(unrolled).toContain('n1["1: reschedule<br/>visits 1 · dropped 0"]');
    expect(unrolled).toContain(`n2["2: main/v2${spoken}<br/>visits 1 · dropped 1"]`);
    expect(unrolled).toContain('n0 -->|"2 (1)"| n1');
    expect(unrolled).toContain('n1 -->|"*: back to main (1)"| n2');
    expect(unrolled).toMatch(/class n0,n2 dropped/);
    expect(unrolled).toContain('accTitle: Flow Appointment reminder');
    // as written: the copies of main added up
    expect(folded).toContain(`m0["main${spoken}<br/>visits 4 · dropped 3"]`);
    expect(folded).toContain('m1["reschedule<br/>visits 1 · dropped 0"]');
    expect(folded).toContain('m0 -->|"2 (1)"| m1');
    expect(folded).toContain('m1 -->|"* (1)"| m0');
    expect(folded).toContain('m0 -.->|"timeout / wrong: retry"| m0');
    const page = text(html);
    expect(page).toContain('0: main 3 2 2: 1');
    expect(page).toContain('1: reschedule 1 0 *: 1');
  });

  it('searches calls by phone (as typed), id, flow, outcome and state', async () => {
    const to = phone();
    const call = await start(to);
    await press(call.id, 'main', '1');
    const spaced = `${to.slice(0, 4)} ${to.slice(4, 6)} ${to.slice(6, 9)} ${to.slice(9)}`;
    const byPhone = await get(`/ui/calls?to=${encodeURIComponent(spaced)}`);
    expect(byPhone.html).toContain(`href="/ui/calls/${call.id}"`);
    expect((byPhone.html.match(/href="\/ui\/calls\/[0-9a-f-]{36}"/g) ?? []).length).toBe(1);
    expect(byPhone.html).toContain(`value="${spaced}"`);

    const byOutcome = await get(`/ui/calls?outcome=confirmed&flow=${FLOW}&state=ended`);
    expect(byOutcome.html).toContain(`href="/ui/calls/${call.id}"`);
    const none = await get('/ui/calls?outcome=no-such-outcome');
    expect(text(none.html)).toContain('No calls match.');

    const byId = await app.request(`/ui/calls?id=${call.id}`);
    expect(byId.status).toBe(303);
    expect(byId.headers.get('location')).toBe(`/ui/calls/${call.id}`);
    const unknown = await get('/ui/calls?id=nope');
    expect(text(unknown.html)).toContain('No call has the id "nope".');
  });

  it('shows one call with its path highlighted on the diagram, its messages and timeline', async () => {
    const call = await start();
    await press(call.id, 'main', '2');
    const waiting = await get(`/ui/calls/${call.id}`);
    let { folded, unrolled } = diagramsOf(waiting.html);
    expect(unrolled).toContain('class n0 visited');
    expect(unrolled).toContain('class n1 current');
    expect(unrolled).toContain('linkStyle 1 stroke:#b45309');
    expect(folded).toContain('class m0 visited');
    expect(folded).toContain('class m1 current');
    expect(folded).toContain('linkStyle 1 stroke:#b45309');
    expect(waiting.html).toContain(`data-live="/ui/calls/${call.id}/events"`);

    await press(call.id, 'reschedule', '1');
    const ended = await get(`/ui/calls/${call.id}`);
    ({ folded, unrolled } = diagramsOf(ended.html));
    expect(unrolled).toContain('class n0,n1,hangup visited');
    expect(unrolled).not.toMatch(/class n\d+ current/);
    expect(unrolled).toContain('linkStyle 1,4 stroke:#b45309');
    expect(folded).toContain('class m0,m1,hangup visited');
    expect(folded).toContain('linkStyle 1,4 stroke:#b45309');
    const page = text(ended.html);
    expect(page).toMatch(/State ended · outcome reschedule-requested/);
    expect(page).toMatch(/1 main 1 2 .* 2 reschedule 1 1/);
    expect(page).toMatch(/Timeline .* key main 2 .*outcome outcome: reschedule-requested/);
    expect(ended.html).toMatch(/<tr data-role="call" data-type="speechcall">/);
  });

  it('the live stream sends the call as server-sent events', async () => {
    const call = await start();
    await press(call.id, 'main', '1');
    const res = await app.request(`/ui/calls/${call.id}/events`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/text\/event-stream/);
    const reader = res.body!.getReader();
    let got = '';
    while (!got.includes('\n\n')) got += new TextDecoder().decode((await reader.read()).value);
    await reader.cancel();
    expect(got.startsWith('event: call\ndata: {')).toBe(true);
    const data = JSON.parse(got.slice(got.indexOf('data: ') + 6, got.indexOf('\n\n')));
    expect(data).toMatchObject({ state: 'ended', outcome: 'confirmed' });
    expect(data.html).toContain('data-role="follow-up" data-type="sms"');
    expect(data.diagrams.unrolled).toContain('class n0,hangup visited');
    expect(data.diagrams.folded).toContain('class m0,hangup visited');
    expect(
      (await app.request('/ui/calls/00000000-0000-7000-8000-000000000000/events')).status,
    ).toBe(404);
  });

  it('searches messages and shows one with its timeline', async () => {
    const call = await start();
    const found = await app.request(`/ui/messages?ref=${call.customerMessageId}`);
    expect(found.status).toBe(303);
    const location = found.headers.get('location')!;
    expect(location).toBe(`/ui/messages/${call.messageId}`);
    const page = text((await get(location)).html);
    expect(page).toMatch(/Status queued/);
    expect(page).toMatch(/Timeline .* queued api/);
    expect(page).toContain(call.id);
    const to = (await readJson(await app.request(`/v1/calls/${call.id}`))).to;
    const list = await get(`/ui/messages?to=${encodeURIComponent(to)}&type=speechcall`);
    expect(list.html).toContain(`href="/ui/messages/${call.messageId}"`);
    expect(text((await get('/ui/messages?ref=nothing-like-it')).html)).toContain(
      'No message has the id "nothing-like-it".',
    );
  });

  it('lists incoming Viber messages, filtered by sender', async () => {
    const from = phone();
    const words = uniq('hello');
    const res = await app.request(
      '/hooks/viber',
      json({ type: 'viber', messageId: uniq('vb'), from, to: 'Sandbox', text: words }),
    );
    expect(res.status).toBe(200);
    expect(text((await get('/ui/inbound')).html)).toContain(words);
    const mine = text((await get(`/ui/inbound?from=${encodeURIComponent(from)}`)).html);
    expect(mine).toContain(words);
    expect(text((await get(`/ui/inbound?from=${encodeURIComponent(phone())}`)).html)).toContain(
      'No incoming messages match.',
    );
  });

  it('try a flow: the form names what is wrong; a good one starts a live sandbox call', async () => {
    expect((await get('/ui/try')).html).toContain(`href="/ui/try/${FLOW}"`);
    const to = phone();
    const form = (vars: Record<string, string>) =>
      new URLSearchParams({ to, from: 'Clinic', lang: 'en', ...vars });
    const bad = await app.request(`/ui/try/${FLOW}`, {
      method: 'POST',
      headers: ORIGIN,
      body: form({ 'var.name': 'Ann' }),
    });
    expect(bad.status).toBe(400);
    const badHtml = await bad.text();
    expectConsolePage(badHtml, new RegExp(`Try ${FLOW}`));
    expect(badHtml).toMatch(/id="try-var-date"[^>]*aria-invalid="true"/);
    expect(text(badHtml)).toMatch(/vars\.date: /);
    expect(badHtml).toContain('value="Ann"'); // what was typed stays
    expect(sandbox.scripts.list().filter((s) => s.to === to)).toEqual([]);

    const good = await app.request(`/ui/try/${FLOW}`, {
      method: 'POST',
      headers: ORIGIN,
      body: form({ 'var.name': 'Ann', 'var.date': 'Monday' }),
    });
    expect(good.status).toBe(303);
    const id = good.headers.get('location')!.match(/^\/ui\/calls\/([0-9a-f-]{36})\/keypad$/)![1]!;
    const call = await readJson(await app.request(`/v1/calls/${id}`));
    expect(call).toMatchObject({ flow: FLOW, to, vars: { name: 'Ann', date: 'Monday' } });
    expect(sandbox.scripts.list().filter((s) => s.to === to)).toEqual([{ to, live: true }]);

    const keypad = await get(`/ui/calls/${id}/keypad`);
    expect(keypad.html).toContain(`action="/ui/calls/${id}/keys"`);
    expect(attrs(keypad.html, 'aria-label')).toEqual(
      expect.arrayContaining(['Press 1', 'Press star', 'Press hash']),
    );
    const wrongKey = await app.request(`/ui/calls/${id}/keys`, {
      method: 'POST',
      headers: { ...ORIGIN, accept: 'application/json' },
      body: new URLSearchParams({ key: 'x' }),
    });
    expect(wrongKey.status).toBe(400);
    expect((await readJson(wrongKey)).ok).toBe(false);
    // without JavaScript the keypad is a plain form: back to the page, which says what happened
    const plain = await app.request(`/ui/calls/${id}/keys`, {
      method: 'POST',
      headers: ORIGIN,
      body: new URLSearchParams({ key: 'x' }),
    });
    expect(plain.status).toBe(303);
    expect(plain.headers.get('location')).toBe(`/ui/calls/${id}/keypad?error=bad-key`);
    const back = text((await get(plain.headers.get('location')!)).html);
    expect(back).toContain('That is not a key of the keypad.');
    // a form post from another site is refused
    const forged = await app.request(`/ui/try/${FLOW}`, {
      method: 'POST',
      headers: { origin: 'http://evil.example' },
      body: form({ 'var.name': 'Ann', 'var.date': 'Monday' }),
    });
    expect(forged.status).toBe(403);
  });

  it('without the sandbox (a real provider) there is nothing to try, and says so', async () => {
    const page = text(await (await bare.request('/ui/try')).text());
    expect(page).toMatch(/built-in sandbox is not running/);
    const call = await start();
    const res = await bare.request(`/ui/calls/${call.id}/keys`, {
      method: 'POST',
      headers: { ...ORIGIN, accept: 'application/json' },
      body: new URLSearchParams({ key: '1' }),
    });
    expect(res.status).toBe(409);
  });

  it('unknown pages, flows and calls are HTML 404s', async () => {
    for (const path of [
      '/ui/nope',
      '/ui/flows/nope',
      '/ui/calls/00000000-0000-7000-8000-000000000000',
      '/ui/messages/nope',
    ]) {
      const { res, html } = await get(path);
      expect(res.status, path).toBe(404);
      expectConsolePage(html, /Not found/);
    }
  });
});
