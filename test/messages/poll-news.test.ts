/**
 * What of a status record goes on the timeline (the poller's `newsOf`), no database: a
 * status of the whole message other than its current one, and each channel's word that is
 * not already that channel's latest.
 */
import { expect, it } from 'vitest';
import { DEFAULT_STATUS_MAP, parseStatusRecord } from '../../src/messages/delivery-parse.ts';
import { newsOf } from '../../src/messages/poller.ts';

const at = new Date('2030-01-01T12:00:00Z');
const createdAt = '2030-01-01T11:00:00.000Z';
const record = {
  messageId: 'p-1',
  deliverystatus: 'delivered',
  extendedStatuses: { viber: 'undeliverable', sms: 'delivered' },
};

it('keeps only news, with the record beside a status of the whole message', () => {
  const { events } = parseStatusRecord(record, 'p-1', DEFAULT_STATUS_MAP);
  const all = newsOf(events, record, { status: 'sent', createdAt }, new Map(), at);
  expect(all.map((e) => [e.status, e.channel, e.source])).toEqual([
    ['delivered', undefined, 'poll'],
    ['failed', 'viber', 'poll'],
    ['delivered', 'sms', 'poll'],
  ]);
  expect(all[0]!.detail).toMatchObject({ response: record, messageId: 'p-1' });
  expect(all[1]!.detail).not.toHaveProperty('response');
  // the status it has already, and a channel word already on the timeline, are not news
  const some = newsOf(
    events,
    record,
    { status: 'delivered', createdAt },
    new Map([['viber', 'undeliverable']]),
    at,
  );
  expect(some.map((e) => `${e.channel}:${e.status}`)).toEqual(['sms:delivered']);
});

it('records a record time beyond the margin, or before the message, at the time it was read', () => {
  const { events } = parseStatusRecord(
    { messageId: 'p-1', deliverystatus: 'delivered', timestamp: '2030-01-02T12:00:00Z' },
    'p-1',
    DEFAULT_STATUS_MAP,
  );
  const [ahead] = newsOf(events, {}, { status: 'sent', createdAt }, new Map(), at);
  expect(ahead).toMatchObject({
    at,
    detail: { claimedAt: '2030-01-02T12:00:00.000Z', timeRejected: 'future' },
  });
  const [early] = newsOf(
    events,
    {},
    { status: 'sent', createdAt: '2030-01-03T00:00:00.000Z' },
    new Map(),
    new Date('2030-01-02T11:59:00Z'),
  );
  expect(early).toMatchObject({
    at: new Date('2030-01-02T11:59:00Z'),
    detail: { timeRejected: 'before-created' },
  });
  const [fine] = newsOf(
    events,
    {},
    { status: 'sent', createdAt },
    new Map(),
    new Date('2030-01-02T11:59:00Z'),
  );
  expect(fine!.at).toEqual(new Date('2030-01-02T12:00:00Z'));
  expect(fine!.detail).not.toHaveProperty('timeRejected');
});
