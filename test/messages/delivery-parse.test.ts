import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_STATUS_MAP,
  parseDeliveryBody,
  parseEventTime,
  parseStatusRecord,
  statusMapWith,
} from '../../src/messages/delivery-parse.ts';
import { storable } from '../../src/messages/inbox.ts';

const JSON_TYPE = 'application/json';

describe('parseDeliveryBody', () => {
  it('reads the sandbox payload', () => {
    const { events, problems } = parseDeliveryBody(
      JSON_TYPE,
      JSON.stringify({
        customerMessageId: 'c-1',
        messageId: 'm-1',
        status: 'delivered',
        timestamp: '2026-11-21T10:00:00.000Z',
        channel: 'sms',
        fallbackIndex: null,
      }),
    );
    expect(problems).toEqual([]);
    expect(events).toEqual([
      {
        customerMessageId: 'c-1',
        providerMessageIds: ['m-1'],
        status: 'delivered',
        rawStatus: 'delivered',
        at: new Date('2026-11-21T10:00:00.000Z'),
        channel: 'sms',
      },
    ]);
  });

  it.each([
    [{ customer_message_id: 'a', state: 'DELIVRD' }, 'a', 'delivered'],
    [{ cmid: 'a', dlr_status: 'UNDELIV' }, 'a', 'failed'],
    [{ 'client-message-id': 'a', Status: 'undeliverable' }, 'a', 'failed'],
    [{ CustomerMessageID: 'a', event: 'seen' }, 'a', 'read'],
    [{ reference: 'a', stat: 'Permanent Failure' }, 'a', 'failed'],
    [{ externalId: 'a', deliveryStatus: 'EXPIRED' }, 'a', 'expired'],
    [{ message: { customerMessageId: 'a', status: 'ENROUTE' } }, 'a', 'sent'],
  ])('reads %j', (body, cmid, status) => {
    const { events } = parseDeliveryBody(JSON_TYPE, JSON.stringify(body));
    expect(events[0]).toMatchObject({ customerMessageId: cmid, status });
  });

  it('reads form bodies, arrays, and arrays under a usual key', () => {
    const form = parseDeliveryBody(
      'application/x-www-form-urlencoded',
      'msg_id=77&stat=DELIVRD&ts=1795300000',
    );
    expect(form.events[0]).toMatchObject({ providerMessageIds: ['77'], status: 'delivered' });
    expect(form.events[0]!.at).toEqual(new Date(1795300000 * 1000));
    const array = parseDeliveryBody(
      JSON_TYPE,
      JSON.stringify([
        { cmid: 'a', status: 'sent' },
        { cmid: 'b', status: 'read' },
      ]),
    );
    expect(array.events.map((e) => e.customerMessageId)).toEqual(['a', 'b']);
    const wrapped = parseDeliveryBody(
      JSON_TYPE,
      JSON.stringify({ results: [{ mid: 9, status: 'sent' }] }),
    );
    expect(wrapped.events[0]).toMatchObject({ providerMessageIds: ['9'], status: 'sent' });
  });

  it('keeps an unknown status verbatim, and a user table extends the vocabulary', () => {
    const body = JSON.stringify({ cmid: 'a', status: 'HANDSET_ACK' });
    expect(parseDeliveryBody(JSON_TYPE, body).events[0]).toMatchObject({ status: 'HANDSET_ACK' });
    const map = statusMapWith({ handset_ack: 'delivered' });
    expect(parseDeliveryBody(JSON_TYPE, body, map).events[0]).toMatchObject({
      status: 'delivered',
      rawStatus: 'HANDSET_ACK',
    });
    expect(DEFAULT_STATUS_MAP.handsetack).toBeUndefined();
  });

  it('reports what it cannot read instead of throwing', () => {
    expect(parseDeliveryBody(JSON_TYPE, '{not json').problems[0]).toMatch(/neither JSON/);
    expect(parseDeliveryBody(JSON_TYPE, '{"status":"sent"}').problems[0]).toMatch(/no message id/);
    expect(parseDeliveryBody(JSON_TYPE, '{"cmid":"a"}').problems[0]).toMatch(/no status/);
    expect(parseDeliveryBody(JSON_TYPE, '[1, "x"]').problems).toHaveLength(2);
  });

  it('never throws, whatever the body', () => {
    fc.assert(
      fc.property(
        fc.oneof(fc.string(), fc.json()),
        fc.constantFrom(JSON_TYPE, 'application/x-www-form-urlencoded', undefined),
        (body, type) => {
          const parsed = parseDeliveryBody(type, body);
          expect(Array.isArray(parsed.events)).toBe(true);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('reads event times as ISO 8601 or epoch seconds or milliseconds', () => {
    expect(parseEventTime('2026-11-21T10:00:00Z')).toEqual(new Date('2026-11-21T10:00:00Z'));
    expect(parseEventTime(1795300000)).toEqual(new Date(1795300000000));
    expect(parseEventTime(1795300000123)).toEqual(new Date(1795300000123));
    expect(parseEventTime('yesterday')).toBeUndefined();
  });

  it('ignores times no event can have: before the epoch, or past the year 9999', () => {
    // found by the fuzz test: Postgres refused the six-digit year, and the callback got a 500
    expect(parseEventTime(-1049114288926.6571)).toBeUndefined();
    expect(parseEventTime(1.1492248477474043e118)).toBeUndefined();
    expect(parseEventTime(0)).toEqual(new Date(0));
    expect(parseEventTime('9999-12-31T23:59:59Z')).toEqual(new Date('9999-12-31T23:59:59Z'));
  });
});

describe('storable', () => {
  it('gives a clean value back as it is, and rebuilds only what holds an unstorable character', () => {
    const clean = { a: 'x', b: [1, { c: 'y' }], d: new Date(0) };
    expect(storable(clean)).toBe(clean);
    const dirty = JSON.parse('{"a":"x","b":[1,{"c":"y\\u0000"}],"__proto__":{"e":"\\ud800"}}');
    const out = storable(dirty);
    expect(out).not.toBe(dirty);
    expect(out.a).toBe('x');
    expect(out.b[1]).toEqual({ c: 'y\uFFFD' });
    expect(Object.hasOwn(out, '__proto__')).toBe(true);
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(Object.getOwnPropertyDescriptor(out, '__proto__')?.value).toEqual({ e: '\uFFFD' });
    // the input is left as it was
    expect(dirty.b[1].c).toBe('y\u0000');
  });

  it('is linear in the depth of a nested body', () => {
    let deep: unknown = 'end\u0000';
    for (let i = 0; i < 2000; i++) deep = { k: deep };
    let out = storable(deep) as { k: unknown } | string;
    for (let i = 0; i < 2000; i++) out = (out as { k: unknown }).k as { k: unknown } | string;
    expect(out).toBe('end\uFFFD');
  });
});

describe("the provider's own shapes (docs/api/smsbat/status.md at bc0d114)", () => {
  it('reads the status webhook: deliverystatus, keyed by messageId alone', () => {
    // "Webhook Alternative"
    const { events, problems } = parseDeliveryBody(
      JSON_TYPE,
      JSON.stringify({
        messageId: 'abc123def456',
        deliverystatus: 'delivered',
        timestamp: '2025-01-23T10:30:00Z',
        cost: 0.05,
      }),
    );
    expect(problems).toEqual([]);
    expect(events).toEqual([
      {
        providerMessageIds: ['abc123def456'],
        status: 'delivered',
        rawStatus: 'delivered',
        at: new Date('2025-01-23T10:30:00Z'),
      },
    ]);
  });

  it.each([
    ['scheduled', 'accepted'],
    ['processing', 'sent'],
    ['delivered', 'delivered'],
    ['undeliverable', 'failed'],
    ['permanenterror', 'failed'],
  ])('maps %s to %s ("Delivery Status Values")', (word, status) => {
    expect(DEFAULT_STATUS_MAP[word]).toBe(status);
  });

  it("reads a record's extendedStatuses as per-channel events beside its own", () => {
    // "Extended Response (with Fallback)"
    const record = {
      messagelistId: 123456,
      messageId: 'abc123def456',
      deliverystatus: 'delivered',
      partscount: 1,
      cost: 0.05,
      fallbacks: [{ type: 'sms', status: 'not_used' }],
      extendedStatuses: { viber: 'delivered', sms: 'not_used' },
    };
    const { events } = parseStatusRecord(record, 'abc123def456');
    expect(events).toEqual([
      { providerMessageIds: ['abc123def456'], status: 'delivered', rawStatus: 'delivered' },
      {
        providerMessageIds: ['abc123def456'],
        status: 'delivered',
        rawStatus: 'delivered',
        channel: 'viber',
        perChannel: true,
      },
      {
        providerMessageIds: ['abc123def456'],
        status: 'not_used',
        rawStatus: 'not_used',
        channel: 'sms',
        perChannel: true,
      },
    ]);
    // without extendedStatuses, the fallbacks list says the same
    const { extendedStatuses: _, ...short } = record;
    expect(parseStatusRecord(short, 'abc123def456').events.map((e) => e.channel)).toEqual([
      undefined,
      'sms',
    ]);
  });

  it('reads a record that names no id as the record of the message asked about', () => {
    // "Scheduled": the docs' example carries no messageId
    const { events, problems } = parseStatusRecord(
      { deliverystatus: 'scheduled', partscount: 1 },
      'p-9',
    );
    expect(problems).toEqual([]);
    expect(events).toEqual([
      { providerMessageIds: ['p-9'], status: 'accepted', rawStatus: 'scheduled' },
    ]);
  });
});
