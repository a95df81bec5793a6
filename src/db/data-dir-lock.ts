/**
 * The lock that keeps an embedded database (PGlite under DATA_DIR) to one process. PGlite has
 * no lock of its own: two processes on one directory each ran their own engine over the same
 * files, and each saw only its own writes (two dispatch leaders, data lost on the next start).
 *
 * The lock is the file `<DATA_DIR>/switchboard.lock`, made atomically (written aside, then
 * hard-linked into place, which fails when the file exists), holding who took it: pid, host,
 * command, since when, and the URL once the process serves one. The kernel does not remove
 * it when its holder dies, so a lock whose holder is gone (same host, no such pid) is stale
 * and the next process takes it over; a lock taken on another host (a shared volume) cannot
 * be checked and is never taken over. A clean close removes it, and so does any exit of the
 * process that does not bypass Node's `exit` event.
 *
 * CLI commands read the same file to find the server that holds a data directory and talk to
 * it through its API instead of opening the database a second time.
 *
 * @example
 * const lock = lockDataDir('./.data'); // throws DataDirLockedError naming the other process
 * lock.announce('http://127.0.0.1:3000');
 * lock.release();
 */
import { randomBytes } from 'node:crypto';
import { linkSync, readFileSync, renameSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import { relative, resolve } from 'node:path';

export const LOCK_FILE = 'switchboard.lock';

/** Who holds a data directory, as its lock file says. */
export interface LockHolder {
  pid: number;
  hostname: string;
  /** ISO 8601 */
  startedAt: string;
  /** how the process was started, e.g. `dist/main.js` or `bin/switchboard.js migrate` */
  command: string;
  /** where a CLI on this host reaches it, once it serves HTTP */
  url?: string;
}

/** The lock this process holds on one data directory. */
export interface DataDirLock {
  readonly file: string;
  /** records the URL the holder serves, for the CLI (see runningServerUrl) */
  announce(url: string): void;
  /** removes the lock file; a second call does nothing */
  release(): void;
}

/** Another process (or this one, a second time) has the data directory open. */
export class DataDirLockedError extends Error {
  constructor(
    readonly dataDir: string,
    readonly file: string,
    /** undefined when the lock file cannot be read */
    readonly holder: LockHolder | undefined,
  ) {
    super(lockedMessage(dataDir, file, holder));
    this.name = 'DataDirLockedError';
  }
}

/** `pid 41 ("dist/main.js", since 2025-03-01T10:00:00.000Z, serving http://127.0.0.1:3000)` */
export function describeHolder(holder: LockHolder): string {
  const host = holder.hostname === hostname() ? '' : ` on host ${holder.hostname}`;
  const url = holder.url ? `, serving ${holder.url}` : '';
  return `pid ${holder.pid}${host} ("${holder.command}", since ${holder.startedAt}${url})`;
}

function lockedMessage(dataDir: string, file: string, holder: LockHolder | undefined): string {
  const dir = `the data directory ${dataDir} (DATA_DIR)`;
  if (holder === undefined) {
    return `${dir} is locked, but its lock file ${file} cannot be read: if no Switchboard uses this directory, delete that file`;
  }
  if (holder.pid === process.pid && holder.hostname === hostname()) {
    return `${dir} is already open in this process`;
  }
  const elsewhere =
    holder.hostname === hostname()
      ? ''
      : `; its liveness cannot be checked from here: if it is not running, delete ${file}`;
  const cli = holder.url
    ? `, or use it: switchboard tokens, send and call run with this DATA_DIR reach it through its API`
    : '';
  return `${dir} is in use by another Switchboard process, ${describeHolder(holder)}: stop it, or set DATA_DIR to another directory${cli}${elsewhere}`;
}

/** lock files this process holds (resolved paths): a second open in-process is refused too */
const heldHere = new Set<string>();

/**
 * Takes the lock on `dataDir` for this process (the directory must exist), or throws
 * DataDirLockedError naming the process that holds it.
 */
export function lockDataDir(dataDir: string): DataDirLock {
  const file = resolve(dataDir, LOCK_FILE);
  if (heldHere.has(file)) throw new DataDirLockedError(dataDir, file, ownRecord());
  const record = ownRecord();
  // each turn either takes the lock, refuses, or removes a stale lock that was there; a few
  // turns cover processes racing for the same stale lock
  for (let turn = 0; turn < 5; turn++) {
    if (createExclusive(file, record)) return held(file, record);
    const seen = readRaw(file);
    if (seen === undefined) continue; // released meanwhile
    const holder = parseHolder(seen);
    if (holder === undefined || isAlive(holder, file)) {
      throw new DataDirLockedError(dataDir, file, holder);
    }
    removeStale(file, seen);
  }
  throw new Error(`could not take the lock ${file}: it kept changing while this process tried`);
}

/**
 * The URL of the live server that holds `dataDir`, as its lock file says; undefined when no
 * live process holds it, or its holder serves no URL (yet).
 */
export function runningServerUrl(dataDir: string): string | undefined {
  return liveHolder(dataDir)?.url;
}

/** The live process that holds `dataDir`, if one does (stale locks are ignored). */
export function liveHolder(dataDir: string): LockHolder | undefined {
  const file = resolve(dataDir, LOCK_FILE);
  const raw = readRaw(file);
  const holder = raw === undefined ? undefined : parseHolder(raw);
  return holder && isAlive(holder, file) ? holder : undefined;
}

/**
 * How a client on this host reaches a server listening on `address`: the wildcard addresses
 * become loopback.
 */
export function urlOnThisHost(address: AddressInfo): string {
  const wildcard = address.address === '0.0.0.0' || address.address === '::';
  const host = wildcard
    ? '127.0.0.1'
    : address.family === 'IPv6'
      ? `[${address.address}]`
      : address.address;
  return `http://${host}:${address.port}`;
}

function ownRecord(): LockHolder {
  const script = process.argv[1] ? relative(process.cwd(), process.argv[1]) : 'node';
  return {
    pid: process.pid,
    hostname: hostname(),
    startedAt: new Date().toISOString(),
    command: [script, ...process.argv.slice(2)].join(' '),
  };
}

function held(file: string, taken: LockHolder): DataDirLock {
  heldHere.add(file);
  let record = taken;
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    heldHere.delete(file);
    process.off('exit', release);
    // remove it only while it is still ours (someone may have deleted it by hand and started)
    const raw = readRaw(file);
    const now = raw === undefined ? undefined : parseHolder(raw);
    if (now && now.pid === record.pid && now.startedAt === record.startedAt) {
      rmSync(file, { force: true });
    }
  };
  process.on('exit', release);
  return {
    file,
    announce(url) {
      if (released) return;
      record = { ...record, url };
      // replaced whole, so a reader never sees half a file
      const aside = asideName(file);
      writeFileSync(aside, JSON.stringify(record));
      renameSync(aside, file);
    },
    release,
  };
}

