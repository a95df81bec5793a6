/**
 * The background work of one instance: the dispatcher (leader only), the status poller
 * (leader only), the attachment of early callbacks and the delivery of events to the user's
 * endpoints (any instance: SKIP LOCKED shares the work). Each is a loop over the
 * database: Postgres holds all state, so stopping or killing the process loses nothing.
 */
import { sql } from 'drizzle-orm';
import { callDispatchHook, type EventDeps, fireDueTimers } from './calls/events.ts';
import { runCampaigns, type SchedulerDeps } from './campaigns/scheduler.ts';
import type { Clock } from './clock.ts';
import type { Database, LeaderLock } from './db/client.ts';
import { errorFields, withTimeout } from './db/errors.ts';
import { ensurePartitions } from './db/partitions.ts';
import { createEndpointRateLimiter, deliverOnce } from './events/deliver.ts';
import { subscriptionsOf } from './events/subscriptions.ts';
import { removeExpiredKeys } from './http/idempotency.ts';
import type { Metrics } from './http/metrics.ts';
import type { OutboundSend } from './http/outbound.ts';
import type { Logger } from './logger.ts';
import {
  type CascadeSender,
  type DispatchOptions,
  type DispatchResult,
  dispatchOnce,
  EMBEDDED_DISPATCH_LEASE_MS,
  type MessagelistSender,
} from './messages/dispatcher.ts';
import { attachPending, type IngestDeps } from './messages/ingest.ts';
import { expireOverdue, pollOnce, type StatusLookup } from './messages/poller.ts';
import {
  RETENTION_STEPS,
  removeEndedPrompts,
  retentionCutoff,
  runAuditRetention,
  runRetention,
} from './privacy/retention.ts';
import type { SpokenPrompts } from './speech/spoken.ts';
import type { PromptStore } from './speech/store.ts';

export interface WorkerDeps {
  database: Database;
  provider: MessagelistSender & StatusLookup;
  /** the cascade client, for messages of type `cascade` (unset: they are rejected) */
  cascade?: CascadeSender;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
  ingest: IngestDeps;
  /** idleMaxMs: DISPATCH_IDLE_MAX_MS, the longest an idle leader's dispatcher sleeps */
  dispatch: DispatchOptions & { idleMaxMs: number };
  poll: { afterMs: number; everyMs: number; maxEveryMs: number; expireMarginMs: number };
  /** the call runtime: dispatcher answers for call messages, durable timers */
  calls: EventDeps;
  /** RETENTION_DAYS: older raw callbacks, message texts and events are removed; unset keeps all */
  retentionDays?: number | undefined;
  /** AUDIT_RETENTION_DAYS: older audit rows are removed; unset keeps all */
  auditRetentionDays?: number | undefined;
  /** the timelines' day partitions, when the server makes and drops them (src/db/partitions.ts) */
  partitions?: { aheadDays: number } | undefined;
  /** the outbound policy's send, for events to the user's endpoints (unset: none are sent) */
  outbound?: OutboundSend;
  /** the campaign scheduler's dependencies; unset: campaigns do not run here */
  campaigns?: SchedulerDeps;
  /** renders the calls' spoken prompts before they are dispatched (src/speech/spoken.ts) */
  spoken?: SpokenPrompts;
  /** personal prompts go this long after their call ended (src/privacy/retention.ts) */
  prompts?: { graceMs: number; removeFiles: PromptStore['removeFiles'] };
}

export interface Workers {
  /** run the dispatcher now rather than at its next tick (new messages in this process) */
  wake(): void;
  stop(): Promise<void>;
}

// an arbitrary constant shared by every Switchboard process: "the dispatcher leader"
export const LEADER_LOCK = 0x5b_0002;

export interface Loop {
  wake(): void;
  stop(): Promise<void>;
}

const HOUR = 3_600_000;

