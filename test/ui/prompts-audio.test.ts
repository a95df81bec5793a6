/**
 * The console plays spoken prompts (issue 25): a call's page plays the prompts its menus
 * played (same-origin `/prompts/…` audio), the keypad page names the prompt playing now, the
 * flow page plays a shared prompt and has a form that previews one with params through
 * GET /ui/flows/{id}/say, whose audio differs with the vars typed and which answers a bad
 * node, language or vars with a 4xx page, never a 500. On the real engine (eSpeak NG).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import { createFlowRegistry } from '../../src/calls/registry.ts';
import { createSandbox, type Sandbox } from '../../src/sandbox/app.ts';
import { buildTestApp, json, phone, readJson, uniq } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';
import { attrs, expectConsolePage, text } from './html.ts';

const dir = mkdtempSync(join(tmpdir(), 'sb-ui-say-'));
const FLOW = uniq('greet');
writeFileSync(
  join(dir, `${FLOW}.yaml`),
  `params:
  name: string
  day: { type: string, default: Monday }
languages: [en, uk]
menus:
  main:
    intro:
      say:
        en: "Hello {{name}}, see you on {{day}}. Press 1."
        uk: "Добрий день, {{name}}. Натисніть 1."
    reprompt: { say: "Press 1 to confirm." }
    retries: 1
    keys:
      "1": [ { goto: bye } ]
    wrong: [ { outcome: no-answer }, hangup ]
  bye:
    intro: ivr_651854
    keys:
      "1": [ { outcome: confirmed }, hangup ]
    wrong: [ { outcome: no-answer }, hangup ]
`,
);

/** A WAV file's bytes: RIFF … WAVE. */
function isWav(body: Uint8Array): boolean {
  const head = new TextDecoder().decode(body.slice(0, 12));
  return head.startsWith('RIFF') && head.endsWith('WAVE');
}

