/**
 * (h) Replay before release (issue 24, point 6): a few thousand calls of
 * `bench/flows/appointment-reminder.yaml` (the recorded-prompt copy the bench server runs) are stored through the real ingest path, then replayed
 * through a changed flow, and the two rates are reported side by side.
 *
 * - Ingest: the calls are started through `POST /v1/calls/batch` and sent to the sandbox,
 *   which accepts them and never plays them; the bench plays the provider. Each call is
 *   answered (a `delivered` callback on `/hooks/delivery`), then its key sequence is posted
 *   to `/hooks/speechcall` one key per round, each key the webhook body of the menu entry
 *   the provider would play (the menu's own `gotoMenu` leads to the next one). The sequences
 *   cycle through 1; 2,1; 7,1 (a wrong key); silence,1; 9,2,1. Ingest rate: calls (and
 *   webhooks) over the time the callbacks and webhooks took, at saturation (20 connections).
 * - Replay: `POST /v1/flows/appointment-reminder/replay` with the flow's file changed (outcome
 *   `confirmed` renamed, key 1's SMS reworded), over exactly those calls (`since` the part's
 *   start), after a small warm-up replay. Replay rate: calls replayed over its wall time, and
 *   the server's and Postgres's CPU per call.
 *
 * BENCH_SCALE scales the number of calls (3000 at 1, at least 200).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type BenchContext, CALLBACK_HEADERS, round, sleep } from './context.ts';
import { ROOT } from './lib/children.ts';
import { runLoad } from './lib/load.ts';
import { type CpuUse, cpuMeter } from './lib/metrics.ts';

const FLOW = 'appointment-reminder';
const CALLS = 3000;
const CONNECTIONS = 20;
/** What the callers do, in turn: `timeout` is silence (the menu's `wrong` entry). */
const SEQUENCES: string[][] = [['1'], ['2', '1'], ['7', '1'], ['timeout', '1'], ['9', '2', '1']];

export interface ReplayBench {
  calls: number;
  ingest: {
    /** delivery callbacks and speech webhooks posted */
    webhooks: number;
    seconds: number;
    callsPerSecond: number;
    webhooksPerSecond: number;
    /** answers by status code over every round */
    statuses: Record<string, number>;
  };
  replay: {
    seconds: number;
    callsPerSecond: number;
    /** the report's counts: replayed, same, differing, skipped */
    replayed: number;
    same: number;
    differing: number;
    skipped: number;
    cpu: CpuUse;
  };
  /** replayed calls/s over ingested calls/s */
  ratio: number;
}

interface StoredMenu {
  dtmfActions: Record<
    string,
    { action: string; body?: unknown; headers?: Record<string, string>; menu?: number }[]
  >;
}

interface StoredCall {
  cmid: string;
  pmid: string | null;
  from: string;
  to: string;
  menu: StoredMenu[];
}

function phone(i: number): string {
  return `+38063${String((i * 7919 + 29) % 10_000_000).padStart(7, '0')}`;
}

async function startCalls(ctx: BenchContext, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let from = 0; from < count; from += 1000) {
    const calls = Array.from({ length: Math.min(1000, count - from) }, (_, k) => ({
      to: phone(from + k),
      vars: { name: `Client ${from + k}`, date: '2026-12-01 10:00' },
    }));
    const res = await fetch(`${ctx.server.url}/v1/calls/batch`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ flow: FLOW, from: 'Clinic', calls }),
    });
    const body = (await res.json()) as { calls?: { status: string; messageId?: string }[] };
    if (res.status >= 300) {
      throw new Error(`POST /v1/calls/batch: ${res.status} ${JSON.stringify(body).slice(0, 500)}`);
    }
    for (const c of body.calls ?? []) if (c.messageId) ids.push(c.messageId);
  }
  if (ids.length !== count) throw new Error(`${count - ids.length} calls were not queued`);
  return ids;
}

async function waitForOutbox(ctx: BenchContext, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const [row] = await ctx.db.sql`select count(*)::int as n from outbox`;
    if (row!.n === 0) return;
    if (Date.now() > deadline) throw new Error(`outbox still holds ${row!.n} rows`);
    await sleep(100);
  }
}

/** Round r's webhooks: the r-th key of each call whose sequence has one, as the menu says. */
function rounds(calls: StoredCall[]): { body: string; headers: Record<string, string> }[][] {
  const out: { body: string; headers: Record<string, string> }[][] = [];
  calls.forEach((call, i) => {
    const keys = SEQUENCES[i % SEQUENCES.length]!;
    let at: number | undefined = 0;
    keys.forEach((key, r) => {
      if (at === undefined)
        throw new Error(`call ${call.cmid}: the menu ended before key ${r + 1}`);
      const entry = call.menu[at]!.dtmfActions;
      const actions = (key === 'timeout' ? entry.wrong : (entry[`d${key}`] ?? entry.wrong)) ?? [];
      const hook = actions.find((a) => a.action === 'webhook' && a.body !== undefined);
      if (!hook) throw new Error(`call ${call.cmid}: no webhook for key ${key}`);
      out[r] ??= [];
      out[r]!.push({
        body: JSON.stringify({ from: call.from, to: call.to, mid: call.pmid, action: hook.body }),
        headers: hook.headers ?? {},
      });
      at = actions.find((a) => a.action === 'gotoMenu')?.menu;
    });
  });
  return out;
}

