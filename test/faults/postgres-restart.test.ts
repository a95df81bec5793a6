/**
 * Postgres restarted under callback load, on a private Postgres server of this test's own
 * (never the shared one other test files use): while it is down every callback is answered
 * 503 (so the provider retries), at once once the server has seen the outage (its breaker,
 * src/db/availability.ts); within 5 seconds of it coming back, callbacks are stored and
 * acknowledged again; and every 2xx of the whole run is in the database.
 */
import postgres from 'postgres';
import { afterAll, describe, expect, it } from 'vitest';
import { availableEngines } from '../support/db.ts';
import { NO_POSTGRES, onlyIf } from '../support/skip.ts';
import {
  canRunPrivatePostgres,
  type PrivatePostgres,
  type Proc,
  postWhy,
  sleep,
  spawnProcess,
  startPrivatePostgres,
  waitUntil,
} from './helpers.ts';

// CI runs the suite on real Postgres (TEST_DATABASE_URL); this test brings its own server
const enabled = availableEngines().includes('postgres') && canRunPrivatePostgres;
const whyNot = availableEngines().includes('postgres')
  ? 'no Postgres server binaries (initdb) on this machine: apt-get install -y postgresql'
  : NO_POSTGRES;
const CALLBACK_TOKEN = 'restart-callback-token';
/**
 * A bound: how long a callback may take to be refused once the server knows Postgres is down.
 * Refusing costs no database work; waiting for the pool would take up to its connect_timeout
 * (5 s) per attempt. The margin is for a loaded machine's event loop, this test's included.
 */
const REFUSED_WITHIN_MS = 2000;

interface Sent {
  body: string;
  sentAt: number;
  answeredAt: number;
  status: number;
  /** why no answer came, for status 0 */
  why?: string;
}

