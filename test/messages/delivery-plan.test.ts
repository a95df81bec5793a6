/**
 * The delivery planner alone, no database: callbacks as the provider sends them, read by
 * parseDeliveryBody, against locked messages and erased ids given as data.
 */
import { describe, expect, it } from 'vitest';
import { DEFAULT_STATUS_MAP, parseDeliveryBody } from '../../src/messages/delivery-parse.ts';
import {
  type DeliveryFacts,
  inboxIdsOf,
  type ParsedCallback,
  planAttach,
  planDeliveries,
  unmatchedOf,
} from '../../src/messages/delivery-plan.ts';
import { dedupKey } from '../../src/messages/inbox.ts';
import type { LockedMessage } from '../../src/messages/timeline-plan.ts';

const now = new Date('2030-01-01T12:00:00Z');
const created = '2030-01-01T10:00:00.000Z';

function callback(body: unknown): ParsedCallback {
  const raw = { contentType: 'application/json', body: JSON.stringify(body) };
  const { events, problems } = parseDeliveryBody(raw.contentType, raw.body, DEFAULT_STATUS_MAP);
  return { raw, key: dedupKey('delivery', raw.body, 0), events, problems };
}

function locked(id: string, extra: Partial<LockedMessage> = {}): LockedMessage {
  return {
    id,
    cmid: `o-${id}`,
    pmid: null,
    status: 'queued',
    fallbacks: 0,
    type: 'sms',
    callId: null,
    role: null,
    createdAt: created,
    ...extra,
  };
}

/** Every callback new, with inbox ids 1, 2, ...; nothing erased unless said. */
function plan(
  callbacks: ParsedCallback[],
  messages: LockedMessage[],
  facts: Partial<DeliveryFacts> = {},
) {
  return planDeliveries(callbacks, {
    inboxIds: callbacks.map((_, i) => i + 1),
    locked: messages,
    isErased: () => false,
    now,
    ...facts,
  });
}

