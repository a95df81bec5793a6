import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_TTL_SECONDS,
  isE164,
  isSmsSender,
  MessagelistRequest,
  parseMessagelistResponse,
  parseMessagelistResponseWithSchemas,
  validateMessage,
  validateMessageWithSchemas,
} from '../../src/provider/message.ts';

const TO = '+380501234567';
const base = { from: 'Acme', to: TO };
const sms = { ...base, type: 'sms', text: 'Your code is 1234' };
const button = (n: number) => ({ label: `Go ${n}`, actionUrl: `https://shop.example.com/${n}` });
const carouselItem = (title: string) => ({
  title,
  imageUrl: 'https://cdn.example.com/p.jpg',
  primaryButton: button(1),
  secondaryButton: button(2),
});
const menu = [
  {
    introUrl: 'https://cdn.example.com/intro.mp3',
    dtmfActions: { d1: [{ action: 'hangup' }] },
  },
];

/** Valid examples of every type. */
const valid: Record<string, object> = {
  sms,
  viber_service: { ...base, type: 'viber_service', text: 'Order 42 shipped' },
  viber_service_attachment: {
    ...base,
    type: 'viber_service',
    messageData: { fileUrl: 'https://cdn.example.com/i.pdf', fileName: 'i.pdf', fileType: 'pdf' },
  },
  viber_promo_image: {
    ...base,
    type: 'viber_promo',
    messageData: { img: 'https://c.example/a.png' },
  },
  viber_promo_text_button: {
    ...base,
    type: 'viber_promo',
    text: 'Sale!',
    messageData: { buttonText: 'Shop', buttonAction: 'https://shop.example.com' },
  },
  viber_promo_all: {
    ...base,
    type: 'viber_promo',
    text: 'Sale!',
    messageData: {
      img: 'https://c.example/a.png',
      buttonText: 'Shop',
      buttonAction: 'https://shop.example.com',
    },
  },
  viber_promo_video: {
    ...base,
    type: 'viber_promo',
    text: 'Watch',
    messageData: {
      video: 'https://c.example/v.mp4',
      thumbnail: 'https://c.example/t.jpg',
      fileSize: 1000,
      duration: 30,
    },
  },
  viber_carousel: {
    ...base,
    type: 'viber_carousel',
    messageData: { carousel: { items: [carouselItem('Red'), carouselItem('Blue')] } },
  },
  viber_survey: {
    ...base,
    type: 'viber_survey',
    text: 'How was it?',
    messageData: { options: ['Good', 'Bad'] },
  },
  viber_otp: {
    ...base,
    type: 'viber_otp',
    messageData: {
      templateId: 'otp_1',
      templateLang: 'uk',
      templateParams: { pin: '1234', business_platform_name: 'Acme', code_validity_time: '5' },
    },
  },
  viber_session: { ...base, type: 'viber_session', text: 'Hello again' },
  flashcall: { ...base, type: 'flashcall', text: '1234' },
  flashcall_random: { ...base, type: 'flashcall' },
  flashcall_callback: { ...base, type: 'flashcall_callback' },
  speechcall: { ...base, type: 'speechcall', text: 'ivr', menu },
  with_fallbacks: {
    ...base,
    type: 'viber_service',
    text: 'Hi',
    fallbacks: [{ ...sms, from: '+380501234567' }],
  },
  scheduled: {
    ...sms,
    customerMessageId: 'c-1',
    dtSend: '2030-01-01T09:00:00+02:00',
    dtExpire: '2030-01-01T10:00:00Z',
  },
};

