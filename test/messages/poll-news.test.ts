/**
 * What of a status record goes on the timeline (the poller's `newsOf`), no database: a
 * status of the whole message other than its current one, and each channel's word that is
 * not already that channel's latest.
 */
import { expect, it } from 'vitest';
import { DEFAULT_STATUS_MAP, parseStatusRecord } from '../../src/messages/delivery-parse.ts';
import { newsOf } from '../../src/messages/poller.ts';

const at = new Date('2030-01-01T12:00:00Z');
const record = {
  messageId: 'p-1',
  deliverystatus: 'delivered',
  extendedStatuses: { viber: 'undeliverable', sms: 'delivered' },
};

it('keeps only news, with the record beside a status of the whole message', () => {
  const { events } = parseStatusRecord(record, 'p-1', DEFAULT_STATUS_MAP);
  const all = newsOf(events, record, 'sent', new Map(), at);
  expect(all.map((e) => [e.status, e.channel, e.source])).toEqual([
    ['delivered', undefined, 'poll'],
    ['failed', 'viber', 'poll'],
    ['delivered', 'sms', 'poll'],
  ]);
  expect(all[0]!.detail).toMatchObject({ response: record, messageId: 'p-1' });
  expect(all[1]!.detail).not.toHaveProperty('response');
  // the status it has already, and a channel word already on the timeline, are not news
  const some = newsOf(events, record, 'delivered', new Map([['viber', 'undeliverable']]), at);
  expect(some.map((e) => `${e.channel}:${e.status}`)).toEqual(['sms:delivered']);
});
