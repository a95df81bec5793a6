/**
 * The message object of the provider's messagelist API, its messageData per type, the
 * speechcall menu (`menu.ts`), fallbacks, and the messagelist request and responses, as zod
 * schemas. docs/provider.md describes the interface and lists every choice made here where
 * the provider's public documentation and the condensed interface disagree; in short, every
 * documented form is accepted, and `validateMessage` answers one canonical form, which is
 * also what Switchboard sends (`toWireMessage` writes its fallbacks as the docs do).
 *
 * Canonical forms (input aliases in brackets):
 * - type `viber_trans` [`viber_service`]; `rcs` is a type of its own;
 * - `fallbacks: [...]`, each with its own `from` and `to` [`fallback: {...}`, one object whose
 *   from/to default to the message's];
 * - viber_promo messageData `{img, buttonText, buttonAction, video, ...}` [`{image, button:
 *   {text, url}}`];
 * - viber_carousel buttons `{text, url}` [`{label, actionUrl}`];
 * - viber_survey messageData `{survey: {options}}` [`{options}`].
 *
 * Rules Switchboard adds where the docs are silent (each a single place to change): dates
 * carry a zone; a fallback cannot nest fallbacks; text lengths count Unicode code points;
 * messageData is refused on sms and speechcall, whose pages show none.
 */
import { parsePhoneNumberFromString } from 'libphonenumber-js';
import { z } from 'zod';
import type { DetailCode, ErrorCode, ErrorDetail } from '../errors.ts';
import { INSTANT_RULE, isStorableInstant, latestAtMost } from '../instants.ts';
import { addRule, issuesToDetails } from './issues.ts';
import { HttpUrl, speechMenu } from './menu.ts';
import { DEFAULT_MAX_SMS_PARTS, type SmsEncoding, smsSegments } from './sms.ts';

export const MESSAGE_TYPES = [
  'sms',
  'viber_trans',
  'viber_promo',
  'viber_carousel',
  'viber_survey',
  'viber_otp',
  'viber_session',
  'rcs',
  'flashcall_callback',
  'flashcall',
  'speechcall',
] as const;
/** The provider's message types; `viber_service` is an input alias of `viber_trans`. */
export const MessageType = z.enum(MESSAGE_TYPES);
export type MessageType = z.infer<typeof MessageType>;

/** Seconds a message lives when neither dtExpire nor ttl is given (docs/provider.md). */
export const DEFAULT_TTL_SECONDS: Readonly<Partial<Record<MessageType, number>>> = {
  sms: 86_400,
  viber_trans: 345_600,
  viber_promo: 604_800,
  viber_session: 604_800,
  // flashcall.md, "Parameters": ttl, default 60
  flashcall: 60,
};

/** The life of a message that states none and whose type has no default (the longest default). */
export const DEFAULT_LIFETIME_SECONDS = 604_800;

/**
 * When a message's life ends: its dtExpire, or its start (dtSend, else `sentAt`) plus its TTL
 * (else its type's default, else `lifetimeSeconds`); then each fallback in turn, which starts
 * when the one before it ends (or at its own dtSend, if later). A message with no final status
 * by then never will have one.
 *
 * @example
 * deadlineOf({ ...sms, ttl: 60 }, new Date(0), 604800) // 1970-01-01T00:01:00.000Z
 */
export function deadlineOf(m: Message, sentAt: Date, lifetimeSeconds: number): Date {
  const end = (one: Single<Message>, start: number): number => {
    if (one.dtSend !== undefined) start = Math.max(start, Date.parse(one.dtSend));
    if (one.dtExpire !== undefined) return Math.max(start, Date.parse(one.dtExpire));
    const ttl = one.ttl ?? DEFAULT_TTL_SECONDS[one.type] ?? lifetimeSeconds;
    return start + ttl * 1000;
  };
  let at = end(m, sentAt.getTime());
  for (const f of m.fallbacks ?? []) at = end(f, at);
  return new Date(latestAtMost(at));
}

/** Most messages in one messagelist request: the provider's limit of 5000. */
export const MAX_MESSAGES_PER_LIST = 5000;

// ---------------------------------------------------------------------------------------
// Field rules

/**
 * True for a valid phone number written in E.164 (`+` and digits only), as judged by
 * libphonenumber-js metadata, not by a pattern.
 *
 * @example
 * isE164('+380501234567') // true
 * isE164('+380 50 123 4567') // false: valid number, but not written in E.164
 */
export function isE164(value: string): boolean {
  const phone = parsePhoneNumberFromString(value);
  return phone !== undefined && phone.number === value && phone.isValid();
}

export const Recipient = z.string(missing('to')).superRefine((to, ctx) => {
  if (isE164(to)) return;
  const phone = parsePhoneNumberFromString(to);
  const hint =
    phone?.isValid() === true ? ` (write it as ${phone.number})` : ' such as +380501234567';
  addRule(ctx, [], 'INVALID_RECIPIENT', `recipient must be a valid E.164 phone number${hint}`);
});

function missing(field: string) {
  return {
    error: (issue: { input?: unknown }) =>
      issue.input === undefined ? `${field} is required` : `${field} must be a string`,
  };
}

const ALPHA_SENDER = /^[A-Za-z0-9]{1,11}$/;

/** A phone number written as E.164: `+` and 7 to 15 digits (a two-way SMS number, say). */
const NUMERIC_SENDER = /^\+[0-9]{7,15}$/;

/**
 * A phone number by its shape alone, `+` and 7 to 15 digits: for numbers the provider writes
 * that no numbering plan need know (senders, caller ids).
 */
export function isPhoneShape(value: string): boolean {
  return NUMERIC_SENDER.test(value);
}

/**
 * The SMS sender rule: up to 11 ASCII letters or digits with no spaces or special
 * characters, or a phone number (for two-way SMS). A number written with `+` is taken by its
 * shape: the docs' own example sender, +380123456789, is not in any numbering plan
 * libphonenumber knows. Digits without the `+` beyond 11 must be a valid number.
 *
 * @example
 * isSmsSender('Acme') // true
 * isSmsSender('Acme Shop') // false
 * isSmsSender('+380123456789') // true
 */
