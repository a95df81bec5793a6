/**
 * The console in a real browser: playwright-core driving Debian's Chromium against the real
 * server (in-process, on a free port, with the sandbox calling it back over HTTP). Opens a
 * flow and its diagram, starts a sandbox call from the "try a flow" form, presses keys (one
 * on the keyboard, one on the on-screen keypad), and sees the path, the outcome and the
 * follow-up SMS arrive live. Screenshots go to test-artifacts/.
 *
 * Needs Chromium at /usr/bin/chromium (`apt-get install -y chromium`), or CHROMIUM_PATH.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BrowserContext, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../../src/server.ts';
import { phone } from '../support/app.ts';
import { availableEngines, createTestDatabase, type TestDatabase } from '../support/db.ts';
import { startTestServer } from '../support/server.ts';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
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

describe('the console in Chromium', () => {
  let db: TestDatabase;
  let server: RunningServer;
  let context: BrowserContext;
  let page: Page;
  let profile: string;
  const requests: string[] = [];
  const errors: string[] = [];
  // what the pages' content policy blocked (the console must need nothing it forbids)
  const blocked: string[] = [];

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) {
      throw new Error(
        `no Chromium at ${CHROMIUM}: apt-get install -y chromium (or set CHROMIUM_PATH)`,
      );
    }
    mkdirSync(ARTIFACTS, { recursive: true });
    db = await createTestDatabase(availableEngines()[0]!);
    // the endpoint case's receiver is on this machine's loopback
    server = await startTestServer(db.database, { env: { OUTBOUND_ALLOW_PRIVATE: 'true' } });
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
  });

  it('opens a flow, tries it with the keypad, and sees the path, outcome and follow-up SMS', async () => {
    // the flow, with its diagram drawn by the bundle this server serves
    await page.goto(`${server.url}/ui/flows`);
    await page.getByRole('link', { name: 'appointment-reminder' }).click();
    await expect
      .poll(() => page.getByRole('heading', { level: 1 }).textContent(), WAIT)
      .toBe('Flow Appointment reminder');
    const folded = page.locator('[data-diagram="folded"] svg');
    await folded.waitFor(WAIT);
    expect(await folded.getAttribute('role')).toBe('img');
    // the menus as written, the hang-up, and the three reactions
    expect(await folded.locator('.node').count()).toBe(6);
    await page.getByText('Every provider menu').click(); // the unrolled one, behind a summary
    const unrolled = page.locator('[data-diagram="unrolled"] svg');
    await unrolled.waitFor(WAIT);
    expect(await unrolled.locator('.node').count()).toBe(16);
    await page.screenshot({ path: join(ARTIFACTS, 'ui-flow.png'), fullPage: true });

    // try it: a sandbox call from the form, filled in by label
    await page.getByRole('link', { name: 'Try this flow' }).click();
    const to = phone();
    await page.getByLabel('Call this number').fill(to);
    await page.getByLabel('name', { exact: true }).fill('Ann');
    await page.getByLabel('date', { exact: true }).fill('Monday 10:00');
    await page.getByRole('button', { name: 'Start the call' }).click();
    await page.waitForURL(/\/ui\/calls\/[0-9a-f-]{36}\/keypad$/, WAIT);
    await page.locator('[data-diagram="folded"] svg').waitFor(WAIT);
    const live = page.locator('section[data-live]');
    const status = page.locator('p.call-status');

    // "9" on the keyboard plays the menu again; the path grows live (server-sent events)
    await page.keyboard.press('9');
    await expect.poll(() => page.locator('#keypad-status').textContent(), WAIT).toBe('Pressed 9.');
    await expect
      .poll(() => live.locator('table[aria-labelledby="path-heading"] tbody tr').count(), WAIT)
      .toBe(1);

    // then "1" on the on-screen keypad: confirmed, the call ends, the SMS goes out
    await page.getByRole('button', { name: 'Press 1' }).click();
    await expect.poll(() => status.textContent(), WAIT).toMatch(/State ended · outcome confirmed/);
    const sms = live.locator('tr[data-role="follow-up"][data-type="sms"]');
    await expect.poll(() => sms.textContent(), WAIT).toMatch(/delivered/);
    const path = await live
      .locator('table[aria-labelledby="path-heading"] tbody tr td:nth-child(2)')
      .allTextContents();
    expect(path).toEqual(['main', 'main/v2']);
    // the diagrams were drawn again with the path: main (twice, unrolled) and the hang-up
    await expect
      .poll(() => page.locator('[data-diagram="folded"] svg .node.visited').count(), WAIT)
      .toBe(2);
    await expect
      .poll(() => page.locator('[data-diagram="unrolled"] svg .node.visited').count(), WAIT)
      .toBe(3);
    await page.screenshot({ path: join(ARTIFACTS, 'ui-try-call.png'), fullPage: true });

    // the same call, found by the calls search
    await page.getByRole('link', { name: 'Calls', exact: true }).click();
    await page.getByLabel('Phone').fill(to);
    await page.getByLabel('Outcome').fill('confirmed');
    await page.getByRole('button', { name: 'Search' }).click();
    await expect.poll(() => page.locator('table tbody tr').count(), WAIT).toBe(1);
    await page.screenshot({ path: join(ARTIFACTS, 'ui-calls-search.png'), fullPage: true });

    // nothing came from anywhere but this server, and no script failed
    const foreign = requests.filter((u) => !u.startsWith(server.url) && !u.startsWith('data:'));
    expect(foreign).toEqual([]);
    expect(errors).toEqual([]);
    expect(blocked).toEqual([]);
  }, 60_000);

  it("shows an endpoint's failed attempt and replays it with its button", async () => {
    // the user's receiver: refuses at first (500), then accepts
    let accepting = false;
    const seen: { id: string; status: number }[] = [];
    const receiver = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        const status = accepting ? 204 : 500;
        seen.push({ id: String(req.headers['webhook-id']), status });
        res.writeHead(status).end();
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    const port = (receiver.address() as AddressInfo).port;
    try {
      const api = (path: string, body: unknown) =>
        fetch(`${server.url}${path}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
      const made = await api('/v1/endpoints', {
        url: `http://127.0.0.1:${port}/hooks`,
        name: 'browser-crm',
        events: ['message.status'],
        ordered: true,
      });
      expect(made.status).toBe(201);
      const endpoint = (await made.json()) as { id: string };
      const sent = await api('/v1/messages', {
        messages: [{ from: 'Acme', to: phone(), type: 'sms', text: 'Your order has shipped' }],
      });
      expect(sent.status).toBe(202);
      // the first event (queued) fails; ordered, so the rest wait behind its retry
      await expect.poll(() => seen.length, WAIT).toBeGreaterThan(0);
      const failed = seen[0]!;
      expect(failed.status).toBe(500);

      await page.goto(`${server.url}/ui/endpoints`);
      await page.getByRole('link', { name: 'browser-crm' }).click();
      await page.waitForURL(`${server.url}/ui/endpoints/${endpoint.id}`, WAIT);
      const row = page.locator('tr', { hasText: failed.id });
      await expect.poll(() => row.first().textContent(), WAIT).toContain('500');

      accepting = true;
      await row
        .first()
        .getByRole('button', { name: `Replay event ${failed.id} to this endpoint` })
        .click();
      await expect.poll(() => page.locator('body').textContent(), WAIT).toContain('Queued 1');
      // the same event again, with the same id, now accepted
      await expect
        .poll(() => seen.some((s) => s.id === failed.id && s.status === 204), WAIT)
        .toBe(true);
      await page.reload();
      await expect
        .poll(() => page.locator('tr', { hasText: '(replay)' }).count(), WAIT)
        .toBeGreaterThan(0);
      expect(errors).toEqual([]);
      expect(blocked).toEqual([]);
    } finally {
      await new Promise((r) => receiver.close(r));
    }
  }, 60_000);

  it('renders the API docs under the same content policy', async () => {
    await page.goto(`${server.url}/docs`);
    await expect.poll(() => page.locator('.opblock').count(), WAIT).toBeGreaterThan(10);
    expect(errors).toEqual([]);
    expect(blocked).toEqual([]);
  }, 60_000);

  it('signs in with the form, signs out, and the old cookie opens nothing', async () => {
    const guarded = await startTestServer(db.database, { env: { UI_TOKEN: 'browser-token' } });
    try {
      await page.goto(`${guarded.url}/ui/flows`);
      await page.waitForURL(/\/ui\/login\?next=%2Fui%2Fflows$/, WAIT);
      await page.getByLabel('Token').fill('browser-token');
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.waitForURL(`${guarded.url}/ui/flows`, WAIT);
      const [cookie] = await context.cookies(`${guarded.url}/ui`);
      expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Strict', path: '/ui' });
      expect(cookie!.secure).toBe(false); // plain HTTP: a Secure cookie would never come back

      await page.getByRole('button', { name: 'Sign out' }).click();
      await page.waitForURL(`${guarded.url}/ui/login`, WAIT);
      expect(await context.cookies(`${guarded.url}/ui`)).toEqual([]);
      // a copy of the cookie taken before signing out: its session is revoked
      await context.addCookies([cookie!]);
      await page.goto(`${guarded.url}/ui/flows`);
      await page.waitForURL(/\/ui\/login\?next=/, WAIT);
      expect(errors).toEqual([]);
      expect(blocked).toEqual([]);
    } finally {
      await context.clearCookies();
      await guarded.stop();
    }
  }, 60_000);
});
