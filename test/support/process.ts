/**
 * Starts the real server as a child process the way `npm start` does: built by
 * scripts/build.mjs (once per test file), then `node <npm start's flags> dist/main.js`; finds
 * its port in the "listening" log line.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { startFlags } from '../../scripts/start-flags.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

let built: Promise<unknown> | undefined;

export interface ServerProcess {
  url: string;
  port: number;
  child: ChildProcess;
  output(): string;
  /** sends `signal` and resolves with the exit code and how long the exit took */
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; ms: number }>;
}

export async function startServerProcess(env: Record<string, string>): Promise<ServerProcess> {
  built ??= promisify(execFile)(process.execPath, ['scripts/build.mjs'], { cwd: ROOT });
  await built;
  const child = spawn(process.execPath, [...startFlags(), 'dist/main.js'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', PORT: '0', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr!.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${out}`)), 60_000);
    const check = () => {
      const m = out.match(/"port":(\d+),"msg":"listening"/);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    };
    child.stdout!.on('data', check);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code}:\n${out}`));
    });
  });
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    child,
    output: () => out,
    stop(signal = 'SIGTERM') {
      const start = Date.now();
      return new Promise((resolve) => {
        if (child.exitCode !== null) return resolve({ code: child.exitCode, ms: 0 });
        child.once('exit', (code) => resolve({ code, ms: Date.now() - start }));
        child.kill(signal);
      });
    },
  };
}
