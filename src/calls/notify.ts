/**
 * A flow's `notify: <endpoint>` action: the `flow.notify` event Switchboard itself sends to
 * one of the user's endpoints (signed, retried, replayable: src/events/deliver.ts), unlike
 * `webhook:`, which the provider calls during the call and Switchboard never sees.
 *
 * Deciding builds the event's data from the machine's effect (pure, `notifyData`); writing
 * records it with `recordEvents` in the transaction of the step that ran it (`writeNotifies`,
 * called by write-plan.ts after its statement). Endpoints live in the database, not in
 * the flow, so a name no enabled endpoint has is found only here: the call's timeline then
 * says so (`notify-skipped`, detail `{ endpoint, reason }`) and the call goes on.
 *
 * One `recordEvents` per notify: it tells how many events it wrote, which is what names the
 * endpoint that was missing. Only steps that run a `notify:` pay for it; a flow without one
 * adds nothing to the webhook path.
 *
 * @example
 * // flows/delivery.yaml: keys: { '1': [{ notify: crm }, { outcome: confirmed }] }
 * await writeNotifies(tx, plan); // one flow.notify event, one delivery to "crm"
 */
import { sql } from 'drizzle-orm';
import type { Tx } from '../db/client.ts';
import { recordEvents } from '../events/record.ts';
import type { EventData } from '../events/types.ts';
import type { FlowEffect } from '../flows/index.ts';
import type { CallPlan } from './plan.ts';

/** The call event kind a `notify:` leaves on the timeline, and the one for a missing endpoint. */
export const NOTIFY_EVENT = 'notify';
export const NOTIFY_SKIPPED_EVENT = 'notify-skipped';

type NotifyEffect = Extract<FlowEffect, { type: 'notify' }>;

/**
 * The `flow.notify` data of a notify effect: the call as the transition leaves it, path steps
 * named as GET /v1/calls/{id} names them (attempt from 1).
 *
 * @example
 * notifyData(callId, effect, now).path // [{ node: 'main', menu: 'main', attempt: 1, key: '1' }]
 */
export function notifyData(
  callId: string,
  effect: NotifyEffect,
  at: Date,
): EventData<'flow.notify'> {
  return {
    callId,
    flow: effect.flow,
    flowVersion: effect.flowVersion,
    node: effect.node,
    endpoint: effect.endpoint,
    to: effect.to ?? '',
    vars: effect.vars,
    ...(effect.data ? { data: effect.data } : {}),
    path: effect.path.map((s) => ({
      node: s.node,
      menu: s.menu,
      attempt: s.attempt + 1,
      key: s.key,
      ...(s.input !== undefined && { input: s.input }),
    })),
    outcome: effect.outcome,
    at: at.toISOString(),
  };
}

/**
 * Records the plan's `flow.notify` events (in its transaction, after the plan's statement, so
 * an endpoint's deliveries of a call stay in step order). A notify whose name no enabled
 * endpoint has turns its call event, written as `notify`, into `notify-skipped` with the
 * reason: one more statement, on that path only.
 */
export async function writeNotifies(tx: Tx, plan: CallPlan): Promise<void> {
  for (const n of plan.notifies) {
    const written = await recordEvents(tx, [
      {
        type: 'flow.notify',
        subject: `call:${n.callId}`,
        data: n.data,
        at: n.at,
        endpoint: n.endpoint,
      },
    ]);
    if (written > 0) continue;
    const detail = { endpoint: n.endpoint, reason: `no enabled endpoint is named "${n.endpoint}"` };
    n.event.kind = NOTIFY_SKIPPED_EVENT;
    n.event.detail = detail;
    // the event as the plan wrote it: this call's notify of that endpoint at that time (the
    // same action twice in one list is the same miss twice)
    await tx.execute(sql`
      update call_events set kind = ${NOTIFY_SKIPPED_EVENT}, detail = ${JSON.stringify(detail)}::jsonb
      where call_id = ${n.callId} and kind = ${NOTIFY_EVENT} and at = ${n.at.toISOString()}::timestamptz
        and node is not distinct from ${n.event.node ?? null}
        and detail = ${JSON.stringify({ endpoint: n.endpoint })}::jsonb`);
  }
}