export function isSmsSender(from: string): boolean {
  if (ALPHA_SENDER.test(from) || NUMERIC_SENDER.test(from)) return true;
  return /^[0-9]+$/.test(from) && isE164(`+${from}`);
}

export const SmsSender = z.string(missing('from')).superRefine((from, ctx) => {
  if (isSmsSender(from)) return;
  addRule(
    ctx,
    [],
    'INVALID_SENDER',
    'sms sender must be up to 11 letters or digits with no spaces or special characters, or a phone number',
  );
});

export const Sender = z.string(missing('from')).superRefine((from, ctx) => {
  if (from.trim() !== '') return;
  addRule(ctx, [], 'INVALID_SENDER', 'sender must not be empty');
});

const LONE_SURROGATE = /\p{Cs}/u;

/**
 * A text field: required with a message naming it, no unpaired UTF-16 surrogate (no
 * encoding can send one: INVALID_ENCODING), and a length in code points.
 */
export function textField(what: string, limits: { min?: number; max?: number } = {}) {
  const { min = 1, max = Number.POSITIVE_INFINITY } = limits;
  return z
    .string({
      error: (issue) =>
        issue.input === undefined ? `${what} is required` : `${what} must be a string`,
    })
    .superRefine((s, ctx) => {
      if (LONE_SURROGATE.test(s)) {
        addRule(
          ctx,
          [],
          'INVALID_ENCODING',
          `${what} holds an unpaired surrogate, which no encoding can send`,
        );
      }
      const n = codePoints(s);
      if (n === 0 && min > 0) addRule(ctx, [], 'TOO_SHORT', `${what} must not be empty`);
      else if (n < min || n > max) {
        const range =
          max === Number.POSITIVE_INFINITY
            ? `at least ${min}`
            : min <= 1
              ? `at most ${max}`
              : `${min} to ${max}`;
        addRule(
          ctx,
          [],
          n < min ? 'TOO_SHORT' : 'TOO_LONG',
          `${what} must be ${range} characters (got ${n})`,
        );
      }
    });
}

const codePoints = (s: string) => Array.from(s).length;

/** Marks a required object field with a message naming it when it is missing. */
function requiredMessage(what: string) {
  return (issue: { code?: string; input?: unknown; keys?: string[] }) => {
    if (issue.code === 'invalid_type' && issue.input === undefined) return `${what} is required`;
    if (issue.code === 'unrecognized_keys')
      return `unknown field(s): ${(issue.keys ?? []).join(', ')}`;
    return undefined;
  };
}

/**
 * ISO 8601 date-time with a zone, e.g. `2025-01-31T09:00:00Z` or `...+02:00`, in years 0001 to
 * 9999 in UTC (src/instants.ts): every time a request gives, the API's filters included.
 */
export const IsoDateTime = z.iso
  .datetime({
    offset: true,
    error: 'must be an ISO 8601 date-time with a zone, e.g. 2025-01-31T09:00:00Z',
  })
  .superRefine((v, ctx) => {
    const ms = Date.parse(v);
    // a string that is no date-time at all has its issue from the format already
    if (Number.isNaN(ms) || isStorableInstant(ms)) return;
    addRule(ctx, [], 'INVALID_DATETIME', `${v} is not ${INSTANT_RULE}`);
  });

const isoLanguages = new Intl.DisplayNames(['en'], { type: 'language', fallback: 'none' });

/** A two-letter ISO 639-1 language code known to the runtime's ICU data. */
export const LanguageCode = z.string().superRefine((code, ctx) => {
  if (/^[a-z]{2}$/.test(code) && isoLanguages.of(code) !== undefined) return;
  addRule(
    ctx,
    [],
    'INVALID_LANGUAGE',
    `"${code}" is not an ISO 639-1 language code such as en, uk`,
  );
});

// ---------------------------------------------------------------------------------------
// messageData per type (docs/provider.md, "Message types")

/** A phone number written as E.164, judged by its shape (flash-call caller ids, RCS dial). */
export const PhoneShape = z.string().superRefine((v, ctx) => {
  if (NUMERIC_SENDER.test(v)) return;
  addRule(ctx, [], 'INVALID_PHONE', 'must be a phone number written as + and 7 to 15 digits');
});

/** viber_trans: a document attached to the text (viber.md, "Viber Transactional"). */
export const ViberTransData = z.strictObject({
  fileUrl: HttpUrl,
  fileName: z.string().min(1).optional(),
  fileType: z.string().min(1).optional(),
});
export type ViberTransData = z.infer<typeof ViberTransData>;

const ButtonText = z.string().min(1, 'a button needs text');

/**
 * viber_promo: image, text, button or video (viber.md, "Viber Promo"); the `image` and
 * `button: {text, url}` of send-message.md's example are read as `img`, `buttonText`,
 * `buttonAction`.
 */
export const ViberPromoData = z
  .strictObject({
    img: HttpUrl.optional(),
    buttonText: ButtonText.optional(),
    buttonAction: HttpUrl.optional(),
    video: HttpUrl.optional(),
    thumbnail: HttpUrl.optional(),
    fileSize: z.number().int().positive().optional(),
    duration: z.number().int().positive().optional(),
    image: HttpUrl.optional(),
    button: z.strictObject({ text: ButtonText, url: HttpUrl }).optional(),
  })
  .superRefine((d, ctx) => {
    if (d.image !== undefined && d.img !== undefined) {
      addRule(ctx, ['image'], 'INVALID_PROMO', 'give the image once, as img (or image)');
    }
    if (d.button !== undefined && (d.buttonText ?? d.buttonAction) !== undefined) {
      addRule(ctx, ['button'], 'INVALID_PROMO', 'give the button once: button or buttonText');
    }
    if ((d.buttonText === undefined) !== (d.buttonAction === undefined)) {
      const missing = d.buttonText === undefined ? 'buttonText' : 'buttonAction';
      addRule(ctx, [missing], 'INVALID_PROMO', 'a button needs both buttonText and buttonAction');
    }
    if (d.video === undefined) {
      for (const f of ['thumbnail', 'fileSize', 'duration'] as const) {
        if (d[f] !== undefined) addRule(ctx, [f], 'INVALID_PROMO', `${f} describes a video`);
      }
    } else if ((d.img ?? d.image) !== undefined) {
      addRule(ctx, ['video'], 'INVALID_PROMO', 'a promo carries an image or a video, not both');
    }
  })
  .transform(({ image, button, ...d }) => {
    const out: Omit<typeof d, never> = { ...d };
    if (image !== undefined) out.img = image;
    if (button !== undefined) {
      out.buttonText = button.text;
      out.buttonAction = button.url;
    }
    return out;
  });
