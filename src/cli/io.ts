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
 * The running Switchboard a command talks to: `--url` (default http://localhost:$PORT, PORT
 * default 3000) and the bearer token, `--token` or else the first of API_TOKEN.
 */
export function switchboardTarget(
  flags: { url?: string | undefined; token?: string | undefined },
  env: Record<string, string | undefined>,
): { baseUrl: string; headers: Record<string, string> } {
  const baseUrl = (flags.url ?? `http://localhost:${env.PORT?.trim() || 3000}`).replace(/\/+$/, '');
  const token = flags.token ?? env.API_TOKEN?.split(',')[0]?.trim();
  return { baseUrl, headers: token ? { Authorization: `Bearer ${token}` } : {} };
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
