/**
 * What the fault tests break things with: a server (or the sandbox) as a child process that
 * can be killed with SIGKILL (spawned as `node --import tsx`, so its pid is the server itself,
 * not a tsx relay that would die alone), and a private Postgres server of the test's own
 * (initdb into a temp dir), which a test may stop and restart without touching the shared one.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface Proc {
  url: string;
  port: number;
  pid: number;
  child: ChildProcess;
  output(): string;
  /** resolves once `pattern` appears in the output (or rejects after `timeoutMs`) */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  kill(signal?: NodeJS.Signals): Promise<void>;
}

export interface SpawnOptions {
  entry?: string;
  env: Record<string, string>;
  /** finds the port in the output (group 1) */
  ready?: RegExp;
}

/** Starts `src/main.ts` (or `entry`) and waits until it prints its port. */
export async function spawnProcess(opts: SpawnOptions): Promise<Proc> {
  const child = spawn(process.execPath, ['--import', 'tsx', opts.entry ?? 'src/main.ts'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', PORT: '0', HOST: '127.0.0.1', ...opts.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const listeners = new Set<() => void>();
  const onData = (d: Buffer) => {
    out += d.toString();
    // keep the tail only: a server under load logs every request
    if (out.length > 2_000_000) out = out.slice(-1_000_000);
    for (const l of listeners) l();
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  const waitFor = (pattern: RegExp, timeoutMs = 60_000) =>
    new Promise<RegExpMatchArray>((resolve, reject) => {
      const check = () => {
        const m = out.match(pattern);
        if (m) {
          done();
          resolve(m);
        }
      };
      const onExit = (code: number | null) => {
        done();
        reject(new Error(`process exited (${code}) before ${pattern}:\n${out.slice(-3000)}`));
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`timed out waiting for ${pattern}:\n${out.slice(-3000)}`));
      }, timeoutMs);
      const done = () => {
        clearTimeout(timer);
        listeners.delete(check);
        child.off('exit', onExit);
      };
      listeners.add(check);
      child.once('exit', onExit);
      check();
    });
  const m = await waitFor(opts.ready ?? /"port":(\d+),"msg":"listening"/);
  const port = Number(m[1]);
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    pid: child.pid!,
    child,
    output: () => out,
    waitFor,
    kill(signal = 'SIGTERM') {
      return new Promise((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        const force = setTimeout(() => child.kill('SIGKILL'), 10_000);
        child.once('exit', () => {
          clearTimeout(force);
          resolve();
        });
        child.kill(signal);
      });
    },
  };
}

/** A port nobody listens on right now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

/**
 * A free port that no other process will be handed while this one is briefly closed: below
 * the kernel's ephemeral range (net.ipv4.ip_local_port_range), from which every listen(0) of
 * the suite's other servers and every outgoing connection takes its port. For a server that
 * is stopped and started again on the same port (a private Postgres crashed on purpose): a
 * port from freePort() can be taken by another test's server in between, and then the
 * clients of the stopped one talk to a stranger.
 */
export async function stablePort(): Promise<number> {
  let low = 32768;
  try {
    low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').split(/\s+/)[0]);
  } catch {
    // not Linux: the usual lower bound of the range
  }
  const floor = Math.min(20_000, low - 1000);
  for (let i = 0; i < 50; i++) {
    const port = floor + Math.floor(Math.random() * (low - floor));
    const free = await new Promise<boolean>((resolve) => {
      const srv = createServer();
      srv.once('error', () => resolve(false));
      srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
    });
    if (free) return port;
  }
  throw new Error(`no free port in ${floor}-${low - 1}`);
}

const PG_BIN = '/usr/lib/postgresql/15/bin';

/** Whether this machine can run a private Postgres (the Debian server binaries are there). */
export const canRunPrivatePostgres = existsSync(join(PG_BIN, 'initdb'));

export interface PrivatePostgres {
  url: string;
  port: number;
  /** `immediate` is a crash (no checkpoint, recovery at the next start) */
  stop(mode?: 'fast' | 'immediate'): void;
  start(): void;
  destroy(): void;
}

/**
 * initdb + pg_ctl start on a free port, listening on 127.0.0.1 and a socket in its own
 * directory. initdb refuses to run as root, so as root the server runs as `postgres`.
 */
export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const dir = mkdtempSync(join(tmpdir(), 'switchboard-pg-'));
  const asRoot = process.getuid?.() === 0;
  if (asRoot) {
    chmodSync(dir, 0o777);
    execFileSync('chown', ['postgres', dir]);
  }
  const run = (bin: string, args: string[]) => {
    const [cmd, argv] = asRoot
      ? ['runuser', ['-u', 'postgres', '--', join(PG_BIN, bin), ...args]]
      : [join(PG_BIN, bin), args];
    return execFileSync(cmd as string, argv as string[], { stdio: 'pipe', timeout: 60_000 });
  };
  const data = join(dir, 'data');
  run('initdb', ['-A', 'trust', '-U', 'postgres', '-D', data, '--no-sync']);
  // it is stopped and started again on this port: one no other server can be given meanwhile
  const port = await stablePort();
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50`;
  const start = () =>
    run('pg_ctl', ['-D', data, '-o', options, '-l', join(dir, 'log'), '-w', 'start']);
  start();
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    stop: (mode = 'fast') => {
      run('pg_ctl', ['-D', data, '-m', mode, '-w', 'stop']);
    },
    start,
    destroy() {
      try {
        run('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
      } catch {
        // already stopped
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Posts `body` to `url`; the status, or 0 when no answer came (connection refused or reset). */
export async function post(url: string, body: string, signal?: AbortSignal): Promise<number> {
  return (await postWhy(url, body, signal)).status;
}

/** As post, with why no answer came (the error and its cause) when the status is 0. */
export async function postWhy(
  url: string,
  body: string,
  signal?: AbortSignal,
): Promise<{ status: number; why?: string }> {
  try {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
      ...(signal && { signal }),
    });
    await res.arrayBuffer();
    return { status: res.status };
  } catch (err) {
    const cause = (err as { cause?: unknown }).cause;
    return { status: 0, why: `${String(err)}${cause ? ` (${String(cause)})` : ''}` };
  }
}

/** Pacing only (a client backing off, a poll's interval): never a stand-in for an ordering. */
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A barrier: polls `condition` (every `everyMs`) until it holds, and fails with `what` if it
 * does not within `timeoutMs`. Resolves with the condition's first truthy value.
 */
export async function waitUntil<T>(
  condition: () => T | Promise<T>,
  what: string,
  timeoutMs = 30_000,
  everyMs = 25,
): Promise<NonNullable<T>> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await condition();
    if (value) return value as NonNullable<T>;
    if (performance.now() >= deadline) throw new Error(`timed out after ${timeoutMs} ms: ${what}`);
    await sleep(everyMs);
  }
}