describe('planDeliveries', () => {
  it.each([
    ['accepted', 'accepted'],
    ['sent', 'sent'],
    ['delivered', 'delivered'],
    ['read', 'read'],
    ['failed', 'failed'],
    ['expired', 'expired'],
    ['rejected', 'rejected'],
    ['DELIVRD', 'delivered'],
    ['undeliverable', 'failed'],
    ['HANDSET_ACK', 'queued'],
  ])('moves a queued message on %s to %s', (word, status) => {
    const p = plan([callback({ customerMessageId: 'o-a', status: word })], [locked('a')]);
    expect(p.timeline.moves).toEqual([{ id: 'a', before: 'queued', after: status }]);
    expect(p.timeline.events).toHaveLength(1);
    expect(p.results[0]).toMatchObject({ duplicate: false, inboxId: 1, matched: 1, pending: 0 });
  });

  it('keeps the vendor word on the timeline when it maps it', () => {
    const p = plan([callback({ customerMessageId: 'o-a', status: 'DELIVRD' })], [locked('a')]);
    expect(p.timeline.events[0]).toMatchObject({
      status: 'delivered',
      source: 'callback',
      detail: { inboxId: 1, providerStatus: 'DELIVRD' },
    });
  });

  it('keeps delivered when failed follows, in one callback or the next', () => {
    const both = plan(
      [
        callback([
          { customerMessageId: 'o-a', status: 'failed', timestamp: '2030-01-01T11:00:02Z' },
          { customerMessageId: 'o-a', status: 'delivered', timestamp: '2030-01-01T11:00:01Z' },
        ]),
      ],
      [locked('a', { status: 'sent' })],
    );
    expect(both.timeline.moves[0]!.after).toBe('delivered');
    const later = plan(
      [callback({ customerMessageId: 'o-a', status: 'failed' })],
      [locked('a', { status: 'delivered' })],
    );
    expect(later.timeline.moves[0]).toEqual({ id: 'a', before: 'delivered', after: 'delivered' });
  });

  it("orders by the events' time, not their arrival", () => {
    const p = plan(
      [
        callback({
          customerMessageId: 'o-a',
          status: 'delivered',
          timestamp: '2030-01-01T11:00:02Z',
        }),
        callback({ customerMessageId: 'o-a', status: 'sent', timestamp: '2030-01-01T11:00:01Z' }),
      ],
      [locked('a', { status: 'accepted' })],
    );
    expect(p.timeline.moves[0]!.after).toBe('delivered');
    expect(p.timeline.events.map((e) => e.status)).toEqual(['delivered', 'sent']);
  });

  it('does not end a message on a channel failure that leaves a fallback', () => {
    const m = locked('a', { status: 'sent', type: 'viber_trans', fallbacks: 1 });
    const viber = plan(
      [callback({ customerMessageId: 'o-a', status: 'failed', channel: 'viber' })],
      [m],
    );
    expect(viber.timeline.moves[0]!.after).toBe('sent');
    const last = plan(
      [callback({ customerMessageId: 'o-a', status: 'failed', channel: 'sms', fallbackIndex: 0 })],
      [m],
    );
    expect(last.timeline.moves[0]!.after).toBe('failed');
  });

  it('records per-channel statuses without moving the status', () => {
    const [e] = callback({
      customerMessageId: 'o-a',
      status: 'delivered',
      channel: 'viber',
    }).events;
    const c: ParsedCallback = {
      ...callback({ x: 1 }),
      events: [{ ...e!, perChannel: true }],
      problems: [],
    };
    const p = plan([c], [locked('a', { status: 'sent', type: 'viber_trans', fallbacks: 1 })]);
    expect(p.timeline.moves[0]).toEqual({
      id: 'a',
      before: 'sent',
      after: 'sent',
      // which channel delivered, as the record says
      deliveredVia: 'viber',
    });
    expect(p.timeline.events[0]!.detail).toMatchObject({ channel: 'viber', perChannel: true });
  });

  it('matches by the provider id when there is no customerMessageId, a parent id too', () => {
    const messages = [locked('a', { pmid: 'p-a' }), locked('b', { pmid: 'p-b' })];
    const p = plan(
      [
        callback({ messageId: 'p-a', deliverystatus: 'delivered' }),
        callback({ messageId: 'p-unknown', parentMessageId: 'p-b', status: 'sent' }),
      ],
      messages,
    );
    expect(p.timeline.moves.map((m) => `${m.id}:${m.after}`)).toEqual(['a:delivered', 'b:sent']);
    // customerMessageId first: a provider id naming another message does not take it
    const cm = plan(
      [callback({ customerMessageId: 'o-b', messageId: 'p-a', status: 'sent' })],
      messages,
    );
    expect(cm.timeline.moves.map((m) => m.id)).toEqual(['b']);
  });

  it('takes the newest of messages sharing a provider id', () => {
    const p = plan(
      [callback({ messageId: 'p-x', status: 'sent' })],
      [locked('a', { pmid: 'p-x' }), locked('b', { pmid: 'p-x' })],
    );
    expect(p.timeline.moves.map((m) => m.id)).toEqual(['b']);
  });

  it('records matched events, keeps unknown ones pending, and drops erased ones', () => {
    const c = callback([
      { customerMessageId: 'o-a', status: 'delivered' },
      {
        customerMessageId: 'o-later',
        messageId: 'p-later',
        status: 'sent',
        timestamp: '2030-01-01T11:00:00Z',
      },
      { customerMessageId: 'o-gone', status: 'read' },
    ]);
    const isErased = (e: { customerMessageId?: string }) => e.customerMessageId === 'o-gone';
    expect(unmatchedOf([c], [1], [locked('a')]).map((e) => e.customerMessageId)).toEqual([
      'o-later',
      'o-gone',
    ]);
    const p = plan([c], [locked('a')], { isErased });
    expect(p.results[0]).toEqual({
      duplicate: false,
      inboxId: 1,
      events: 3,
      matched: 1,
      pending: 1,
      dropped: 1,
      problems: [],
    });
    expect(p.pending).toEqual([
      {
        inbox_id: 1,
        customer_message_id: 'o-later',
        provider_message_id: 'p-later',
        status: 'sent',
        detail: c.events[1],
        at: '2030-01-01T11:00:00.000Z',
      },
    ]);
    // the erased message's id is cut out of the stored body; the rest stays
    expect(p.inbox).toHaveLength(1);
    expect(p.inbox[0]).toMatchObject({ id: 1, pending: 1, outcome: { dropped: 1, matched: 1 } });
    expect(p.inbox[0]!.body).not.toContain('o-gone');
    expect(p.inbox[0]!.body).toContain('o-later');
  });

  it('stores nothing of a callback whose every event was about erased messages', () => {
    const p = plan([callback({ customerMessageId: 'o-gone', status: 'read' })], [], {
      isErased: () => true,
    });
    expect(p.inbox).toEqual([]);
    expect(p.pending).toEqual([]);
    expect(p.results[0]).toMatchObject({ duplicate: false, matched: 0, pending: 0, dropped: 1 });
  });

  it('answers a body repeated in the batch, or stored before, as a duplicate', () => {
    const a = callback({ customerMessageId: 'o-a', status: 'sent' });
    const b = callback({ customerMessageId: 'o-a', status: 'delivered' });
    const keys = [a.key, b.key];
    const ids = inboxIdsOf([a, a, b], keys, new Set([b.key]), [10, 11]);
    expect(ids).toEqual([10, undefined, undefined]);
    const p = plan([a, a, b], [locked('a')], { inboxIds: ids });
    expect(p.results.map((r) => r.duplicate)).toEqual([false, true, true]);
    expect(p.results[1]).toEqual({
      duplicate: true,
      events: 0,
      matched: 0,
      pending: 0,
      problems: [],
    });
    expect(p.timeline.events).toHaveLength(1);
    expect(p.inbox.map((r) => r.id)).toEqual([10]);
    // and duplicates' events are not looked up as erased
    expect(unmatchedOf([a, a, b], ids, [])).toHaveLength(1);
  });

  it('keeps an unreadable body with its problems, and orders inbox rows by key', () => {
    const bad: ParsedCallback = {
      raw: { contentType: 'application/json', body: '{not json' },
      key: dedupKey('delivery', '{not json', 0),
      ...parseDeliveryBody('application/json', '{not json', DEFAULT_STATUS_MAP),
    };
    const ok = callback({ customerMessageId: 'o-a', status: 'sent' });
    const p = plan([bad, ok], [locked('a')]);
    expect(p.results[0]!.problems.length).toBeGreaterThan(0);
    expect(p.inbox.map((r) => r.key)).toEqual([bad.key, ok.key].sort());
  });

  it('hooks only the messages of calls', () => {
    const p = plan(
      [
        callback([
          { customerMessageId: 'o-a', status: 'sent' },
          { customerMessageId: 'o-b', status: 'sent' },
        ]),
      ],
      [locked('a'), locked('b', { callId: 'call-1', role: 'call' })],
    );
    expect(p.timeline.recorded).toHaveLength(2);
    expect(p.hooked.map((r) => r.result.messageId)).toEqual(['b']);
  });
});