export type ViberPromoData = z.output<typeof ViberPromoData>;

/** A carousel button: `{text, url}` (viber.md), or `{label, actionUrl}`. */
export const CarouselButton = z
  .strictObject({
    text: ButtonText.optional(),
    url: HttpUrl.optional(),
    label: ButtonText.optional(),
    actionUrl: HttpUrl.optional(),
  })
  .superRefine((b, ctx) => {
    const docs = b.text !== undefined || b.url !== undefined;
    const other = b.label !== undefined || b.actionUrl !== undefined;
    if (docs && other) {
      addRule(ctx, [], 'INVALID_BUTTON', 'a button is {text, url} or {label, actionUrl}, not both');
    } else if (other) {
      if (b.label === undefined) addRule(ctx, ['label'], 'REQUIRED', 'a button needs a label');
      if (b.actionUrl === undefined)
        addRule(ctx, ['actionUrl'], 'REQUIRED', 'a button needs a url');
    } else {
      if (b.text === undefined) addRule(ctx, ['text'], 'REQUIRED', 'a button needs text');
      if (b.url === undefined) addRule(ctx, ['url'], 'REQUIRED', 'a button needs a url');
    }
  })
  .transform((b) => ({
    text: (b.text ?? b.label) as string,
    url: (b.url ?? b.actionUrl) as string,
  }));
export type CarouselButton = z.output<typeof CarouselButton>;

export const CarouselItem = z.strictObject({
  title: textField('a carousel title', { min: 2, max: 38 }),
  imageUrl: HttpUrl.superRefine((url, ctx) => {
    const file = new URL(url).pathname.split('/').pop() ?? '';
    const ext = file.includes('.') ? file.split('.').pop()?.toLowerCase() : undefined;
    if (ext === undefined || ['jpg', 'jpeg', 'png'].includes(ext)) return;
    addRule(ctx, [], 'INVALID_IMAGE', `a carousel image must be JPEG or PNG (got .${ext})`);
  }),
  primaryButton: CarouselButton,
  secondaryButton: CarouselButton,
});
export type CarouselItem = z.output<typeof CarouselItem>;

export const ViberCarouselData = z.strictObject(
  {
    carousel: z.strictObject(
      {
        items: z
          .array(CarouselItem)
          .min(2, 'a carousel needs 2 to 5 items')
          .max(5, 'a carousel needs 2 to 5 items'),
      },
      { error: requiredMessage('carousel') },
    ),
  },
  { error: requiredMessage('messageData (carousel.items)') },
);
export type ViberCarouselData = z.output<typeof ViberCarouselData>;

/** Most and fewest survey answers: viber.md allows 1 to 5 (the condensed interface 2 to 5). */
export const SURVEY_OPTIONS = { min: 1, max: 5 } as const;
const SurveyOptions = z
  .array(textField('a survey option', { max: 50 }))
  .min(SURVEY_OPTIONS.min, `a survey needs ${SURVEY_OPTIONS.min} to ${SURVEY_OPTIONS.max} options`)
  .max(SURVEY_OPTIONS.max, `a survey needs ${SURVEY_OPTIONS.min} to ${SURVEY_OPTIONS.max} options`);

/** viber_survey: `{survey: {options}}` (viber.md), or `{options}`. */
export const ViberSurveyData = z
  .strictObject(
    {
      survey: z
        .strictObject({ options: SurveyOptions }, { error: requiredMessage('survey.options') })
        .optional(),
      options: SurveyOptions.optional(),
    },
    { error: requiredMessage('messageData (survey.options)') },
  )
  .superRefine((d, ctx) => {
    if (d.survey === undefined && d.options === undefined) {
      addRule(ctx, ['survey', 'options'], 'REQUIRED', 'a survey needs messageData.survey.options');
    } else if (d.survey !== undefined && d.options !== undefined) {
      addRule(ctx, ['options'], 'INVALID_SURVEY', 'give the options once, under survey.options');
    }
  })
  .transform((d) => ({ survey: { options: (d.survey?.options ?? d.options) as string[] } }));
export type ViberSurveyData = z.output<typeof ViberSurveyData>;

/**
 * viber_otp: a registered template with its own parameters (viber.md, "Viber OTP": the
 * template names them, case-sensitively: `PIN`, `TIME`, ...), or a code and its validity in
 * seconds (send-message.md's example).
 */
export const ViberOtpData = z
  .strictObject(
    {
      templateId: textField('templateId').optional(),
      templateLang: LanguageCode.optional(),
      templateParams: z.record(z.string().min(1), z.union([z.string(), z.number()])).optional(),
      code: z
        .union([
          z.string().regex(/^[0-9A-Za-z]{1,16}$/, 'a code is 1 to 16 letters or digits'),
          z.number().int().nonnegative(),
        ])
        .optional(),
      validity: z.number().int().positive('validity is a positive number of seconds').optional(),
    },
    { error: requiredMessage('messageData (templateId, templateLang, templateParams)') },
  )
  .superRefine((d, ctx) => {
    const template = ['templateId', 'templateLang', 'templateParams'] as const;
    const usesTemplate = template.some((f) => d[f] !== undefined);
    if (usesTemplate && (d.code !== undefined || d.validity !== undefined)) {
      addRule(ctx, ['code'], 'INVALID_OTP', 'an OTP is a template or a code, not both');
      return;
    }
    if (usesTemplate || d.code === undefined) {
      for (const f of template) {
        if (d[f] === undefined) addRule(ctx, [f], 'REQUIRED', `a template OTP needs ${f}`);
      }
    }
  });
