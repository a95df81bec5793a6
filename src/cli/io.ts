import { DEFAULT_DATA_DIR } from '../config.ts';
import { runningServerUrl } from '../db/data-dir-lock.ts';

/** What a command needs from the process, passed in so tests can run commands in-process. */
export interface CliIo {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  env: Record<string, string | undefined>;
  cwd: string;
}

export const processIo = (): CliIo => ({
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
  cwd: process.cwd(),
});

/**
 * The running Switchboard a command talks to: `--url`, else SWITCHBOARD_URL, else the server
 * that holds DATA_DIR's embedded database, else the address `switchboard serve` would listen
 * on with this environment (HOST and PORT, default localhost:3000); and the bearer token,
 * `--token` or else the first of API_TOKEN.
 */
export function switchboardTarget(
  flags: { url?: string | undefined; token?: string | undefined },
  env: Record<string, string | undefined>,
): { baseUrl: string; headers: Record<string, string> } {
  const baseUrl = (
    flags.url ??
    (env.SWITCHBOARD_URL?.trim() || serverOnDataDir(env) || serveUrl(env))
  ).replace(/\/+$/, '');
  const token = flags.token ?? env.API_TOKEN?.split(',')[0]?.trim();
  return { baseUrl, headers: token ? { Authorization: `Bearer ${token}` } : {} };
}

/**
 * The server that holds the embedded database's DATA_DIR, as its lock file says
 * (db/data-dir-lock.ts), when PORT does not name one and the database is embedded: a CLI
 * command then talks to that server's API instead of opening the database a second time.
 */
function serverOnDataDir(env: Record<string, string | undefined>): string | undefined {
  if (env.PORT?.trim() || env.DATABASE_URL?.trim()) return undefined;
  return runningServerUrl(env.DATA_DIR?.trim() || DEFAULT_DATA_DIR);
}

/** Where `switchboard serve` listens with `env`'s HOST and PORT, as a client reaches it. */
function serveUrl(env: Record<string, string | undefined>): string {
  const port = env.PORT?.trim() || 3000;
  const host = env.HOST?.trim().replace(/^\[|\]$/g, '') ?? '';
  // unset, the wildcard or loopback: this machine
  if (host === '' || ['0.0.0.0', '::', '127.0.0.1', 'localhost'].includes(host)) {
    return `http://localhost:${port}`;
  }
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/**
 * The one-line answer to a connection that failed: the address tried, and how to name another.
 *
 * @example
 * unreachable('http://localhost:3000', 'connect ECONNREFUSED 127.0.0.1:3000')
 * // cannot reach Switchboard at http://localhost:3000 (connect ECONNREFUSED ...). Is it running? ...
 */
export function unreachable(baseUrl: string, reason: string): string {
  return `cannot reach Switchboard at ${baseUrl} (${reason}). Is it running (npx switchboard serve)? If it runs elsewhere, point at it with SWITCHBOARD_URL=http://host:port or --url http://host:port`;
}

export interface ErrorAnswer {
  error?: { code?: string; message?: string; details?: { path: string; message: string }[] };
}

/** The error envelope of an answer as one line, with its first details. */
export function describeError(body: unknown): string {
  const e = (body as ErrorAnswer | undefined)?.error;
  if (!e) return JSON.stringify(body);
  const details = (e.details ?? [])
    .slice(0, 5)
    .map((d) => `\n  ${d.path}: ${d.message}`)
    .join('');
  return `${e.code}: ${e.message}${details}`;
}
