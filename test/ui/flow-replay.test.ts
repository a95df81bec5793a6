/**
 * "Replay before release" in the console (issue 24, point 4): `/ui/flows/{id}/replay` shows a
 * form prefilled with the flow's file; a draft pasted there or uploaded as a file is replayed
 * over the flow's stored calls (started and advanced through the app, as real ones are) and
 * the page shows the report: totals, outcomes before and after, each differing call with
 * where its path parts. A draft that does not compile, a bad period and an unknown flow get
 * a page that says so (file:line for the draft).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import { signNodeToken } from '../../src/flows/index.ts';
import { buildTestApp, json, phone, readJson } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';
import { expectConsolePage, text } from './html.ts';

const FLOW = 'ui-replay';
const SOURCE = `title: UI replay
params:
  name: string
assert: { outcomeOnEveryPath: false }
menus:
  main:
    intro: "Hello {{name}}: 1 to confirm, 2 for more"
    keys:
      "1": [ { outcome: confirmed }, hangup ]
      "2": [ { goto: more } ]
  more:
    intro: "1 to talk to us"
    keys:
      "1": [ { outcome: callback }, { send: { type: sms, text: "We will call you, {{name}}." } }, hangup ]
`;
/** Key 2 now confirms at once: the `more` menu is gone. */
const CHANGED = `title: UI replay
params:
  name: string
assert: { outcomeOnEveryPath: false }
menus:
  main:
    intro: "Hello {{name}}: 1 or 2 to confirm"
    keys:
      "1": [ { outcome: confirmed }, hangup ]
      "2": [ { outcome: confirmed }, hangup ]
`;

const origin = { origin: 'http://localhost' };

describeEachEngine('the replay page', (ctx) => {
  let app: App;
  let built: ReturnType<typeof buildTestApp>;
  let moreId: string;

  const start = async () => {
    const res = await app.request(
      '/v1/calls',
      json({ flow: FLOW, from: 'Shop', to: phone(), vars: { name: 'Ann' } }),
    );
    expect(res.status).toBe(202);
    return (await readJson(res)).id as string;
  };
  const press = async (callId: string, node: string, key: string) => {
    const token = signNodeToken({ callId, node, key }, built.calls.signingSecret);
    const res = await app.request(
      '/hooks/speechcall',
      json({ from: 'Shop', mid: 'm', action: { token } }),
    );
    expect(res.status).toBe(200);
  };
  const post = (fields: Record<string, string>, id = FLOW) =>
    app.request(`/ui/flows/${id}/replay/run`, {
      method: 'POST',
      headers: { ...origin, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(fields).toString(),
    });

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sb-ui-replay-'));
    writeFileSync(join(dir, `${FLOW}.yaml`), SOURCE);
    built = buildTestApp(ctx.database(), { env: { FLOWS_DIR: dir } });
    app = built.app;
    await press(await start(), 'main', '1');
    moreId = await start();
    await press(moreId, 'main', '2');
    await press(moreId, 'more', '1');
  });

  it('shows the form, prefilled with the flow file and a week back', async () => {
    const res = await app.request(`/ui/flows/${FLOW}/replay`);
    expect(res.status).toBe(200);
    const html = await res.text();
    expectConsolePage(html, `Replay calls of ${FLOW}`);
    expect(html).toContain(`action="/ui/flows/${FLOW}/replay/run"`);
    expect(html).toContain('enctype="multipart/form-data"');
    expect(text(html)).toContain('"Hello {{name}}: 1 to confirm, 2 for more"');
    expect(html).toMatch(/<input id="replay-since" name="since" required="" value="7d"/);
    expect(html).toMatch(/<input id="replay-file" name="file" type="file"/);
  });

  it('replays a pasted draft and shows each differing call and the totals', async () => {
    const res = await post({ source: CHANGED, since: '1h' });
    expect(res.status).toBe(200);
    const html = await res.text();
    expectConsolePage(html, `Replay calls of ${FLOW}`);
    const page = text(html);
    expect(page).toContain('2 calls since');
    expect(page).toContain('2 replayed, 1 the same, 1 differing, 0 skipped.');
    expect(page).toMatch(/Differing path 1 Differing outcome 1 Differing follow-ups 1/);
    expect(page).toMatch(/Outcomes before callback: 1 confirmed: 1 Outcomes after confirmed: 2/);
    // the one call that went to `more`, linked, with where its path parts
    expect(html).toContain(`<li data-call="${moreId}"><a href="/ui/calls/${moreId}">`);
    expect(page).toContain('path parts at step 2: more:1 before, nothing (the call ends) after');
    expect(page).toContain('outcome callback → confirmed');
    expect(page).toContain('follow-ups: before sms: We will call you, Ann.; after (none)');
    // the draft stays in the form for the next try
    expect(page).toContain('"Hello {{name}}: 1 or 2 to confirm"');
  });

  it('replays an uploaded file instead of the text', async () => {
    const body = new FormData();
    body.set('source', SOURCE);
    body.set('since', '1h');
    body.set('file', new File([CHANGED], 'changed.yaml', { type: 'application/yaml' }));
    const res = await app.request(`/ui/flows/${FLOW}/replay/run`, {
      method: 'POST',
      headers: origin,
      body,
    });
    expect(res.status).toBe(200);
    expect(text(await res.text())).toContain('2 replayed, 1 the same, 1 differing');
  });

  it('says the draft does not compile, at its line; a bad period; an unknown flow', async () => {
    const broken = CHANGED.replace(
      '"2": [ { outcome: confirmed }, hangup ]',
      '"2": [ { goto: gone } ]',
    );
    const line = broken.split('\n').findIndex((l) => l.includes('gone')) + 1;
    const res = await post({ source: broken, since: '1h' });
    expect(res.status).toBe(400);
    const page = text(await res.text());
    expect(page).toContain(`the changed flow "${FLOW}" does not compile`);
    expect(page).toMatch(new RegExp(`flows/${FLOW}\\.yaml:${line}:\\d+ `));
    expect(page).not.toContain('replayed,');

    const since = await post({ source: CHANGED, since: 'yesterday' });
    expect(since.status).toBe(400);
    expect(text(await since.text())).toContain(
      'since: must be a time back from now (30m, 12h, 7d, 2w) or an ISO 8601 time',
    );

    expect((await app.request('/ui/flows/no-such-flow/replay')).status).toBe(404);
    expect((await post({ source: CHANGED, since: '1h' }, 'no-such-flow')).status).toBe(404);
  });
});