/** One broken rule each: [label, message, expected path, expected detail code, top code]. */
const invalid: Array<[string, object, string, string, string]> = [
  [
    'recipient not E.164 (spaces)',
    { ...sms, to: '+380 50 123 4567' },
    'to',
    'INVALID_RECIPIENT',
    'INVALID_RECIPIENT',
  ],
  [
    'recipient without +',
    { ...sms, to: '380501234567' },
    'to',
    'INVALID_RECIPIENT',
    'INVALID_RECIPIENT',
  ],
  [
    'recipient too short',
    { ...sms, to: '+3805012' },
    'to',
    'INVALID_RECIPIENT',
    'INVALID_RECIPIENT',
  ],
  ['recipient missing', { ...sms, to: undefined }, 'to', 'INVALID_RECIPIENT', 'INVALID_RECIPIENT'],
  [
    'sender of 12 letters',
    { ...sms, from: 'AcmeShopping' },
    'from',
    'INVALID_SENDER',
    'INVALID_SENDER',
  ],
  [
    'sender with a space',
    { ...sms, from: 'Acme Shop' },
    'from',
    'INVALID_SENDER',
    'INVALID_SENDER',
  ],
  ['sender with a dash', { ...sms, from: 'Acme-Shop' }, 'from', 'INVALID_SENDER', 'INVALID_SENDER'],
  ['sender with Cyrillic', { ...sms, from: 'Акме' }, 'from', 'INVALID_SENDER', 'INVALID_SENDER'],
  [
    'numeric sender not a phone',
    { ...sms, from: '123456789012' },
    'from',
    'INVALID_SENDER',
    'INVALID_SENDER',
  ],
  [
    'empty viber sender',
    { ...valid.viber_session, from: ' ' },
    'from',
    'INVALID_SENDER',
    'INVALID_SENDER',
  ],
  ['sms without text', { ...sms, text: undefined }, 'text', 'invalid_type', 'INVALID_MESSAGE'],
  ['sms with empty text', { ...sms, text: '' }, 'text', 'TOO_SHORT', 'INVALID_MESSAGE'],
  ['lone surrogate', { ...sms, text: 'x\uD83D' }, 'text', 'INVALID_ENCODING', 'INVALID_ENCODING'],
  [
    'sms too long',
    { ...sms, text: 'a'.repeat(153 * 10 + 1) },
    'text',
    'MESSAGE_TOO_LONG',
    'MESSAGE_TOO_LONG',
  ],
  ['unknown type', { ...sms, type: 'mms' }, 'type', 'invalid_union', 'INVALID_MESSAGE'],
  ['rcs is not modelled', { ...sms, type: 'rcs' }, 'type', 'invalid_union', 'INVALID_MESSAGE'],
  ['unknown field', { ...sms, recipient: TO }, 'recipient', 'unrecognized_key', 'INVALID_MESSAGE'],
  ['dtSend not ISO', { ...sms, dtSend: 'tomorrow' }, 'dtSend', 'invalid_format', 'INVALID_MESSAGE'],
  [
    'dtSend without a zone',
    { ...sms, dtSend: '2030-01-01T09:00:00' },
    'dtSend',
    'invalid_format',
    'INVALID_MESSAGE',
  ],
  [
    'dtExpire before dtSend',
    { ...sms, dtSend: '2030-01-02T00:00:00Z', dtExpire: '2030-01-01T00:00:00Z' },
    'dtExpire',
    'EXPIRE_BEFORE_SEND',
    'INVALID_MESSAGE',
  ],
  [
    'dtExpire equal to dtSend',
    { ...sms, dtSend: '2030-01-01T00:00:00Z', dtExpire: '2030-01-01T02:00:00+02:00' },
    'dtExpire',
    'EXPIRE_BEFORE_SEND',
    'INVALID_MESSAGE',
  ],
  ['ttl zero', { ...sms, ttl: 0 }, 'ttl', 'too_small', 'INVALID_MESSAGE'],
  ['ttl fractional', { ...sms, ttl: 1.5 }, 'ttl', 'invalid_type', 'INVALID_MESSAGE'],
  [
    'messageData on sms',
    { ...sms, messageData: {} },
    'messageData',
    'unrecognized_key',
    'INVALID_MESSAGE',
  ],
  ['menu on sms', { ...sms, menu }, 'menu', 'unrecognized_key', 'INVALID_MESSAGE'],
  [
    'carousel of 1',
    { ...valid.viber_carousel, messageData: { carousel: { items: [carouselItem('Red')] } } },
    'messageData.carousel.items',
    'too_small',
    'INVALID_MESSAGE',
  ],
  [
    'carousel of 6',
    {
      ...valid.viber_carousel,
      messageData: { carousel: { items: Array(6).fill(carouselItem('Red')) } },
    },
    'messageData.carousel.items',
    'too_big',
    'INVALID_MESSAGE',
  ],
  [
    'carousel title of 1',
    {
      ...valid.viber_carousel,
      messageData: { carousel: { items: [carouselItem('Red'), carouselItem('B')] } },
    },
    'messageData.carousel.items[1].title',
    'TOO_SHORT',
    'INVALID_MESSAGE',
  ],
  [
    'carousel title of 39',
    {
      ...valid.viber_carousel,
      messageData: { carousel: { items: [carouselItem('x'.repeat(39)), carouselItem('Red')] } },
    },
    'messageData.carousel.items[0].title',
    'TOO_LONG',
    'INVALID_MESSAGE',
  ],
  [
    'carousel gif',
    {
      ...valid.viber_carousel,
      messageData: {
        carousel: {
          items: [
            carouselItem('Red'),
            { ...carouselItem('Blue'), imageUrl: 'https://c.example/p.gif' },
          ],
        },
      },
    },
    'messageData.carousel.items[1].imageUrl',
    'INVALID_IMAGE',
    'INVALID_MESSAGE',
  ],
  [
    'carousel button without url',
    {
      ...valid.viber_carousel,
      messageData: {
        carousel: {
          items: [
            carouselItem('Red'),
            { ...carouselItem('Blue'), secondaryButton: { label: 'x' } },
          ],
        },
      },
    },
    'messageData.carousel.items[1].secondaryButton.actionUrl',
    'invalid_type',
    'INVALID_MESSAGE',
  ],
  [
    'carousel without messageData',
    { ...base, type: 'viber_carousel' },
    'messageData',
    'invalid_type',
    'INVALID_MESSAGE',
  ],
  [
    'survey title of 86',
    { ...valid.viber_survey, text: 'q'.repeat(86) },
    'text',
    'TOO_LONG',
    'INVALID_MESSAGE',
  ],
  [
    'survey without title',
    { ...valid.viber_survey, text: undefined },
    'text',
    'invalid_type',
    'INVALID_MESSAGE',
  ],
  [
    'survey of 1 option',
    { ...valid.viber_survey, messageData: { options: ['a'] } },
    'messageData.options',
    'too_small',
    'INVALID_MESSAGE',
  ],
  [
    'survey of 6 options',
    { ...valid.viber_survey, messageData: { options: ['a', 'b', 'c', 'd', 'e', 'f'] } },
    'messageData.options',
    'too_big',
    'INVALID_MESSAGE',
  ],
  [
    'survey option of 51',
    { ...valid.viber_survey, messageData: { options: ['a', 'o'.repeat(51)] } },
    'messageData.options[1]',
    'TOO_LONG',
    'INVALID_MESSAGE',
  ],
  [
    'otp PIN upper case',
    {
      ...valid.viber_otp,
      messageData: { templateId: 't', templateLang: 'en', templateParams: { PIN: '1' } },
    },
    'messageData.templateParams.PIN',
    'UNKNOWN_TEMPLATE_PARAM',
    'INVALID_MESSAGE',
  ],
  [
    'otp unknown language',
    {
      ...valid.viber_otp,
      messageData: { templateId: 't', templateLang: 'english', templateParams: { pin: '1' } },
    },
    'messageData.templateLang',
    'INVALID_LANGUAGE',
    'INVALID_MESSAGE',
  ],
  [
    'otp without templateId',
    { ...valid.viber_otp, messageData: { templateLang: 'en', templateParams: { pin: '1' } } },
    'messageData.templateId',
    'invalid_type',
    'INVALID_MESSAGE',
  ],
  [
    'flashcall letters',
    { ...valid.flashcall, text: '12a4' },
    'text',
    'invalid_format',
    'INVALID_MESSAGE',
  ],
  [
    'speechcall without menu',
    { ...base, type: 'speechcall' },
    'menu',
    'invalid_type',
    'INVALID_MESSAGE',
  ],
  [
    'speechcall bad key',
    { ...valid.speechcall, menu: [{ ...menu[0], dtmfActions: { d10: [{ action: 'hangup' }] } }] },
    'menu[0].dtmfActions.d10',
    'unrecognized_key',
    'INVALID_MESSAGE',
  ],
  [
    'speechcall goto nowhere',
    {
      ...valid.speechcall,
      menu: [{ ...menu[0], dtmfActions: { d1: [{ action: 'gotoMenu', menu: '1' }] } }],
    },
    'menu[0].dtmfActions.d1[0].menu',
    'UNKNOWN_MENU',
    'INVALID_MESSAGE',
  ],
  [
    'promo image and text without button',
    { ...valid.viber_promo_all, messageData: { img: 'https://c.example/a.png' } },
    'messageData.buttonText',
    'INVALID_PROMO',
    'INVALID_MESSAGE',
  ],
  [
    'promo button without text',
    { ...valid.viber_promo_text_button, text: undefined },
    'text',
    'INVALID_PROMO',
    'INVALID_MESSAGE',
  ],
  [
    'promo half a button',
    { ...valid.viber_promo_text_button, messageData: { buttonText: 'Shop' } },
    'messageData.buttonAction',
    'INVALID_PROMO',
    'INVALID_MESSAGE',
  ],
  [
    'promo video missing duration',
    {
      ...valid.viber_promo_video,
      messageData: {
        video: 'https://c.example/v.mp4',
        thumbnail: 'https://c.example/t.jpg',
        fileSize: 1,
      },
    },
    'messageData.duration',
    'INVALID_PROMO',
    'INVALID_MESSAGE',
  ],
  ['promo empty', { ...base, type: 'viber_promo' }, 'text', 'TEXT_REQUIRED', 'INVALID_MESSAGE'],
  ['service empty', { ...base, type: 'viber_service' }, 'text', 'TEXT_REQUIRED', 'INVALID_MESSAGE'],
  [
    'fallback with a bad recipient',
    { ...valid.with_fallbacks, fallbacks: [{ ...sms, to: '12' }] },
    'fallbacks[0].to',
    'INVALID_RECIPIENT',
    'INVALID_RECIPIENT',
  ],
  [
    'fallback too long',
    { ...valid.with_fallbacks, fallbacks: [{ ...sms, text: 'щ'.repeat(671) }] },
    'fallbacks[0].text',
    'MESSAGE_TOO_LONG',
    'MESSAGE_TOO_LONG',
  ],
  [
    'nested fallbacks',
    { ...valid.with_fallbacks, fallbacks: [{ ...sms, fallbacks: [sms] }] },
    'fallbacks[0].fallbacks',
    'invalid_type',
    'INVALID_MESSAGE',
  ],
  [
    'empty fallbacks',
    { ...valid.with_fallbacks, fallbacks: [] },
    'fallbacks',
    'too_small',
    'INVALID_MESSAGE',
  ],
];

