/**
 * The dispatcher leader killed mid-batch: two server processes on one database, one provider
 * (a standalone sandbox both send to). The leader is killed with SIGKILL while messages are
 * being dispatched; the other takes the advisory lock over and finishes. Counted at the
 * provider, every message ends with exactly one acceptance: none lost, none sent twice.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { sql } from 'drizzle-orm';
import { afterAll, describe, expect, it } from 'vitest';
import { rowsOf } from '../../src/db/client.ts';
import { availableEngines, createTestDatabase, type TestDatabase } from '../support/db.ts';
import { NO_POSTGRES, onlyIf } from '../support/skip.ts';
import { type Proc, spawnProcess, waitUntil } from './helpers.ts';

const onPostgres = availableEngines().includes('postgres');

interface ProviderRecord {
  customerMessageId: string | null;
  parentMessageId: string | null;
}

describe('the dispatcher leader killed mid-batch', () => {
  let db: TestDatabase | undefined;
  const procs: Proc[] = [];
  let sink: Server | undefined;
  afterAll(async () => {
    await Promise.all(procs.map((p) => p.kill('SIGKILL')));
    sink?.close();
    await db?.drop();
  });

  it.runIf(onPostgres)(
    onlyIf(
      onPostgres,
      'hands over to the other instance; each message is accepted exactly once',
      NO_POSTGRES,
    ),
    async () => {
      db = await createTestDatabase('postgres');
      // callbacks are not what this test is about: a sink takes them
      sink = createServer((req, res) => {
        req.resume();
        req.on('end', () => res.writeHead(200).end());
      });
      await new Promise<void>((resolve) => sink!.listen(0, '127.0.0.1', resolve));
      const sinkPort = (sink.address() as AddressInfo).port;
      const sandbox = await spawnProcess({
        entry: 'src/sandbox/main.ts',
        env: {
          SANDBOX_PORT: '0',
          SANDBOX_CALLBACK_URL: `http://127.0.0.1:${sinkPort}/hooks/delivery`,
          SANDBOX_CALLBACK_TOKEN: 'leader-callback-token',
        },
        ready: /listening at http:\/\/127\.0\.0\.1:(\d+)/,
      });
      procs.push(sandbox);
      // small batches, so that the kill lands in the middle of the work
      const env = {
        DATABASE_URL: db.url!,
        PROVIDER_BASE_URL: sandbox.url,
        CALLBACK_TOKEN: 'leader-callback-token',
        DISPATCH_BATCH_SIZE: '25',
      };
      const first = await spawnProcess({ env });
      procs.push(first);
      await first.waitFor(/became dispatcher leader/, 20_000);
      const second = await spawnProcess({ env });
      procs.push(second);

      const total = 2000;
      const cmids = Array.from({ length: total }, (_, i) => `lead-${i}`);
      const res = await fetch(`${second.url}/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          messages: cmids.map((customerMessageId, i) => ({
            from: 'Acme',
            to: `+38050${String(1_000_000 + i).padStart(7, '0')}`,
            type: 'sms',
            text: `message ${i}`,
            customerMessageId,
          })),
        }),
      });
      expect(res.status).toBe(202);

      const accepted = async () => {
        const r = await fetch(`${sandbox.url}/_control/messages`);
        const list = (await r.json()) as ProviderRecord[];
        return list.filter(
          (m) => m.parentMessageId === null && m.customerMessageId?.startsWith('lead-'),
        );
      };
      // barrier: kill the leader once it has sent some, with plenty left
      const before = await waitUntil(
        async () => {
          const n = (await accepted()).length;
          return n >= 300 && n;
        },
        'the leader to send 300 messages',
        30_000,
        50,
      );
      // how far past 300 the leader got is timing; that it has not finished is the point
      expect(before).toBeGreaterThanOrEqual(300);
      expect(before).toBeLessThan(total);
      first.child.kill('SIGKILL');
      await second.waitFor(/became dispatcher leader/, 20_000);

      // barrier: Switchboard's outbox is empty, so nothing more will be sent; only then are the
      // provider's records final (a duplicate sent late would otherwise go unseen)
      const outboxCount = async () =>
        rowsOf<{ n: number }>(
          await db!.database.db.execute(sql`select count(*)::int as n from outbox`),
        )[0]!.n;
      await waitUntil(
        async () => (await outboxCount()) === 0,
        'the outbox to empty after the handover',
        60_000,
        200,
      );
      const records = await accepted();
      const perMessage = new Map<string, number>();
      for (const r of records) {
        perMessage.set(r.customerMessageId!, (perMessage.get(r.customerMessageId!) ?? 0) + 1);
      }
      expect(cmids.filter((c) => !perMessage.has(c))).toEqual([]);
      expect([...perMessage].filter(([, n]) => n !== 1)).toEqual([]);

      // and Switchboard agrees: one recorded acceptance per message, none left in the outbox
      const rows = rowsOf<{ cmid: string; accepted: number }>(
        await db.database.db.execute(sql`
          select m.customer_message_id as cmid,
                 count(e.id) filter (where e.status = 'accepted' and e.source = 'dispatch')::int as accepted
          from messages m left join message_events e on e.message_id = m.id
          where m.customer_message_id like 'lead-%'
          group by m.customer_message_id`),
      );
      expect(rows).toHaveLength(total);
      expect(rows.filter((r) => r.accepted !== 1)).toEqual([]);
      const outbox = rowsOf<{ n: number }>(
        await db.database.db.execute(sql`select count(*)::int as n from outbox`),
      );
      expect(outbox[0]?.n).toBe(0);
    },
    120_000,
  );
});
