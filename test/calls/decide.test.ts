/**
 * The pure decide step (src/calls/decide.ts): a locked call, an event and `now` in, plan
 * entries out; no database anywhere in this file.
 */
import { describe, expect, it } from 'vitest';
import type { HeldWebhook, KeyCall } from '../../src/calls/call-rows.ts';
import {
  type DecideDeps,
  decideKey,
  decideStart,
  decideStatus,
  decideTimer,
} from '../../src/calls/decide.ts';
import { type CallPlan, createCallPlan } from '../../src/calls/plan.ts';
import type { CallRow } from '../../src/db/schema/index.ts';
import { createFlowMachine, persistFlowSnapshot, startFlow } from '../../src/flows/index.ts';
import { uuidv7 } from '../../src/ids.ts';
import { loadExample, SAMPLE_VARS } from '../flows/helpers.ts';

const compiled = loadExample('appointment-reminder');
const machine = createFlowMachine(compiled);
const deps: DecideDeps = { flows: { machineFor: () => machine } };
const started = new Date('2026-01-01T10:00:00Z');
const now = new Date('2026-01-01T10:01:00Z');

/** A call just started and locked, with the given held webhooks. */
function lockedCall(held: HeldWebhook[] = []): KeyCall {
  const id = uuidv7(started.getTime());
  const vars = SAMPLE_VARS['appointment-reminder'];
  const { snapshot } = startFlow(machine, {
    vars,
    lang: 'en',
    to: '+380501234567',
    from: 'Clinic',
  });
  const row: CallRow = {
    id,
    flowId: compiled.id,
    flowVersion: compiled.version,
    to: '+380501234567',
    from: 'Clinic',
    lang: 'en',
    vars,
    state: 'queued',
    outcome: null,
    snapshot: persistFlowSnapshot(snapshot),
    messageId: uuidv7(started.getTime()),
    endedAt: null,
    createdAt: started,
    updatedAt: started,
  };
  return { row, compiled, held: held.map((h) => ({ ...h, callId: id })) };
}

const heldAt = (id: number, node: string, key: string): HeldWebhook => ({
  id,
  callId: '',
  inboxId: 100 + id,
  node,
  key,
  receivedAt: started,
});
const kinds = (plan: CallPlan) => plan.events.map((e) => e.kind);
const stat = (plan: CallPlan, metric: string, subject: string, key = '') =>
  [...plan.stats.values()].find(
    (s) => s.metric === metric && s.subject === subject && s.key === key,
  )?.count;

