/**
 * Callbacks against a real provider (issue 21, point 3): with PROVIDER_BASE_URL set and no
 * CALLBACK_TOKEN, the real process (as `npm start` runs it) refuses to start, naming the
 * variable and the two ways out; CALLBACKS_OPEN=true starts it with its hooks open, and says
 * that this is on purpose.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startServerProcess } from '../support/process.ts';

// a closed port: the provider is never reached, only named
const PROVIDER_BASE_URL = 'http://127.0.0.1:9';

describe('a real provider without a callback secret', () => {
  const dirs: string[] = [];
  afterAll(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });
  const dataDir = () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchboard-callbacks-'));
    dirs.push(dir);
    return dir;
  };

  it('refuses to start, exiting 2 with a message naming CALLBACK_TOKEN and CALLBACKS_OPEN', async () => {
    const start = startServerProcess({ DATA_DIR: dataDir(), PROVIDER_BASE_URL });
    await expect(start).rejects.toThrow(/server exited with 2:/);
    await expect(start).rejects.toThrow(/CALLBACK_TOKEN: must be set when PROVIDER_BASE_URL/);
    await expect(start).rejects.toThrow(/CALLBACKS_OPEN=true/);
  }, 120_000);

  it('starts with CALLBACKS_OPEN=true, saying its hooks are open on purpose', async () => {
    const server = await startServerProcess({
      DATA_DIR: dataDir(),
      PROVIDER_BASE_URL,
      CALLBACKS_OPEN: 'true',
    });
    try {
      expect(server.output()).toContain(
        'CALLBACK_TOKEN is not set and CALLBACKS_OPEN=true: /hooks/delivery and /hooks/viber are open on purpose',
      );
      const res = await fetch(`${server.url}/hooks/delivery`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ customerMessageId: 'open-on-purpose', status: 'delivered' }),
      });
      expect(res.status).toBe(200);
    } finally {
      expect((await server.stop()).code).toBe(0);
    }
    // a build and a start of the real process: slow on a busy machine, never a bound
  }, 120_000);
});
