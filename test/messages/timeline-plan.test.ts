/**
 * The timeline planner alone, no database: which events go on which timeline, where each
 * message's status moves, which messages get a status check, and the order the hooks run in.
 */
import { describe, expect, it } from 'vitest';
import type { MessageStatus } from '../../src/messages/status.ts';
import type { NewEvent } from '../../src/messages/timeline.ts';
import { type LockedMessage, ofCalls, planTimeline } from '../../src/messages/timeline-plan.ts';

const at = (s: number) => new Date(Date.UTC(2030, 0, 1, 12, 0, s));

function locked(id: string, extra: Partial<LockedMessage> = {}): LockedMessage {
  return {
    id,
    cmid: `c-${id}`,
    pmid: null,
    status: 'accepted',
    fallbacks: 0,
    type: 'sms',
    callId: null,
    role: null,
    createdAt: '2030-01-01T00:00:00.000Z',
    ...extra,
  };
}

const ev = (status: string, s: number, extra: Partial<NewEvent> = {}): NewEvent => ({
  status,
  source: 'callback',
  at: at(s),
  detail: {},
  ...extra,
});

const statusAfterAll = (m: LockedMessage, events: NewEvent[]): MessageStatus =>
  planTimeline([m], new Map([[m.id, events]])).moves[0]!.after;

describe('planTimeline', () => {
  it('applies events in event time, and keeps them in arrival order', () => {
    const m = locked('a', { status: 'accepted' });
    const plan = planTimeline([m], new Map([['a', [ev('delivered', 2), ev('sent', 1)]]]));
    expect(plan.moves).toEqual([{ id: 'a', before: 'accepted', after: 'delivered' }]);
    expect(plan.events.map((e) => [e.status, e.at])).toEqual([
      ['delivered', at(2).toISOString()],
      ['sent', at(1).toISOString()],
    ]);
  });

  it('keeps delivered when a failure follows it', () => {
    expect(statusAfterAll(locked('a'), [ev('delivered', 1), ev('failed', 2)])).toBe('delivered');
    expect(statusAfterAll(locked('a', { status: 'delivered' }), [ev('failed', 1)])).toBe(
      'delivered',
    );
  });

  it('lets no vendor word move the status, and still records it', () => {
    const plan = planTimeline([locked('a')], new Map([['a', [ev('HANDSET_ACK', 1)]]]));
    expect(plan.moves[0]).toEqual({ id: 'a', before: 'accepted', after: 'accepted' });
    expect(plan.events.map((e) => e.status)).toEqual(['HANDSET_ACK']);
  });

  it("does not end a message on a channel's failure while a fallback is left", () => {
    const m = locked('a', { type: 'viber_trans', fallbacks: 1, status: 'sent' });
    expect(statusAfterAll(m, [ev('failed', 1, { channel: 'viber' })])).toBe('sent');
    // the last fallback failing ends it, and so does a failure naming no channel
    expect(statusAfterAll(m, [ev('failed', 1, { channel: 'sms', fallbackIndex: 0 })])).toBe(
      'failed',
    );
    expect(statusAfterAll(m, [ev('failed', 1)])).toBe('failed');
  });

  it('records per-channel statuses without moving the status by them', () => {
    const m = locked('a', { type: 'viber_trans', fallbacks: 1, status: 'sent' });
    const plan = planTimeline(
      [m],
      new Map([['a', [ev('delivered', 1, { channel: 'viber', perChannel: true })]]]),
    );
    expect(plan.moves[0]!.after).toBe('sent');
    expect(plan.events[0]!.detail).toEqual({ channel: 'viber', perChannel: true });
  });

  it('takes deliveredVia from the last delivered or read event naming a channel', () => {
    const plan = planTimeline(
      [locked('a')],
      new Map([
        [
          'a',
          [
            ev('read', 3, { channel: 'sms' }),
            ev('delivered', 2, { channel: 'viber' }),
            ev('sent', 1),
          ],
        ],
      ]),
    );
    expect(plan.moves[0]).toEqual({
      id: 'a',
      before: 'accepted',
      after: 'read',
      deliveredVia: 'sms',
    });
  });

  it('queues a status check only for a channel-less end of a message with fallbacks', () => {
    const plan = planTimeline(
      [
        locked('a', { fallbacks: 1, type: 'viber_trans' }),
        locked('b', { fallbacks: 1, type: 'viber_trans' }),
        locked('c'),
        locked('d', { fallbacks: 4, type: 'cascade' }),
        locked('e', { fallbacks: 1, type: 'viber_trans', status: 'delivered' }),
      ],
      new Map([
        ['a', [ev('delivered', 1)]],
        ['b', [ev('delivered', 1, { channel: 'viber' })]],
        ['c', [ev('delivered', 1)]],
        ['d', [ev('delivered', 1)]],
        // no move, no check
        ['e', [ev('delivered', 1)]],
      ]),
    );
    expect(plan.checks).toEqual(['a']);
  });

  it('leaves out messages without events, and hooks calls first, in call-id order', () => {
    const plan = planTimeline(
      [
        locked('a', { callId: 'c-2', role: 'call' }),
        locked('b'),
        locked('c', { callId: 'c-1', role: 'call' }),
        locked('d'),
        locked('e', { callId: 'c-1', role: 'followup' }),
      ],
      new Map([
        ['a', [ev('sent', 1)]],
        ['b', [ev('sent', 1)]],
        ['c', [ev('failed', 1)]],
        ['e', [ev('sent', 1)]],
      ]),
    );
    expect(plan.moves.map((m) => m.id)).toEqual(['a', 'b', 'c', 'e']);
    expect(plan.recorded.map((r) => r.result.messageId)).toEqual(['c', 'e', 'a', 'b']);
    expect(ofCalls(plan.recorded).map((r) => r.result.messageId)).toEqual(['c', 'e', 'a']);
    expect(plan.recorded[0]).toEqual({
      result: {
        messageId: 'c',
        before: 'accepted',
        after: 'failed',
        callId: 'c-1',
        role: 'call',
        fallbacks: 0,
        type: 'sms',
      },
      events: [ev('failed', 1)],
    });
  });
});
