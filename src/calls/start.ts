/**
 * Starting calls: check the flow, the vars and the numbers, render the menu with signed
 * tokens (start-prepare.ts), and store the call (pinned to its flow version), its speechcall
 * message and the outbox row in one transaction (start-store.ts). The dispatcher sends it.
 *
 * @example
 * await startCall(deps, { flow: 'appointment-reminder', to: '+380501234567', from: 'Clinic', vars: { name: 'Ann', date: 'Monday' } });
 */

import type { z } from 'zod';
import { decideLimits, delayOutbox, type LimitSettings } from '../campaigns/limits.ts';
import { NO_HOLIDAYS } from '../campaigns/windows.ts';
import type { Tx } from '../db/client.ts';
import { AppError } from '../errors.ts';
import type { CompiledFlow } from '../flows/index.ts';
import { itemInputProblem } from '../http/input.ts';
import { optedOutAmong, optedOutRejection } from '../opt-outs/store.ts';
import { isPhoneShape } from '../provider/message.ts';
import { issuesToDetails } from '../zod-issues.ts';
import type { StartDeps } from './deps.ts';
import { type PreparedCall, prepareCall, type Rejection, startableFlow } from './start-prepare.ts';
import {
  BatchCall,
  type BatchCallsRequest,
  type BatchItemResult,
  type CallStarted,
  type StartCallRequest,
} from './start-schemas.ts';
import { pinVersion, storeCalls } from './start-store.ts';
import { bumpStats, type StatScope } from './stats.ts';

export type { StartDeps } from './deps.ts';
export { prepareCallMessage, prepareCallMessageWithSchemas } from './start-prepare.ts';
export {
  BatchCallsRequest,
  BatchItemResult,
  CallStarted,
  StartCallRequest,
} from './start-schemas.ts';

/** The `started` counter of a flow's stats (one per call started, whatever starts it). */
export const STARTED = { metric: 'started', subject: '' };

/** A new call's counters: its flow, the version it is pinned to, its language. */
export function statScope(compiled: CompiledFlow, p: PreparedCall): StatScope {
  return { flowId: compiled.id, version: compiled.version, lang: p.lang };
}

/**
 * POST /v1/calls. `record`, when given, runs inside the transaction that stores the call,
 * with its answer (an Idempotency-Key's answer is kept there, src/http/idempotency.ts).
 */
export async function startCall(
  deps: StartDeps,
  input: StartCallRequest,
  record?: (tx: Tx, started: CallStarted) => Promise<void>,
): Promise<CallStarted> {
  const flow = await startableFlow(deps, input.flow, 'flow');
  const compiled = flow.compiled;
  const now = deps.clock.now();
  const prepared = prepareCall(deps, compiled, input, '', now);
  if (prepared.error)
    throw new AppError(prepared.error.code, prepared.error.message, prepared.error.details);
  if ((await optedOutAmong(deps.db, [input.to])).size > 0) {
    const e = optedOutRejection('to', input.to);
    throw new AppError(e.code, e.message, e.details);
  }
  const p = prepared.call!;
  const started: CallStarted = {
    id: p.id,
    flow: compiled.id,
    flowVersion: compiled.version,
    messageId: p.message.row.id!,
    customerMessageId: p.customerMessageId,
    state: 'queued',
  };
  await deps.db.transaction(async (tx) => {
    // a calling window or the frequency cap, when asked (src/campaigns/limits.ts)
    const [decision] = asksLimits(input)
      ? await decideLimits(tx, limitsOf(deps), input, [{ to: input.to, path: 'to' }], now)
      : [];
    if (decision && !decision.ok) {
      throw new AppError(decision.code, decision.message, decision.details);
    }
    await pinVersion(tx, compiled, flow.source, now);
    await storeCalls(tx, deps, compiled, [{ p, input }], now);
    if (decision?.ok && decision.availableAt) {
      await delayOutbox(tx, [{ messageId: p.message.row.id!, availableAt: decision.availableAt }]);
    }
    await bumpStats(tx, [{ scope: statScope(compiled, p), entries: [STARTED] }]);
    await record?.(tx, started);
  });
  deps.onQueued?.();
  return started;
}

/** Whether a request asked for a window or the cap. */
function asksLimits(input: { window?: unknown; cap?: boolean | undefined }): boolean {
  return input.window !== undefined || input.cap === true;
}

/** The project's window, holidays and cap (StartDeps.limits), or none of them. */
function limitsOf(deps: StartDeps): LimitSettings {
  return (
    deps.limits ?? {
      window: { from: '00:00', to: '24:00' },
      holidays: NO_HOLIDAYS,
      capPerDay: undefined,
    }
  );
}

