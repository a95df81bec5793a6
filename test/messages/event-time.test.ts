/**
 * The one rule about claimed event times (event-time.ts), no database: before the message was
 * created, or more than 5 minutes after the event was received, it is not believed; a time
 * exactly at either bound is.
 */
import { describe, expect, it } from 'vitest';
import { FUTURE_MARGIN_MS, timeRejected } from '../../src/messages/event-time.ts';

const created = new Date('2030-01-01T10:00:00.000Z');
const received = new Date('2030-01-01T10:30:00.000Z');
const plus = (base: Date, ms: number) => new Date(base.getTime() + ms);

describe('timeRejected', () => {
  it('keeps the margin at 5 minutes', () => {
    expect(FUTURE_MARGIN_MS).toBe(300_000);
  });

  it.each([
    ['in 1999', new Date('1999-01-01T00:00:00Z'), 'before-created'],
    ['a millisecond before the message was created', plus(created, -1), 'before-created'],
    ['exactly when the message was created', created, undefined],
    ['between creation and receipt', plus(created, 60_000), undefined],
    ['exactly when it was received', received, undefined],
    ['within the margin after receipt', plus(received, FUTURE_MARGIN_MS - 1), undefined],
    ['exactly at the margin', plus(received, FUTURE_MARGIN_MS), undefined],
    ['a millisecond beyond the margin', plus(received, FUTURE_MARGIN_MS + 1), 'future'],
    ['a day ahead', plus(received, 86_400_000), 'future'],
  ])('judges a time %s', (_, claimed, expected) => {
    expect(timeRejected(claimed, received, created)).toBe(expected);
  });

  it('reads the creation time as the lock sends it (JSON text with an offset)', () => {
    expect(timeRejected(plus(created, -1), received, '2030-01-01T12:00:00+02:00')).toBe(
      'before-created',
    );
    expect(timeRejected(created, received, '2030-01-01T10:00:00.000000+00:00')).toBeUndefined();
  });

  it('judges only the future when there is no message to be created before', () => {
    expect(timeRejected(new Date('1999-01-01T00:00:00Z'), received)).toBeUndefined();
    expect(timeRejected(plus(received, 86_400_000), received)).toBe('future');
  });
});
