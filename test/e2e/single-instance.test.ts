/**
 * One process per embedded database, with real processes: a second server on the same
 * DATA_DIR exits 1 naming the first (pid, URL); CLI commands go through the running server's
 * API (found through the DATA_DIR lock), and `migrate` refuses; after a SIGKILL the next
 * server takes the stale lock over, and a clean stop removes it.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { runMigrate } from '../../src/cli/migrate.ts';
import { runTokens } from '../../src/cli/tokens.ts';
import { LOCK_FILE } from '../../src/db/data-dir-lock.ts';
import { capture } from '../support/cli.ts';
import { type ServerProcess, startServerProcess } from '../support/process.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const ADMIN = 'single-instance-admin-5c1d';

/** runs the `switchboard` command as a user would, with only `env` (and PATH) set */
async function switchboard(argv: string[], env: Record<string, string>) {
  try {
    const { stdout, stderr } = await promisify(execFile)(
      process.execPath,
      ['bin/switchboard.js', ...argv],
      { cwd: ROOT, env: { PATH: process.env.PATH ?? '', ...env } },
    );
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

/** a CLI command run in this process, with `env` as its whole environment */
async function inProcess(run: (io: Parameters<typeof runMigrate>[0]) => Promise<number>) {
  const out = capture();
  const err = capture();
  return {
    run: (env: Record<string, string>) =>
      run({ stdout: out.stream, stderr: err.stream, env, cwd: ROOT }),
    err: () => err.text(),
  };
}

describe('one process per embedded database', () => {
  const dirs: string[] = [];
  const servers: ServerProcess[] = [];
  afterAll(async () => {
    // stop() waits for an exit, and a killed child has already had its own
    for (const s of servers) {
      if (s.child.exitCode === null && s.child.signalCode === null) await s.stop('SIGKILL');
    }
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('refuses a second server, serves the CLI through the first, and survives a SIGKILL', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'switchboard-single-'));
    dirs.push(dataDir);
    const env = { DATA_DIR: dataDir, API_TOKEN: ADMIN };
    const first = await startServerProcess(env);
    servers.push(first);
    const pid = first.child.pid!;

    // a second server on the same directory: exit 1, one line naming the first and what to do
    const second = startServerProcess(env);
    await expect(second).rejects.toThrow(/server exited with 1:/);
    const refusal = await second.catch((e: Error) => e.message);
    expect(refusal).toContain(`is in use by another Switchboard process, pid ${pid}`);
    expect(refusal).toContain(`serving http://127.0.0.1:${first.port}`);
    expect(refusal).toContain('stop it, or set DATA_DIR to another directory');
    expect(refusal).not.toContain('database open'); // refused before opening the database

    // the CLI finds the server through the lock (no --url, no PORT) and uses its API
    const made = await switchboard(['tokens', 'create', '--name', 'ci', '--scope', 'read'], env);
    expect(made.stderr).toMatch(/^created tok_\S+ "ci" \(read\)/);
    expect(made.code).toBe(0);
    const token = made.stdout.trim();
    const listed = await fetch(`${first.url}/v1/messages`, {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(listed.status).toBe(200);

    // without an admin token, the refusal says where to get one
    const noToken = await inProcess((io) => runTokens(['list'], io));
    expect(await noToken.run({ DATA_DIR: dataDir })).toBe(1);
    expect(noToken.err()).toContain('UNAUTHORIZED');
    expect(noToken.err()).toContain(
      `http://127.0.0.1:${first.port} asks for an admin token: set API_TOKEN`,
    );

    // migrate does not open the database under a running server
    const migrate = await inProcess(runMigrate);
    expect(await migrate.run({ DATA_DIR: dataDir })).toBe(1);
    expect(migrate.err()).toContain(`is open in pid ${pid}`);
    expect(migrate.err()).toContain('stop it to run migrate');

    // killed: the lock file stays behind, and the next server takes it over
    expect((await first.stop('SIGKILL')).code).toBe(null);
    expect(JSON.parse(readFileSync(join(dataDir, LOCK_FILE), 'utf8')).pid).toBe(pid);
    const third = await startServerProcess(env);
    servers.push(third);
    const after = await fetch(`${third.url}/v1/messages`, {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(after.status).toBe(200); // the token made through the first is in the database

    // a clean stop removes the lock
    expect((await third.stop('SIGTERM')).code).toBe(0);
    expect(existsSync(join(dataDir, LOCK_FILE))).toBe(false);
  }, 180_000);
});
