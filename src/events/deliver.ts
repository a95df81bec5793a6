/**
 * The delivery worker: sends each pending event delivery to its endpoint as its own signed
 * POST, records every attempt, and moves the delivery on (delivered, the next attempt, or
 * exhausted) by the rules of schedule.ts. Any instance may run it; the statements:
 *
 * 1. **Claim** (one short transaction): due pending deliveries (`next_at <= now`) of enabled
 *    endpoints, oldest due first, `FOR UPDATE OF d SKIP LOCKED` so that instances share the
 *    work; for an `ordered` endpoint only a subject's earliest pending delivery (an earlier
 *    one still pending, being retried, holds the rest back). The claimed rows get a lease:
 *    `next_at` moves past the time the round's requests can take (`leaseMs`) and the
 *    transaction commits, so no transaction stays open across HTTP, and a crash mid-request
 *    leaves a delivery that comes due again when the lease ends: at-least-once, with the same
 *    `webhook-id`. A healthy endpoint gets its share of the round (all of it when alone); one
 *    that is failing at most FAILING_ENDPOINT_CLAIM rows (fewer for a rate-limited one); the
 *    rest go to the back of the queue (`next_at` = now, or spaced at its rate) so one
 *    endpoint's backlog cannot starve the others.
 * 2. **Send**: every endpoint at once, at most PER_ENDPOINT_CONCURRENCY requests in flight to
 *    each, and no more than `rate_limit` a second to each (counted in this process: N instances
 *    may together send N times that), through the outbound policy (private addresses refused
 *    unless allowed; redirects not followed). The body is `{"type","timestamp","data"}` of the
 *    stored event; the headers are the three Standard Webhooks ones, signed with each live
 *    secret of the endpoint.
 * 3. **Record** (one transaction per endpoint): the attempts into `delivery_attempts` (one
 *    statement), the deliveries' next states (one statement; each only if its lease is still
 *    the one this round set: a replay or a reclaim meanwhile wins), for an ordered endpoint the subject's later deliveries pushed
 *    to the retry's time (so they are not scanned as due while they must wait),
 *    `endpoints.failing_since` (not written when all succeeded and it was not failing), and
 *    the disable rule: an endpoint disabled records an
 *    `endpoint.disabled` event and its pending deliveries become exhausted (replayable).
 *
 * @example
 * const { attempted } = await deliverOnce({ db, outbound: policy.send, clock: systemClock });
 */
import { and, eq, inArray, sql } from 'drizzle-orm';
import type { Clock } from '../clock.ts';
import { type Db, rowsOf, type Tx, valueArray } from '../db/client.ts';
import { errorFields } from '../db/errors.ts';
import { deliveryAttempts, endpoints, eventDeliveries } from '../db/schema/index.ts';
import {
  OutboundRefusedError,
  type OutboundSend,
  OutboundUnreachableError,
} from '../http/outbound.ts';
import type { Logger } from '../logger.ts';
import { recordEvents } from './record.ts';
import {
  type AttemptOutcome,
  DISABLE_AFTER_MS,
  disableReason,
  disablesAtOnce,
  type NextStep,
  nextStep,
  REQUEST_TIMEOUT_MS,
  RESPONSE_BODY_CAP,
  shouldDisable,
  succeeded,
} from './schedule.ts';
import { signatureHeaders, webhookId } from './sign.ts';
import { subscriptionsOf } from './subscriptions.ts';

/** Requests in flight to one endpoint at a time. */
export const PER_ENDPOINT_CONCURRENCY = 8;
/**
 * Deliveries an endpoint that is failing (`failing_since` set) gets per round: 2 waves of the
 * request timeout at worst. A healthy one gets its share of the round (all of it when it is
 * alone), so a steady stream to one endpoint costs a claim and a record per BATCH events.
 */
