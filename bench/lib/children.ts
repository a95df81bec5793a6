/**
 * The processes a benchmark measures: each runs as `node <entry>`, with no relay process in
 * between, so its pid is the process that serves, and its memory can be read from /proc. A
 * TypeScript entry (the bench's sandbox and bare endpoint) is bundled first by esbuild into
 * plain JavaScript, as Switchboard itself runs built (scripts/build.mjs): under tsx's loader
 * each would carry a loader thread with a heap and collections of its own. Output goes to a log file, not a pipe: the bench process reads nothing while it
 * generates load, and the child never blocks on a full pipe.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** What a child (Switchboard, the sandbox, the bare endpoint) logs once it listens: group 1 its port. */
export const LISTENING = /"port":(\d+),"msg":"listening"/;

export interface Child {
  name: string;
  pid: number;
  port: number;
  url: string;
  process: ChildProcess;
  logFile: string;
  /** the process's own figures from /proc/<pid>/status, in KiB (VmHWM is its peak RSS) */
  memory(): { rssKiB: number; hwmKiB: number } | undefined;
  /** the last `chars` characters of its output */
  tail(chars?: number): string;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

export interface SpawnOptions {
  name: string;
  /** path of the entry, relative to the repository */
  entry: string;
  env: Record<string, string>;
  /** finds the port in the output once the child is ready */
  ready: RegExp;
  logDir: string;
  timeoutMs?: number;
  /** extra node flags (e.g. --cpu-prof) */
  nodeArgs?: string[];
}

function readStatus(pid: number): { rssKiB: number; hwmKiB: number } | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kib = (key: string) => Number(status.match(new RegExp(`${key}:\\s+(\\d+) kB`))?.[1] ?? 0);
    return { rssKiB: kib('VmRSS'), hwmKiB: kib('VmHWM') };
  } catch {
    return undefined;
  }
}

/**
 * `entry` and the sources it imports as one JavaScript file; packages stay imports of
 * node_modules, which is why the file is written inside the repository (node_modules/.cache).
 */
async function bundle(entry: string, name: string): Promise<string> {
  const outfile = join(ROOT, 'node_modules/.cache/switchboard-bench', `${name}.mjs`);
  await build({
    entryPoints: [join(ROOT, entry)],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    logLevel: 'warning',
  });
  return outfile;
}

/**
 * Starts a child and resolves once `ready` matches its output (group 1: the port).
 *
 * @example
 * const server = await spawnChild({ name: 'switchboard', entry: 'dist/main.js', env, ready: /"port":(\d+),"msg":"listening"/, logDir });
 */
export async function spawnChild(opts: SpawnOptions): Promise<Child> {
  const logFile = join(opts.logDir, `${opts.name}.log`);
  const fd = openSync(logFile, 'w');
  const entry = /\.tsx?$/.test(opts.entry) ? await bundle(opts.entry, opts.name) : opts.entry;
  const child = spawn(process.execPath, [...(opts.nodeArgs ?? []), entry], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', ...opts.env },
    stdio: ['ignore', fd, fd],
  });
  closeSync(fd);
  const tail = (chars = 4000) => {
    try {
      return readFileSync(logFile, 'utf8').slice(-chars);
    } catch {
      return '';
    }
  };
  const port = await new Promise<number>((resolve, reject) => {
    const deadline = Date.now() + (opts.timeoutMs ?? 60_000);
    const onExit = (code: number | null) => {
      clearInterval(timer);
      reject(new Error(`${opts.name} exited with ${code} before it was ready:\n${tail()}`));
    };
    const timer = setInterval(() => {
      const m = readFileSync(logFile, 'utf8').match(opts.ready);
      if (m) {
        clearInterval(timer);
        child.off('exit', onExit);
        resolve(Number(m[1]));
      } else if (Date.now() > deadline) {
        clearInterval(timer);
        child.off('exit', onExit);
        child.kill('SIGKILL');
        reject(new Error(`${opts.name} was not ready in time:\n${tail()}`));
      }
    }, 50);
    child.once('exit', onExit);
  });
  return {
    name: opts.name,
    pid: child.pid!,
    port,
    url: `http://127.0.0.1:${port}`,
    process: child,
    logFile,
    memory: () => readStatus(child.pid!),
    tail,
    stop(signal = 'SIGTERM') {
      return new Promise((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve(child.exitCode);
        const force = setTimeout(() => child.kill('SIGKILL'), 15_000);
        child.once('exit', (code) => {
          clearTimeout(force);
          resolve(code);
        });
        child.kill(signal);
      });
    },
  };
}

/**
 * Samples a child's RSS every `everyMs`. `stop()` returns the peak seen and the kernel's
 * VmHWM (the peak of the whole process); `section()` returns the highest RSS sampled since
 * the previous `section()` (or the start), so each part of a run gets its own peak.
 */
export function sampleMemory(child: Child, everyMs = 250) {
  let peakKiB = 0;
  let sectionKiB = 0;
  const take = () => {
    const m = child.memory();
    if (!m) return;
    peakKiB = Math.max(peakKiB, m.rssKiB, m.hwmKiB);
    sectionKiB = Math.max(sectionKiB, m.rssKiB);
  };
  const timer = setInterval(take, everyMs);
  timer.unref();
  return {
    peakKiB: () => {
      take();
      return peakKiB;
    },
    section: () => {
      take();
      const peak = sectionKiB;
      sectionKiB = child.memory()?.rssKiB ?? 0;
      return peak;
    },
    stop() {
      take();
      clearInterval(timer);
      return peakKiB;
    },
  };
}
