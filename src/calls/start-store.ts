/**
 * Started calls stored: their version pinned, messages, rows, first events and timers, and
 * their `call.started` events when an endpoint wants them (one statement more, then only).
 */
import type { Tx } from '../db/client.ts';
import { callEvents, calls, callTimers, flowVersions } from '../db/schema/index.ts';
import { recordEvents } from '../events/record.ts';
import { subscriptionsOf } from '../events/subscriptions.ts';
import type { EventData } from '../events/types.ts';
import type { CompiledFlow } from '../flows/index.ts';
import { storeMessages } from '../messages/submit.ts';
import { storeCompositions } from '../speech/spoken.ts';
import { runStartEffects } from './apply.ts';
import type { StartDeps } from './deps.ts';
import type { PreparedCall } from './start-prepare.ts';

/**
 * The flow version calls are pinned to (once per version), with the file's text it was
 * compiled from. A version stored before keeps the source it has: a conflict does nothing, so
 * concurrent starts never wait on the version's row (an edit that leaves the compiled form
 * alone, a comment, is the same version, and keeps the first text).
 */
export async function pinVersion(
  tx: Tx,
  compiled: CompiledFlow,
  source: string,
  now: Date,
): Promise<void> {
  await tx
    .insert(flowVersions)
    // created_at: the first call's start, on the clock its calls' own times come from
    .values({ flowId: compiled.id, version: compiled.version, compiled, source, createdAt: now })
    .onConflictDoNothing();
}

/** A new call's `call.started` event (src/events/types.ts). */
function startedEvent(row: typeof calls.$inferInsert & { id: string; createdAt: Date }) {
  const data: EventData<'call.started'> = {
    callId: row.id,
    flow: row.flowId,
    flowVersion: row.flowVersion,
    to: row.to,
    from: row.from,
    lang: row.lang,
    vars: row.vars as Record<string, unknown>,
    messageId: row.messageId!,
    at: row.createdAt.toISOString(),
  };
  return { type: 'call.started', subject: `call:${row.id}`, data, at: row.createdAt };
}

/**
 * Stores prepared calls of one flow in a few set-based statements: their messages, events and
 * outbox rows, the call rows, and the first effects (the no-response timer).
 */
export async function storeCalls(
  tx: Tx,
  deps: StartDeps,
  compiled: CompiledFlow,
  items: { p: PreparedCall; input: { to: string; from: string } }[],
  now: Date,
) {
  const subs = subscriptionsOf(deps.db);
  await storeMessages(
    tx,
    items.map((i) => i.p.message),
    now,
    subs.wants('message.status'),
  );
  const rows = items.map(({ p, input }) => ({
    id: p.id,
    flowId: compiled.id,
    flowVersion: compiled.version,
    to: input.to,
    from: input.from,
    lang: p.lang,
    vars: p.vars,
    state: 'queued',
    outcome: null,
    snapshot: p.snapshot,
    messageId: p.message.row.id!,
    endedAt: null,
    createdAt: now,
    updatedAt: now,
  }));
  for (let i = 0; i < rows.length; i += 500) await tx.insert(calls).values(rows.slice(i, i + 500));
  const prompts = items.flatMap((i) => i.p.prompts);
  if (prompts.length > 0) await storeCompositions(tx, prompts);
  if (subs.wants('call.started')) await recordEvents(tx, rows.map(startedEvent));
  // a new call's only effects are timers: written in bulk; anything else goes the long way
  const timers: (typeof callTimers.$inferInsert)[] = [];
  const events: (typeof callEvents.$inferInsert)[] = [];
  for (const [n, { p }] of items.entries()) {
    const other = p.effects.filter((e) => e.type !== 'startTimer');
    if (other.length > 0) await runStartEffects(tx, deps, rows[n]!, other);
    for (const e of p.effects) {
      if (e.type !== 'startTimer') continue;
      timers.push({ callId: p.id, timer: e.timer, fireAt: new Date(now.getTime() + e.afterMs) });
      events.push({
        callId: p.id,
        kind: 'timer-started',
        detail: { timer: e.timer, afterMs: e.afterMs },
        at: now,
      });
    }
  }
  for (let i = 0; i < timers.length; i += 1000) {
    await tx.insert(callTimers).values(timers.slice(i, i + 1000));
    await tx.insert(callEvents).values(events.slice(i, i + 1000));
  }
}