export const FAILING_ENDPOINT_CLAIM = 16;
/** A rate-limited endpoint gets at most this many seconds' worth per round. */
const RATE_WINDOW_S = 30;
/** Due deliveries looked at per round. */
const BATCH = 128;
/** Added to a round's lease beyond the time its waves of requests can take. */
const LEASE_MARGIN_MS = 30_000;

/**
 * How long a round's claimed deliveries are left alone: longer than its requests can take
 * (`most` to one endpoint, PER_ENDPOINT_CONCURRENCY at a time, each at most the timeout), so a
 * delivery is sent again only when the instance that claimed it is gone.
 */
export function leaseMs(most: number, timeoutMs: number): number {
  return Math.ceil(most / PER_ENDPOINT_CONCURRENCY) * (timeoutMs + 1000) + LEASE_MARGIN_MS;
}

export const USER_AGENT = 'Switchboard-Webhooks/1 (+https://www.standardwebhooks.com/)';

export interface DeliverDeps {
  db: Db;
  /** the outbound policy's `send` (src/http/outbound.ts) */
  outbound: OutboundSend;
  clock: Clock;
  logger?: Logger;
  /** jitter's randomness (tests: a fixed value) */
  random?: () => number;
  /** REQUEST_TIMEOUT_MS unless set (tests) */
  timeoutMs?: number;
  /** rows claimed per round */
  batchSize?: number;
  /** the per-endpoint rate limiter kept between rounds (createEndpointRateLimiter); per round if unset */
  limiter?: EndpointRateLimiter;
  /** each round's counts, for metrics */
  onAttempts?: (counts: { succeeded: number; failed: number }) => void;
}

/** A claimed delivery with what sending it needs. */
interface Claimed {
  id: number;
  eventId: string;
  endpointId: string;
  subject: string;
  attempts: number;
  trigger: 'scheduled' | 'replay';
  url: string;
  ordered: boolean;
  rateLimit: number | null;
  /** the endpoint's failing_since when claimed: null means no health to write after success */
  failing: boolean;
  secrets: string[];
  type: string;
  data: unknown;
  createdAt: Date;
}

interface Attempt {
  delivery: Claimed;
  at: Date;
  durationMs: number;
  outcome: AttemptOutcome;
  responseBody: string | null;
  error: string | null;
}

/**
 * Spaces the requests to each endpoint at most `rate` a second (real time, not the injected
 * clock: it paces this process's own requests). In-process: another instance has its own.
 */
export interface EndpointRateLimiter {
  /** resolves when a request to `endpointId` may start */
  take(endpointId: string, rate: number | null): Promise<void>;
}

export function createEndpointRateLimiter(): EndpointRateLimiter {
  const nextSlot = new Map<string, number>();
  return {
    async take(endpointId, rate) {
      if (rate === null || rate <= 0) return;
      let now = performance.now();
      const slot = Math.max(now, nextSlot.get(endpointId) ?? 0);
      nextSlot.set(endpointId, slot + 1000 / rate);
      // a timer runs on the event loop's whole-millisecond clock and may fire up to a
      // millisecond early by performance.now(): wait again until the slot has truly come
      while (slot > now) {
        await new Promise((r) => setTimeout(r, Math.ceil(slot - now)));
        now = performance.now();
      }
    },
  };
}

/** One round: claim, send, record. `attempted` is the number of requests made. */
export async function deliverOnce(deps: DeliverDeps): Promise<{ attempted: number }> {
  const claimed = await claim(deps);
  if (claimed.rows.length === 0) return { attempted: 0 };
  const limiter = deps.limiter ?? createEndpointRateLimiter();
  const byEndpoint = new Map<string, Claimed[]>();
  for (const r of claimed.rows)
    byEndpoint.set(r.endpointId, [...(byEndpoint.get(r.endpointId) ?? []), r]);
  const counts = { succeeded: 0, failed: 0 };
  await Promise.all(
    [...byEndpoint.values()].map(async (rows) => {
      const attempts = await pool(rows, PER_ENDPOINT_CONCURRENCY, async (row) => {
        await limiter.take(row.endpointId, row.rateLimit);
        return attempt(deps, row);
      });
      for (const a of attempts) counts[succeeded(a.outcome) ? 'succeeded' : 'failed']++;
      try {
        await record(deps, attempts, claimed.leaseUntil);
      } catch (err) {
        // the lease runs out and the deliveries are sent again (same webhook-id)
        deps.logger?.warn(
          { err: errorFields(err), endpoint: rows[0]?.endpointId },
          'recording delivery attempts failed',
        );
      }
    }),
  );
  deps.onAttempts?.(counts);
  return { attempted: counts.succeeded + counts.failed };
}