describe('validateMessage', () => {
  it('answers as the schemas do, for messages near and far from a plain SMS', () => {
    // the hand-checked SMS path must accept only what the schemas accept, with the same
    // output: a plain SMS, valid or at a rule's edge, then maybe one field changed or added
    const odd = fc.oneof(
      fc.anything(),
      fc.constantFrom(undefined, null, '', 0, -1, 1.5, 2 ** 53, '5', Number.NaN),
    );
    const phone = fc.constantFrom(
      '+380501234567',
      '+380 50 123 4567',
      '380501234567',
      '+38050123456',
      '+1',
      '+447911123456',
    );
    const sender = fc.oneof(
      phone,
      fc.constantFrom('Acme', 'Acme Shop', 'ABCDEFGHIJK', 'ABCDEFGHIJKL'),
    );
    const text = fc.oneof(
      fc.string({ unit: 'binary', maxLength: 40 }),
      fc.constantFrom('', 'a', '\uD800', 'a\uDC00b', '😀', '€'.repeat(900), 'x'.repeat(1600)),
    );
    const cmid = fc.oneof(
      fc.string({ maxLength: 5 }),
      fc.constantFrom('', 'c'.repeat(256), 'c'.repeat(257)),
    );
    const ttl = fc.oneof(fc.integer({ min: -2, max: 100_000 }), fc.constantFrom(0, 1.5, 2 ** 53));
    const base = fc.record(
      {
        from: sender,
        to: phone,
        type: fc.constant('sms'),
        text,
        customerMessageId: cmid,
        ttl,
      },
      { requiredKeys: ['from', 'to', 'type', 'text'] },
    );
    const change = fc.tuple(
      fc.constantFrom(
        'from',
        'to',
        'type',
        'text',
        'customerMessageId',
        'ttl',
        'dtSend',
        'dtExpire',
        'messageData',
        'fallbacks',
        'extra',
      ),
      fc.oneof(
        odd,
        sender,
        text,
        cmid,
        ttl,
        fc.constantFrom('viber_service', '2030-01-01T00:00:00Z'),
      ),
    );
    const message = fc
      .tuple(base, fc.option(change, { nil: undefined }))
      .map(([m, c]) => (c ? { ...m, [c[0]]: c[1] } : m));
    fc.assert(
      fc.property(message, fc.boolean(), (m, inherited) => {
        const input = inherited ? Object.assign(Object.create({ inherited: 1 }), m) : m;
        const opts = { now: new Date('2029-06-01T00:00:00Z') };
        const got = validateMessage(input, opts);
        const want = validateMessageWithSchemas(input, opts);
        expect(got).toEqual(want);
        // the same fields in the same order, as they are stored and sent
        expect(JSON.stringify(got)).toBe(JSON.stringify(want));
      }),
      { numRuns: 3000 },
    );
  });

  it.each(Object.entries(valid))('accepts %s', (_label, input) => {
    const r = validateMessage(input);
    expect(r.ok ? [] : r.error.details).toEqual([]);
  });

  it.each(invalid)('refuses: %s', (_label, input, path, code, top) => {
    const r = validateMessage(input);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.error.details).toContainEqual(expect.objectContaining({ path, code }));
    expect(r.error.code).toBe(top);
    expect(r.error.message.length).toBeGreaterThan(0);
  });

  it('normalises viber_trans to viber_service, with its default TTL', () => {
    const r = validateMessage({ ...base, type: 'viber_trans', text: 'Hi' });
    expect(r.ok && r.message).toMatchObject({ type: 'viber_service', ttl: 345_600 });
  });

  it('applies the default TTLs of seed 2.3 only when neither dtExpire nor ttl is given', () => {
    expect(DEFAULT_TTL_SECONDS).toEqual({
      sms: 86400,
      viber_service: 345600,
      viber_promo: 604800,
      viber_session: 604800,
    });
    const ttl = (m: object) => {
      const r = validateMessage(m);
      if (!r.ok) throw new Error(r.error.message);
      return r.message.ttl;
    };
    expect(ttl(sms)).toBe(86400);
    expect(ttl(valid.viber_promo_image as object)).toBe(604800);
    expect(ttl(valid.viber_session as object)).toBe(604800);
    expect(ttl({ ...sms, ttl: 60 })).toBe(60);
    expect(ttl({ ...sms, dtExpire: '2099-01-01T00:00:00Z' })).toBeUndefined();
    expect(ttl(valid.flashcall as object)).toBeUndefined(); // no default stated for flashcall
    const r = validateMessage(valid.with_fallbacks);
    expect(r.ok && r.message.fallbacks?.[0]?.ttl).toBe(86400);
  });

  it('returns parts and encoding for sms only', () => {
    const r = validateMessage({ ...sms, text: 'щ'.repeat(71) });
    expect(r).toMatchObject({ ok: true, parts: 2, encoding: 'UCS2' });
    const v = validateMessage(valid.viber_session);
    expect(v.ok && 'parts' in v).toBe(false);
  });

  it('honours maxSmsParts', () => {
    const text = 'a'.repeat(307); // 3 parts
    expect(validateMessage({ ...sms, text }, { maxSmsParts: 3 }).ok).toBe(true);
    const r = validateMessage({ ...sms, text }, { maxSmsParts: 2 });
    expect(!r.ok && r.error.code).toBe('MESSAGE_TOO_LONG');
  });

  it('refuses a dtExpire already past relative to now', () => {
    const m = { ...sms, dtExpire: '2025-01-01T00:00:00Z' };
    expect(validateMessage(m, { now: new Date('2024-12-31T00:00:00Z') }).ok).toBe(true);
    const r = validateMessage(m, { now: new Date('2025-01-02T00:00:00Z') });
    expect(!r.ok && r.error.details[0]).toMatchObject({ path: 'dtExpire', code: 'EXPIRED' });
  });

  it('reports a bad recipient next to an unknown type, and refuses non-objects', () => {
    const r = validateMessage({ ...sms, type: 'mms', to: '0501234567' });
    expect(!r.ok && r.error.details.map((d) => d.path)).toEqual(['type', 'to']);
    for (const x of [null, 'sms', [sms], 42]) {
      const n = validateMessage(x);
      expect(!n.ok && n.error.details[0]?.path).toBe('');
    }
  });

  it('suggests the E.164 spelling of a valid but badly written number', () => {
    const r = validateMessage({ ...sms, to: '+380 (50) 123-45-67' });
    expect(!r.ok && r.error.message).toContain('+380501234567');
  });

  it('reports every problem of a message at once', () => {
    const r = validateMessage({ from: 'Acme Shop', to: '123', type: 'sms', ttl: -1 });
    expect(!r.ok && r.error.details.map((d) => d.path).sort()).toEqual([
      'from',
      'text',
      'to',
      'ttl',
    ]);
  });
});

