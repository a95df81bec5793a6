/**
 * (c) Speech webhook to follow-up in the outbox, at 500 webhooks/s offered. Calls of
 * `flows/appointment-reminder.yaml` are started through `POST /v1/calls/batch` and sent to
 * the sandbox, which accepts them and never plays them (the bench plays the provider): each
 * call is answered with a `delivered` callback, then the bench posts the webhook the provider
 * would post for key 1 of the first menu (`{from, to, mid, action: <the menu's webhook
 * body>}`). Key 1 records an outcome and sends an SMS: the hook answers 200 after the
 * transaction that wrote the follow-up and its outbox row has committed, so the hook's
 * latency is the time from webhook to follow-up in the outbox.
 */
import { type BenchContext, CALLBACK_HEADERS, round, sleep } from './context.ts';
import { type LoadResult, runLoad } from './lib/load.ts';
import { type CpuUse, cpuMeter } from './lib/metrics.ts';

export type SpeechBench =
  | { measured: false; reason: string }
  | {
      measured: true;
      calls: number;
      load: LoadResult;
      /** CPU of the server and of Postgres over the measured load, per webhook answered */
      cpu: CpuUse;
      /** follow-up messages stored for the measured calls */
      followUps: number;
    };

const FLOW = 'appointment-reminder';
const RATE = 500;

interface Webhook {
  body: string;
  headers: Record<string, string>;
}

async function routeMissing(url: string, path: string): Promise<boolean> {
  const res = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{}',
  });
  const text = await res.text();
  return res.status === 404 && text.includes('ROUTE_NOT_FOUND');
}

function phone(i: number): string {
  return `+38067${String((i * 7919 + 13) % 10_000_000).padStart(7, '0')}`;
}

/** Starts `count` calls; answers their message ids. */
async function startCalls(ctx: BenchContext, count: number, offset: number): Promise<string[]> {
  const ids: string[] = [];
  for (let from = 0; from < count; from += 1000) {
    const calls = Array.from({ length: Math.min(1000, count - from) }, (_, k) => ({
      to: phone(offset + from + k),
      vars: { name: `Client ${offset + from + k}`, date: '2026-12-01 10:00' },
    }));
    const res = await fetch(`${ctx.server.url}/v1/calls/batch`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ flow: FLOW, from: 'Clinic', calls }),
    });
    const body = (await res.json()) as {
      calls?: { messageId?: string }[];
      items?: { messageId?: string }[];
    };
    if (res.status >= 300)
      throw new Error(`POST /v1/calls/batch: ${res.status} ${JSON.stringify(body).slice(0, 500)}`);
    for (const item of body.calls ?? body.items ?? []) if (item.messageId) ids.push(item.messageId);
  }
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

/** The provider's side of each call: answered (a delivery callback), then the key-1 webhook. */
async function prepareWebhooks(ctx: BenchContext, messageIds: string[]): Promise<Webhook[]> {
  const rows = await ctx.db.sql<
    {
      cmid: string;
      pmid: string | null;
      from: string;
      to: string;
      action: { body?: unknown; headers?: Record<string, string> } | null;
    }[]
  >`
    select customer_message_id as cmid, provider_message_id as pmid, "from", "to",
           payload->'menu'->0->'dtmfActions'->'d1'->0 as action
    from messages where id = any(${messageIds}::uuid[])`;
  const answered = rows.map((r) =>
    JSON.stringify({
      customerMessageId: r.cmid,
      messageId: r.pmid,
      status: 'delivered',
      timestamp: new Date().toISOString(),
      channel: 'speechcall',
    }),
  );
  await runLoad({
    url: ctx.server.url,
    seconds: 60,
    connections: 20,
    headers: CALLBACK_HEADERS,
    request: (i) => ({ path: '/hooks/delivery', body: answered[i % answered.length]! }),
    maxRequests: answered.length,
  });
  return rows
    .filter((r) => r.action?.body !== undefined && r.pmid)
    .map((r) => ({
      body: JSON.stringify({ from: r.from, to: r.to, mid: r.pmid, action: r.action!.body }),
      headers: r.action!.headers ?? {},
    }));
}

export async function benchSpeech(ctx: BenchContext): Promise<SpeechBench> {
  if (
    (await routeMissing(ctx.server.url, '/v1/calls')) ||
    (await routeMissing(ctx.server.url, '/hooks/speechcall'))
  ) {
    return { measured: false, reason: 'calls runtime missing' };
  }
  const warm = RATE * 2;
  const measured = RATE * ctx.seconds;
  ctx.log(`(c) starting ${warm + measured} calls of ${FLOW}`);
  const warmIds = await startCalls(ctx, warm, 0);
  const ids = await startCalls(ctx, measured, warm);
  ctx.log('(c) calls started; waiting for the dispatcher to send them');
  await waitForOutbox(ctx);
  ctx.log('(c) answering the calls (delivery callbacks)');
  const warmHooks = await prepareWebhooks(ctx, warmIds);
  const hooks = await prepareWebhooks(ctx, ids);
  if (hooks.length === 0)
    return { measured: false, reason: 'the call messages carry no webhook for key 1' };
  const followUpsBefore = await countFollowUps(ctx);
  await runLoad({
    url: ctx.server.url,
    seconds: 2,
    connections: 20,
    rate: RATE,
    request: (i) => ({ path: '/hooks/speechcall', ...warmHooks[i % warmHooks.length]! }),
  });
  ctx.log(`(c) ${RATE} webhooks/s offered`);
  const meter = await cpuMeter(ctx.server.pid, ctx.db);
  const load = await runLoad({
    url: ctx.server.url,
    seconds: ctx.seconds,
    connections: 30,
    rate: RATE,
    request: (i) => ({ path: '/hooks/speechcall', ...hooks[i % hooks.length]! }),
  });
  const cpu = await meter.stop(load.requests);
  await sleep(500);
  const followUps = (await countFollowUps(ctx)) - followUpsBefore;
  return {
    measured: true,
    calls: ids.length,
    load: { ...load, p50: round(load.p50), p99: round(load.p99) },
    cpu,
    followUps,
  };
}

async function countFollowUps(ctx: BenchContext): Promise<number> {
  const [row] = await ctx.db.sql`select count(*)::int as n from messages where role = 'follow-up'`;
  return row!.n as number;
}
