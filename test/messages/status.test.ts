import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MESSAGE_STATUSES, nextStatus } from '../../src/messages/status.ts';
import { statusAfter } from '../../src/messages/timeline.ts';

describe('nextStatus', () => {
  it.each([
    ['queued', 'accepted', 'accepted'],
    ['accepted', 'sent', 'sent'],
    ['sent', 'delivered', 'delivered'],
    ['delivered', 'sent', 'delivered'],
    ['delivered', 'read', 'read'],
    ['read', 'delivered', 'read'],
    ['sent', 'failed', 'failed'],
    ['failed', 'delivered', 'failed'],
    ['expired', 'sent', 'expired'],
    ['delivered', 'failed', 'delivered'],
    ['sent', 'some-vendor-word', 'sent'],
  ] as const)('%s then %s is %s', (current, incoming, expected) => {
    expect(nextStatus(current, incoming)).toBe(expected);
  });

  it('ends in the same status whatever the order of the events', () => {
    const progress = fc.array(fc.constantFrom('accepted', 'sent', 'delivered', 'read'), {
      maxLength: 5,
    });
    const failure = fc.option(fc.constantFrom('failed', 'expired', 'rejected'), { nil: undefined });
    fc.assert(
      fc.property(progress, failure, fc.infiniteStream(fc.nat()), (steps, fail, rand) => {
        // a failure and a delivery of the same message contradict each other: not generated
        const events: string[] =
          fail && !steps.some((s) => s === 'delivered' || s === 'read') ? [...steps, fail] : steps;
        const shuffled = [...events];
        for (let i = shuffled.length - 1; i > 0; i--) {
          const j = rand.next().value % (i + 1);
          [shuffled[i], shuffled[j]] = [shuffled[j]!, shuffled[i]!];
        }
        const a = events.reduce(nextStatus, 'queued' as const);
        const b = shuffled.reduce(nextStatus, 'queued' as const);
        expect(b).toBe(a);
      }),
    );
  });

  it('never moves a status down a rank', () => {
    const order = ['queued', 'accepted', 'sent', 'delivered', 'read'];
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...MESSAGE_STATUSES)), (events) => {
        let current: (typeof MESSAGE_STATUSES)[number] = 'queued';
        for (const e of events) {
          const next = nextStatus(current, e);
          if (order.includes(current) && order.includes(next)) {
            expect(order.indexOf(next)).toBeGreaterThanOrEqual(order.indexOf(current));
          }
          if (['read', 'failed', 'expired', 'rejected'].includes(current))
            expect(next).toBe(current);
          current = next;
        }
      }),
    );
  });
});

describe('statusAfter: one channel, or the message as a whole', () => {
  const callback = { source: 'callback' as const };
  it('waits for the fallbacks when one channel fails, but not when the whole message did', () => {
    // the condensed interface names the channel of each event: the primary failing with a
    // fallback left is not the end
    expect(statusAfter('sent', { ...callback, status: 'failed', channel: 'viber' }, 1)).toBe(
      'sent',
    );
    expect(
      statusAfter('sent', { ...callback, status: 'failed', channel: 'sms', fallbackIndex: 0 }, 1),
    ).toBe('failed');
    // the provider's own webhook names none: its deliverystatus counts every channel
    // (status.md, "Webhook Alternative")
    expect(statusAfter('sent', { ...callback, status: 'failed' }, 1)).toBe('failed');
  });

  it("never moves the status by a channel's own status from extendedStatuses", () => {
    for (const status of ['delivered', 'failed', 'read', 'expired', 'not_used']) {
      expect(
        statusAfter('sent', { source: 'poll', status, channel: 'sms', perChannel: true }, 1),
      ).toBe('sent');
    }
  });
});
