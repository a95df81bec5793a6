/** The stored payload read back as what was sent (`sent.ts`), without a database. */
import { describe, expect, it } from 'vitest';
import { removedOf, sentOf } from '../../src/messages/sent.ts';

const to = '+380501234567';

describe('sentOf', () => {
  it("gives a single wire `fallback` the message's from and to, as a list", () => {
    const stored = {
      customerMessageId: 'c1',
      type: 'viber_trans',
      from: 'Acme',
      to,
      text: 'Hi',
      fallback: { type: 'sms', text: 'Hi by SMS' },
    };
    expect(sentOf(stored, 'viber_trans')).toEqual({
      type: 'viber_trans',
      from: 'Acme',
      to,
      text: 'Hi',
      fallbacks: [{ type: 'sms', from: 'Acme', to, text: 'Hi by SMS' }],
    });
  });

  it('keeps a fallback its own sender and recipient', () => {
    const stored = {
      type: 'rcs',
      from: 'Acme',
      to,
      text: 'Hi',
      fallback: { type: 'sms', from: 'AcmeSMS', to: '+380501112233', text: 'x' },
    };
    expect(sentOf(stored, 'rcs')?.fallbacks).toEqual([
      { type: 'sms', from: 'AcmeSMS', to: '+380501112233', text: 'x' },
    ]);
  });

  it('names the first fields first, whatever order jsonb kept', () => {
    const stored = { to, ttl: 60, from: 'Acme', text: '1', type: 'flashcall', dtSend: 'x' };
    expect(Object.keys(sentOf(stored, 'flashcall')!)).toEqual([
      'type',
      'from',
      'to',
      'text',
      'ttl',
      'dtSend',
    ]);
  });

  it("leaves out a speechcall's menu and the customerMessageId", () => {
    const stored = {
      type: 'speechcall',
      from: 'Clinic',
      to,
      text: 'ivr',
      customerMessageId: 'c1',
      menu: [{ introUrl: 'https://example.com/a.mp3' }],
    };
    expect(sentOf(stored, 'speechcall')).toEqual({
      type: 'speechcall',
      from: 'Clinic',
      to,
      text: 'ivr',
    });
  });

  it("reads a cascade's endpoint names back as Switchboard's", () => {
    const stored = {
      type: 'cascade',
      id: 'c1',
      fromName: 'Acme',
      toPhone: to,
      scheduledSent: '2030-01-01T09:00:00Z',
      messageType: 'transaction',
      text: 'Hi',
      endpoint: 'batch',
    };
    expect(sentOf(stored, 'cascade')).toEqual({
      type: 'cascade',
      from: 'Acme',
      to,
      text: 'Hi',
      dtSend: '2030-01-01T09:00:00Z',
      messageType: 'transaction',
      endpoint: 'batch',
    });
  });

  it('is null once retention marked the payload, or for a payload that is no object', () => {
    expect(sentOf({ type: 'sms', from: 'Acme', to, redacted: 'retention' }, 'sms')).toBeNull();
    expect(sentOf(null, 'sms')).toBeNull();
    expect(sentOf([], 'sms')).toBeNull();
  });
});

describe('removedOf', () => {
  it('says retention and when; the time is null for texts removed before it was recorded', () => {
    const payload = { type: 'sms', redacted: 'retention' };
    const at = new Date('2030-01-02T03:04:05.000Z');
    expect(removedOf(payload, at)).toEqual({ reason: 'retention', at: '2030-01-02T03:04:05.000Z' });
    expect(removedOf(payload, null)).toEqual({ reason: 'retention', at: null });
    expect(removedOf({ type: 'sms', text: 'kept' }, null)).toBeUndefined();
  });
});