// One transaction per chunk: a batch of 10 000 never holds one giant transaction open. A
// prepared call holds its rendered, validated menu (~84 KB of objects, 44 KB of JSON for the
// appointment reminder, whose 12 menus have an entry for each of their 13 inputs; ~25 KB and
// 14 KB when the figures below were measured) until its chunk commits, and the insert
// serialises every payload again, so the chunk sets how much of a batch is in memory at once.
// 6000 calls in requests of 1000: with 500 the server's RSS peaked at ~400 MB (~50 MB live),
// with 50 at ~270 MB, for the same CPU within the noise (the statements per chunk are few and
// set-based).
const BATCH_CHUNK = 50;

/** A batch's call that does not fit `BatchCall`, in the envelope's words. */
function shapeRejection(error: z.ZodError, index: number): Rejection {
  const details = issuesToDetails(error.issues, ['calls', index]);
  const first = details[0];
  return {
    code: 'VALIDATION_ERROR',
    message: first ? `${first.path}: ${first.message}` : `calls[${index}]: invalid call`,
    details,
  };
}

/**
 * POST /v1/calls/batch: per-item results in request order, like /v1/messages, whatever the
 * mix (all rejected too). The opt-out list is asked once, for every number of the batch.
 */
export async function startCalls(
  deps: StartDeps,
  input: BatchCallsRequest,
): Promise<{ flow: string; flowVersion: string; calls: BatchItemResult[]; queued: number }> {
  const flow = await startableFlow(deps, input.flow, 'flow');
  const compiled = flow.compiled;
  const results: BatchItemResult[] = new Array(input.calls.length);
  // every number of the batch in one lookup; one that is no number is refused on its own below
  const optedOut = await optedOutAmong(
    deps.db,
    input.calls.flatMap((c) => {
      const to = (c as { to?: unknown } | null)?.to;
      return typeof to === 'string' && isPhoneShape(to) ? [to] : [];
    }),
  );
  let queued = 0;
  for (let start = 0; start < input.calls.length; start += BATCH_CHUNK) {
    const now = deps.clock.now();
    const chunk = input.calls.slice(start, start + BATCH_CHUNK);
    const ready: { index: number; p: PreparedCall; input: { to: string; from: string } }[] = [];
    chunk.forEach((raw, i) => {
      const index = start + i;
      // each call checked on its own: one that does not fit is rejected alone
      const unstorable = itemInputProblem('calls', index, raw);
      if (unstorable) {
        results[index] = { status: 'rejected', error: unstorable };
        return;
      }
      const parsed = BatchCall.safeParse(raw);
      if (!parsed.success) {
        results[index] = { status: 'rejected', error: shapeRejection(parsed.error, index) };
        return;
      }
      const item = parsed.data;
      const callInput = {
        to: item.to,
        from: input.from,
        vars: item.vars,
        lang: item.lang ?? input.lang,
      };
      const prepared = prepareCall(deps, compiled, callInput, `calls[${index}]`, now);
      if (prepared.error)
        results[index] = { status: 'rejected', error: prepared.error as Rejection };
      else if (optedOut.has(item.to))
        results[index] = {
          status: 'rejected',
          error: optedOutRejection(`calls[${index}].to`, item.to),
        };
      else ready.push({ index, p: prepared.call!, input: callInput });
    });
    if (ready.length === 0) continue;
    let stored = ready;
    await deps.db.transaction(async (tx) => {
      // a calling window or the frequency cap, when the batch asked (src/campaigns/limits.ts)
      const decisions = asksLimits(input)
        ? await decideLimits(
            tx,
            limitsOf(deps),
            input,
            ready.map((r) => ({ to: r.input.to, path: `calls[${r.index}].to` })),
            now,
          )
        : [];
      stored = ready.filter((r, i) => {
        const d = decisions[i];
        if (!d || d.ok) return true;
        results[r.index] = {
          status: 'rejected',
          error: { code: d.code, message: d.message, details: d.details },
        };
        return false;
      });
      if (stored.length === 0) return;
      await pinVersion(tx, compiled, flow.source, now);
      await storeCalls(tx, deps, compiled, stored, now);
      await delayOutbox(
        tx,
        ready.flatMap((r, i) => {
          const d = decisions[i];
          return d?.ok && d.availableAt
            ? [{ messageId: r.p.message.row.id!, availableAt: d.availableAt }]
            : [];
        }),
      );
      await bumpStats(
        tx,
        stored.map((r) => ({ scope: statScope(compiled, r.p), entries: [STARTED] })),
      );
    });
    for (const r of stored) {
      results[r.index] = {
        id: r.p.id,
        messageId: r.p.message.row.id!,
        customerMessageId: r.p.customerMessageId,
        status: 'queued',
      };
    }
    queued += stored.length;
    deps.onQueued?.();
  }
  return { flow: compiled.id, flowVersion: compiled.version, calls: results, queued };
}
