/**
 * A transition's effects (xstate's actions, as data) into plan entries: call events, path
 * and outcome, follow-up messages with deterministic customerMessageIds, timers, statistics.
 * Pure: nothing here runs an effect.
 */
import type { CallRow } from '../db/schema/index.ts';
import type { FlowEffect } from '../flows/index.ts';
import { prepareMessages } from '../messages/submit.ts';
import type { CallState } from './deps.ts';
import { NOTIFY_EVENT, notifyData } from './notify.ts';
import { addEvent, addFollowUp, addNotify, addStats, type CallPlan, setTimer } from './plan.ts';
import { type StatEntry, WRONG_INPUT_METRIC } from './stats.ts';

export interface CallStatus {
  state: CallState;
  outcome: string | null;
}

/** Plans the effects of one transition of the call; returns its state and outcome after them. */
export function planEffects(
  plan: CallPlan,
  opts: { maxSmsParts?: number | undefined },
  row: Pick<CallRow, 'id' | 'flowId' | 'flowVersion' | 'lang'>,
  effects: FlowEffect[],
  current: CallStatus,
  now: Date,
): CallStatus {
  const callId = row.id;
  let { state, outcome } = current;
  const stats: StatEntry[] = [];
  for (const effect of effects) {
    switch (effect.type) {
      case 'step':
        // on a `wrong` step, what the caller did: `timeout` (silence) or the unhandled key
        addEvent(plan, {
          callId,
          kind: 'key',
          node: effect.node,
          menu: effect.menu,
          attempt: effect.attempt + 1,
          key: effect.key,
          ...(effect.input !== undefined && { detail: { input: effect.input } }),
          at: now,
        });
        stats.push({ metric: 'visit', subject: effect.node });
        stats.push({ metric: 'key', subject: effect.node, key: effect.key });
        if (effect.input !== undefined) {
          stats.push({ metric: WRONG_INPUT_METRIC, subject: effect.node, key: effect.input });
        }
        if (state === 'queued' || state === 'accepted') state = 'in-progress';
        break;
      case 'outcome':
        outcome = effect.name;
        addEvent(plan, { callId, kind: 'outcome', detail: { outcome: effect.name }, at: now });
        stats.push({ metric: 'outcome', subject: effect.name });
        break;
      case 'send': {
        // deterministic: the same effect of the same call always has the same id, so a
        // replayed event can never queue (or the provider accept) a second copy
        const customerMessageId = `${callId}:${effect.id}`;
        const { results, prepared } = prepareMessages(
          [{ ...effect.message, customerMessageId }],
          {
            callId,
            role: 'follow-up',
            ...(opts.maxSmsParts !== undefined && { maxSmsParts: opts.maxSmsParts }),
          },
          now,
        );
        const rejected = results[0];
        if (rejected) {
          addEvent(plan, {
            callId,
            kind: 'follow-up-rejected',
            detail: { id: effect.id, customerMessageId, error: rejected.error },
            at: now,
          });
          break;
        }
        // the writer adds `messageId`, or `optedOut: true` or `duplicate: true`, to the stored detail
        addFollowUp(plan, {
          prepared: prepared[0]!,
          event: {
            callId,
            kind: 'follow-up',
            detail: { id: effect.id, customerMessageId, type: effect.message.type },
            at: now,
          },
        });
        break;
      }
      case 'notify':
        // the event's data is the call as this transition leaves it; the writer records it
        addNotify(plan, {
          callId,
          endpoint: effect.endpoint,
          data: notifyData(callId, effect, now),
          at: now,
          event: {
            callId,
            kind: NOTIFY_EVENT,
            node: effect.node,
            detail: { endpoint: effect.endpoint },
            at: now,
          },
        });
        break;
      case 'optOut':
        // the callee's number (a call always has one); the writer adds it in the same statement
        if (effect.to !== null) {
          plan.optOuts.push({
            phone: effect.to,
            detail: { callId, node: effect.node },
            at: now,
          });
          addEvent(plan, { callId, kind: 'opt-out', node: effect.node, at: now });
        }
        break;
      case 'providerWebhook':
        addEvent(plan, { callId, kind: 'webhook', detail: { url: effect.url }, at: now });
        break;
      case 'hangup':
        addEvent(plan, { callId, kind: 'hangup', node: effect.node, at: now });
        stats.push({ metric: 'hangup', subject: effect.node });
        if (state !== 'failed') state = 'ended';
        break;
      case 'startTimer':
        setTimer(plan, callId, effect.timer, new Date(now.getTime() + effect.afterMs));
        addEvent(plan, {
          callId,
          kind: 'timer-started',
          detail: { timer: effect.timer, afterMs: effect.afterMs },
          at: now,
        });
        break;
      case 'cancelTimer':
        setTimer(plan, callId, effect.timer, null);
        addEvent(plan, {
          callId,
          kind: 'timer-cancelled',
          detail: { timer: effect.timer },
          at: now,
        });
        break;
    }
  }
  addStats(plan, row, stats);
  return { state, outcome };
}
