/**
 * Every page a browser renders (the console and the API docs) carries a content policy, no
 * framing and no referrer (issue 21's finding: pages sent neither).
 */
import { beforeAll, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import { buildTestApp } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';

describeEachEngine('page headers', (ctx) => {
  let app: App;
  beforeAll(() => {
    app = buildTestApp(ctx.database()).app;
  });

  it('sends a content policy, no framing and no referrer on the console and the docs', async () => {
    for (const path of [
      '/ui',
      '/ui/',
      '/ui/messages',
      '/ui/calls',
      '/ui/flows',
      '/ui/assets/console.js',
      '/ui/no-such-page',
      '/docs',
      '/docs/assets/init.js',
    ]) {
      const res = await app.request(path);
      expect(res.status, path).toBeLessThan(500);
      const csp = res.headers.get('content-security-policy') ?? '';
      expect(csp, path).toContain("default-src 'self'");
      expect(csp, path).toContain("script-src 'self'");
      expect(csp, path).toContain("frame-ancestors 'none'");
      expect(res.headers.get('x-frame-options'), path).toBe('DENY');
      expect(res.headers.get('referrer-policy'), path).toBe('no-referrer');
      expect(res.headers.get('x-content-type-options'), path).toBe('nosniff');
    }
  });
});
