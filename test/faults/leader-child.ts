/**
 * A process that competes for a leader lock and does nothing else, for leader-hung.test.ts
 * (to be stopped with SIGSTOP): `GET /acquire` answers its lock's tryAcquire, `true` or
 * `false`. Between requests it calls nothing, so only the lock's own heartbeat talks to
 * Postgres. Env: DATABASE_URL, LEADER_KEY.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { openDatabase } from '../../src/db/client.ts';

const database = await openDatabase({ url: process.env.DATABASE_URL, maxConnections: 1 });
const lock = database.createLeaderLock(Number(process.env.LEADER_KEY));

const server = createServer((req, res) => {
  if (req.url !== '/acquire') {
    res.writeHead(404).end();
    return;
  }
  lock.tryAcquire().then(
    (held) => res.writeHead(200).end(String(held)),
    (err: unknown) => res.writeHead(500).end(String(err)),
  );
});
server.listen(0, '127.0.0.1', () => {
  console.log(`leader-child listening on ${(server.address() as AddressInfo).port}`);
});