describe('decideKey', () => {
  it('applies a key at the current node: path, outcome, follow-up, hangup, new row', () => {
    const call = lockedCall();
    const plan = createCallPlan(started);
    expect(decideKey(deps, plan, call, { node: 'main', key: '1', inboxId: 7 }, now)).toBe(
      'applied',
    );
    expect(kinds(plan)).toEqual(['key', 'timer-cancelled', 'outcome', 'follow-up', 'hangup']);
    expect(plan.events[0]).toMatchObject({
      callId: call.row.id,
      node: 'main',
      menu: 'main',
      attempt: 1,
      key: '1',
      at: now,
    });
    const row = plan.rows.get(call.row.id)!;
    expect(row).toMatchObject({
      state: 'ended',
      outcome: 'confirmed',
      updatedAt: now,
      endedAt: now,
    });
    expect((row.snapshot as { value: string }).value).not.toBe('main');
    expect(plan.timers.get(call.row.id)).toEqual({
      dropAll: false,
      set: new Map([['noResponse', null]]),
    });
    expect(stat(plan, 'visit', 'main')).toBe(1);
    expect(stat(plan, 'key', 'main', '1')).toBe(1);
    expect(stat(plan, 'outcome', 'confirmed')).toBe(1);
    expect(stat(plan, 'hangup', 'main')).toBe(1);
    expect(plan.now).toBe(now);
    // the locked call itself is input only: the plan holds its new row
    expect(call.row.state).toBe('queued');
  });

  it('gives a follow-up the deterministic customerMessageId callId:effectId', () => {
    const call = lockedCall();
    const first = createCallPlan(now);
    const again = createCallPlan(now);
    decideKey(deps, first, call, { node: 'main', key: '1', inboxId: 7 }, now);
    decideKey(deps, again, call, { node: 'main', key: '1', inboxId: 8 }, now);
    const [f] = first.followUps;
    expect(first.followUps).toHaveLength(1);
    expect(f!.event.detail).toEqual({
      id: 'main:1:1',
      customerMessageId: `${call.row.id}:main:1:1`,
      type: 'sms',
    });
    expect(f!.prepared.row).toMatchObject({
      customerMessageId: `${call.row.id}:main:1:1`,
      callId: call.row.id,
      role: 'follow-up',
      type: 'sms',
    });
    // a replay decides the same customerMessageId, so the writer stores it once
    expect(again.followUps[0]!.prepared.row.customerMessageId).toBe(
      f!.prepared.row.customerMessageId,
    );
  });

  it('holds a key for a node still ahead, and changes nothing else', () => {
    const call = lockedCall();
    const plan = createCallPlan(now);
    expect(decideKey(deps, plan, call, { node: 'reschedule', key: '1', inboxId: 9 }, now)).toBe(
      'held',
    );
    expect(plan.heldAdded).toEqual([
      { callId: call.row.id, node: 'reschedule', key: '1', inboxId: 9, receivedAt: now },
    ]);
    expect(plan.events).toEqual([
      {
        callId: call.row.id,
        kind: 'held',
        node: 'reschedule',
        key: '1',
        detail: { inboxId: 9 },
        at: now,
      },
    ]);
    expect(plan.rows.size).toBe(0);
    expect(plan.stats.size).toBe(0);
  });

  it('ignores a key for a node already left (duplicate) or out of reach (stale)', () => {
    const call = lockedCall();
    const plan = createCallPlan(now);
    expect(decideKey(deps, plan, call, { node: 'main', key: '2', inboxId: 1 }, now)).toBe(
      'applied',
    );
    // the second event starts from the row the first left in the plan
    expect(decideKey(deps, plan, call, { node: 'main', key: '1', inboxId: 2 }, now)).toBe(
      'duplicate',
    );
    expect(plan.events.at(-1)).toMatchObject({
      kind: 'ignored',
      node: 'main',
      key: '1',
      detail: { reason: 'duplicate', inboxId: 2 },
    });
    expect(decideKey(deps, plan, call, { node: 'reschedule', key: '1', inboxId: 3 }, now)).toBe(
      'applied',
    );
    expect(decideKey(deps, plan, call, { node: 'main/v2', key: '1', inboxId: 4 }, now)).toBe(
      'stale',
    );
    expect(plan.events.at(-1)).toMatchObject({
      kind: 'ignored',
      detail: { reason: 'stale', inboxId: 4 },
    });
    expect(plan.followUps).toEqual([]);
    expect(plan.rows.get(call.row.id)).toMatchObject({
      state: 'ended',
      outcome: 'reschedule-requested',
    });
  });

  it('drains held webhooks in arrival order once their node is reached', () => {
    // arrived before: reschedule '1' (id 5), then reschedule '*' (id 6), main/v2 '1' (id 7)
    const call = lockedCall([
      heldAt(5, 'reschedule', '1'),
      heldAt(6, 'reschedule', '*'),
      heldAt(7, 'main/v2', '1'),
    ]);
    const plan = createCallPlan(now);
    expect(decideKey(deps, plan, call, { node: 'main', key: '2', inboxId: 1 }, now)).toBe(
      'applied',
    );
    const keys = plan.events.filter((e) => e.kind === 'key').map((e) => `${e.node}:${e.key}`);
    // id 5 came first, so reschedule '1' applies and ends the call; the others are ignored
    expect(keys).toEqual(['main:2', 'reschedule:1']);
    expect(plan.events.filter((e) => e.kind === 'ignored').map((e) => e.detail)).toEqual([
      { reason: 'duplicate', inboxId: 106 },
      { reason: 'stale', inboxId: 107 },
    ]);
    expect(plan.heldReleased).toEqual([5, 6, 7]);
    expect(plan.heldAdded).toEqual([]);
    expect(plan.rows.get(call.row.id)).toMatchObject({ outcome: 'reschedule-requested' });
  });

  it('drains along a chain of held webhooks, and one held earlier in the same plan', () => {
    const call = lockedCall([heldAt(6, 'reschedule', '*')]);
    const plan = createCallPlan(now);
    expect(decideKey(deps, plan, call, { node: 'main/v2', key: '1', inboxId: 2 }, now)).toBe(
      'held',
    );
    expect(decideKey(deps, plan, call, { node: 'main', key: '2', inboxId: 1 }, now)).toBe(
      'applied',
    );
    const keys = plan.events.filter((e) => e.kind === 'key').map((e) => `${e.node}:${e.key}`);
    expect(keys).toEqual(['main:2', 'reschedule:*', 'main/v2:1']);
    expect(plan.heldReleased).toEqual([6]);
    // held and released within the plan: never written
    expect(plan.heldAdded).toEqual([]);
    expect(plan.held.get(call.row.id)).toEqual([]);
    expect(plan.rows.get(call.row.id)).toMatchObject({ state: 'ended', outcome: 'confirmed' });
  });
});