/** The flow's file with outcome `confirmed` renamed and key 1's SMS reworded. */
function changedFlow(): string {
  const source = readFileSync(join(ROOT, 'bench', 'flows', `${FLOW}.yaml`), 'utf8');
  const changed = source
    .replaceAll('outcome: confirmed', 'outcome: accepted')
    .replace('Thanks {{name}}, see you on {{date}}.', 'See you on {{date}}, {{name}}.');
  if (changed === source)
    throw new Error(`bench/flows/${FLOW}.yaml has no outcome "confirmed" left`);
  return changed;
}

async function replay(
  ctx: BenchContext,
  body: Record<string, unknown>,
): Promise<{ calls: number; replayed: number; same: number; differing: number; skipped: number }> {
  const res = await fetch(`${ctx.server.url}/v1/flows/${FLOW}/replay`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const report = (await res.json()) as Record<string, number>;
  if (res.status !== 200) {
    throw new Error(`POST /v1/flows/${FLOW}/replay: ${res.status} ${JSON.stringify(report)}`);
  }
  return report as never;
}

export async function benchReplay(ctx: BenchContext): Promise<ReplayBench> {
  const count = Math.max(200, Math.round(CALLS * ctx.scale));
  // the calls of this part only: earlier parts start calls of the same flow
  const since = new Date(Date.now() - 1000).toISOString();
  ctx.log(`(h) starting ${count} calls of ${FLOW}`);
  const messageIds = await startCalls(ctx, count);
  await waitForOutbox(ctx);
  const calls = await ctx.db.sql<StoredCall[]>`
    select customer_message_id as cmid, provider_message_id as pmid, "from", "to",
           payload->'menu' as menu
    from messages where id = any(${messageIds}::uuid[]) order by id`;
  const answered = calls.map((c) =>
    JSON.stringify({
      customerMessageId: c.cmid,
      messageId: c.pmid,
      status: 'delivered',
      timestamp: new Date().toISOString(),
      channel: 'speechcall',
    }),
  );
  const keyRounds = rounds(calls);

  ctx.log(`(h) ingest: ${answered.length} callbacks, then ${keyRounds.length} rounds of keys`);
  const statuses: Record<string, number> = {};
  let seconds = 0;
  let webhooks = 0;
  const load = async (
    path: string,
    list: { body: string; headers?: Record<string, string> }[],
    headers: Record<string, string> = {},
  ) => {
    const t0 = performance.now();
    const r = await runLoad({
      url: ctx.server.url,
      seconds: 600,
      connections: CONNECTIONS,
      headers,
      maxRequests: list.length,
      request: (i) => ({ path, ...list[i % list.length]! }),
    });
    // wall time: the load's own `seconds` is whole seconds, too coarse for a short round
    seconds += (performance.now() - t0) / 1000;
    webhooks += r.requests;
    for (const [s, n] of Object.entries(r.statuses)) statuses[s] = (statuses[s] ?? 0) + n;
  };
  await load(
    '/hooks/delivery',
    answered.map((body) => ({ body })),
    CALLBACK_HEADERS,
  );
  for (const keys of keyRounds) await load('/hooks/speechcall', keys);
  const refused = Object.entries(statuses).filter(([s]) => s !== '200');
  if (refused.length > 0) throw new Error(`ingest answers: ${JSON.stringify(statuses)}`);

  const source = changedFlow();
  ctx.log('(h) replay: warm-up');
  await replay(ctx, { source, since, limit: 100 });
  ctx.log(`(h) replay: ${count} calls through the changed flow`);
  const meter = await cpuMeter(ctx.server.pid, ctx.db);
  const t0 = performance.now();
  const report = await replay(ctx, { source, since });
  const replaySeconds = (performance.now() - t0) / 1000;
  const cpu = await meter.stop(report.calls);
  if (report.calls !== count) {
    throw new Error(`the replay saw ${report.calls} calls, ${count} were stored`);
  }
  const ingestRate = count / seconds;
  const replayRate = report.replayed / replaySeconds;
  return {
    calls: count,
    ingest: {
      webhooks,
      seconds: round(seconds, 2),
      callsPerSecond: round(ingestRate, 0),
      webhooksPerSecond: round(webhooks / seconds, 0),
      statuses,
    },
    replay: {
      seconds: round(replaySeconds, 2),
      callsPerSecond: round(replayRate, 0),
      replayed: report.replayed,
      same: report.same,
      differing: report.differing,
      skipped: report.skipped,
      cpu,
    },
    ratio: round(replayRate / ingestRate, 2),
  };
}