describe('field rules', () => {
  it('isE164 uses number metadata, not a pattern', () => {
    expect(isE164('+380501234567')).toBe(true);
    expect(isE164('+447911123456')).toBe(true);
    expect(isE164('+12025550143')).toBe(true);
    // shaped like E.164 but not a valid number
    expect(isE164('+15555550100')).toBe(false);
    expect(isE164('+999123456789')).toBe(false);
  });

  it('isSmsSender: 11 letters/digits or a phone number', () => {
    expect(isSmsSender('A'.repeat(11))).toBe(true);
    expect(isSmsSender('A'.repeat(12))).toBe(false);
    expect(isSmsSender('380501234567')).toBe(true);
    expect(isSmsSender('+380501234567')).toBe(true);
    expect(isSmsSender('')).toBe(false);
    fc.assert(
      fc.property(fc.stringMatching(/^[A-Za-z0-9]{1,11}$/), (s) => {
        expect(isSmsSender(s)).toBe(true);
      }),
    );
    fc.assert(
      fc.property(fc.stringMatching(/^[A-Za-z]{0,5}[ !@#_.-][A-Za-z]{0,5}$/), (s) => {
        expect(isSmsSender(s)).toBe(false);
      }),
    );
  });
});

describe('messagelist', () => {
  it('MessagelistRequest takes 1 to 5000 messages', () => {
    expect(MessagelistRequest.safeParse({ messages: [] }).success).toBe(false);
    expect(MessagelistRequest.safeParse({ messages: Array(5000).fill(sms) }).success).toBe(true);
    const over = MessagelistRequest.safeParse({ messages: Array(5001).fill(sms) });
    expect(over.success).toBe(false);
    expect(over.error?.issues[0]?.message).toContain('5000');
  });

  it('parses the SMS form of 2.6', () => {
    const r = parseMessagelistResponse({
      messagelistId: 77,
      messages: [
        { messageId: 'm1', status: 'accepted', parts: 2, customerMessageId: 'c1', to: TO },
        { status: 'rejected', customerMessageId: 'c2', to: '+1', error: 'INVALID_RECIPIENT' },
      ],
    });
    expect(r).toEqual({
      shape: 'sms',
      messagelistId: 77,
      messages: [
        {
          messageId: 'm1',
          status: 'accepted',
          accepted: true,
          parts: 2,
          customerMessageId: 'c1',
          to: TO,
        },
        {
          status: 'rejected',
          accepted: false,
          customerMessageId: 'c2',
          to: '+1',
          error: { code: 'INVALID_RECIPIENT', message: 'INVALID_RECIPIENT' },
        },
      ],
    });
  });

  it('parses the generic form of 2.6, recipient becoming to', () => {
    const r = parseMessagelistResponse({
      messages: [{ messageId: 123, status: 'sent', recipient: TO, text: '4821' }],
    });
    expect(r).toEqual({
      shape: 'generic',
      messages: [{ messageId: '123', status: 'sent', accepted: true, to: TO, text: '4821' }],
    });
  });

  it('returns undefined for anything else', () => {
    for (const body of [null, {}, { messages: 'x' }, { messages: [{ messageId: 'm' }] }, 'ok']) {
      expect(parseMessagelistResponse(body)).toBeUndefined();
    }
  });

  it('answers as the schemas do, for bodies near and far from the SMS form', () => {
    // each field either well typed or anything at all, so the hand-written checks of the
    // common form meet every near miss
    const odd = fc.oneof(
      fc.anything(),
      fc.constantFrom(Number.NaN, Number.POSITIVE_INFINITY, -0, 2 ** 53, 1.5, -1, '12', null),
    );
    const field = <T>(good: fc.Arbitrary<T>) =>
      fc.option(fc.oneof({ weight: 4, arbitrary: good }, { weight: 1, arbitrary: odd }), {
        nil: undefined,
      });
    const item = fc.oneof(
      {
        weight: 8,
        arbitrary: fc.record(
          {
            messageId: field(fc.oneof(fc.uuid(), fc.integer())),
            status: fc.oneof(
              { weight: 6, arbitrary: fc.constantFrom('accepted', 'rejected') },
              { weight: 1, arbitrary: fc.oneof(fc.constantFrom('sent', 'failed'), odd) },
            ),
            parts: field(fc.nat(20)),
            customerMessageId: field(fc.string()),
            to: field(fc.string()),
            text: field(fc.string()),
            error: field(
              fc.oneof(fc.string(), fc.record({ code: fc.string(), message: fc.string() })),
            ),
            existingMessageId: field(fc.oneof(fc.uuid(), fc.integer())),
            extra: field(fc.string()),
          },
          { requiredKeys: ['status'] },
        ),
      },
      { weight: 1, arbitrary: odd },
    );
    const body = fc.oneof(
      {
        weight: 8,
        arbitrary: fc.record(
          {
            messagelistId: fc.oneof(
              { weight: 4, arbitrary: fc.integer() },
              { weight: 1, arbitrary: odd },
            ),
            messages: fc.oneof(
              { weight: 8, arbitrary: fc.array(item, { maxLength: 6 }) },
              { weight: 1, arbitrary: odd },
            ),
          },
          { requiredKeys: [] },
        ),
      },
      { weight: 1, arbitrary: odd },
    );
    fc.assert(
      fc.property(body, (b) => {
        expect(parseMessagelistResponse(b)).toEqual(parseMessagelistResponseWithSchemas(b));
      }),
      { numRuns: 2000 },
    );
  });
});