/**
 * Replay: the deliveries become pending again, due now, with a fresh schedule (attempts 0).
 * `last_attempt_at` is kept: the next attempt is recorded with trigger `replay`. Returns how
 * many rows it changed.
 */
export async function requeue(
  tx: Db | Tx,
  deliveryIds: readonly number[],
  now: Date = new Date(),
): Promise<number> {
  if (deliveryIds.length === 0) return 0;
  const rows = await tx
    .update(eventDeliveries)
    .set({ state: 'pending', attempts: 0, nextAt: now, deliveredAt: null })
    .where(inArray(eventDeliveries.id, [...deliveryIds]))
    .returning({ id: eventDeliveries.id });
  return rows.length;
}

interface ClaimRow {
  id: number | string;
  event_id: string;
  endpoint_id: string;
  subject: string;
  attempts: number;
  last_attempt_at: Date | string | null;
  url: string;
  ordered: boolean;
  rate_limit: number | null;
  failing_since: Date | string | null;
  secrets: unknown;
}

async function claim(deps: DeliverDeps): Promise<{ rows: Claimed[]; leaseUntil: Date }> {
  const now = deps.clock.now();
  const nowIso = now.toISOString();
  const timeoutMs = deps.timeoutMs ?? REQUEST_TIMEOUT_MS;
  const batch = deps.batchSize ?? BATCH;
  const claimed = await deps.db.transaction(async (tx) => {
    const rows = rowsOf<ClaimRow>(
      await tx.execute(sql`
        select d.id, d.event_id, d.endpoint_id, d.subject, d.attempts, d.last_attempt_at,
               e.url, e.ordered, e.rate_limit, e.failing_since, e.secrets
        from event_deliveries d
        join endpoints e on e.id = d.endpoint_id
        where d.state = 'pending' and d.next_at <= ${nowIso}::timestamptz and e.enabled
          and (not e.ordered or not exists (
            select 1 from event_deliveries p
            where p.endpoint_id = d.endpoint_id and p.subject = d.subject
              and p.state = 'pending' and p.id < d.id))
        order by d.next_at, d.id
        limit ${batch}
        for update of d skip locked`),
    );
    // a delivery whose event is gone is not claimed (none should be: erasure and retention
    // delete both in one transaction)
    const events = await eventsByIds(tx, [...new Set(rows.map((r) => r.event_id))]);
    const due = rows.filter((r) => events.has(r.event_id));
    // a healthy endpoint's share: the round divided among the endpoints in it
    const share = Math.max(
      FAILING_ENDPOINT_CLAIM,
      Math.floor(batch / Math.max(1, new Set(due.map((r) => r.endpoint_id)).size)),
    );
    const kept: ClaimRow[] = [];
    const later: { id: number; at: string }[] = [];
    const taken = new Map<string, number>();
    for (const row of due) {
      const n = taken.get(row.endpoint_id) ?? 0;
      taken.set(row.endpoint_id, n + 1);
      const base = row.failing_since === null ? share : FAILING_ENDPOINT_CLAIM;
      const cap =
        row.rate_limit === null
          ? base
          : Math.max(1, Math.min(base, row.rate_limit * RATE_WINDOW_S));
      if (n < cap) {
        kept.push(row);
        continue;
      }
      // behind everything due now; a rate-limited endpoint's spaced at its rate
      const wait = row.rate_limit === null ? 0 : Math.ceil(((n - cap) * 1000) / row.rate_limit);
      later.push({ id: Number(row.id), at: new Date(now.getTime() + wait).toISOString() });
    }
    const most = Math.max(0, ...[...taken.values()].map((n) => Math.min(n, share)));
    const leaseUntil = new Date(now.getTime() + leaseMs(most, timeoutMs));
    if (kept.length > 0) {
      await tx
        .update(eventDeliveries)
        .set({ nextAt: leaseUntil })
        .where(
          inArray(
            eventDeliveries.id,
            kept.map((r) => Number(r.id)),
          ),
        );
    }
    if (later.length > 0) {
      await tx.execute(sql`
        update event_deliveries d set next_at = l.at
        from jsonb_to_recordset(${JSON.stringify(later)}::jsonb) as l(id bigint, at timestamptz)
        where d.id = l.id`);
    }
    return { kept: kept.map((r) => toClaimed(r, events.get(r.event_id)!, now)), leaseUntil };
  });
  return { rows: claimed.kept, leaseUntil: claimed.leaseUntil };
}