export type ViberOtpData = z.infer<typeof ViberOtpData>;

/** flashcall: the number that will call (flashcall.md, "Basic Flash Call"). */
export const FlashcallData = z.strictObject(
  { callerId: PhoneShape },
  { error: requiredMessage('messageData (callerId)') },
);
export type FlashcallData = z.infer<typeof FlashcallData>;

/** Media an RCS message may carry (rcs.md, "Media Specifications"). */
export const RCS_MEDIA_TYPES = [
  'image/jpeg',
  'image/png',
  'image/gif',
  'video/mp4',
  'video/3gpp',
  'audio/mpeg',
  'audio/aac',
] as const;
/** rcs.md, "Best Practices": at most 4 buttons per message. */
export const RCS_MAX_BUTTONS = 4;
/** rcs.md, "Overview": up to 3072 characters. */
export const RCS_MAX_TEXT = 3072;

export const RcsMedia = z.strictObject({
  url: HttpUrl,
  type: z.string().superRefine((t, ctx) => {
    if ((RCS_MEDIA_TYPES as readonly string[]).includes(t.toLowerCase())) return;
    addRule(
      ctx,
      [],
      'INVALID_MEDIA_TYPE',
      `media type must be one of ${RCS_MEDIA_TYPES.join(', ')}`,
    );
  }),
  height: z.number().int().positive().optional(),
  width: z.number().int().positive().optional(),
  thumbnail: HttpUrl.optional(),
});

/** The four button actions of rcs.md, "Button Actions". */
export const RcsAction = z.discriminatedUnion(
  'type',
  [
    z.strictObject({ type: z.literal('openUrl'), url: HttpUrl }),
    z.strictObject({ type: z.literal('dial'), phoneNumber: PhoneShape }),
    z.strictObject({ type: z.literal('shareLocation') }),
    z.strictObject({
      type: z.literal('createCalendarEvent'),
      title: textField('an event title'),
      startTime: IsoDateTime,
      endTime: IsoDateTime.optional(),
    }),
  ],
  { error: 'action type must be openUrl, dial, shareLocation or createCalendarEvent' },
);

export const RcsButton = z.strictObject({ text: ButtonText, action: RcsAction });
const RcsButtons = z
  .array(RcsButton)
  .min(1, 'buttons must hold at least one button')
  .max(RCS_MAX_BUTTONS, `at most ${RCS_MAX_BUTTONS} buttons`);

export const RcsCard = z.strictObject({
  title: textField('a card title'),
  description: textField('a card description', { min: 0 }).optional(),
  media: RcsMedia.optional(),
  buttons: RcsButtons.optional(),
});

/** rcs: media, buttons or a carousel of cards (rcs.md). */
export const RcsData = z.strictObject({
  media: RcsMedia.optional(),
  buttons: RcsButtons.optional(),
  carousel: z
    .strictObject({ cards: z.array(RcsCard).min(1, 'a carousel needs at least one card') })
    .optional(),
});
export type RcsData = z.infer<typeof RcsData>;

/** Free-form messageData for types whose data no source shows (viber_session, flashcall_callback). */
const OpenData = z.record(z.string(), z.unknown());

// ---------------------------------------------------------------------------------------
// The message variants

/**
 * The longest id Switchboard takes, in characters: a customerMessageId a client gives, and an
 * id a callback names (a message's, its parent's, an incoming message's, its sender). Real ids
 * are a few dozen characters; ids are indexed, and a Postgres B-tree entry holds at most 2704
 * bytes, so a longer one is refused (the API) or not read as an id (a callback, kept whole).
 */
export const MAX_ID_LENGTH = 256;

/** Whether a callback's id is longer than MAX_ID_LENGTH, so not read as one. */
export const isOverlongId = (id: string | null | undefined): boolean =>
  id != null && id.length > MAX_ID_LENGTH;

/** Why a callback's event or message naming such an id was not read, for its `problems`. */
export const OVERLONG_ID = `longer than ${MAX_ID_LENGTH} characters, which is no id: not read`;

const common = {
  customerMessageId: z.string().min(1).max(MAX_ID_LENGTH).optional(),
  dtSend: IsoDateTime.optional(),
  dtExpire: IsoDateTime.optional(),
  ttl: z.number().int().positive('ttl must be a positive number of seconds').optional(),
};

function strict(type: string) {
  return {
    error: (issue: { code?: string; keys?: string[] }) =>
      issue.code === 'unrecognized_keys'
        ? `field not allowed on a ${type} message: ${(issue.keys ?? []).join(', ')}`
        : undefined,
  };
}

