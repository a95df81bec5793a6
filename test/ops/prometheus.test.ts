/**
 * deploy/prometheus/alerts.yml and deploy/grafana/switchboard.json: the rules pass
 * `promtool check rules` and their unit tests (`promtool test rules`, alerts.test.yml), and
 * every metric and label they read is in a live scrape of a running server, so a renamed
 * metric cannot leave an alert that never fires. promtool is in Debian's `prometheus`
 * package; those two tests are skipped, saying so, without it.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { phone, readJson, uniq } from '../support/app.ts';
import { type ServerProcess, startServerProcess } from '../support/process.ts';
import { eventually } from '../support/server.ts';
import { noTool, onlyIf } from '../support/skip.ts';
import { metricsOf, ROOT, requireTool, scrapedSeries } from './support.ts';

const PROMTOOL = requireTool('promtool', 'prometheus', 'prometheus rules');
const RULES = `${ROOT}/deploy/prometheus/alerts.yml`;

/** Labels Prometheus adds to every scraped series, and the histogram's bucket label. */
const TARGET_LABELS = new Set(['instance', 'job', 'le']);
/** Series Prometheus makes itself for each target, never in the target's own /metrics. */
const SCRAPE_SERIES = new Set(['up']);

interface Rule {
  alert: string;
  expr: string;
}

function ruleExpressions(): { where: string; expr: string }[] {
  const doc = parse(readFileSync(RULES, 'utf8')) as { groups: { rules: Rule[] }[] };
  return doc.groups.flatMap((g) =>
    g.rules.map((r) => ({ where: `alert ${r.alert}`, expr: r.expr })),
  );
}

interface Panel {
  title: string;
  targets?: { expr: string }[];
  panels?: Panel[];
}

function dashboardExpressions(): { where: string; expr: string }[] {
  const doc = JSON.parse(readFileSync(`${ROOT}/deploy/grafana/switchboard.json`, 'utf8')) as {
    panels: Panel[];
  };
  const all = (panels: Panel[]): Panel[] => panels.flatMap((p) => [p, ...all(p.panels ?? [])]);
  return all(doc.panels).flatMap((p) =>
    (p.targets ?? []).map((t) => ({ where: `panel "${p.title}"`, expr: t.expr })),
  );
}

describe('the alerting rules', () => {
  const noPromtool = noTool('promtool', 'prometheus');
  it.skipIf(!PROMTOOL)(onlyIf(!!PROMTOOL, 'pass promtool check rules', noPromtool), () => {
    const run = spawnSync(PROMTOOL!, ['check', 'rules', RULES], { encoding: 'utf8' });
    expect(run.status, run.stdout + run.stderr).toBe(0);
    expect(run.stdout).toMatch(/SUCCESS: \d+ rules found/);
  });

  const unitTests = 'pass their unit tests (promtool test rules alerts.test.yml)';
  it.skipIf(!PROMTOOL)(onlyIf(!!PROMTOOL, unitTests, noPromtool), () => {
    const run = spawnSync(
      PROMTOOL!,
      ['test', 'rules', `${ROOT}/deploy/prometheus/alerts.test.yml`],
      { encoding: 'utf8' },
    );
    expect(run.status, run.stdout + run.stderr).toBe(0);
  });
});

describe('metrics named by the rules and the dashboard, in a live scrape', () => {
  let server: ServerProcess;
  let scrape: Map<string, Set<string>>;
  const dataDir = mkdtempSync(join(tmpdir(), 'switchboard-metrics-'));

  beforeAll(async () => {
    server = await startServerProcess({ DATA_DIR: dataDir });
    // traffic that makes every labelled series appear: a message sent and delivered (dispatch,
    // delivery callbacks), a call (calls by state, speech webhooks), a refused callback, a 404
    const to = phone();
    await fetch(`${server.url}/sandbox/_control/scripts`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ to, keys: ['1'] }),
    });
    const call = await fetch(`${server.url}/v1/calls`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        flow: 'appointment-reminder',
        to,
        from: 'Clinic',
        vars: { name: 'Ann', date: 'Monday 10:00' },
      }),
    });
    expect(call.status).toBe(202);
    const cmid = uniq('metrics');
    const sent = await fetch(`${server.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        messages: [{ from: 'Acme', to: phone(), type: 'sms', text: 'hi', customerMessageId: cmid }],
      }),
    });
    expect(sent.status).toBe(202);
    await fetch(`${server.url}/v1/messages/no-such-message`);
    await fetch(`${server.url}/readyz`);
    await eventually(
      async () =>
        (await readJson(await fetch(`${server.url}/v1/messages/${cmid}`))).status === 'delivered',
      20_000,
      'the message delivered',
    );
    scrape = scrapedSeries(await (await fetch(`${server.url}/metrics`)).text());
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  for (const [what, list] of [
    ['alerts.yml', ruleExpressions],
    ['the Grafana dashboard', dashboardExpressions],
  ] as const) {
    it(`every metric and label ${what} reads is exported`, () => {
      const exprs = list();
      expect(exprs.length).toBeGreaterThan(5);
      const problems: string[] = [];
      for (const { where, expr } of exprs) {
        const metrics = metricsOf(expr);
        if (metrics.size === 0) problems.push(`${where}: no metric found in ${expr}`);
        for (const [name, labels] of metrics) {
          if (SCRAPE_SERIES.has(name)) continue;
          const exported = scrape.get(name);
          if (!exported) {
            problems.push(`${where}: ${name} is not in /metrics`);
            continue;
          }
          for (const label of labels) {
            if (!TARGET_LABELS.has(label) && !exported.has(label)) {
              problems.push(`${where}: ${name} has no label ${label}`);
            }
          }
        }
      }
      expect(problems).toEqual([]);
    });
  }
});