interface EventRow {
  id: string;
  type: string;
  data: unknown;
  created_at: Date | string;
}

/**
 * The events `ids`, by their ids as one array parameter: Postgres plans only the day
 * partitions that hold them, where a join through `outgoing_events` would plan every day kept
 * (1.4 ms of planning at 30 days, 17 at 365: docs/scaling.md, "Partitions").
 */
export async function eventsByIds(tx: Tx, ids: readonly string[]): Promise<Map<string, EventRow>> {
  if (ids.length === 0) return new Map();
  const rows = rowsOf<EventRow>(
    await tx.execute(sql`
      select id, type, data, created_at from outgoing_events
      where id = any(${valueArray(ids, 'uuid')})`),
  );
  return new Map(rows.map((r) => [r.id, r]));
}

function toClaimed(r: ClaimRow, ev: EventRow, now: Date): Claimed {
  const secrets = (typeof r.secrets === 'string' ? JSON.parse(r.secrets) : r.secrets) as {
    secret: string;
    expiresAt?: string | null;
  }[];
  // the newest always signs; an older one until it expires (rotation overlap)
  const live = secrets.filter(
    (s, i) => i === 0 || !s.expiresAt || new Date(s.expiresAt).getTime() > now.getTime(),
  );
  return {
    id: Number(r.id),
    eventId: r.event_id,
    endpointId: r.endpoint_id,
    subject: r.subject,
    attempts: r.attempts,
    trigger: r.attempts === 0 && r.last_attempt_at !== null ? 'replay' : 'scheduled',
    url: r.url,
    ordered: r.ordered,
    rateLimit: r.rate_limit,
    failing: r.failing_since !== null,
    secrets: live.map((s) => s.secret),
    type: ev.type,
    data: typeof ev.data === 'string' ? JSON.parse(ev.data) : ev.data,
    createdAt: new Date(ev.created_at),
  };
}

/** Runs `fn` over `items`, at most `limit` at a time; results in the items' order. */
async function pool<T, R>(items: T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const lanes = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!);
    }
  });
  await Promise.all(lanes);
  return out;
}

/** The body of an event: what is signed and sent. */
export function eventBody(type: string, createdAt: Date, data: unknown): string {
  return JSON.stringify({ type, timestamp: createdAt.toISOString(), data });
}