// Built twice: for a fallback (from and to may be left to the message's, no fallbacks of its
// own) and for a message. The variants stay plain objects; rules across fields live in
// `crossFieldRules`, on the union.
function variants<E extends z.core.$ZodLooseShape, F extends boolean>(extra: E, fallback: F) {
  const addressing = {
    from: fallback ? Sender.optional() : Sender,
    to: fallback ? Recipient.optional() : Recipient,
  } as F extends true
    ? { from: z.ZodOptional<typeof Sender>; to: z.ZodOptional<typeof Recipient> }
    : { from: typeof Sender; to: typeof Recipient };
  const variant = <T extends z.core.$ZodLooseShape>(type: string, shape: T) =>
    z.strictObject({ ...addressing, ...common, ...extra, ...shape }, strict(type));
  return z.discriminatedUnion(
    'type',
    [
      variant('sms', {
        type: z.literal('sms'),
        from: fallback ? SmsSender.optional() : SmsSender,
        text: textField('text'),
      }),
      variant('viber_trans', {
        type: z.enum(['viber_trans', 'viber_service']).transform(() => 'viber_trans' as const),
        text: textField('text').optional(),
        messageData: ViberTransData.optional(),
      }),
      variant('viber_promo', {
        type: z.literal('viber_promo'),
        text: textField('text').optional(),
        messageData: ViberPromoData.optional(),
      }),
      variant('viber_carousel', {
        type: z.literal('viber_carousel'),
        text: textField('text', { min: 0 }).optional(),
        messageData: ViberCarouselData,
      }),
      variant('viber_survey', {
        type: z.literal('viber_survey'),
        text: textField('text (the survey title)', { max: 85 }),
        messageData: ViberSurveyData,
      }),
      variant('viber_otp', {
        type: z.literal('viber_otp'),
        text: textField('text', { min: 0 }).optional(),
        messageData: ViberOtpData,
      }),
      variant('viber_session', {
        type: z.literal('viber_session'),
        text: textField('text'),
        messageData: OpenData.optional(),
      }),
      variant('rcs', {
        type: z.literal('rcs'),
        text: textField('text', { max: RCS_MAX_TEXT }),
        messageData: RcsData.optional(),
      }),
      variant('flashcall', {
        type: z.literal('flashcall'),
        // The last digits of the calling number; omitted, the provider picks the code.
        text: z
          .string()
          .regex(/^[0-9]+$/, 'flashcall text must be digits (the code)')
          .optional(),
        messageData: FlashcallData.optional(),
      }),
      variant('flashcall_callback', {
        type: z.literal('flashcall_callback'),
        text: textField('text', { min: 0 }).optional(),
        messageData: OpenData.optional(),
      }),
      variant('speechcall', {
        type: z.literal('speechcall'),
        text: textField('text', { min: 0 }).optional(),
        menu: speechMenu('menu is required for speechcall'),
      }),
    ],
    {
      error: `type must be one of ${MESSAGE_TYPES.join(', ')} (or viber_service, read as viber_trans)`,
    },
  );
}

const FallbackUnion = variants(
  {
    fallbacks: z.undefined({ error: 'a fallback cannot carry fallbacks of its own' }).optional(),
    fallback: z.undefined({ error: 'a fallback cannot carry a fallback of its own' }).optional(),
  },
  true,
);
type Ctx = Parameters<typeof addRule>[0];
/** A message without its fallbacks: what the rules of one message look at. */
type Single<T> = T extends unknown ? Omit<T, 'fallbacks' | 'fallback'> : never;

function crossFieldRules(m: Single<z.output<typeof FallbackUnion>>, ctx: Ctx): void {
  if (m.dtSend !== undefined && m.dtExpire !== undefined) {
    if (Date.parse(m.dtExpire) <= Date.parse(m.dtSend)) {
      addRule(ctx, ['dtExpire'], 'EXPIRE_BEFORE_SEND', 'dtExpire must be after dtSend');
    }
  }
  if (m.type === 'viber_trans' && m.text === undefined && m.messageData === undefined) {
    addRule(ctx, ['text'], 'TEXT_REQUIRED', 'viber_trans needs text or a file attachment');
  }
  if (m.type === 'viber_promo') {
    const d = m.messageData ?? {};
    if (m.text === undefined && d.img === undefined && d.video === undefined) {
      addRule(ctx, ['text'], 'TEXT_REQUIRED', 'viber_promo needs text, an image or a video');
    }
    if (d.buttonText !== undefined && m.text === undefined) {
      addRule(ctx, ['text'], 'INVALID_PROMO', 'a promo button needs text');
    }
  }
}

/** A fallback as it is given: any type, same rules, no fallbacks of its own. */
export const FallbackInput = FallbackUnion.superRefine(crossFieldRules);
/** A fallback in canonical form: its own sender and recipient, always. */
export type Fallback = Single<z.output<typeof FallbackUnion>> & { from: string; to: string };

const MessageUnion = variants(
  {
    fallbacks: z.array(FallbackInput).min(1).optional(),
    fallback: FallbackInput.optional(),
  },
  false,
);
type ParsedMessage = z.output<typeof MessageUnion>;
type Canonical<T> = T extends unknown
  ? Omit<T, 'fallback' | 'fallbacks'> & { fallbacks?: Fallback[] }
  : never;

/** Where a message's fallbacks were given: `fallback` (one) or `fallbacks` (a list). */
function fallbackKey(m: { fallback?: unknown }): 'fallback' | 'fallbacks' {
  return m.fallback !== undefined ? 'fallback' : 'fallbacks';
}

/**
 * A fallback may leave `from` and `to` to the message's; an SMS fallback then needs a sender
 * the SMS rule takes (a Viber name may hold spaces).
 */
function fallbackRules(m: ParsedMessage, ctx: Ctx): void {
  if (m.fallback !== undefined && m.fallbacks !== undefined) {
    addRule(
      ctx,
      ['fallback'],
      'INVALID_FALLBACK',
      'give fallback (one) or fallbacks (a list), not both',
    );
    return;
  }
  const list = m.fallback !== undefined ? [m.fallback] : (m.fallbacks ?? []);
  const key = fallbackKey(m);
  list.forEach((f, i) => {
    if (f.type !== 'sms' || f.from !== undefined || isSmsSender(m.from)) return;
    addRule(
      ctx,
      key === 'fallback' ? [key, 'from'] : [key, i, 'from'],
      'INVALID_SENDER',
      `an sms fallback sends from the message's "${m.from}", which is not an SMS sender (up to 11 letters or digits, or a phone number): give the fallback a from of its own`,
    );
  });
}

function canonical(m: ParsedMessage): Message {
  const { fallback, fallbacks, ...rest } = m;
  const list = fallback !== undefined ? [fallback] : fallbacks;
  if (list === undefined) return rest as Message;
  const out = rest as Message;
  out.fallbacks = list.map((f) => ({ ...f, from: f.from ?? m.from, to: f.to ?? m.to }) as Fallback);
  return out;
}

/**
 * One message of a messagelist, typed per `type`, in canonical form (see the module comment).
 *
 * @example
 * Message.parse({ from: 'Acme', to: '+380501234567', type: 'sms', text: 'hi' });
 */
export const Message = MessageUnion.superRefine(crossFieldRules)
  .superRefine(fallbackRules)
  .transform(canonical);
export type Message = Canonical<ParsedMessage>;
export type MessageInput = z.input<typeof Message>;