describe('Postgres restarted under load', () => {
  let pg: PrivatePostgres | undefined;
  let server: Proc | undefined;
  afterAll(async () => {
    await server?.kill('SIGKILL');
    pg?.destroy();
  });

  it.runIf(enabled)(
    onlyIf(enabled, 'answers 503 at once while it is down, and recovers within 5 s after', whyNot),
    async () => {
      pg = await startPrivatePostgres();
      server = await spawnProcess({
        env: {
          DATABASE_URL: pg.url,
          PROVIDER_BASE_URL: 'http://127.0.0.1:9',
          CALLBACK_TOKEN: CALLBACK_TOKEN,
        },
      });
      const url = `${server.url}/hooks/delivery?token=${CALLBACK_TOKEN}`;
      const sent: Sent[] = [];
      // when each sender's request in flight was sent: a failure says who waits, and how long
      const inFlight = new Map<number, number>();
      let stop = false;
      let seq = 0;
      const worker = async (w: number) => {
        // bounded in count and time: at most 2000 requests per worker
        for (let i = 0; i < 2000 && !stop; i++) {
          const n = seq++;
          const body = JSON.stringify({
            customerMessageId: `pg-${n}`,
            status: 'delivered',
            timestamp: new Date().toISOString(),
          });
          const sentAt = performance.now();
          inFlight.set(w, sentAt);
          const { status, why } = await postWhy(url, body, AbortSignal.timeout(10_000));
          inFlight.delete(w);
          sent.push({ body, sentAt, answeredAt: performance.now(), status, why });
          // pacing, not an ordering: a provider backs off a little on errors
          if (status !== 200) await sleep(20);
        }
      };
      const workers = Array.from({ length: 8 }, (_, w) => worker(w));
      // for the failure message: when Postgres was stopped, once it was
      let crashedAt: number | undefined;
      try {
        // barrier: the server is storing callbacks before the crash
        const ok = () => sent.filter((s) => s.status === 200).length;
        await waitUntil(() => ok() >= 50, '50 callbacks acknowledged before the crash', 20_000);
        // a bound: how many more came in meanwhile is timing
        expect(ok()).toBeGreaterThanOrEqual(50);

        // a crash: no checkpoint, no goodbye to the clients, recovery at the next start
        pg.stop('immediate');
        const downAt = performance.now();
        crashedAt = downAt;
        // when the server had seen the outage: its first 503 after the crash (onError tells the
        // breaker before it answers, so from then on callbacks are refused without the pool)
        const seenAt = () =>
          sent.find((s) => s.status === 503 && s.answeredAt >= downAt)?.answeredAt;
        // barrier: down until the server has seen it and 50 callbacks sent after that were
        // answered, and for a second at least (several of the breaker's probes fail meanwhile)
        await waitUntil(
          () => {
            const seen = seenAt();
            if (seen === undefined || performance.now() - downAt < 1000) return false;
            return sent.filter((s) => s.sentAt >= seen).length >= 50;
          },
          '50 answers to callbacks sent after the server saw the outage',
          15_000,
        );
        const readyWhileDown = await fetch(`${server.url}/readyz`);
        expect(readyWhileDown.status).toBe(503);
        expect(await readyWhileDown.json()).toMatchObject({ database: 'down' });
        const metricsWhileDown = await fetch(`${server.url}/metrics`);
        expect(await metricsWhileDown.text()).toMatch(/^switchboard_database_up 0$/m);
        const startingAt = performance.now();
        pg.start();
        const upAt = performance.now();

        // recovery: a callback sent after Postgres is back is acknowledged within 5 s (a bounded
        // poll: the time it takes is what is measured)
        let recoveredAt: number | undefined;
        while (performance.now() - upAt < 8000) {
          const first = sent.find((s) => s.sentAt >= upAt && s.status === 200);
          if (first) {
            recoveredAt = first.answeredAt;
            break;
          }
          await sleep(25);
        }
        // barrier, in place of half a second more of load: 50 callbacks sent after the restart
        // are acknowledged, so the check below covers the recovered server's writes too
        if (recoveredAt !== undefined) {
          await waitUntil(
            () => sent.filter((s) => s.sentAt >= upAt && s.status === 200).length >= 50,
            '50 callbacks acknowledged after the restart',
            20_000,
          );
        }
        stop = true;
        await Promise.all(workers);

        // nothing sent after the crash and answered before the restart was a 2xx
        const whileDown = sent.filter((s) => s.sentAt >= downAt && s.answeredAt <= upAt);
        // a bound: how many were answered while it was down is timing
        expect(whileDown.length).toBeGreaterThan(0);
        expect(whileDown.filter((s) => s.status >= 200 && s.status < 300)).toEqual([]);
        // each one a 503: no 2xx, no reset (the server died), no client timeout (it waited)
        const described = (s: Sent) =>
          `${s.status} after ${Math.round(s.answeredAt - s.sentAt)} ms${s.why ? `: ${s.why}` : ''}`;
        const otherwise = whileDown.filter((s) => s.status !== 503).slice(0, 5);
        expect(otherwise.map(described), 'answers other than 503 while Postgres was down').toEqual(
          [],
        );
        // and at once, once the server had seen the outage. Those sent before that (between the
        // crash and the first failure the server saw) are in the pool's queue like the ones in
        // flight at the crash: they get their 503 when postgres.js gives up on them, which on a
        // loaded machine takes seconds, so only their status is held to the rule above
        const seen = seenAt()!;
        // pg_ctl start blocks this process: an answer that came meanwhile is seen after it, so
        // callbacks sent before it and answered after it (in whileDown or not) get that long more
        const blocked = upAt - startingAt;
        const slow = sent.filter(
          (s) =>
            s.sentAt >= seen &&
            s.sentAt < startingAt &&
            s.answeredAt - s.sentAt > REFUSED_WITHIN_MS + (s.answeredAt >= upAt ? blocked : 0),
        );
        expect(slow.slice(0, 5).map(described), 'refused slowly while down').toEqual([]);
        const queued = whileDown.filter((s) => s.sentAt < seen);
        console.info(
          `${whileDown.length} callbacks answered 503 while Postgres was down, ${queued.length} sent before the server saw it (slowest ${Math.round(Math.max(0, ...queued.map((s) => s.answeredAt - s.sentAt)))} ms)`,
        );
        expect(recoveredAt, 'no 2xx within 8 s of the restart').toBeDefined();
        // a bound: the recovery time is what is measured, and 5 s is its budget
        expect(recoveredAt! - upAt).toBeLessThanOrEqual(5000);
        console.info(`first 2xx ${Math.round(recoveredAt! - upAt)} ms after Postgres was back`);
        expect((await fetch(`${server.url}/readyz`)).status).toBe(200);
        const metricsAfter = await fetch(`${server.url}/metrics`);
        expect(await metricsAfter.text()).toMatch(/^switchboard_database_up 1$/m);

        // and every acknowledged callback of the run is stored
        const acknowledged = sent.filter((s) => s.status === 200).map((s) => s.body);
        const sql = postgres(pg.url, { max: 1, onnotice: () => {} });
        try {
          const rows = await sql<{ body: string }[]>`select body from inbox`;
          const stored = new Set(rows.map((r) => r.body));
          expect(acknowledged.filter((b) => !stored.has(b))).toEqual([]);
        } finally {
          await sql.end();
        }
      } catch (err) {
        // what the senders saw: answers by status (and why, for no answer) before and after the
        // crash, and the requests still waiting for one
        const now = performance.now();
        const after = crashedAt;
        const tally = (list: Sent[]) => {
          const counts = new Map<string, number>();
          for (const s of list) {
            const key = s.why ? `${s.status} (${s.why})` : String(s.status);
            counts.set(key, (counts.get(key) ?? 0) + 1);
          }
          return [...counts].map(([k, n]) => `${n} × ${k}`).join(', ') || 'none';
        };
        const before = sent.filter((s) => after === undefined || s.sentAt < after);
        const since = after === undefined ? [] : sent.filter((s) => s.sentAt >= after);
        const waiting = [...inFlight.values()].map((at) => `${Math.round(now - at)} ms`);
        console.error(
          [
            `sent before the crash: ${tally(before)}`,
            `sent after it: ${after === undefined ? 'no crash yet' : tally(since)}`,
            `waiting for an answer: ${waiting.join(', ') || 'none'}`,
          ].join('\n'),
        );
        // the server's own account of what happened (it may have died)
        console.error(server.output().slice(-4000));
        throw err;
      } finally {
        stop = true;
        await Promise.all(workers);
      }
    },
    60_000,
  );
});
