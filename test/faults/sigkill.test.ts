/**
 * Store, then acknowledge (DESIGN rule 2), under the harshest stop there is: the server is
 * killed with SIGKILL while many delivery callbacks are in flight. Every callback that got a
 * 2xx must be in the inbox afterwards; those cut off got no 2xx, and the provider retries them.
 */
import { sql } from 'drizzle-orm';
import { afterAll, describe, expect, it } from 'vitest';
import { rowsOf } from '../../src/db/client.ts';
import { availableEngines, createTestDatabase, type TestDatabase } from '../support/db.ts';
import { NO_POSTGRES, onlyIf } from '../support/skip.ts';
import { type Proc, post, spawnProcess, waitUntil } from './helpers.ts';

const onPostgres = availableEngines().includes('postgres');
const KEEPS = onlyIf(onPostgres, 'keeps every callback it acknowledged', NO_POSTGRES);
const CALLBACK_TOKEN = 'sigkill-callback-token';

describe('the server killed with SIGKILL under callback load', () => {
  let db: TestDatabase | undefined;
  let server: Proc | undefined;
  afterAll(async () => {
    await server?.kill('SIGKILL');
    await db?.drop();
  });

  it.runIf(onPostgres)(KEEPS, async () => {
    db = await createTestDatabase('postgres');
    // no provider is needed here: a closed port keeps the built-in sandbox out of the way
    // (a provider address, so the callbacks carry a token as a real provider's must)
    server = await spawnProcess({
      env: {
        DATABASE_URL: db.url!,
        PROVIDER_BASE_URL: 'http://127.0.0.1:9',
        CALLBACK_TOKEN: CALLBACK_TOKEN,
      },
    });
    const url = `${server.url}/hooks/delivery?token=${CALLBACK_TOKEN}`;
    const acknowledged: string[] = [];
    const refused: number[] = [];
    let seq = 0;
    let killed = false;
    const worker = async (w: number) => {
      // bounded: at most 400 requests per worker, and none after the kill
      for (let i = 0; i < 400 && !killed; i++) {
        const n = seq++;
        const body = JSON.stringify({
          customerMessageId: `kill-${w}-${n}`,
          messageId: `pm-kill-${n}`,
          status: n % 2 === 0 ? 'sent' : 'delivered',
          timestamp: new Date().toISOString(),
        });
        const status = await post(url, body);
        if (status >= 200 && status < 300) acknowledged.push(body);
        else refused.push(status);
      }
    };
    const workers = Array.from({ length: 24 }, (_, w) => worker(w));
    // barrier: kill once the server has acknowledged a good number, with 24 requests in flight
    await waitUntil(() => acknowledged.length >= 300, '300 callbacks acknowledged', 20_000, 10);
    server.child.kill('SIGKILL');
    killed = true;
    await Promise.all(workers);
    await new Promise<void>((resolve) => {
      if (server!.child.exitCode !== null || server!.child.signalCode !== null) resolve();
      else server!.child.once('exit', () => resolve());
    });
    expect(server.child.signalCode).toBe('SIGKILL');
    // a bound: how many were answered between the barrier and the kill is timing
    expect(acknowledged.length).toBeGreaterThanOrEqual(300);

    const rows = rowsOf<{ body: string }>(
      await db.database.db.execute(
        sql`select body from inbox where kind = 'delivery'
          and body in (select jsonb_array_elements_text(${JSON.stringify(acknowledged)}::jsonb))`,
      ),
    );
    // exactly one inbox row for each acknowledged callback (each body is unique to this test)
    expect(rows).toHaveLength(acknowledged.length);
    const stored = new Set(rows.map((r) => r.body));
    const lost = acknowledged.filter((b) => !stored.has(b));
    expect(lost).toEqual([]);
    // what was cut off got no 2xx: no answer at all (0), or a 5xx from a dying server
    expect(refused.every((s) => s === 0 || s >= 500)).toBe(true);
  });
});