/**
 * The message as it is POSTed: canonical, but a single fallback is written as the docs write
 * it (`fallback: {type, text, ...}`, viber.md, rcs.md, flashcall.md), with `from` and `to`
 * left out when they are the message's. Two or more stay a `fallbacks` list: the docs show no
 * form for them (docs/provider.md).
 *
 * @example
 * toWireMessage({ from: 'Acme', to, type: 'viber_trans', text: 'Hi', fallbacks: [{ from: 'Acme', to, type: 'sms', text: 'Hi' }] })
 * // { from: 'Acme', to, type: 'viber_trans', text: 'Hi', fallback: { type: 'sms', text: 'Hi' } }
 */
export function toWireMessage(m: Message): WireMessage {
  if (m.fallbacks?.length !== 1) return m;
  const { fallbacks, ...rest } = m;
  const { from, to, ...f } = fallbacks[0] as Fallback;
  const one: Record<string, unknown> = { ...f };
  if (from !== m.from) one.from = from;
  if (to !== m.to) one.to = to;
  return { ...rest, fallback: one } as WireMessage;
}
/** A message as sent: canonical, or with its one fallback under `fallback`. */
export type WireMessage =
  | Message
  | (Omit<Message, 'fallbacks'> & { fallback: Record<string, unknown> });

// ---------------------------------------------------------------------------------------
// validateMessage

const PROVIDER_CODES = [
  'INVALID_RECIPIENT',
  'INVALID_SENDER',
  'MESSAGE_TOO_LONG',
  'INVALID_ENCODING',
] as const satisfies readonly ErrorCode[];

export type ValidateMessageResult =
  | { ok: true; message: Message; parts?: number; encoding?: SmsEncoding }
  | { ok: false; error: { code: ErrorCode; message: string; details: ErrorDetail[] } };

export interface ValidateMessageOptions {
  /** Most SMS parts allowed per text; DEFAULT_MAX_SMS_PARTS (10) when omitted. */
  maxSmsParts?: number;
  /** "Now", for refusing an already expired dtExpire. */
  now?: Date;
}

// Checked separately when the type is missing or unknown, so such a message still reports
// a bad `to` or `from` next to the bad `type`.
const CommonFields = z.looseObject({ from: Sender, to: Recipient });

/**
 * Validates one message with every rule of docs/provider.md, applies its type's default TTL
 * ("Sending: POST /bat/messagelist") when neither dtExpire nor ttl is given, and counts SMS
 * parts. Detail paths are relative to the message (`to`,
 * `messageData.carousel.items[2].title`, `fallbacks[0].to`); the error code is the provider's
 * identifier where one fits (INVALID_RECIPIENT, INVALID_SENDER, MESSAGE_TOO_LONG,
 * INVALID_ENCODING), otherwise INVALID_MESSAGE.
 *
 * @example
 * validateMessage({ from: 'Acme', to: '+380501234567', type: 'sms', text: 'hi' })
 * // { ok: true, message: { ..., ttl: 86400 }, parts: 1, encoding: 'GSM7' }
 * validateMessage({ from: 'Acme', to: '0501234567', type: 'sms', text: 'hi' }).ok // false
 */
export function validateMessage(
  input: unknown,
  opts: ValidateMessageOptions = {},
): ValidateMessageResult {
  return validate(input, opts, true);
}

/** `validateMessage` by the schemas alone (exported for the test that compares). */
export function validateMessageWithSchemas(
  input: unknown,
  opts: ValidateMessageOptions = {},
): ValidateMessageResult {
  return validate(input, opts, false);
}

const SMS_KEYS = new Set(['from', 'to', 'customerMessageId', 'ttl', 'type', 'text']);

/**
 * A plain SMS (from, to, type, text, and customerMessageId or ttl, nothing else) that keeps
 * every rule, checked by hand: when this accepts a message the schemas accept it too, with
 * the same output (fields in the schema's order). Anything else is left to the schemas
 * (undefined), including every message that breaks a rule.
 */
function parseSmsFast(input: object): Message | undefined {
  const proto = Object.getPrototypeOf(input);
  if (proto !== Object.prototype && proto !== null) return undefined;
  const m = input as Record<string, unknown>;
  for (const key of Object.keys(m)) {
    if (!SMS_KEYS.has(key) || m[key] === undefined) return undefined;
  }
  const { from, to, customerMessageId, ttl, type, text } = m;
  if (type !== 'sms' || typeof text !== 'string' || text === '' || LONE_SURROGATE.test(text))
    return undefined;
  if (typeof from !== 'string' || !isSmsSender(from)) return undefined;
  if (typeof to !== 'string' || !isE164(to)) return undefined;
  if (
    customerMessageId !== undefined &&
    !(
      typeof customerMessageId === 'string' &&
      customerMessageId.length >= 1 &&
      customerMessageId.length <= 256
    )
  )
    return undefined;
  if (ttl !== undefined && !(Number.isSafeInteger(ttl) && (ttl as number) > 0)) return undefined;
  return {
    from,
    to,
    ...(customerMessageId !== undefined && { customerMessageId }),
    ...(ttl !== undefined && { ttl: ttl as number }),
    type: 'sms',
    text,
  };
}

