/**
 * What a person sees when the server starts: the banner comes once the server is ready
 * (every address it lists answers at once, none with 503), it lists the console, the log
 * lines are JSON on a pipe and never among the banner, and with nothing guarding /v1 and /ui
 * (no API_TOKEN) the server listens on loopback only and says how to open it. Run as
 * `npm start` runs it: the built server as a child process (test/support/process.ts builds it).
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFlags } from '../../scripts/start-flags.ts';
import { loadConfig } from '../../src/config.ts';
import { createLogger } from '../../src/logger.ts';
import { nextSteps, startServer } from '../../src/server.ts';
import { createTestDatabase } from '../support/db.ts';
import { eventually } from '../support/server.ts';
import { onlyIf } from '../support/skip.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** An IPv4 address of this machine other than loopback, if it has one. */
function outsideAddress(): string | undefined {
  return Object.values(networkInterfaces())
    .flat()
    .find((a) => a !== undefined && a.family === 'IPv4' && !a.internal)?.address;
}

interface Started {
  child: ChildProcess;
  banner: string;
  stdout(): string;
  stderr(): string;
}

/** Starts the built server and resolves as soon as its banner is whole on stderr. */
async function startUntilBanner(env: Record<string, string>): Promise<Started> {
  await promisify(execFile)(process.execPath, ['scripts/build.mjs'], { cwd: ROOT });
  const child = spawn(process.execPath, [...startFlags(), 'dist/main.js'], {
    cwd: ROOT,
    // no HOST and no API_TOKEN unless the test gives them: the defaults are what is tested
    env: { PATH: process.env.PATH ?? '', PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const banner = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no banner:\n${err}\n${out}`)), 60_000);
    child.stderr!.on('data', (d: Buffer) => {
      err += d.toString();
      // the banner's last line
      const end = err.match(/\nAPI reference: [^\n]*\n/);
      if (end) {
        clearTimeout(timer);
        resolve(err.slice(0, (end.index ?? 0) + end[0].length));
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code}:\n${err}\n${out}`));
    });
  });
  return { child, banner, stdout: () => out, stderr: () => err };
}

function stop(child: ChildProcess | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (!child || child.exitCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });
}

