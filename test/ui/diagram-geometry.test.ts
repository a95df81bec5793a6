/**
 * The diagrams as Mermaid lays them out: every example flow, folded and unrolled, drawn by the
 * same Mermaid bundle and settings the console uses, in Debian's Chromium. The `on:` box must
 * sit where no edge passes: no point of any edge's path lies inside that box's rectangle.
 *
 * Needs Chromium at /usr/bin/chromium (`apt-get install -y chromium`), or CHROMIUM_PATH;
 * skipped, saying so, when it is missing.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { type BrowserContext, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isFlowFile, loadFlowFile } from '../../src/flows/index.ts';
import { flowDiagram } from '../../src/ui/diagram.ts';
import { onlyIf } from '../support/skip.ts';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const HAVE_CHROMIUM = existsSync(CHROMIUM);
if (!HAVE_CHROMIUM) {
  console.warn(
    `diagram-geometry: skipped, no Chromium at ${CHROMIUM} (apt-get install -y chromium, or set CHROMIUM_PATH)`,
  );
}
const MERMAID = join(
  dirname(createRequire(import.meta.url).resolve('mermaid/package.json')),
  'dist',
  'mermaid.min.js',
);
const FLOWS = readdirSync('flows')
  .filter(isFlowFile)
  .map((f) => join('flows', f));

interface Geometry {
  box: { x: number; y: number; width: number; height: number } | null;
  edges: number;
  /** edge paths with a point inside the box: [edge id, x, y] */
  crossing: Array<[string, number, number]>;
}

// Runs in the page (the tests have no DOM types, so it is kept as text): renders the source as
// the console does, then samples every edge path pixel by pixel against the on: box.
const MEASURE = `async (text) => {
  window.drawn = (window.drawn ?? 0) + 1;
  const { svg } = await window.mermaid.render('geometry-' + window.drawn, text);
  const host = document.getElementById('host');
  host.innerHTML = svg;
  const cluster = [...host.querySelectorAll('g.cluster')].find((g) =>
    (g.getAttribute('id') ?? '').includes('reactions'),
  );
  const rect = cluster?.querySelector('rect')?.getBoundingClientRect() ?? null;
  const paths = [...host.querySelectorAll('path.flowchart-link')];
  const crossing = [];
  if (rect) {
    for (const path of paths) {
      const ctm = path.getScreenCTM();
      if (!ctm) continue;
      const length = path.getTotalLength();
      for (let at = 0; at <= length; at += 2) {
        const p = path.getPointAtLength(at).matrixTransform(ctm);
        // inside by more than a pixel: a path may at most touch the border
        if (p.x > rect.left + 1 && p.x < rect.right - 1 && p.y > rect.top + 1 && p.y < rect.bottom - 1) {
          crossing.push([path.id, Math.round(p.x), Math.round(p.y)]);
          break;
        }
      }
    }
  }
  return {
    box: rect && { x: rect.x, y: rect.y, width: rect.width, height: rect.height },
    edges: paths.length,
    crossing,
  };
}`;

/** Renders `source` as the console does and measures the reactions box against every edge. */
async function measure(page: Page, source: string): Promise<Geometry> {
  return (await page.evaluate(`(${MEASURE})(${JSON.stringify(source)})`)) as Geometry;
}

const noChromium = `no Chromium at ${CHROMIUM}: apt-get install -y chromium (or set CHROMIUM_PATH)`;
const LAYOUT = onlyIf(HAVE_CHROMIUM, 'the diagram layout (Mermaid in Chromium)', noChromium);

describe.skipIf(!HAVE_CHROMIUM)(LAYOUT, () => {
  let context: BrowserContext;
  let page: Page;
  let profile: string;

  beforeAll(async () => {
    profile = mkdtempSync(join(tmpdir(), 'sb-geometry-'));
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run'],
      viewport: { width: 1400, height: 1000 },
    });
    page = context.pages()[0] ?? (await context.newPage());
    await page.setContent('<!doctype html><html><body><div id="host"></div></body></html>');
    await page.addScriptTag({ path: MERMAID });
    // the console's settings (src/ui/assets/console.js)
    await page.evaluate(
      `window.mermaid.initialize(${JSON.stringify({
        startOnLoad: false,
        securityLevel: 'strict',
        theme: 'default',
        flowchart: { htmlLabels: true, useMaxWidth: true },
      })})`,
    );
  }, 60_000);

  afterAll(async () => {
    await context?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
  });

  for (const file of FLOWS) {
    for (const folded of [true, false]) {
      it(`${file}, ${folded ? 'folded' : 'unrolled'}: no edge passes through the on: box`, async () => {
        const compiled = (await loadFlowFile(file)).compiled!;
        const geometry = await measure(page, flowDiagram(compiled, { folded }).source);
        expect(geometry.edges).toBeGreaterThan(0);
        expect(geometry.box).not.toBeNull();
        expect(geometry.crossing).toEqual([]);
      }, 90_000);
    }
  }
});