function validate(
  input: unknown,
  opts: ValidateMessageOptions,
  fast: boolean,
): ValidateMessageResult {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    return failure([
      { path: '', code: 'INVALID_TYPE', message: 'a message must be a JSON object' },
    ]);
  }
  let data = fast ? parseSmsFast(input) : undefined;
  if (data === undefined) {
    const parsed = Message.safeParse(input);
    if (!parsed.success) {
      const details = issuesToDetails(parsed.error.issues);
      if (details.some((d) => d.path === 'type')) {
        const extra = CommonFields.safeParse(input);
        if (!extra.success) details.push(...issuesToDetails(extra.error.issues));
      }
      return failure(details);
    }
    data = parsed.data;
  }
  const message = withDefaultTtl(data);
  if (message.fallbacks) message.fallbacks = message.fallbacks.map((f) => withDefaultTtl(f));

  const details: ErrorDetail[] = [];
  const now = opts.now;
  const maxParts = opts.maxSmsParts ?? DEFAULT_MAX_SMS_PARTS;
  let sms: { parts: number; encoding: SmsEncoding } | undefined;
  // detail paths name the fallback as it was given: `fallback.text` or `fallbacks[1].text`
  const single = (input as { fallback?: unknown }).fallback !== undefined;
  const all: Array<[string, Single<Message>]> = [
    ['', message],
    ...(message.fallbacks ?? []).map((f, i): [string, Single<Message>] => [
      single ? 'fallback.' : `fallbacks[${i}].`,
      f,
    ]),
  ];
  for (const [prefix, m] of all) {
    if (now && m.dtExpire !== undefined && Date.parse(m.dtExpire) <= now.getTime()) {
      details.push({
        path: `${prefix}dtExpire`,
        code: 'EXPIRED',
        message: `dtExpire ${m.dtExpire} is already past`,
      });
    }
    if (m.type === 'sms') {
      const seg = smsSegments(m.text);
      if (seg.parts > maxParts) {
        details.push({
          path: `${prefix}text`,
          code: 'MESSAGE_TOO_LONG',
          message: `text needs ${seg.parts} SMS parts (${seg.units} ${seg.encoding === 'GSM7' ? 'GSM 7-bit septets' : 'UCS-2 units'}); the maximum is ${maxParts}`,
        });
      }
      if (prefix === '') sms = { parts: seg.parts, encoding: seg.encoding };
    }
  }
  if (details.length > 0) return failure(details);
  return sms
    ? { ok: true, message, parts: sms.parts, encoding: sms.encoding }
    : { ok: true, message };
}

function withDefaultTtl<M extends Single<Message>>(m: M): M {
  if (m.dtExpire !== undefined || m.ttl !== undefined) return m;
  const ttl = DEFAULT_TTL_SECONDS[m.type];
  return ttl === undefined ? m : { ...m, ttl };
}

// A missing or non-string `to`/`from` breaks the same provider rule as a malformed one.
const FIELD_CODES: Record<string, ErrorCode & DetailCode> = {
  to: 'INVALID_RECIPIENT',
  from: 'INVALID_SENDER',
};

function failure(raw: ErrorDetail[]): ValidateMessageResult {
  const details = raw.map((d) => {
    const field = d.path.split('.').pop() ?? '';
    const code = FIELD_CODES[field];
    return code && (d.code === 'INVALID_TYPE' || d.code === 'REQUIRED') ? { ...d, code } : d;
  });
  const known = details.find((d) => (PROVIDER_CODES as readonly string[]).includes(d.code));
  const first = known ?? details[0];
  const code: ErrorCode = (known?.code as ErrorCode | undefined) ?? 'INVALID_MESSAGE';
  const message = first
    ? `${first.path === '' ? 'message' : first.path}: ${first.message}`
    : 'invalid message';
  return { ok: false, error: { code, message, details } };
}

// ---------------------------------------------------------------------------------------
// Messagelist request and responses (docs/provider.md, "The answer to a messagelist")

/** Body of POST /bat/messagelist: 1 to 5000 messages. */
export const MessagelistRequest = z.strictObject({
  messages: z
    .array(Message)
    .min(1, 'messages must hold at least one message')
    .max(MAX_MESSAGES_PER_LIST, `at most ${MAX_MESSAGES_PER_LIST} messages per request`),
});
export type MessagelistRequest = z.output<typeof MessagelistRequest>;

const Id = z.union([z.string(), z.number()]).transform(String);

/** What a flash call's answer adds (flashcall.md, "Response Format"). */
const FlashcallAnswer = {
  callerId: z.string().optional(),
  /** the caller id with its first digits masked, e.g. `***456789` */
  pattern: z.string().optional(),
  ttl: z.number().int().nonnegative().optional(),
};

/**
 * The form of send-message.md: a messagelistId and accepted/rejected per message (the
 * table also names `failed`, read like rejected by the generic form below).
 */
export const MessagelistResponseSms = z.looseObject({
  messagelistId: z.coerce.number().int(),
  messages: z.array(
    z.looseObject({
      messageId: Id.optional(),
      status: z.enum(['accepted', 'rejected']),
      parts: z.number().int().nonnegative().optional(),
      customerMessageId: z.string().optional(),
      to: z.string().optional(),
      /** flashcall: the code, when the request left it to the provider. */
      text: z.string().optional(),
      ...FlashcallAnswer,
      error: z.unknown().optional(),
    }),
  ),
});

/**
 * The generic form (`smsbat/index.md`, "Response Format", and the condensed interface):
 * status `sent`, the number under `recipient`.
 */
export const MessagelistResponseGeneric = z.looseObject({
  messagelistId: z.coerce.number().int().optional(),
  messages: z.array(
    z.looseObject({
      messageId: Id.optional(),
      status: z.string(),
      parts: z.number().int().nonnegative().optional(),
      customerMessageId: z.string().optional(),
      recipient: z.string().optional(),
      to: z.string().optional(),
      /** flashcall: the code, when the request left it to the provider. */
      text: z.string().optional(),
      ...FlashcallAnswer,
      error: z.unknown().optional(),
    }),
  ),
});

/** Either shape of the messagelist answer, as the provider sends it. */
export const MessagelistResponse = z.union([MessagelistResponseSms, MessagelistResponseGeneric]);
export type MessagelistResponse = z.output<typeof MessagelistResponse>;

export const NormalisedMessageResult = z.object({
  messageId: z.string().optional(),
  status: z.string(),
  accepted: z.boolean(),
  customerMessageId: z.string().optional(),
  to: z.string().optional(),
  parts: z.number().int().optional(),
  text: z.string().optional(),
  /** flashcall: the number that calls, its pattern, and how long the code holds */
  callerId: z.string().optional(),
  pattern: z.string().optional(),
  ttl: z.number().int().optional(),
  error: z.object({ code: z.string().optional(), message: z.string() }).optional(),
  /**
   * With a DUPLICATE_CUSTOMER_MESSAGE_ID rejection: the message that already holds the id.
   * A resend after an interrupted dispatch learns from it that the first send went through.
   */
  existingMessageId: z.string().optional(),
});
export type NormalisedMessageResult = z.infer<typeof NormalisedMessageResult>;