/** Every address the banner lists (those with a placeholder in them excepted). */
function addresses(banner: string): string[] {
  const urls = banner.match(/http:\/\/[^\s'"\\]+/g) ?? [];
  return [...new Set(urls.filter((u) => !u.includes('<')))];
}

describe('npm start with nothing configured', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'switchboard-startup-'));
  let started: Started;
  let port: number;
  // requested the moment the banner was whole, before anything else
  const firstAnswers: { url: string; status: number }[] = [];

  beforeAll(async () => {
    started = await startUntilBanner({ DATA_DIR: dataDir });
    const urls = addresses(started.banner);
    // localhost may resolve to ::1 first; the server listens on 127.0.0.1
    const local = urls.map((u) => u.replace('//localhost:', '//127.0.0.1:'));
    const answers = await Promise.all(local.map((u) => fetch(u).then((r) => r.status)));
    local.forEach((url, i) => {
      firstAnswers.push({ url, status: answers[i]! });
    });
    port = Number(started.banner.match(/ready at http:\/\/localhost:(\d+)/)?.[1]);
    // the "listening" log line comes after the banner, on the other pipe: nothing orders
    // the two pipes' arrival here, so wait for it (a barrier on the line itself)
    await eventually(async () => started.stdout().includes('"msg":"listening"'), 30_000);
  }, 90_000);

  afterAll(async () => {
    await stop(started?.child);
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('prints the banner once every address it lists answers, none with 503', () => {
    // the console, the API, the sandbox, the docs, the metrics and readiness, at least
    expect(firstAnswers.length).toBeGreaterThanOrEqual(8);
    const bad = firstAnswers.filter((a) => a.status === 503 || a.status >= 500);
    expect(bad).toEqual([]);
  });

  it('lists the console, and keeps the log lines out of the banner', () => {
    expect(started.banner).toContain(`http://localhost:${port}/ui`);
    expect(firstAnswers.map((a) => new URL(a.url).pathname)).toContain('/ui');
    expect(started.banner).not.toContain('"level"');
    // on a pipe the log lines are JSON, one per line, on stdout
    const lines = started.stdout().trim().split('\n');
    expect(lines.length).toBeGreaterThan(3);
    for (const line of lines) expect(() => JSON.parse(line), line).not.toThrow();
    expect(started.stdout()).toContain('"msg":"listening"');
  });

  it('listens on loopback only, and says how to open it', async () => {
    expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
    expect(started.banner).toMatch(/this machine only/);
    expect(started.banner).toContain('set API_TOKEN and UI_TOKEN');
    expect(started.banner).toContain('HOST=0.0.0.0');
    expect(started.stdout()).toContain('"host":"127.0.0.1"');
  });

  const outside = outsideAddress();
  it.runIf(outside !== undefined)(
    onlyIf(
      outside !== undefined,
      'is not reachable on an address of this machine that is not loopback',
      'this machine has no IPv4 address besides loopback',
    ),
    async () => {
      const res = await fetch(`http://${outside}:${port}/healthz`).then(
        (r) => `answered ${r.status}`,
        (e: Error & { cause?: { code?: string } }) => e.cause?.code ?? e.message,
      );
      expect(res).toBe('ECONNREFUSED');
    },
  );
});

describe('the banner', () => {
  const banner = (env: Record<string, string>) => nextSteps(loadConfig(env), 3000);

  it('with API_TOKEN, listens on every interface and says /v1 and /ui need a token', () => {
    const text = banner({ API_TOKEN: 'secret-token' });
    expect(loadConfig({ API_TOKEN: 'secret-token' }).host).toBe('0.0.0.0');
    expect(text).toContain('Listening on 0.0.0.0');
    expect(text).toContain('/v1 and /ui need a token');
    expect(text).not.toContain('WARNING');
    expect(text).not.toContain('secret-token');
  });

  it('with HOST=0.0.0.0 and no API_TOKEN, starts but warns loudly what is open', () => {
    const text = banner({ HOST: '0.0.0.0' });
    expect(text).toMatch(/WARNING: listening on 0\.0\.0\.0 with no API_TOKEN/);
    expect(text).toContain('/v1 (until a token is made with POST /v1/tokens) and /ui');
    expect(banner({ HOST: '0.0.0.0', UI_TOKEN: 'ui' })).not.toContain('and /ui');
  });

  it('names the address it listens on when that is neither loopback nor every interface', () => {
    expect(banner({ HOST: '10.1.2.3', API_TOKEN: 't' })).toContain('ready at http://10.1.2.3:3000');
    expect(banner({ HOST: '::1' })).toContain('ready at http://[::1]:3000');
  });
});

describe('HOST=0.0.0.0 with no API_TOKEN', () => {
  it('starts, and warns in the log what anyone on the network can use', async () => {
    const lines: string[] = [];
    const logger = createLogger('warn', { write: (l: string) => void lines.push(l) });
    const db = await createTestDatabase('pglite');
    const server = await startServer(loadConfig({ PORT: '0', HOST: '0.0.0.0' }), logger, {
      database: db.database,
    });
    try {
      expect((await fetch(`http://127.0.0.1:${server.port}/healthz`)).status).toBe(200);
    } finally {
      await server.stop();
      await db.drop();
    }
    const warning = lines.map((l) => JSON.parse(l)).find((l) => /^HOST=0\.0\.0\.0/.test(l.msg));
    expect(warning).toMatchObject({ level: 40, host: '0.0.0.0' });
    expect(warning.msg).toContain('/v1 and /ui can be used by anyone on the network');
  });
});