describe('claimed times (event-time.ts)', () => {
  it('records a time before the message or beyond the margin at receipt, keeping the claim', () => {
    const p = plan(
      [
        callback([
          { customerMessageId: 'o-a', status: 'sent', timestamp: '1999-01-01T00:00:00Z' },
          { customerMessageId: 'o-a', status: 'HANDSET_ACK', timestamp: '2030-01-02T12:00:00Z' },
          { customerMessageId: 'o-a', status: 'delivered', timestamp: '2030-01-01T12:04:59Z' },
          { customerMessageId: 'o-a', status: 'DELIVRD', timestamp: '2030-01-01T10:00:00Z' },
        ]),
      ],
      [locked('a', { status: 'accepted' })],
    );
    expect(p.timeline.events.map((e) => [e.status, e.at, e.detail])).toEqual([
      [
        'sent',
        now.toISOString(),
        { inboxId: 1, claimedAt: '1999-01-01T00:00:00.000Z', timeRejected: 'before-created' },
      ],
      [
        'HANDSET_ACK',
        now.toISOString(),
        { inboxId: 1, claimedAt: '2030-01-02T12:00:00.000Z', timeRejected: 'future' },
      ],
      // within the margin, and exactly at the creation: believed, nothing added
      ['delivered', '2030-01-01T12:04:59.000Z', { inboxId: 1 }],
      ['delivered', created, { inboxId: 1, providerStatus: 'DELIVRD' }],
    ]);
  });

  it('orders a back-dated failure by its receipt, so it cannot overtake a delivery', () => {
    const events = [
      { customerMessageId: 'o-a', status: 'delivered', timestamp: '2030-01-01T11:00:00Z' },
      { customerMessageId: 'o-a', status: 'failed', timestamp: '1999-01-01T00:00:00Z' },
    ];
    const p = plan([callback(events)], [locked('a', { status: 'sent' })]);
    // at its claimed time the failure would have come first and ended the message
    expect(p.timeline.moves[0]).toEqual({ id: 'a', before: 'sent', after: 'delivered' });
    const believed = plan(
      [callback(events)],
      [locked('a', { status: 'sent', createdAt: '1998-01-01T00:00:00.000Z' })],
    );
    expect(believed.timeline.moves[0]!.after).toBe('failed');
  });

  it('judges a pending event when it is attached: by its message and when it was received', () => {
    const [early, ahead, fine] = callback([
      { customerMessageId: 'o-a', status: 'sent', timestamp: '2030-01-01T09:00:00Z' },
      { customerMessageId: 'o-a', status: 'delivered', timestamp: '2030-01-01T11:10:00Z' },
      { customerMessageId: 'o-a', status: 'read', timestamp: '2030-01-01T11:04:00Z' },
    ]).events;
    // the callback came at 11:00; the attach runs at 12:00 (the message appeared meanwhile)
    const receivedAt = new Date('2030-01-01T11:00:00Z');
    const stored = (e: typeof early) => JSON.parse(JSON.stringify(e));
    const p = planAttach(
      [
        { id: 1, inboxId: 7, detail: stored(early), receivedAt },
        { id: 2, inboxId: 7, detail: stored(ahead), receivedAt },
        { id: 3, inboxId: 7, detail: stored(fine), receivedAt },
      ],
      [locked('a', { status: 'accepted' })],
    );
    expect(p.timeline.events.map((e) => [e.status, e.at, e.detail.timeRejected])).toEqual([
      ['sent', '2030-01-01T11:00:00.000Z', 'before-created'],
      ['delivered', '2030-01-01T11:00:00.000Z', 'future'],
      ['read', '2030-01-01T11:04:00.000Z', undefined],
    ]);
    expect(p.timeline.events[0]!.detail.claimedAt).toBe('2030-01-01T09:00:00.000Z');
  });
});