/** The channel the `event_deliveries_queued` trigger (migration 0011) notifies. */
export const DELIVERIES_QUEUED = 'switchboard_deliveries';
/** The channel the `endpoints_changed` trigger (migration 0011) notifies. */
export const ENDPOINTS_CHANGED = 'switchboard_endpoints';
/**
 * The channel an instance that does not lead notifies when it has queued messages to send
 * (Workers.wake), and anything else that queues them should (the benches' seeding does): the
 * leader's dispatcher listens, and runs a round at once. The leader's own are woken
 * in-process, so one instance alone sends no NOTIFY.
 */
export const OUTBOX_QUEUED = 'switchboard_outbox';

/**
 * The dispatcher's wait between idle rounds while nothing tells it of queued messages (it
 * does not listen to OUTBOX_QUEUED: not yet, or it could not) and on an instance that does not
 * lead (its round asks nothing of Postgres while it waits for the lock there).
 */
const DISPATCH_POLL_MS = 200;

/**
 * How long a worker's step may run before the log says so (again each time as long): a step
 * is milliseconds of SQL and, for the dispatcher, the provider's answer, so one still running
 * after this is stuck on something (a connection, a lock, a provider that does not answer),
 * and the line names the worker whose work has stopped meanwhile.
 */
export const STEP_REPORT_MS = 15_000;

/**
 * The longest a dispatcher round waits for the spoken prompts' render before it sends anyway
 * (the render goes on; GET /prompts/{id} renders what a provider fetches before it is done).
 * A round's render takes seconds (eSpeak NG says a prompt in tens of milliseconds); one still
 * running this long is stuck or unusually large, and no message, SMS included, waits longer.
 */
export const SPOKEN_WAIT_MS = 30_000;

/**
 * How long a stop waits on a worker's running step before the log names it (`stop waits for a
 * worker step`): a stop that hangs (up to SHUTDOWN_TIMEOUT_MS in production, a test's hook
 * timeout) then says which worker holds it and what that step was doing, well before the
 * STEP_REPORT_MS line would.
 */
export const STOP_REPORT_MS = 2_000;

/**
 * Runs `step` repeatedly: again at once while it reports more work, else after `idleMs` (or
 * when woken; a function is asked after each step). With `waitFirst`, the first step waits
 * too. A step running longer than STEP_REPORT_MS is logged (`worker step still running`, its
 * `worker`, `runningMs` and, when the step said so through `doing`, what it was doing last),
 * and so is one that holds a stop for longer than STOP_REPORT_MS (`stop waits for a worker step`).
 */
export function loop(
  name: string,
  logger: Logger,
  idleMs: number | (() => number),
  step: (doing: (what: string) => void) => Promise<boolean>,
  opts: { waitFirst?: boolean } = {},
): Loop {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let wakeUp: (() => void) | undefined;
  // a wake while a step runs is kept: the next sleep returns at once (else it was lost, and
  // what it announced waited for the next poll)
  let woken = false;
  // the running step: when it began and what it said it is doing now (for the warnings to name
  // where it is stuck)
  let running: { started: number; doing?: string } | undefined;
  const where = () =>
    running && {
      worker: name,
      runningMs: Date.now() - running.started,
      ...(running.doing && { doing: running.doing }),
    };
  const sleep = async () => {
    if (woken) {
      woken = false;
      return;
    }
    await new Promise<void>((resolve) => {
      wakeUp = resolve;
      timer = setTimeout(resolve, typeof idleMs === 'number' ? idleMs : idleMs());
    });
    wakeUp = undefined;
    clearTimeout(timer);
  };
  const run = (async () => {
    if (opts.waitFirst) await sleep();
    while (!stopped) {
      let more = false;
      const current: { started: number; doing?: string } = { started: Date.now() };
      running = current;
      const slow = setInterval(
        () => logger.warn(where(), 'worker step still running'),
        STEP_REPORT_MS,
      );
      slow.unref(); // never what keeps the process alive
      try {
        more = await step((what) => {
          current.doing = what;
        });
      } catch (err) {
        logger.warn({ err: errorFields(err), worker: name }, 'worker step failed');
      } finally {
        clearInterval(slow);
        running = undefined;
      }
      if (stopped || more) continue;
      await sleep();
    }
  })();
  return {
    wake: () => {
      if (wakeUp) wakeUp();
      else woken = true;
    },
    async stop() {
      stopped = true;
      wakeUp?.();
      const held = setTimeout(() => {
        if (running) logger.warn(where(), 'stop waits for a worker step');
      }, STOP_REPORT_MS);
      held.unref();
      try {
        await run;
      } finally {
        clearTimeout(held);
      }
    },
  };
}

