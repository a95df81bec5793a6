/**
 * The flow editor in a real browser: playwright-core driving Debian's Chromium against the
 * real server (in-process, on a free port). From a flow's page, "Edit this flow" opens the
 * editor; a key typed into the YAML makes an error with its file:line:column appear in the
 * problems list (checked as you type, through the console's check route); fixing it clears
 * the error and the Mermaid diagram is drawn again with the new key, by the console's own
 * Mermaid asset, under the console's content policy. Nothing is saved. Screenshots go to
 * test-artifacts/.
 *
 * Needs Chromium at /usr/bin/chromium (`apt-get install -y chromium`), or CHROMIUM_PATH;
 * skipped, saying so, when it is missing.
 */
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BrowserContext, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../../src/server.ts';
import { availableEngines, createTestDatabase, type TestDatabase } from '../support/db.ts';
import { startTestServer } from '../support/server.ts';
import { onlyIf } from '../support/skip.ts';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const HAVE_CHROMIUM = existsSync(CHROMIUM);
const noChromium = `no Chromium at ${CHROMIUM}: apt-get install -y chromium (or set CHROMIUM_PATH)`;
if (!HAVE_CHROMIUM) console.warn(`flow-edit-browser: skipped, ${noChromium}`);

const ARTIFACTS = 'test-artifacts';
const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
const WAIT = { timeout: 15_000 };
const FLOW = 'appointment-reminder';
const ORIGINAL = readFileSync(`flows/${FLOW}.yaml`, 'utf8');
/** The line the test types into, and where on it: right after `"9`. */
const LINE = ORIGINAL.split('\n').findIndex((l) => l.trimStart().startsWith('"9": ')) + 1;
const AFTER_NINE = (ORIGINAL.split('\n')[LINE - 1] ?? '').indexOf('"9"') + 2;

const EDITOR = onlyIf(HAVE_CHROMIUM, 'the flow editor in Chromium', noChromium);

describe.skipIf(!HAVE_CHROMIUM)(EDITOR, () => {
  let db: TestDatabase;
  let server: RunningServer;
  let context: BrowserContext;
  let page: Page;
  let profile: string;
  let flowsDir: string;
  const requests: string[] = [];
  const errors: string[] = [];
  // what the pages' content policy blocked (the editor must need nothing it forbids)
  const blocked: string[] = [];

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    // a copy of the example flow: the repository's flows/ is never the server's
    flowsDir = mkdtempSync(join(tmpdir(), 'sb-flow-edit-browser-'));
    copyFileSync(`flows/${FLOW}.yaml`, join(flowsDir, `${FLOW}.yaml`));
    db = await createTestDatabase(availableEngines()[0]!);
    server = await startTestServer(db.database, { env: { FLOWS_DIR: flowsDir } });
    profile = mkdtempSync(join(tmpdir(), 'sb-chromium-'));
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: FLAGS,
      viewport: { width: 1400, height: 1000 },
    });
    page = context.pages()[0] ?? (await context.newPage());
    page.on('request', (r) => requests.push(r.url()));
    page.on('pageerror', (e) => errors.push(e.message));
    page.on('console', (m) => {
      if (/Content Security Policy/i.test(m.text())) blocked.push(m.text());
    });
  }, 60_000);

  afterAll(async () => {
    await context?.close();
    await server?.stop();
    await db?.drop();
    if (profile) rmSync(profile, { recursive: true, force: true });
    if (flowsDir) rmSync(flowsDir, { recursive: true, force: true });
  });

  it('shows an error with its line as a key is typed, and redraws the diagram once it is fixed', async () => {
    expect(LINE).toBeGreaterThan(0);
    await page.goto(`${server.url}/ui/flows/${FLOW}`);
    await page.getByRole('link', { name: 'Edit this flow' }).click();
    await page.waitForURL(`${server.url}/ui/flows/${FLOW}/edit`, WAIT);
    const folded = page.locator('[data-edit-diagram="folded"]');
    await folded.locator('svg').waitFor(WAIT);
    const firstVersion = await folded.getAttribute('data-version');
    expect(firstVersion).toMatch(/^[0-9a-f]{16,}$/);
    expect(await folded.locator('svg').textContent()).toContain('after 3 rounds, 9');

    // the cursor to just after "9 on its line, by keyboard, and an x typed there
    const source = page.locator('#source');
    await source.click();
    await page.keyboard.press('Control+Home');
    for (let i = 1; i < LINE; i++) await page.keyboard.press('ArrowDown');
    await page.keyboard.press('Home');
    for (let i = 0; i < AFTER_NINE; i++) await page.keyboard.press('ArrowRight');
    await page.keyboard.type('x');
    expect(await source.inputValue()).toContain('"9x": [ { goto: main } ]');

    // checked as typed: the error, where it is, and the rule
    const status = page.locator('#check-status');
    await expect
      .poll(() => status.textContent(), WAIT)
      .toBe('1 error: the draft does not compile.');
    const problem = page.locator('#problems li[data-severity="error"]');
    expect(await problem.count()).toBe(1);
    const where = `flows/${FLOW}.yaml:${LINE}:${AFTER_NINE - 1}`;
    expect(await problem.textContent()).toMatch(
      new RegExp(`^error ${where.replace(/\./g, '\\.')} INVALID_KEY "9x" is not a key`),
    );
    // the diagram stays, said to be the last draft that compiled
    expect(await page.locator('#diagram-note').textContent()).toMatch(/last draft that did/);
    expect(await folded.getAttribute('data-version')).toBe(firstVersion);
    await page.screenshot({ path: join(ARTIFACTS, 'ui-flow-edit-error.png'), fullPage: true });

    // fixed: "9x" becomes "8", a key the callee can press
    await page.keyboard.press('Backspace');
    await page.keyboard.press('Backspace');
    await page.keyboard.type('8');
    expect(await source.inputValue()).toContain('"8": [ { goto: main } ]');
    await expect.poll(() => status.textContent(), WAIT).toMatch(/^No errors/);
    expect(await problem.count()).toBe(0);
    // drawn again by the console's Mermaid, for the new version, with the new key
    await expect.poll(() => folded.getAttribute('data-version'), WAIT).not.toBe(firstVersion);
    await expect
      .poll(async () => (await folded.locator('svg').textContent()) ?? '', WAIT)
      .toContain('after 3 rounds, 8');
    expect(await folded.locator('svg').getAttribute('role')).toBe('img');
    expect(await page.locator('#diagram-note').textContent()).toBe(
      'The draft as the callee hears it.',
    );
    await page.screenshot({ path: join(ARTIFACTS, 'ui-flow-edit-fixed.png'), fullPage: true });

    // nothing was written, nothing came from elsewhere, no script failed, nothing was blocked
    expect(readFileSync(join(flowsDir, `${FLOW}.yaml`), 'utf8')).toBe(ORIGINAL);
    const foreign = requests.filter((u) => !u.startsWith(server.url) && !u.startsWith('data:'));
    expect(foreign).toEqual([]);
    expect(requests).toContain(`${server.url}/ui/assets/mermaid.min.js`);
    expect(errors).toEqual([]);
    expect(blocked).toEqual([]);
  }, 60_000);
});