function asideName(file: string): string {
  return `${file}.${process.pid}.${randomBytes(4).toString('hex')}`;
}

/** Creates `file` holding `record` if it does not exist, whole or not at all. */
function createExclusive(file: string, record: LockHolder): boolean {
  const text = JSON.stringify(record);
  const aside = asideName(file);
  writeFileSync(aside, text, { flag: 'wx' });
  try {
    linkSync(aside, file);
    return true;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') return false;
    if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'ENOSYS') throw err;
  } finally {
    unlinkSync(aside);
  }
  // a file system without hard links: exclusive create, written just after
  try {
    writeFileSync(file, text, { flag: 'wx' });
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  }
}

function readRaw(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

function parseHolder(raw: string): LockHolder | undefined {
  try {
    const v = JSON.parse(raw) as Partial<LockHolder>;
    if (typeof v.pid !== 'number' || typeof v.hostname !== 'string') return undefined;
    return {
      pid: v.pid,
      hostname: v.hostname,
      startedAt: String(v.startedAt ?? '?'),
      command: String(v.command ?? '?'),
      ...(typeof v.url === 'string' && { url: v.url }),
    };
  } catch {
    return undefined;
  }
}

/**
 * Whether the holder may still run. On another host nobody can tell: it counts as alive. A
 * record with this process's own pid, not held here, is from an earlier process that had the
 * same pid (a container restarted after a kill: pid 1 again).
 */
function isAlive(holder: LockHolder, file: string): boolean {
  if (holder.hostname !== hostname()) return true;
  if (holder.pid === process.pid) return heldHere.has(file);
  try {
    process.kill(holder.pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists, under another user
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Removes the stale lock whose text was `seen`, unless another process replaced it meanwhile:
 * moved aside first (only one process can move a given file), then checked; a live lock moved
 * by mistake is put back (link: never over a newer one).
 */
function removeStale(file: string, seen: string): void {
  const aside = asideName(file);
  try {
    renameSync(file, aside);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  try {
    if (readFileSync(aside, 'utf8') !== seen) linkSync(aside, file);
  } catch {
    // a newer lock is in place already (EEXIST), or no hard links here: nothing to put back
  } finally {
    unlinkSync(aside);
  }
}