/** One shape for both responses: `accepted` is false only for `rejected` (or `failed`). */
export const NormalisedMessagelistResponse = z.object({
  shape: z.enum(['sms', 'generic']),
  messagelistId: z.number().int().optional(),
  messages: z.array(NormalisedMessageResult),
});
export type NormalisedMessagelistResponse = z.infer<typeof NormalisedMessagelistResponse>;

/**
 * Parses either messagelist answer shape into one normalised shape, or returns undefined
 * when the body is neither.
 *
 * @example
 * parseMessagelistResponse({ messages: [{ messageId: 'm1', status: 'sent', recipient: '+380501234567' }] })
 * // { shape: 'generic', messages: [{ messageId: 'm1', status: 'sent', accepted: true, to: '+380501234567' }] }
 */
export function parseMessagelistResponse(body: unknown): NormalisedMessagelistResponse | undefined {
  return parseSmsResponseFast(body) ?? parseMessagelistResponseWithSchemas(body);
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);
const optionalString = (v: unknown) => v === undefined || typeof v === 'string';

/**
 * The SMS form with plainly typed fields, checked by hand (a messagelist answer holds up to
 * 5000 messages): when this accepts a body, `MessagelistResponseSms` accepts it too and
 * `parseMessagelistResponseWithSchemas` gives the same result. Anything else, a string
 * messagelistId or an unknown status say, is left to the schemas (undefined).
 */
function parseSmsResponseFast(body: unknown): NormalisedMessagelistResponse | undefined {
  if (!isRecord(body)) return undefined;
  const { messagelistId, messages } = body;
  if (!Number.isSafeInteger(messagelistId) || !Array.isArray(messages)) return undefined;
  const out: NormalisedMessageResult[] = new Array(messages.length);
  for (let i = 0; i < messages.length; i++) {
    const m: unknown = messages[i];
    if (!isRecord(m)) return undefined;
    const { messageId, status, parts, customerMessageId, to, text, callerId, pattern, ttl } = m;
    if (status !== 'accepted' && status !== 'rejected') return undefined;
    if (
      !(
        messageId === undefined ||
        typeof messageId === 'string' ||
        (typeof messageId === 'number' && Number.isFinite(messageId))
      )
    )
      return undefined;
    if (!(parts === undefined || (Number.isSafeInteger(parts) && (parts as number) >= 0)))
      return undefined;
    if (!(optionalString(customerMessageId) && optionalString(to) && optionalString(text)))
      return undefined;
    if (!(optionalString(callerId) && optionalString(pattern))) return undefined;
    if (!(ttl === undefined || (Number.isSafeInteger(ttl) && (ttl as number) >= 0)))
      return undefined;
    out[i] = clean({
      messageId: idOrUndefined(messageId),
      status,
      accepted: status === 'accepted',
      customerMessageId: customerMessageId as string | undefined,
      to: to as string | undefined,
      parts: parts as number | undefined,
      text: text as string | undefined,
      callerId: callerId as string | undefined,
      pattern: pattern as string | undefined,
      ttl: ttl as number | undefined,
      error: normaliseError(m.error),
      existingMessageId: idOrUndefined(m.existingMessageId),
    });
  }
  return { shape: 'sms', messagelistId: messagelistId as number, messages: out };
}

/** `parseMessagelistResponse` by the schemas alone (exported for the test that compares). */
export function parseMessagelistResponseWithSchemas(
  body: unknown,
): NormalisedMessagelistResponse | undefined {
  const sms = MessagelistResponseSms.safeParse(body);
  if (sms.success) {
    return {
      shape: 'sms',
      messagelistId: sms.data.messagelistId,
      messages: sms.data.messages.map((m) =>
        clean({
          messageId: idOrUndefined(m.messageId),
          status: m.status,
          accepted: m.status === 'accepted',
          customerMessageId: m.customerMessageId,
          to: m.to,
          parts: m.parts,
          text: m.text,
          callerId: m.callerId,
          pattern: m.pattern,
          ttl: m.ttl,
          error: normaliseError(m.error),
          existingMessageId: idOrUndefined(m.existingMessageId),
        }),
      ),
    };
  }
  const generic = MessagelistResponseGeneric.safeParse(body);
  if (!generic.success) return undefined;
  return clean({
    shape: 'generic' as const,
    messagelistId: generic.data.messagelistId,
    messages: generic.data.messages.map((m) =>
      clean({
        messageId: idOrUndefined(m.messageId),
        status: m.status,
        accepted: m.status !== 'rejected' && m.status !== 'failed',
        customerMessageId: m.customerMessageId,
        to: m.recipient ?? m.to,
        parts: m.parts,
        text: m.text,
        callerId: m.callerId,
        pattern: m.pattern,
        ttl: m.ttl,
        error: normaliseError(m.error),
        existingMessageId: idOrUndefined(m.existingMessageId),
      }),
    ),
  });
}

/**
 * A provider's id as Switchboard keeps it, or undefined: an id longer than MAX_ID_LENGTH is no
 * id (it could not be indexed), so an answer naming one is taken without it.
 */
function idOrUndefined(v: unknown): string | undefined {
  const id = typeof v === 'string' || typeof v === 'number' ? String(v) : undefined;
  return isOverlongId(id) ? undefined : id;
}

function normaliseError(error: unknown): NormalisedMessageResult['error'] {
  if (error === undefined || error === null) return undefined;
  if (typeof error === 'string') return { code: error, message: error };
  if (typeof error === 'object') {
    const e = error as Record<string, unknown>;
    const code = typeof e.code === 'string' ? e.code : undefined;
    const message = typeof e.message === 'string' ? e.message : (code ?? JSON.stringify(error));
    return code === undefined ? { message } : { code, message };
  }
  return { message: String(error) };
}

/** Drops undefined fields so results compare and serialise cleanly. */
function clean<T extends object>(o: T): T {
  for (const k of Object.keys(o) as Array<keyof T>) if (o[k] === undefined) delete o[k];
  return o;
}
