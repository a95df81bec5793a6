/**
 * Peer of part (b): the dispatcher a team would build on pg-boss instead of Switchboard's
 * outbox. One job per message in a pg-boss queue; a worker (`boss.work`) fetching 5000 jobs at
 * a time posts each batch as one messagelist (`POST /bat/messagelist`, the provider's batch
 * endpoint, as Switchboard's dispatcher does) to the bench sandbox, and pg-boss completes the
 * batch when the handler returns. Tuned as a team would: `burstWhenBatchFull` (a full batch
 * fetches again at once instead of waiting for the next poll), two batches in flight
 * (`localConcurrency: 2`, as Switchboard's dispatcher keeps two rounds in flight on Postgres),
 * polling every 0.5 s (pg-boss's minimum). The answers are counted, not stored: the peer does
 * less per message than Switchboard, which records each answer on the message's timeline.
 *
 * Run as a child of `npm run bench` (PORT=0; DATABASE_URL: the bench database, where pg-boss
 * installs its schema; SANDBOX_URL, SANDBOX_API_KEY). Controlled over loopback HTTP, so the
 * bench can seed jobs first and time the drain alone:
 * - `POST /seed?prefix=p&count=n`: n jobs (customerMessageIds p1..pn), inserted 5000 a call;
 * - `POST /start`: the worker starts fetching; `POST /stop`: it stops;
 * - `GET /stats`: what it has posted and what the sandbox answered.
 */
import { createServer } from 'node:http';
import { PgBoss } from 'pg-boss';

const url = process.env.DATABASE_URL;
const sandbox = process.env.SANDBOX_URL;
if (!url || !sandbox) throw new Error('DATABASE_URL and SANDBOX_URL are required');
const apiKey = process.env.SANDBOX_API_KEY ?? 'sandbox-key';
const PEER_QUEUE = 'messages';
const BATCH = 5000;

interface SmsJob {
  from: string;
  to: string;
  type: 'sms';
  text: string;
  customerMessageId: string;
}

const boss = new PgBoss({ connectionString: url, max: 10 });
boss.on('error', (err) =>
  console.error(JSON.stringify({ msg: 'pg-boss error', err: String(err) })),
);
await boss.start();
await boss.createQueue(PEER_QUEUE);

const stats = { posted: 0, requests: 0, accepted: 0, rejected: 0, status429: 0, failures: 0 };

/** The same number for message i as the bench's seeding gives Switchboard's (PHONE_SQL). */
function phone(i: number): string {
  return `+38050${String((i * 7919) % 10_000_000).padStart(7, '0')}`;
}

async function seed(prefix: string, count: number): Promise<void> {
  for (let from = 1; from <= count; from += BATCH) {
    const jobs = [];
    for (let i = from; i <= Math.min(count, from + BATCH - 1); i++) {
      const data: SmsJob = {
        from: 'Bench',
        to: phone(i),
        type: 'sms',
        text: `Your order ${i} is on its way`,
        customerMessageId: `${prefix}${i}`,
      };
      jobs.push({ data });
    }
    await boss.insert(PEER_QUEUE, jobs);
  }
}

async function post(jobs: { data: SmsJob }[]): Promise<void> {
  const res = await fetch(`${sandbox}/bat/messagelist`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-authorization-key': apiKey },
    body: JSON.stringify({ messages: jobs.map((j) => j.data) }),
  });
  stats.requests++;
  const text = await res.text();
  if (res.status === 429) {
    stats.status429++;
    throw new Error('rate limited'); // pg-boss retries the batch's jobs
  }
  if (!res.ok) {
    stats.failures++;
    throw new Error(`messagelist answered ${res.status}: ${text.slice(0, 200)}`);
  }
  const answer = JSON.parse(text) as { messages?: { status?: string }[] };
  for (const m of answer.messages ?? []) {
    if (m.status === 'accepted') stats.accepted++;
    else stats.rejected++;
  }
  stats.posted += jobs.length;
}

let workerId: string | undefined;

const server = createServer((req, res) => {
  const u = new URL(req.url ?? '/', 'http://localhost');
  const answer = (status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  const run = async () => {
    if (req.method === 'POST' && u.pathname === '/seed') {
      await seed(u.searchParams.get('prefix') ?? 'pb-', Number(u.searchParams.get('count') ?? 0));
      return answer(200, { seeded: true });
    }
    if (req.method === 'POST' && u.pathname === '/start') {
      workerId = await boss.work<SmsJob>(
        PEER_QUEUE,
        {
          batchSize: BATCH,
          localConcurrency: 2,
          burstWhenBatchFull: true,
          pollingIntervalSeconds: 0.5,
        },
        post,
      );
      return answer(200, { workerId });
    }
    if (req.method === 'POST' && u.pathname === '/stop') {
      await boss.offWork(PEER_QUEUE);
      workerId = undefined;
      return answer(200, { stopped: true });
    }
    if (req.method === 'GET' && u.pathname === '/stats') return answer(200, stats);
    return answer(404, { error: 'not found' });
  };
  run().catch((err: unknown) => answer(500, { error: String(err) }));
});
server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  console.log(JSON.stringify({ port, msg: 'listening' }));
});
process.once('SIGTERM', () => {
  server.close();
  void boss.stop({ graceful: false }).then(() => process.exit(0));
});
