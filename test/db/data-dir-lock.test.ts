/**
 * The DATA_DIR lock (src/db/data-dir-lock.ts): one holder at a time, a refusal that names the
 * holder, stale locks of dead processes taken over, locks of other hosts and unreadable ones
 * left alone, and the URL a server announces read back by the CLI; openDatabase refuses a
 * locked directory. (Released on a clean stop, taken over after a kill: test/e2e/single-instance.)
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/client.ts';
import {
  DataDirLockedError,
  LOCK_FILE,
  type LockHolder,
  liveHolder,
  lockDataDir,
  runningServerUrl,
  urlOnThisHost,
} from '../../src/db/data-dir-lock.ts';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
const freshDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'switchboard-lock-'));
  dirs.push(dir);
  return dir;
};
const writeHolder = (dir: string, holder: LockHolder) =>
  writeFileSync(join(dir, LOCK_FILE), JSON.stringify(holder));
const readHolder = (dir: string): LockHolder =>
  JSON.parse(readFileSync(join(dir, LOCK_FILE), 'utf8'));

/** the pid of a process that ran and has exited */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', '']);
  await new Promise((resolve) => child.once('exit', resolve));
  return child.pid!;
}

function lockedError(dir: string): DataDirLockedError {
  try {
    lockDataDir(dir);
  } catch (err) {
    if (err instanceof DataDirLockedError) return err;
    throw err;
  }
  throw new Error('the lock was taken');
}

describe('lockDataDir', () => {
  it('writes who holds it, refuses a second lock in this process, and removes the file on release', () => {
    const dir = freshDir();
    const lock = lockDataDir(dir);
    const holder = readHolder(dir);
    expect(holder).toMatchObject({ pid: process.pid, hostname: hostname() });
    expect(Date.parse(holder.startedAt)).not.toBeNaN();
    expect(holder.command).not.toBe('');

    expect(lockedError(dir).message).toContain('already open in this process');

    lock.release();
    expect(existsSync(join(dir, LOCK_FILE))).toBe(false);
    lock.release(); // a second release does nothing
    lockDataDir(dir).release();
  });

  it('refuses while a live process holds it, naming its pid, command, start and URL', () => {
    const dir = freshDir();
    // the process that started this test worker: alive, and not this process
    const other: LockHolder = {
      pid: process.ppid,
      hostname: hostname(),
      startedAt: '2025-03-01T10:00:00.000Z',
      command: 'dist/main.js',
      url: 'http://127.0.0.1:4321',
    };
    writeHolder(dir, other);
    const err = lockedError(dir);
    expect(err.holder).toEqual(other);
    expect(err.message).toContain(`pid ${process.ppid}`);
    expect(err.message).toContain('"dist/main.js", since 2025-03-01T10:00:00.000Z');
    expect(err.message).toContain('serving http://127.0.0.1:4321');
    expect(err.message).toMatch(/stop it, or set DATA_DIR to another directory/);
    expect(err.message).not.toContain('\n');
    // the holder's lock is left as it was
    expect(readHolder(dir)).toEqual(other);
    expect(runningServerUrl(dir)).toBe('http://127.0.0.1:4321');
  });

  it('takes over the lock of a process that died without releasing it', async () => {
    const dir = freshDir();
    const pid = await deadPid();
    writeHolder(dir, {
      pid,
      hostname: hostname(),
      startedAt: '2025-03-01T10:00:00.000Z',
      command: 'dist/main.js',
      url: 'http://127.0.0.1:4321',
    });
    // the CLI does not send requests to a dead server
    expect(liveHolder(dir)).toBeUndefined();
    expect(runningServerUrl(dir)).toBeUndefined();
    const lock = lockDataDir(dir);
    expect(readHolder(dir).pid).toBe(process.pid);
    lock.release();
  });

  it("takes over a lock with this process's own pid not held here (a restarted container)", () => {
    const dir = freshDir();
    writeHolder(dir, {
      pid: process.pid,
      hostname: hostname(),
      startedAt: '2025-03-01T10:00:00.000Z',
      command: 'dist/main.js',
    });
    const lock = lockDataDir(dir);
    expect(readHolder(dir).startedAt).not.toBe('2025-03-01T10:00:00.000Z');
    lock.release();
  });

  it('leaves alone a lock taken on another host, and one it cannot read, saying what to do', () => {
    const dir = freshDir();
    writeHolder(dir, {
      pid: 1,
      hostname: `not-${hostname()}`,
      startedAt: '2025-03-01T10:00:00.000Z',
      command: 'dist/main.js',
    });
    const elsewhere = lockedError(dir);
    expect(elsewhere.message).toContain(`on host not-${hostname()}`);
    expect(elsewhere.message).toContain(`if it is not running, delete ${join(dir, LOCK_FILE)}`);

    writeFileSync(join(dir, LOCK_FILE), 'not json');
    const unreadable = lockedError(dir);
    expect(unreadable.holder).toBeUndefined();
    expect(unreadable.message).toContain('cannot be read');
    expect(readFileSync(join(dir, LOCK_FILE), 'utf8')).toBe('not json');
  });

  it('records the URL a server announces, for the CLI, until released', () => {
    const dir = freshDir();
    const lock = lockDataDir(dir);
    expect(runningServerUrl(dir)).toBeUndefined();
    lock.announce('http://127.0.0.1:5555');
    expect(runningServerUrl(dir)).toBe('http://127.0.0.1:5555');
    expect(lockedError(dir).message).toContain('already open in this process');
    lock.release();
    expect(runningServerUrl(dir)).toBeUndefined();
  });

  it('does not remove a lock file that is no longer its own', () => {
    const dir = freshDir();
    const lock = lockDataDir(dir);
    const other: LockHolder = {
      pid: process.ppid,
      hostname: hostname(),
      startedAt: '2025-03-01T10:00:00.000Z',
      command: 'dist/main.js',
    };
    writeHolder(dir, other); // deleted by hand and taken by another process meanwhile
    lock.release();
    expect(readHolder(dir)).toEqual(other);
  });
});

describe('urlOnThisHost', () => {
  it('turns the wildcard addresses into loopback and brackets IPv6', () => {
    expect(urlOnThisHost({ address: '0.0.0.0', family: 'IPv4', port: 3000 })).toBe(
      'http://127.0.0.1:3000',
    );
    expect(urlOnThisHost({ address: '::', family: 'IPv6', port: 3000 })).toBe(
      'http://127.0.0.1:3000',
    );
    expect(urlOnThisHost({ address: '::1', family: 'IPv6', port: 80 })).toBe('http://[::1]:80');
    expect(urlOnThisHost({ address: '10.0.0.5', family: 'IPv4', port: 80 })).toBe(
      'http://10.0.0.5:80',
    );
  });
});

describe('openDatabase on an embedded data directory', () => {
  it('refuses while the directory is locked, before starting an engine on it', async () => {
    const dir = freshDir();
    const lock = lockDataDir(dir);
    try {
      await expect(openDatabase({ dataDir: dir })).rejects.toThrow(DataDirLockedError);
      expect(existsSync(join(dir, 'pgdata'))).toBe(false);
    } finally {
      lock.release();
    }
  });
});