/** One request; never throws (a failure is an outcome). */
async function attempt(deps: DeliverDeps, d: Claimed): Promise<Attempt> {
  const at = deps.clock.now();
  const started = performance.now();
  const timeoutMs = deps.timeoutMs ?? REQUEST_TIMEOUT_MS;
  const signal = AbortSignal.timeout(timeoutMs);
  const elapsed = () => Math.round(performance.now() - started);
  const body = eventBody(d.type, d.createdAt, d.data);
  try {
    const headers = signatureHeaders(d.secrets, webhookId(d.eventId), at, body);
    const res = await deps.outbound(d.url, {
      method: 'POST',
      ownHeaders: { ...headers, 'content-type': 'application/json', 'user-agent': USER_AGENT },
      body,
      signal,
    });
    const responseBody = await readCapped(res, RESPONSE_BODY_CAP).catch(() => null);
    return {
      delivery: d,
      at,
      durationMs: elapsed(),
      outcome: { kind: 'response', status: res.status, retryAfter: res.headers.get('retry-after') },
      responseBody,
      error: null,
    };
  } catch (err) {
    const outcome: AttemptOutcome =
      err instanceof OutboundRefusedError
        ? { kind: 'refused', reason: err.reason }
        : signal.aborted
          ? { kind: 'timeout' }
          : { kind: 'unreachable' };
    const error =
      outcome.kind === 'timeout'
        ? `no answer within ${timeoutMs / 1000} s`
        : err instanceof OutboundRefusedError || err instanceof OutboundUnreachableError
          ? err.message
          : // our own fault (a bad secret, say): said without the details
            'the request could not be made';
    if (!(err instanceof OutboundRefusedError || err instanceof OutboundUnreachableError)) {
      deps.logger?.warn(
        { endpoint: d.endpointId, delivery: d.id, err: { name: (err as Error).name } },
        'event delivery could not be sent',
      );
    }
    return { delivery: d, at, durationMs: elapsed(), outcome, responseBody: null, error };
  }
}

/** The first `cap` bytes of the body as text; the rest is never read. */
async function readCapped(res: Response, cap: number): Promise<string | null> {
  if (!res.body) return null;
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    while (size < cap) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      size += value.byteLength;
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
  const bytes = Buffer.concat(chunks).subarray(0, cap);
  // a character cut at the cap is dropped, not shown as U+FFFD
  return new TextDecoder().decode(bytes).replace(/\uFFFD$/, '');
}

/** Writes one endpoint's attempts of a round, its deliveries' next states and its health. */
async function record(deps: DeliverDeps, attempts: Attempt[], leaseUntil: Date): Promise<void> {
  const first = attempts[0];
  if (!first) return;
  const endpointId = first.delivery.endpointId;
  const random = deps.random ?? Math.random;
  const disabled = await deps.db.transaction(async (tx) => {
    await tx.insert(deliveryAttempts).values(
      attempts.map((a) => ({
        deliveryId: a.delivery.id,
        eventId: a.delivery.eventId,
        endpointId,
        at: a.at,
        status: succeeded(a.outcome) ? 'succeeded' : 'failed',
        responseStatus: a.outcome.kind === 'response' ? a.outcome.status : null,
        responseBody: a.responseBody,
        durationMs: a.durationMs,
        error: a.error,
        trigger: a.delivery.trigger,
      })),
    );
    // every delivery's next state in one statement, each only if it is still this round's
    // lease (a replay, or a reclaim after the lease ran out, wins)
    const steps = attempts.map((a) => ({
      a,
      step: nextStep(a.delivery.attempts + 1, a.outcome, a.at, random) as NextStep,
    }));
    const moved = new Set(
      rowsOf<{ id: number | string }>(
        await tx.execute(sql`
          update event_deliveries d set state = v.state, attempts = v.attempts,
            last_attempt_at = v.at, next_at = coalesce(v.next_at, d.next_at),
            delivered_at = coalesce(v.delivered_at, d.delivered_at)
          from jsonb_to_recordset(${JSON.stringify(
            steps.map(({ a, step }) => ({
              id: a.delivery.id,
              state: step.state,
              attempts: a.delivery.attempts + 1,
              at: a.at.toISOString(),
              next_at: step.state === 'pending' ? step.nextAt.toISOString() : null,
              delivered_at: step.state === 'delivered' ? a.at.toISOString() : null,
            })),
          )}::jsonb) as v(id bigint, state text, attempts int, at timestamptz,
            next_at timestamptz, delivered_at timestamptz)
          where d.id = v.id and d.state = 'pending'
            and d.next_at = ${leaseUntil.toISOString()}::timestamptz
          returning d.id`),
      ).map((r) => Number(r.id)),
    );
    for (const { a, step } of steps) {
      const d = a.delivery;
      if (moved.has(d.id) && step.state === 'pending' && d.ordered) {
        // the subject's later events wait for this one: not due before its retry
        await tx.execute(sql`
          update event_deliveries set next_at = greatest(next_at, ${step.nextAt.toISOString()}::timestamptz)
          where endpoint_id = ${endpointId} and subject = ${d.subject} and state = 'pending'
            and id > ${d.id}`);
      }
    }
    // all sent, and it was not failing: nothing to write about its health
    if (!first.delivery.failing && attempts.every((a) => succeeded(a.outcome))) return false;
    return health(tx, deps, endpointId, attempts);
  });
  if (disabled) subscriptionsOf(deps.db).changed();
}

