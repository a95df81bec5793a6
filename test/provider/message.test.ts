import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_TTL_SECONDS,
  isE164,
  isSmsSender,
  MessagelistRequest,
  parseMessagelistResponse,
  parseMessagelistResponseWithSchemas,
  toWireMessage,
  type ViberCarouselData,
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

const rcsButton = { text: 'Track', action: { type: 'openUrl', url: 'https://t.example.com/1' } };

/** Valid examples of every type, in each documented form. */
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
  // the docs' forms (docs/api/smsbat/*.md at bc0d114; each example is also a fixture in
  // test/provider/docs/, checked there against its expected canonical form)
  numeric_sender: { ...sms, from: '+380123456789' }, // sms.md, "Numeric Sender"
  with_fallback: {
    ...base,
    type: 'viber_promo',
    text: 'Your Viber message',
    messageData: { img: 'https://example.com/image.jpg' },
    fallback: { type: 'sms', text: 'Your SMS fallback message (image not included)' },
  }, // viber.md, "Fallback to SMS"
  viber_promo_docs_button: {
    ...base,
    type: 'viber_promo',
    text: 'Check out our new product!',
    messageData: {
      image: 'https://example.com/image.jpg',
      button: { text: 'View Product', url: 'https://example.com/product' },
    },
  }, // send-message.md, "Viber Promo"
  viber_promo_video_only: {
    ...base,
    type: 'viber_promo',
    messageData: { video: 'https://c.example/v.mp4' },
  },
  viber_carousel_docs_buttons: {
    ...base,
    type: 'viber_carousel',
    messageData: {
      carousel: {
        items: ['A', 'B'].map((p) => ({
          title: `Product ${p}`,
          imageUrl: `https://example.com/product-${p}.jpg`,
          primaryButton: { text: 'Buy Now', url: `https://example.com/${p}` },
          secondaryButton: { text: 'Details', url: `https://example.com/${p}/details` },
        })),
      },
    },
  }, // viber.md, "Viber Carousel"
  viber_survey_docs: {
    ...base,
    type: 'viber_survey',
    text: 'How satisfied are you with our service?',
    messageData: { survey: { options: ['Very Satisfied', 'Satisfied'] } },
  }, // viber.md, "Viber Survey"
  viber_survey_one_option: {
    ...base,
    type: 'viber_survey',
    text: 'Agree?',
    messageData: { survey: { options: ['Yes'] } },
  },
  viber_otp_template: {
    ...base,
    type: 'viber_otp',
    messageData: {
      templateId: 'a1b2c3d4-e5f6-7890-abcd-ef1234567890',
      templateLang: 'en',
      templateParams: { PIN: '123456', TIME: '10' },
    },
    ttl: 600,
  }, // viber.md, "Viber OTP"
  viber_otp_code: { ...base, type: 'viber_otp', messageData: { code: '123456', validity: 300 } }, // send-message.md
  rcs_text: { ...base, type: 'rcs', text: 'Welcome to our service!' },
  rcs_media: {
    ...base,
    type: 'rcs',
    text: 'Check out our new product!',
    messageData: {
      media: {
        url: 'https://example.com/product.jpg',
        type: 'image/jpeg',
        height: 600,
        width: 800,
      },
    },
  }, // rcs.md, "Text + Image"
  rcs_buttons: {
    ...base,
    type: 'rcs',
    text: 'Your order #12345 is ready for pickup',
    messageData: {
      buttons: [
        rcsButton,
        { text: 'Contact Support', action: { type: 'dial', phoneNumber: '+380501234567' } },
        { text: 'Share Location', action: { type: 'shareLocation' } },
        {
          text: 'Add to Calendar',
          action: {
            type: 'createCalendarEvent',
            title: 'Appointment',
            startTime: '2025-01-25T14:00:00Z',
            endTime: '2025-01-25T15:00:00Z',
          },
        },
      ],
    },
  }, // rcs.md, "Button Actions"
  rcs_carousel: {
    ...base,
    type: 'rcs',
    text: 'Featured Products',
    messageData: {
      carousel: {
        cards: [
          {
            title: 'Product A',
            description: 'Premium quality product',
            media: { url: 'https://example.com/product-a.jpg', type: 'image/jpeg' },
            buttons: [rcsButton],
          },
        ],
      },
    },
  }, // rcs.md, "RCS Carousel"
  flashcall_caller_id: {
    ...base,
    type: 'flashcall',
    messageData: { callerId: '+380123456789' },
    ttl: 60,
  }, // flashcall.md, "Basic Flash Call"
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
  ['sms without text', { ...sms, text: undefined }, 'text', 'REQUIRED', 'INVALID_MESSAGE'],
  ['sms with empty text', { ...sms, text: '' }, 'text', 'TOO_SHORT', 'INVALID_MESSAGE'],
  ['lone surrogate', { ...sms, text: 'x\uD83D' }, 'text', 'INVALID_ENCODING', 'INVALID_ENCODING'],
  [
    'sms too long',
    { ...sms, text: 'a'.repeat(153 * 10 + 1) },
    'text',
    'MESSAGE_TOO_LONG',
    'MESSAGE_TOO_LONG',
  ],
  ['unknown type', { ...sms, type: 'mms' }, 'type', 'INVALID_VALUE', 'INVALID_MESSAGE'],
  // rcs.md, "Parameters": text is required, up to 3072 characters
  ['rcs without text', { ...base, type: 'rcs' }, 'text', 'REQUIRED', 'INVALID_MESSAGE'],
  [
    'rcs text of 3073',
    { ...base, type: 'rcs', text: 'r'.repeat(3073) },
    'text',
    'TOO_LONG',
    'INVALID_MESSAGE',
  ],
  [
    'rcs with 5 buttons',
    { ...valid.rcs_buttons, messageData: { buttons: Array(5).fill(rcsButton) } },
    'messageData.buttons',
    'TOO_BIG',
    'INVALID_MESSAGE',
  ],
  [
    'rcs media of an unknown type',
    {
      ...valid.rcs_media,
      messageData: { media: { url: 'https://c.example/a.bmp', type: 'image/bmp' } },
    },
    'messageData.media.type',
    'INVALID_MEDIA_TYPE',
    'INVALID_MESSAGE',
  ],
  [
    'rcs button with an unknown action',
    {
      ...valid.rcs_buttons,
      messageData: { buttons: [{ text: 'Go', action: { type: 'teleport' } }] },
    },
    'messageData.buttons[0].action.type',
    'INVALID_VALUE',
    'INVALID_MESSAGE',
  ],
  [
    'flashcall caller id not a number',
    { ...base, type: 'flashcall', messageData: { callerId: 'Acme' } },
    'messageData.callerId',
    'INVALID_PHONE',
    'INVALID_MESSAGE',
  ],
  [
    'fallback and fallbacks together',
    { ...valid.with_fallback, fallbacks: [sms] },
    'fallback',
    'INVALID_FALLBACK',
    'INVALID_MESSAGE',
  ],
  [
    'sms fallback inheriting a sender SMS cannot use',
    {
      ...base,
      from: 'Acme Shop',
      type: 'viber_trans',
      text: 'Hi',
      fallback: { type: 'sms', text: 'Hi' },
    },
    'fallback.from',
    'INVALID_SENDER',
    'INVALID_SENDER',
  ],
  ['unknown field', { ...sms, recipient: TO }, 'recipient', 'UNKNOWN_FIELD', 'INVALID_MESSAGE'],
  ['dtSend not ISO', { ...sms, dtSend: 'tomorrow' }, 'dtSend', 'INVALID_FORMAT', 'INVALID_MESSAGE'],
  [
    'dtSend without a zone',
    { ...sms, dtSend: '2030-01-01T09:00:00' },
    'dtSend',
    'INVALID_FORMAT',
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
  ['ttl zero', { ...sms, ttl: 0 }, 'ttl', 'TOO_SMALL', 'INVALID_MESSAGE'],
  ['ttl fractional', { ...sms, ttl: 1.5 }, 'ttl', 'INVALID_TYPE', 'INVALID_MESSAGE'],
  [
    'messageData on sms',
    { ...sms, messageData: {} },
    'messageData',
    'UNKNOWN_FIELD',
    'INVALID_MESSAGE',
  ],
  ['menu on sms', { ...sms, menu }, 'menu', 'UNKNOWN_FIELD', 'INVALID_MESSAGE'],
  [
    'carousel of 1',
    { ...valid.viber_carousel, messageData: { carousel: { items: [carouselItem('Red')] } } },
    'messageData.carousel.items',
    'TOO_SMALL',
    'INVALID_MESSAGE',
  ],
  [
    'carousel of 6',
    {
      ...valid.viber_carousel,
      messageData: { carousel: { items: Array(6).fill(carouselItem('Red')) } },
    },
    'messageData.carousel.items',
    'TOO_BIG',
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
    'REQUIRED',
    'INVALID_MESSAGE',
  ],
  [
    'carousel without messageData',
    { ...base, type: 'viber_carousel' },
    'messageData',
    'REQUIRED',
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
    'REQUIRED',
    'INVALID_MESSAGE',
  ],
  [
    // viber.md allows 1 to 5 options (the condensed interface 2 to 5): the wider is taken
    'survey of no options',
    { ...valid.viber_survey, messageData: { options: [] } },
    'messageData.options',
    'TOO_SMALL',
    'INVALID_MESSAGE',
  ],
  [
    'survey of 6 options',
    { ...valid.viber_survey, messageData: { options: ['a', 'b', 'c', 'd', 'e', 'f'] } },
    'messageData.options',
    'TOO_BIG',
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
    // the template names its parameters (viber.md: PIN, TIME), so no key is refused; a
    // template and a code together are
    'otp template and code',
    {
      ...valid.viber_otp,
      messageData: { templateId: 't', templateLang: 'en', templateParams: { PIN: '1' }, code: '1' },
    },
    'messageData.code',
    'INVALID_OTP',
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
    'REQUIRED',
    'INVALID_MESSAGE',
  ],
  [
    'flashcall letters',
    { ...valid.flashcall, text: '12a4' },
    'text',
    'INVALID_FORMAT',
    'INVALID_MESSAGE',
  ],
  [
    'speechcall without menu',
    { ...base, type: 'speechcall' },
    'menu',
    'INVALID_TYPE',
    'INVALID_MESSAGE',
  ],
  [
    'speechcall bad key',
    { ...valid.speechcall, menu: [{ ...menu[0], dtmfActions: { d10: [{ action: 'hangup' }] } }] },
    'menu[0].dtmfActions.d10',
    'UNKNOWN_FIELD',
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
    // an image with text and no button is shown by viber.md's own fallback example, so it is
    // taken; a video's thumbnail without the video is not
    'promo thumbnail without a video',
    { ...valid.viber_promo_all, messageData: { thumbnail: 'https://c.example/t.jpg' } },
    'messageData.thumbnail',
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
    // viber.md marks thumbnail, fileSize and duration optional: a video alone is taken; the
    // same image twice (img and send-message.md's image) is not
    'promo image given twice',
    {
      ...valid.viber_promo_all,
      messageData: { img: 'https://c.example/a.png', image: 'https://c.example/a.png' },
    },
    'messageData.image',
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
    'INVALID_TYPE',
    'INVALID_MESSAGE',
  ],
  [
    'empty fallbacks',
    { ...valid.with_fallbacks, fallbacks: [] },
    'fallbacks',
    'TOO_SMALL',
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

  it('normalises viber_service to viber_trans (send-message.md), with its default TTL', () => {
    const r = validateMessage({ ...base, type: 'viber_service', text: 'Hi' });
    expect(r.ok && r.message).toMatchObject({ type: 'viber_trans', ttl: 345_600 });
  });

  it('applies the default TTLs of seed 2.3 only when neither dtExpire nor ttl is given', () => {
    expect(DEFAULT_TTL_SECONDS).toEqual({
      sms: 86400,
      viber_trans: 345600,
      viber_promo: 604800,
      viber_session: 604800,
      flashcall: 60, // flashcall.md, "Parameters": ttl default 60
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
    expect(ttl(valid.flashcall as object)).toBe(60);
    expect(ttl(valid.speechcall as object)).toBeUndefined(); // no default stated for speechcall
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

describe('documented forms, read into one canonical form', () => {
  const canonical = (m: object | undefined) => {
    const r = validateMessage(m);
    if (!r.ok) throw new Error(r.error.message);
    return r.message;
  };

  it('reads a single fallback as a list, from and to taken from the message', () => {
    expect(canonical(valid.with_fallback)).toMatchObject({
      fallbacks: [{ from: 'Acme', to: TO, type: 'sms', ttl: 86400 }],
    });
    expect('fallback' in canonical(valid.with_fallback)).toBe(false);
  });

  it('reads the promo image and button of send-message.md as img, buttonText, buttonAction', () => {
    expect(canonical(valid.viber_promo_docs_button)).toMatchObject({
      messageData: {
        img: 'https://example.com/image.jpg',
        buttonText: 'View Product',
        buttonAction: 'https://example.com/product',
      },
    });
  });

  it('writes carousel buttons as {text, url} and survey options under survey', () => {
    const carousel = canonical(valid.viber_carousel) as { messageData: ViberCarouselData };
    expect(carousel.messageData.carousel.items[0]?.primaryButton).toEqual({
      text: 'Go 1',
      url: 'https://shop.example.com/1',
    });
    expect(canonical(valid.viber_survey)).toMatchObject({
      messageData: { survey: { options: ['Good', 'Bad'] } },
    });
    expect(canonical(valid.viber_survey_docs)).toMatchObject({
      messageData: { survey: { options: ['Very Satisfied', 'Satisfied'] } },
    });
  });

  it('keeps an OTP template with its own parameter names, and a code with its validity', () => {
    expect(canonical(valid.viber_otp_template)).toMatchObject({
      messageData: { templateParams: { PIN: '123456', TIME: '10' } },
    });
    expect(canonical(valid.viber_otp_code)).toMatchObject({
      messageData: { code: '123456', validity: 300 },
    });
  });

  it('takes a numeric sender by its shape', () => {
    expect(canonical(valid.numeric_sender)).toMatchObject({ from: '+380123456789' });
  });
});

describe('toWireMessage', () => {
  it('sends one fallback as the docs do, with only what differs from the message', () => {
    const m = validateMessage(valid.with_fallback);
    if (!m.ok) throw new Error(m.error.message);
    expect(toWireMessage(m.message)).toEqual({
      from: 'Acme',
      to: TO,
      type: 'viber_promo',
      text: 'Your Viber message',
      messageData: { img: 'https://example.com/image.jpg' },
      ttl: 604800,
      fallback: { type: 'sms', text: 'Your SMS fallback message (image not included)', ttl: 86400 },
    });
    const own = validateMessage({
      ...valid.with_fallback,
      fallback: { type: 'sms', text: 'x', from: 'AcmeSMS' },
    });
    expect(own.ok && toWireMessage(own.message)).toMatchObject({ fallback: { from: 'AcmeSMS' } });
  });

  it('keeps two or more fallbacks as a list, and a message without any as it is', () => {
    const two = validateMessage({ ...valid.with_fallbacks, fallbacks: [sms, sms] });
    if (!two.ok) throw new Error(two.error.message);
    expect(toWireMessage(two.message)).toBe(two.message);
    const none = validateMessage(sms);
    expect(none.ok && toWireMessage(none.message)).toEqual(none.ok && none.message);
  });

  it('sends what the sandbox and validateMessage read back as the same message', () => {
    for (const [label, input] of Object.entries(valid)) {
      const first = validateMessage(input);
      if (!first.ok) throw new Error(`${label}: ${first.error.message}`);
      const again = validateMessage(JSON.parse(JSON.stringify(toWireMessage(first.message))));
      expect(again.ok && again.message, label).toEqual(first.message);
    }
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
    // sms.md, "Numeric Sender": +380123456789 is in no numbering plan, but it is the docs'
    // own example, so numbers written with + are taken by their shape
    expect(isSmsSender('+380123456789')).toBe(true);
    expect(isSmsSender('+12345')).toBe(false);
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

  it('keeps a flash call\'s callerId, pattern and ttl (flashcall.md, "Response Format")', () => {
    const body = {
      messagelistId: 123456,
      messages: [
        {
          messageId: 'abc123def456',
          status: 'accepted',
          callerId: '+380123456789',
          pattern: '***456789',
          to: TO,
          ttl: 60,
        },
      ],
    };
    const expected = {
      shape: 'sms',
      messagelistId: 123456,
      messages: [
        {
          messageId: 'abc123def456',
          status: 'accepted',
          accepted: true,
          to: TO,
          callerId: '+380123456789',
          pattern: '***456789',
          ttl: 60,
        },
      ],
    };
    expect(parseMessagelistResponse(body)).toEqual(expected);
    expect(parseMessagelistResponseWithSchemas(body)).toEqual(expected);
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