describeEachEngine('console: spoken prompts', (ctx) => {
  let app: App;
  let built: ReturnType<typeof buildTestApp>;
  let sandbox: Sandbox;

  const get = async (path: string) => {
    const res = await app.request(path);
    return { res, html: await res.text() };
  };
  const audioOf = async (path: string) => {
    const res = await app.request(path);
    return { res, body: new Uint8Array(await res.arrayBuffer()) };
  };

  beforeAll(async () => {
    sandbox = createSandbox({});
    const flows = createFlowRegistry(dir);
    built = buildTestApp(ctx.database(), { flows, sandbox: sandbox.app });
    app = built.app;
    // as the server does when a flow loads: its prompts without params are stored, shared
    const loaded = await flows.get(FLOW);
    await built.spoken.prepareFlow(loaded!.compiled!);
  });
  afterAll(async () => {
    await sandbox.close();
  });

  it("plays a call's own prompt and names the others on its page and its keypad", async () => {
    const res = await app.request(
      '/v1/calls',
      json({ flow: FLOW, from: 'Clinic', to: phone(), vars: { name: 'Maria' } }),
    );
    expect(res.status).toBe(202);
    const call = await readJson(res);

    const { res: page, html } = await get(`/ui/calls/${call.id}`);
    expect(page.status).toBe(200);
    expectConsolePage(html, /Call to \+380/);
    const section = html.slice(html.indexOf('id="prompts-heading"'));
    const audios = attrs(section, 'src').filter((s) => s.startsWith('/prompts/'));
    // the intro (the call's own, with Maria) and the shared reprompt; `bye` is a provider id
    expect(audios).toHaveLength(2);
    expect(text(section)).toContain('provider audio id ivr_651854');
    expect(text(section)).toContain('Hello Maria, see you on Monday. Press 1.');
    expect(text(section)).toMatch(/0: main \(now\)/);
    for (const src of audios) {
      const { res: a, body } = await audioOf(src);
      expect(a.status, src).toBe(200);
      expect(a.headers.get('content-type')).toBe('audio/wav');
      expect(isWav(body)).toBe(true);
    }

    // the keypad page: the menu the callee is in, and its prompt (the call's own)
    const keypad = await get(`/ui/calls/${call.id}/keypad`);
    expectConsolePage(keypad.html, new RegExp(`Trying ${FLOW}`));
    const now = keypad.html.match(/<audio[^>]*data-now-playing[^>]*>/)?.[0] ?? '';
    expect(attrs(now, 'src')).toEqual([audios[0]]);
    expect(text(keypad.html)).toContain('Menu main : “Hello Maria, see you on Monday. Press 1.”');
  });

  it('plays the shared prompt on the flow page and previews one with params', async () => {
    const { res, html } = await get(`/ui/flows/${FLOW}`);
    expect(res.status).toBe(200);
    expectConsolePage(html, new RegExp(`Flow ${FLOW}`));
    const section = html.slice(html.indexOf('id="flow-prompts-heading"'));
    // the reprompt has no params: its shared audio plays from here, one per language (the
    // same words, spoken by each language's voice)
    const shared = attrs(section, 'src').filter((s) => s.startsWith('/prompts/'));
    expect(new Set(shared).size).toBe(2);
    for (const src of shared) {
      const { res: a, body } = await audioOf(src);
      expect(a.status, src).toBe(200);
      expect(a.headers.get('content-type')).toBe('audio/wav');
      expect(isWav(body)).toBe(true);
    }
    expect(text(section)).toContain('provider audio id ivr_651854');

    // the intro has params: a GET form per language, the default filled in
    const forms = [...section.matchAll(/<form[^>]*data-say[\s\S]*?<\/form>/g)].map((m) => m[0]);
    expect(forms).toHaveLength(2);
    expect(attrs(forms[0]!, 'action')).toEqual([`/ui/flows/${FLOW}/say`]);
    expect(forms[0]).toContain('name="node" value="main"');
    expect(forms[0]).toContain('name="lang" value="en"');
    expect(forms[0]).toMatch(/name="var\.name" value=""/);
    expect(forms[0]).toMatch(/name="var\.day" value="Monday"/);
    expect(forms[1]).toContain('name="lang" value="uk"');
    expect(forms[1]).not.toContain('var.day'); // the Ukrainian text does not say it

    const say = (name: string) =>
      audioOf(`/ui/flows/${FLOW}/say?node=main&lang=en&var.name=${name}&var.day=Friday`);
    const ann = await say('Ann');
    expect(ann.res.status).toBe(200);
    expect(ann.res.headers.get('content-type')).toBe('audio/wav');
    expect(ann.res.headers.get('cache-control')).toBe('no-store');
    expect(isWav(ann.body)).toBe(true);
    const bartholomew = await say('Bartholomew');
    expect(isWav(bartholomew.body)).toBe(true);
    expect(Buffer.from(bartholomew.body).equals(Buffer.from(ann.body))).toBe(false);
  });

  it('answers a bad node, language or vars with a console page, never a 500', async () => {
    const cases: [string, number][] = [
      [`/ui/flows/${FLOW}/say?node=nowhere&lang=en&var.name=Ann`, 404],
      [`/ui/flows/${FLOW}/say?lang=en`, 404],
      [`/ui/flows/${FLOW}/say?node=main&lang=fr&var.name=Ann`, 400],
      [`/ui/flows/${FLOW}/say?node=bye&lang=en`, 400], // recorded audio: nothing to speak
      [`/ui/flows/${FLOW}/say?node=main&lang=en`, 400], // name is required
      [`/ui/flows/${uniq('none')}/say?node=main&lang=en`, 404],
    ];
    for (const [path, status] of cases) {
      const { res, html } = await get(path);
      expect(res.status, path).toBe(status);
      expect(res.headers.get('content-type'), path).toMatch(/text\/html/);
      expect(html, path).toContain('class="notice error"');
    }
  });
});

// the flows directory serves every engine's run: removed once all are done
afterAll(() => rmSync(dir, { recursive: true, force: true }));
