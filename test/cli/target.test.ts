/**
 * Which server a CLI command talks to (`--url`, else SWITCHBOARD_URL, else the HOST and PORT
 * `switchboard serve` would use, localhost:3000 when unset), and what it says when nothing
 * answers there: the address it tried and how to point it at another.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCall } from '../../src/cli/call.ts';
import { switchboardTarget } from '../../src/cli/io.ts';
import { runSend } from '../../src/cli/send.ts';
import { runTokens } from '../../src/cli/tokens.ts';
import { capture } from '../support/cli.ts';

// no server holds this embedded database, so no lock file points anywhere
const dataDir = mkdtempSync(join(tmpdir(), 'switchboard-target-'));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

const target = (flags: { url?: string }, env: Record<string, string>) =>
  switchboardTarget(flags, { DATA_DIR: dataDir, ...env }).baseUrl;

describe('the server a command talks to', () => {
  it('is --url, else SWITCHBOARD_URL, else HOST and PORT, else localhost:3000', () => {
    expect(target({}, {})).toBe('http://localhost:3000');
    expect(target({}, { PORT: '8080' })).toBe('http://localhost:8080');
    expect(target({}, { PORT: '8080', HOST: '0.0.0.0' })).toBe('http://localhost:8080');
    expect(target({}, { PORT: '8080', HOST: '10.0.0.5' })).toBe('http://10.0.0.5:8080');
    expect(target({}, { PORT: '8080', SWITCHBOARD_URL: 'https://sb.example/' })).toBe(
      'https://sb.example',
    );
    expect(
      target({ url: 'http://127.0.0.1:4000' }, { SWITCHBOARD_URL: 'https://sb.example' }),
    ).toBe('http://127.0.0.1:4000');
  });
});

describe('when nothing answers there', () => {
  // port 9 (discard): nothing listens on it here
  const env = { SWITCHBOARD_URL: 'http://127.0.0.1:9', DATA_DIR: dataDir };
  const io = () => {
    const out = capture();
    const err = capture();
    return {
      err,
      io: { stdout: out.stream, stderr: err.stream, env, cwd: process.cwd() },
    };
  };

  it.each([
    ['tokens list', (i: ReturnType<typeof io>['io']) => runTokens(['list'], i)],
    [
      'call',
      (i: ReturnType<typeof io>['io']) =>
        runCall(['appointment-reminder', '--to', '+380501234567', '--from', 'Clinic'], i),
    ],
    [
      'send',
      (i: ReturnType<typeof io>['io']) =>
        runSend(['--to', '+380501234567', '--from', 'Acme', '--text', 'hi'], i),
    ],
  ])('%s names the address it tried and how to point it elsewhere', async (_name, run) => {
    const t = io();
    expect(await run(t.io)).not.toBe(0);
    const said = t.err.text();
    expect(said).toContain('cannot reach Switchboard at http://127.0.0.1:9');
    expect(said).toContain('SWITCHBOARD_URL=');
    expect(said).toContain('--url');
  });
});
