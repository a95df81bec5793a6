/**
 * A real PgBouncer (Debian's `pgbouncer`) in transaction mode for tests: its own config in a
 * temporary directory, on a free port, forwarding every database name to the Postgres of
 * TEST_DATABASE_URL, clients trusted (the user list names the URL's user, and its password if
 * it has one, for PgBouncer's own logins to Postgres). Transaction mode hands each
 * transaction whichever server connection is free: what Switchboard's DATABASE_PREPARE=false
 * and DATABASE_DIRECT_URL are for (docs/scaling.md, "Behind PgBouncer").
 *
 * @example
 * const bouncer = await startPgBouncer(process.env.TEST_DATABASE_URL!);
 * const pooled = bouncer.via(directUrl); // the same database, through PgBouncer
 * await bouncer.stop();
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';

/** The pgbouncer binary (on PATH, or where Debian puts it), or undefined when not installed. */
export function findPgBouncer(): string | undefined {
  const found = spawnSync('sh', ['-c', 'command -v pgbouncer'], { encoding: 'utf8' });
  if (found.status === 0 && found.stdout.trim() !== '') return found.stdout.trim();
  return existsSync('/usr/sbin/pgbouncer') ? '/usr/sbin/pgbouncer' : undefined;
}

export interface PgBouncer {
  port: number;
  /** `url` with its host and port replaced by PgBouncer's: the same database, pooled */
  via(url: string): string;
  /** the backend pids of the server connections PgBouncer holds now (SHOW SERVERS) */
  serverPids(): Promise<number[]>;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

function quote(v: string): string {
  return `"${v.replace(/"/g, '""')}"`;
}

/** Starts PgBouncer in transaction mode in front of `targetUrl`'s server. */
export async function startPgBouncer(targetUrl: string): Promise<PgBouncer> {
  const bin = findPgBouncer();
  if (!bin) throw new Error('no pgbouncer on PATH (apt-get install -y pgbouncer)');
  const target = new URL(targetUrl);
  const user = decodeURIComponent(target.username) || 'postgres';
  const password = decodeURIComponent(target.password);
  const dir = mkdtempSync(join(tmpdir(), 'switchboard-pgbouncer-'));
  // PgBouncer refuses to run as root: as root it runs as postgres, which must read these
  chmodSync(dir, 0o755);
  const port = await freePort();
  writeFileSync(join(dir, 'userlist.txt'), `${quote(user)} ${quote(password)}\n`, { mode: 0o644 });
  writeFileSync(
    join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      `* = host=${target.hostname} port=${target.port || '5432'}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${join(dir, 'userlist.txt')}`,
      `admin_users = ${user}`,
      'pool_mode = transaction',
      'max_client_conn = 1000',
      'default_pool_size = 20',
      '',
    ].join('\n'),
    { mode: 0o644 },
  );
  const asRoot = process.getuid?.() === 0;
  const child: ChildProcess = spawn(
    bin,
    [...(asRoot ? ['-u', 'postgres'] : []), join(dir, 'pgbouncer.ini')],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  child.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const cleanup = () => rmSync(dir, { recursive: true, force: true });
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`pgbouncer did not start:\n${out}`)), 10_000);
      const check = () => {
        if (out.includes(`listening on 127.0.0.1:${port}`)) {
          clearTimeout(timer);
          resolve();
        }
      };
      child.stdout?.on('data', check);
      child.stderr?.on('data', check);
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`pgbouncer exited with ${code}:\n${out}`));
      });
    });
  } catch (err) {
    child.kill('SIGKILL');
    cleanup();
    throw err;
  }
  const via = (url: string) => {
    const u = new URL(url);
    u.hostname = '127.0.0.1';
    u.port = String(port);
    return u.toString();
  };
  return {
    port,
    via,
    async serverPids() {
      // the admin console speaks the simple query protocol only
      const adminUrl = new URL(via(targetUrl));
      adminUrl.pathname = '/pgbouncer';
      const admin = postgres(adminUrl.toString(), {
        max: 1,
        fetch_types: false,
        onnotice: () => {},
      });
      try {
        const rows = await admin.unsafe('show servers').simple();
        return rows.map((r) => Number(r.remote_pid)).filter((pid) => pid > 0);
      } finally {
        await admin.end({ timeout: 1 });
      }
    },
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await exited;
      }
      cleanup();
    },
  };
}