/**
 * Keeps `failing_since` true to the attempts (null after a success; the first failure after
 * the last success otherwise) and applies the disable rule. True when it disabled the endpoint.
 */
async function health(
  tx: Tx,
  deps: DeliverDeps,
  endpointId: string,
  attempts: Attempt[],
): Promise<boolean> {
  const sorted = [...attempts].sort((a, b) => a.at.getTime() - b.at.getTime());
  const lastSuccess = sorted.findLastIndex((a) => succeeded(a.outcome));
  const failuresAfter = sorted.slice(lastSuccess + 1);
  const firstFailure = failuresAfter[0]?.at;
  const [ep] = await tx
    .update(endpoints)
    .set({
      failingSince:
        lastSuccess < 0
          ? sql`coalesce(${endpoints.failingSince}, ${firstFailure?.toISOString() ?? null}::timestamptz)`
          : (firstFailure ?? null),
    })
    .where(eq(endpoints.id, endpointId))
    .returning({
      name: endpoints.name,
      url: endpoints.url,
      enabled: endpoints.enabled,
      failingSince: endpoints.failingSince,
    });
  if (!ep?.enabled || ep.failingSince === null) return false;
  const now = sorted.at(-1)?.at ?? deps.clock.now();
  const gone = failuresAfter.map((a) => disablesAtOnce(a.outcome)).find((r) => r !== undefined);
  let reason = gone;
  if (reason === undefined && now.getTime() - ep.failingSince.getTime() >= DISABLE_AFTER_MS) {
    const [row] = rowsOf<{ n: number | string }>(
      await tx.execute(sql`
        select count(*) as n from delivery_attempts
        where endpoint_id = ${endpointId} and status = 'failed'
          and at >= ${ep.failingSince.toISOString()}::timestamptz`),
    );
    const failed = Number(row?.n ?? 0);
    if (shouldDisable(ep.failingSince, failed, now))
      reason = disableReason(ep.failingSince, failed);
  }
  if (reason === undefined) return false;
  await tx
    .update(endpoints)
    .set({ enabled: false, disabledReason: reason, updatedAt: now })
    .where(eq(endpoints.id, endpointId));
  // nothing more goes to it; what was waiting stays visible and can be replayed once it is back
  await tx
    .update(eventDeliveries)
    .set({ state: 'exhausted' })
    .where(and(eq(eventDeliveries.endpointId, endpointId), eq(eventDeliveries.state, 'pending')));
  await recordEvents(tx, [
    {
      type: 'endpoint.disabled',
      subject: `endpoint:${endpointId}`,
      data: {
        endpointId,
        name: ep.name,
        url: ep.url,
        reason,
        failingSince: ep.failingSince.toISOString(),
        at: now.toISOString(),
      },
      at: now,
    },
  ]);
  deps.logger?.warn({ endpoint: endpointId, reason }, 'endpoint disabled: it kept failing');
  return true;
}