/**
 * The calls' spoken prompts rendered before a dispatcher round sends, so the provider finds
 * them ready (src/speech/spoken.ts). A failure is logged: the call still goes, and
 * GET /prompts/{id} renders what is missing. So is a render still running after `waitMs`
 * (it goes on meanwhile): dispatch, SMS included, never waits on speech for longer.
 */
export async function renderBeforeDispatch(
  spoken: Pick<SpokenPrompts, 'renderPending'>,
  logger: Logger,
  waitMs = SPOKEN_WAIT_MS,
): Promise<void> {
  try {
    await withTimeout(spoken.renderPending(), waitMs, "the spoken prompts' render");
  } catch (err) {
    logger.warn(
      { err: errorFields(err) },
      'spoken prompts not rendered before dispatch; they render when fetched',
    );
  }
}

export function startWorkers(deps: WorkerDeps): Workers {
  const { logger } = deps;
  // the moment a lock this instance waited for is its own, its dispatcher runs a round
  const leader: LeaderLock = deps.database.createLeaderLock(LEADER_LOCK, () => wakeDispatcher());
  let wasLeader = false;
  // the leader's own duties that run every few minutes: a new leader runs them at once
  const duties: Loop[] = [];
  const isLeader = async () => {
    const now = await leader.tryAcquire();
    if (now !== wasLeader)
      logger.info(
        { leader: now },
        now ? 'became dispatcher leader' : 'no longer dispatcher leader',
      );
    const became = now && !wasLeader;
    wasLeader = now;
    if (became) for (const d of duties) d.wake();
    return now;
  };

  const onRecorded = callDispatchHook(deps.calls);
  // true once this instance listens to OUTBOX_QUEUED (below): an idle leader then sleeps
  // until the outbox's next row is due (a retry, a campaign's window), DISPATCH_IDLE_MAX_MS
  // at most, woken at once by rows queued here (Workers.wake) or on another instance
  // (OUTBOX_QUEUED; a NOTIFY lost while the listening connection was down is late by that
  // much at most)
  let outboxHeard = false;
  let dispatchIdleMs = DISPATCH_POLL_MS;
  // a wake since the first lane's last round began: a waker may wake before its transaction
  // commits (a status hook runs inside it), so a woken round that finds nothing polls again soon
  let dispatchWoken = false;
  const wakeDispatcher = () => {
    dispatchWoken = true;
    dispatcher.wake();
  };
  /**
   * One round, or undefined when this instance does not lead; with `nextDue`, an empty one
   * says when the outbox's next row is due (the first lane's, to know how long to sleep).
   */
  // on the embedded database a transaction holds the one connection for every query of the
  // process: its rounds send outside their claim's transaction (dispatchOnce, `leaseMs`)
  const embedded = deps.database.kind === 'pglite';
  const dispatchRound = async (
    nextDue: boolean,
    doing: (what: string) => void,
  ): Promise<DispatchResult | undefined> => {
    doing('asking for the leader lock');
    if (!(await isLeader())) return undefined;
    // the calls' spoken prompts first, so the provider finds them rendered (src/speech/spoken.ts)
    if (deps.spoken) {
      doing('rendering spoken prompts');
      await renderBeforeDispatch(deps.spoken, logger);
    }
    doing('claiming, sending and recording a round');
    const result = await dispatchOnce(
      {
        db: deps.database.db,
        provider: deps.provider,
        ...(deps.cascade && { cascade: deps.cascade }),
        clock: deps.clock,
        logger,
        onRecorded,
        onDispatched: (accepted, rejected) => {
          deps.metrics.dispatched.inc({ result: 'accepted' }, accepted);
          deps.metrics.dispatched.inc({ result: 'rejected' }, rejected);
        },
      },
      { ...deps.dispatch, nextDue, ...(embedded && { leaseMs: EMBEDDED_DISPATCH_LEASE_MS }) },
    );
    deps.metrics.dispatchRounds.inc({ result: result.claimed > 0 ? 'sent' : 'idle' });
    if (result.accepted + result.rejected > 0) attacher.wake();
    return result;
  };
  /** Whether a round found a full batch (so more is probably waiting). */
  const wasFull = (r: DispatchResult | undefined) => r?.full === true && r.failed === 0;
  /** How long the first lane sleeps after round `r` (woken: a wake started it). */
  const idleAfter = (r: DispatchResult | undefined, woken: boolean): number => {
    if (r?.nextDueAt === undefined || woken) return DISPATCH_POLL_MS;
    const until = r.nextDueAt ? r.nextDueAt.getTime() - deps.clock.now().getTime() : Infinity;
    return Math.max(DISPATCH_POLL_MS, Math.min(until, deps.dispatch.idleMaxMs));
  };
  // The first lane polls; while it finds full batches it wakes the others, which run rounds
  // of their own until one comes back short, then sleep until woken again. Each round is its
  // own transaction and SKIP LOCKED keeps their rows apart (ADR 0001), so while one round
  // waits for the provider another claims or records.
  const lanes = Math.max(1, deps.dispatch.concurrency ?? (deps.database.kind === 'pglite' ? 1 : 2));
  const extraLanes: Loop[] = [];
  const dispatcher = loop(
    'dispatcher',
    logger,
    () => dispatchIdleMs,
    async (doing) => {
      const woken = dispatchWoken;
      dispatchWoken = false;
      const result = await dispatchRound(outboxHeard, doing);
      dispatchIdleMs = idleAfter(result, woken);
      const more = wasFull(result);
      if (more) for (const lane of extraLanes) lane.wake();
      return more;
    },
  );
  for (let i = 1; i < lanes; i++) {
    extraLanes.push(
      loop(
        'dispatcher',
        logger,
        HOUR,
        async (doing) => wasFull(await dispatchRound(false, doing)),
        {
          waitFirst: true,
        },
      ),
    );
  }
  const attacher = loop(
    'attach-pending',
    logger,
    1000,
    async () => (await attachPending(deps.ingest)) > 0,
  );
  const poller = loop('poller', logger, 5000, async () => {
    if (!wasLeader) return false;
    const pollDeps = {
      ...deps,
      db: deps.database.db,
      statusMap: deps.ingest.statusMap,
      ...(deps.ingest.onRecorded && { onRecorded: deps.ingest.onRecorded }),
    };
    const polled = await pollOnce(pollDeps, deps.poll);
    const expired = await expireOverdue(pollDeps, { marginMs: deps.poll.expireMarginMs });
    deps.metrics.statusPolls.inc(polled);
    deps.metrics.expired.inc(expired);
    return polled + expired > 0;
  });
  // durable timers: any instance may fire them (SKIP LOCKED), after a restart too
  const timers = loop('timers', logger, 500, async () => (await fireDueTimers(deps.calls)) > 0);
  // retention (leader only): a batch of 500 per kind, again at once while more is left; and
  // Idempotency-Keys past their 24 h, whatever RETENTION_DAYS says
  const retention = loop('retention', logger, 5 * 60_000, async () => {
    if (!wasLeader) return false;
    const keys = await removeExpiredKeys(deps.database.db, deps.clock.now(), 500);
    // prompts with a person's details, whatever RETENTION_DAYS says
    const prompts =
      deps.prompts &&
      (await removeEndedPrompts(deps.database.db, deps.clock.now(), deps.prompts.graceMs, 500));
    if (prompts) await deps.prompts?.removeFiles(prompts.files);
    const audit = await runAuditRetention(deps.database.db, deps.clock, deps.auditRetentionDays);
    const more = keys.more || prompts?.more === true || audit.more;
    if (deps.retentionDays === undefined) return more;
    const kept = await runRetention(
      deps.database.db,
      deps.clock,
      deps.retentionDays,
      500,
      deps.partitions
        ? RETENTION_STEPS
        : RETENTION_STEPS.filter((s) => s.kind !== 'eventPartitions'),
    );
    return kept.more || more;
  });
  duties.push(retention);
  // the timelines' day partitions (leader only): PARTITIONS_AHEAD_DAYS ahead, checked hourly
  // (the start made them too: src/server.ts)
  const partitions =
    deps.partitions &&
    loop(
      'partitions',
      logger,
      HOUR,
      async () => {
        if (!wasLeader || !deps.partitions) return false;
        const now = deps.clock.now();
        const made = await ensurePartitions(deps.database.db, now, deps.partitions.aheadDays, {
          keepFrom: deps.retentionDays ? retentionCutoff(now, deps.retentionDays) : undefined,
        });
        if (made.length > 0) logger.info({ partitions: made }, 'day partitions made');
        return false;
      },
      { waitFirst: true },
    );
  // campaigns (leader only): start what is due, settle ended attempts, release due
  // recipients at each campaign's pace (src/campaigns/scheduler.ts); every second, again at
  // once while it finds work
  const campaigns =
    deps.campaigns &&
    loop('campaigns', logger, 1000, async () => {
      if (!wasLeader || !deps.campaigns) return false;
      return runCampaigns(deps.campaigns);
    });
  // events to the user's endpoints: any instance (SKIP LOCKED, leases); woken when deliveries
  // are queued (a NOTIFY at their commit, from any instance), polled twice a second besides
  const outbound = deps.outbound;
  const limiter = createEndpointRateLimiter();
  const deliveries =
    outbound &&
    loop('event-deliveries', logger, 500, async () => {
      const { attempted } = await deliverOnce({
        db: deps.database.db,
        outbound,
        clock: deps.clock,
        logger,
        limiter,
        onAttempts: ({ succeeded, failed }) => {
          deps.metrics.eventsDelivered.inc(succeeded);
          deps.metrics.eventAttemptsFailed.inc(failed);
        },
      });
      return attempted > 0;
    });
  const listening = (channel: string, onNotify: () => void) =>
    deps.database.listen(channel, onNotify).catch((err: unknown) => {
      // the polls still do the work; only the wake-up is lost
      logger.warn({ err, channel }, 'cannot listen; polling only');
      return undefined;
    });
  // one NOTIFY at a time, and one more after it for wakes that came meanwhile
  let announcing = false;
  let announceAgain = false;
  const announceQueued = (): void => {
    if (announcing) {
      announceAgain = true;
      return;
    }
    announcing = true;
    void deps.database.db
      .execute(sql`select pg_notify(${OUTBOX_QUEUED}, '')`)
      .catch((err: unknown) => {
        logger.warn(
          { err: errorFields(err) },
          'cannot tell the leading instance of queued messages; it finds them within DISPATCH_IDLE_MAX_MS',
        );
      })
      .finally(() => {
        announcing = false;
        if (announceAgain) {
          announceAgain = false;
          announceQueued();
        }
      });
  };
  const unlisten = [
    deliveries ? listening(DELIVERIES_QUEUED, () => deliveries.wake()) : undefined,
    // messages queued on another instance: the leader's dispatcher runs a round at once
    listening(OUTBOX_QUEUED, () => wakeDispatcher()).then((stop) => {
      outboxHeard = stop !== undefined;
      return stop;
    }),
    // an endpoint made or changed on any instance: this one's events cache reads them again
    listening(ENDPOINTS_CHANGED, () => subscriptionsOf(deps.database.db).changed()),
  ];

  return {
    wake: () => {
      wakeDispatcher();
      // the leader is another instance: tell it (its dispatcher may sleep DISPATCH_IDLE_MAX_MS)
      if (!wasLeader) announceQueued();
    },
    async stop() {
      await Promise.all([
        dispatcher.stop(),
        ...extraLanes.map((lane) => lane.stop()),
        attacher.stop(),
        poller.stop(),
        timers.stop(),
        retention.stop(),
        partitions?.stop(),
        campaigns?.stop(),
        deliveries?.stop(),
        ...unlisten.map((u) => u?.then((stop) => stop?.())),
      ]);
      await leader.release();
    },
  };
}