describe('planAttach', () => {
  it('attaches the events whose message is locked, and counts them per inbox row', () => {
    const [e1, e2] = callback([
      { customerMessageId: 'o-a', status: 'sent', timestamp: '2030-01-01T11:00:01Z' },
      { messageId: 'p-b', status: 'delivered', timestamp: '2030-01-01T11:00:02Z' },
    ]).events;
    const [e3] = callback({ customerMessageId: 'o-none', status: 'sent' }).events;
    const p = planAttach(
      [
        { id: 1, inboxId: 7, detail: e1!, receivedAt: now },
        { id: 2, inboxId: 7, detail: e2!, receivedAt: now },
        { id: 3, inboxId: 8, detail: e3!, receivedAt: now },
      ],
      [locked('a'), locked('b', { pmid: 'p-b' })],
    );
    expect(p.attached).toEqual([1, 2]);
    expect(p.perInbox).toEqual([{ id: 7, receivedAt: now.toISOString(), n: 2 }]);
    expect(p.timeline.moves.map((m) => `${m.id}:${m.after}`)).toEqual(['a:sent', 'b:delivered']);
    expect(p.timeline.events[0]).toMatchObject({
      detail: { inboxId: 7 },
      at: '2030-01-01T11:00:01.000Z',
    });
  });
});