describe('decideStatus', () => {
  it('failed: the call fails, its timers are dropped, the on-failed follow-up is queued', () => {
    const call = lockedCall();
    const plan = createCallPlan(now);
    decideStatus(deps, plan, call, 'failed', now);
    expect(plan.rows.get(call.row.id)).toMatchObject({
      state: 'failed',
      updatedAt: now,
      endedAt: now,
    });
    expect(plan.timers.get(call.row.id)).toEqual({ dropAll: true, set: new Map() });
    expect(plan.events[0]).toMatchObject({ kind: 'status', detail: { status: 'failed' } });
    expect(kinds(plan)).toContain('follow-up');
    const [f] = plan.followUps;
    const effectId = (f!.event.detail as { id: string }).id;
    expect(f!.prepared.row.customerMessageId).toBe(`${call.row.id}:${effectId}`);
    expect(stat(plan, 'failure', 'failed')).toBe(1);
  });

  it('accepted: a queued call becomes accepted and keeps its timers', () => {
    const call = lockedCall();
    const plan = createCallPlan(now);
    decideStatus(deps, plan, call, 'accepted', now);
    expect(plan.rows.get(call.row.id)).toMatchObject({ state: 'accepted', endedAt: null });
    expect(plan.timers.has(call.row.id)).toBe(false);
    expect(plan.stats.size).toBe(0);
    // a later failure in the same plan starts from `accepted`
    decideStatus(deps, plan, call, 'failed', now);
    expect(plan.rows.get(call.row.id)).toMatchObject({ state: 'failed', endedAt: now });
  });
});

describe('decideTimer', () => {
  it('a running timer fires: its event, then the transition', () => {
    const call = lockedCall();
    const plan = createCallPlan(now);
    expect(decideTimer(deps, plan, call, 'noResponse', now)).toBe(true);
    expect(plan.events[0]).toEqual({
      callId: call.row.id,
      kind: 'timer-fired',
      detail: { timer: 'noResponse' },
      at: now,
    });
    expect(kinds(plan)).toContain('outcome');
    expect(plan.rows.get(call.row.id)).toMatchObject({ outcome: 'no-response' });
  });

  it('a timer the machine no longer runs moves nothing', () => {
    const call = lockedCall();
    const plan = createCallPlan(now);
    decideKey(deps, plan, call, { node: 'main', key: '1', inboxId: 1 }, now);
    const before = plan.rows.get(call.row.id);
    expect(decideTimer(deps, plan, call, 'noResponse', now)).toBe(false);
    expect(plan.events.at(-1)).toMatchObject({ kind: 'timer-fired' });
    expect(plan.rows.get(call.row.id)).toBe(before);
  });
});

describe('decideStart', () => {
  it("plans a new call's first effects: its timer set, with its event", () => {
    const call = lockedCall();
    const plan = createCallPlan(now);
    decideStart(
      deps,
      plan,
      call.row,
      [{ type: 'startTimer', timer: 'noResponse', afterMs: 60_000 }],
      now,
    );
    expect(plan.timers.get(call.row.id)?.set.get('noResponse')).toEqual(
      new Date(now.getTime() + 60_000),
    );
    expect(kinds(plan)).toEqual(['timer-started']);
    expect(plan.rows.size).toBe(0);
  });
});
