/**
 * What a test that timed out waiting on a server prints beside its own findings: the sessions
 * of its database that are not idle (what each waits on, for how long, running what), the
 * PgBouncer pool of that database when the tests run through one, and whether eSpeak NG's
 * worker thread has requests unanswered. Each part that cannot be read says why instead.
 */

import postgres from 'postgres';
import { inject } from 'vitest';
import { withTimeout } from '../../src/db/errors.ts';
import { espeakPendingRequests } from '../../src/speech/espeak.ts';
import type { TestDatabase } from './db.ts';
import type { TestServer } from './server.ts';

export async function diagnose(url: string | undefined): Promise<string> {
  const parts = [`eSpeak NG requests unanswered: ${espeakPendingRequests()}`];
  if (url === undefined) return parts.join('\n');
  const name = new URL(url).pathname.slice(1);
  const direct = postgres(url, { max: 1, onnotice: () => {}, connect_timeout: 5 });
  try {
    const sessions = await direct`
      select pid, state, wait_event_type, wait_event, backend_type,
        round(extract(epoch from now() - xact_start)) as xact_s,
        round(extract(epoch from now() - state_change)) as state_s,
        left(query, 160) as query
      from pg_stat_activity
      where datname = current_database() and pid <> pg_backend_pid() and state <> 'idle'`;
    parts.push(`sessions not idle: ${JSON.stringify(sessions)}`);
    const locks = await direct`
      select pid, locktype, mode, relation::regclass::text as relation
      from pg_locks where not granted`;
    parts.push(`locks waited for: ${JSON.stringify(locks)}`);
  } catch (err) {
    parts.push(`sessions not read: ${String(err)}`);
  } finally {
    await direct.end({ timeout: 1 });
  }
  const port = inject('pgbouncerPort');
  if (port !== null) {
    const admin = postgres(`postgres://postgres@127.0.0.1:${port}/pgbouncer`, {
      max: 1,
      onnotice: () => {},
      connect_timeout: 5,
      fetch_types: false,
    });
    try {
      const pools = await admin.unsafe('show pools').simple();
      parts.push(`PgBouncer pool: ${JSON.stringify(pools.filter((p) => p.database === name))}`);
    } catch (err) {
      parts.push(`PgBouncer pools not read: ${String(err)}`);
    } finally {
      await admin.end({ timeout: 1 });
    }
  }
  return parts.join('\n');
}

/**
 * A block's teardown: `server` stopped, then `db` dropped, each within `ms`. Past that it throws
 * naming the part that hangs, with the server's last warnings (a worker step holding the stop
 * names itself there: `stop waits for a worker step`) and `diagnose`, instead of the bare hook
 * timeout that says nothing.
 */
export async function stopAndDrop(
  server: TestServer | undefined,
  db: TestDatabase | undefined,
  ms = 25_000,
): Promise<void> {
  const bounded = async (work: Promise<void> | undefined, what: string) => {
    try {
      await withTimeout(work ?? Promise.resolve(), ms, what);
    } catch (err) {
      throw new Error(
        `${(err as Error).message}; the server's last warnings:\n${server?.warnings().join('') ?? ''}\n${await diagnose(db?.url)}`,
        { cause: err },
      );
    }
  };
  await bounded(server?.stop(), "the server's stop");
  await bounded(db?.drop(), "the test database's drop");
}
