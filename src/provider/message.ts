/**
 * The message object of the provider (seed 2.3), its messageData per type (2.4), the
 * speechcall menu (2.5, in `menu.ts`), fallbacks, and the messagelist request and responses
 * (2.6), as zod schemas with every rule the seed states.
 *
 * Decisions where the seed is silent (each is a single place to change):
 * - `viber_trans` is accepted and normalised to `viber_service` on parse.
 * - The RCS message is not modelled: the seed names no `type` value nor fields for it.
 * - viber_survey options live in `messageData.options` (an array of strings).
 * - viber_promo: `img` and `buttonAction` are absolute http(s) URLs; `buttonText` and
 *   `buttonAction` come together; a button needs text; an image with text needs a button
 *   (the seed's three variants); plain text alone is allowed too. Video: `video`,
 *   `thumbnail`, `fileSize`, `duration` all together, and not with `img`.
 * - viber_otp: `templateParams.pin` is required; the other two keys are optional; any other
 *   key (including `PIN`, since keys are case-sensitive) is refused.
 * - The SMS sender rule (11 ASCII letters or digits, or a phone number) applies to sms; other
 *   types need a non-empty sender (Viber alpha-names may hold spaces).
 * - Text lengths (survey title, options, carousel titles) count Unicode code points.
 * - Dates must carry a zone (`Z` or `+02:00`): a dispatch time without one is ambiguous.
 * - A fallback is a full message of its own type (same rules) but cannot nest fallbacks.
 * - messageData is refused on sms, flashcall and speechcall (the seed shows none), and free
 *   form on viber_session and flashcall_callback (the seed shows none, but does not say
 *   there is none).
 */
import { parsePhoneNumberFromString } from 'libphonenumber-js';
import { z } from 'zod';
import type { ErrorCode, ErrorDetail } from '../errors.ts';
import { addRule, issuesToDetails } from './issues.ts';
import { HttpUrl, speechMenu } from './menu.ts';
import { DEFAULT_MAX_SMS_PARTS, type SmsEncoding, smsSegments } from './sms.ts';

export const MESSAGE_TYPES = [
  'sms',
  'viber_service',
  'viber_promo',
  'viber_carousel',
  'viber_survey',
  'viber_otp',
  'viber_session',
  'flashcall_callback',
  'flashcall',
  'speechcall',
] as const;
/** The seed's message types; `viber_trans` is an input alias of `viber_service`. */
export const MessageType = z.enum(MESSAGE_TYPES);
export type MessageType = z.infer<typeof MessageType>;

/** Seed 2.3: seconds a message lives when neither dtExpire nor ttl is given. */
export const DEFAULT_TTL_SECONDS: Readonly<Partial<Record<MessageType, number>>> = {
  sms: 86_400,
  viber_service: 345_600,
  viber_promo: 604_800,
  viber_session: 604_800,
};

/** Most messages in one messagelist request (seed 4 and 8). */
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

/**
 * The SMS sender rule: up to 11 ASCII letters or digits with no spaces or special
 * characters, or a phone number (for two-way SMS), with or without the leading `+`.
 *
 * @example
 * isSmsSender('Acme') // true
 * isSmsSender('Acme Shop') // false
 * isSmsSender('+380501234567') // true
 */
export function isSmsSender(from: string): boolean {
  if (ALPHA_SENDER.test(from)) return true;
  const digits = from.startsWith('+') ? from.slice(1) : from;
  return /^[0-9]+$/.test(digits) && isE164(`+${digits}`);
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

/** ISO 8601 date-time with a zone, e.g. `2025-01-31T09:00:00Z` or `...+02:00`. */
export const IsoDateTime = z.iso.datetime({
  offset: true,
  error: 'must be an ISO 8601 date-time with a zone, e.g. 2025-01-31T09:00:00Z',
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
// messageData per type (seed 2.4)

export const ViberServiceData = z.strictObject({
  fileUrl: HttpUrl,
  fileName: z.string().min(1),
  fileType: z.string().min(1),
});
export type ViberServiceData = z.infer<typeof ViberServiceData>;

export const ViberPromoData = z
  .strictObject({
    img: HttpUrl.optional(),
    buttonText: z.string().min(1).optional(),
    buttonAction: HttpUrl.optional(),
    video: HttpUrl.optional(),
    thumbnail: HttpUrl.optional(),
    fileSize: z.number().int().positive().optional(),
    duration: z.number().int().positive().optional(),
  })
  .superRefine((d, ctx) => {
    if ((d.buttonText === undefined) !== (d.buttonAction === undefined)) {
      const missing = d.buttonText === undefined ? 'buttonText' : 'buttonAction';
      addRule(ctx, [missing], 'INVALID_PROMO', 'a button needs both buttonText and buttonAction');
    }
    const videoFields = ['video', 'thumbnail', 'fileSize', 'duration'] as const;
    const given = videoFields.filter((f) => d[f] !== undefined);
    if (given.length > 0) {
      for (const f of videoFields) {
        if (d[f] === undefined) {
          addRule(ctx, [f], 'INVALID_PROMO', `a video promo needs ${videoFields.join(', ')}`);
        }
      }
      if (d.img !== undefined) {
        addRule(ctx, ['img'], 'INVALID_PROMO', 'a promo carries an image or a video, not both');
      }
    }
  });
export type ViberPromoData = z.infer<typeof ViberPromoData>;

export const CarouselButton = z.strictObject({
  label: z.string().min(1),
  actionUrl: HttpUrl,
});
export type CarouselButton = z.infer<typeof CarouselButton>;

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
export type CarouselItem = z.infer<typeof CarouselItem>;

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
export type ViberCarouselData = z.infer<typeof ViberCarouselData>;

export const ViberSurveyData = z.strictObject(
  {
    options: z
      .array(textField('a survey option', { max: 50 }))
      .min(2, 'a survey needs 2 to 5 options')
      .max(5, 'a survey needs 2 to 5 options'),
  },
  { error: requiredMessage('messageData (options)') },
);
export type ViberSurveyData = z.infer<typeof ViberSurveyData>;

/** The case-sensitive keys of viber_otp templateParams. */
export const OTP_PARAM_KEYS = ['pin', 'business_platform_name', 'code_validity_time'] as const;

export const OtpTemplateParams = z
  .record(z.string(), z.union([z.string().min(1), z.number()]))
  .superRefine((params, ctx) => {
    for (const key of Object.keys(params)) {
      if ((OTP_PARAM_KEYS as readonly string[]).includes(key)) continue;
      const near = OTP_PARAM_KEYS.find((k) => k.toLowerCase() === key.toLowerCase());
      addRule(
        ctx,
        [key],
        'UNKNOWN_TEMPLATE_PARAM',
        near
          ? `templateParams keys are case-sensitive: write "${near}", not "${key}"`
          : `unknown templateParams key "${key}"; keys are ${OTP_PARAM_KEYS.join(', ')}`,
      );
    }
    if (params.pin === undefined)
      addRule(ctx, ['pin'], 'REQUIRED', 'templateParams.pin is required');
  });

export const ViberOtpData = z.strictObject(
  {
    templateId: textField('templateId'),
    templateLang: LanguageCode,
    templateParams: OtpTemplateParams,
  },
  { error: requiredMessage('messageData (templateId, templateLang, templateParams)') },
);
export type ViberOtpData = z.infer<typeof ViberOtpData>;

/** Free-form messageData for types whose data the seed does not show. */
const OpenData = z.record(z.string(), z.unknown());

// ---------------------------------------------------------------------------------------
// The message variants

const common = {
  from: Sender,
  to: Recipient,
  customerMessageId: z.string().min(1).max(256).optional(),
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

// Built twice: once without `fallbacks` (a fallback cannot nest them) and once with. The
// variants stay plain objects; rules across fields live in `crossFieldRules`, on the union.
function variants<E extends z.core.$ZodLooseShape>(extra: E) {
  const variant = <T extends z.core.$ZodLooseShape>(type: string, shape: T) =>
    z.strictObject({ ...common, ...extra, ...shape }, strict(type));
  return z.discriminatedUnion(
    'type',
    [
      variant('sms', { type: z.literal('sms'), from: SmsSender, text: textField('text') }),
      variant('viber_service', {
        type: z.enum(['viber_service', 'viber_trans']).transform(() => 'viber_service' as const),
        text: textField('text').optional(),
        messageData: ViberServiceData.optional(),
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
      variant('flashcall', {
        type: z.literal('flashcall'),
        // The last digits of the calling number; omitted, the provider picks a random code.
        text: z
          .string()
          .regex(/^[0-9]+$/, 'flashcall text must be digits (the code)')
          .optional(),
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
    { error: `type must be one of ${MESSAGE_TYPES.join(', ')} (or viber_trans)` },
  );
}

const FallbackUnion = variants({
  fallbacks: z.undefined({ error: 'a fallback cannot carry fallbacks of its own' }).optional(),
});
type Ctx = Parameters<typeof addRule>[0];
/** A message without its fallbacks: what the rules of one message look at. */
type Single<T> = T extends unknown ? Omit<T, 'fallbacks'> : never;

function crossFieldRules(m: Single<z.output<typeof FallbackUnion>>, ctx: Ctx): void {
  if (m.dtSend !== undefined && m.dtExpire !== undefined) {
    if (Date.parse(m.dtExpire) <= Date.parse(m.dtSend)) {
      addRule(ctx, ['dtExpire'], 'EXPIRE_BEFORE_SEND', 'dtExpire must be after dtSend');
    }
  }
  if (m.type === 'viber_service' && m.text === undefined && m.messageData === undefined) {
    addRule(ctx, ['text'], 'TEXT_REQUIRED', 'viber_service needs text or a file attachment');
  }
  if (m.type === 'viber_promo') {
    const d = m.messageData ?? {};
    const hasButton = d.buttonText !== undefined;
    if (m.text === undefined && d.img === undefined && d.video === undefined) {
      addRule(ctx, ['text'], 'TEXT_REQUIRED', 'viber_promo needs text, an image or a video');
    }
    if (hasButton && m.text === undefined) {
      addRule(ctx, ['text'], 'INVALID_PROMO', 'a promo button needs text');
    }
    if (d.img !== undefined && m.text !== undefined && !hasButton) {
      addRule(
        ctx,
        ['messageData', 'buttonText'],
        'INVALID_PROMO',
        'an image with text needs a button (buttonText and buttonAction)',
      );
    }
  }
}

/** A message used as a fallback: any type, same rules, no fallbacks of its own. */
export const Fallback = FallbackUnion.superRefine(crossFieldRules);
export type Fallback = z.output<typeof Fallback>;

/**
 * One message of a messagelist (seed 2.3), typed per `type`.
 *
 * @example
 * Message.parse({ from: 'Acme', to: '+380501234567', type: 'sms', text: 'hi' });
 */
export const Message = variants({
  fallbacks: z.array(Fallback).min(1).optional(),
}).superRefine(crossFieldRules);
export type Message = z.output<typeof Message>;
export type MessageInput = z.input<typeof Message>;

// ---------------------------------------------------------------------------------------
// validateMessage

const SEED_CODES = [
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
 * Validates one message with every rule of the seed, applies the default TTL (seed 2.3) when
 * neither dtExpire nor ttl is given, and counts SMS parts. Detail paths are relative to the
 * message (`to`, `messageData.carousel.items[2].title`, `fallbacks[0].to`); the error code
 * is the seed's identifier where one fits (INVALID_RECIPIENT, INVALID_SENDER,
 * MESSAGE_TOO_LONG, INVALID_ENCODING), otherwise INVALID_MESSAGE.
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
      { path: '', code: 'invalid_type', message: 'a message must be a JSON object' },
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
  const all: Array<[string, Single<Message>]> = [
    ['', message],
    ...(message.fallbacks ?? []).map((f, i): [string, Single<Message>] => [`fallbacks[${i}].`, f]),
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

// A missing or non-string `to`/`from` breaks the same seed rule as a malformed one.
const FIELD_CODES: Record<string, ErrorCode> = { to: 'INVALID_RECIPIENT', from: 'INVALID_SENDER' };

function failure(raw: ErrorDetail[]): ValidateMessageResult {
  const details = raw.map((d) => {
    const field = d.path.split('.').pop() ?? '';
    const code = FIELD_CODES[field];
    return code && d.code === 'invalid_type' ? { ...d, code } : d;
  });
  const seed = details.find((d) => (SEED_CODES as readonly string[]).includes(d.code));
  const first = seed ?? details[0];
  const code: ErrorCode = (seed?.code as ErrorCode | undefined) ?? 'INVALID_MESSAGE';
  const message = first
    ? `${first.path === '' ? 'message' : first.path}: ${first.message}`
    : 'invalid message';
  return { ok: false, error: { code, message, details } };
}

// ---------------------------------------------------------------------------------------
// Messagelist request and responses (seed 2.6)

/** Body of POST /bat/messagelist: 1 to 5000 messages. */
export const MessagelistRequest = z.strictObject({
  messages: z
    .array(Message)
    .min(1, 'messages must hold at least one message')
    .max(MAX_MESSAGES_PER_LIST, `at most ${MAX_MESSAGES_PER_LIST} messages per request`),
});
export type MessagelistRequest = z.output<typeof MessagelistRequest>;

const Id = z.union([z.string(), z.number()]).transform(String);

/** The SMS form of 2.6: a messagelistId and accepted/rejected per message. */
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
      error: z.unknown().optional(),
    }),
  ),
});

/** The generic form of 2.6: status `sent`, the number under `recipient`. */
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
      error: z.unknown().optional(),
    }),
  ),
});

/** Either shape of seed 2.6, as the provider sends it. */
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
 * Parses either response shape of seed 2.6 into one normalised shape, or returns undefined
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
    const { messageId, status, parts, customerMessageId, to, text } = m;
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
    out[i] = clean({
      messageId: messageId === undefined ? undefined : String(messageId),
      status,
      accepted: status === 'accepted',
      customerMessageId: customerMessageId as string | undefined,
      to: to as string | undefined,
      parts: parts as number | undefined,
      text: text as string | undefined,
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
          messageId: m.messageId,
          status: m.status,
          accepted: m.status === 'accepted',
          customerMessageId: m.customerMessageId,
          to: m.to,
          parts: m.parts,
          text: m.text,
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
        messageId: m.messageId,
        status: m.status,
        accepted: m.status !== 'rejected' && m.status !== 'failed',
        customerMessageId: m.customerMessageId,
        to: m.recipient ?? m.to,
        parts: m.parts,
        text: m.text,
        error: normaliseError(m.error),
        existingMessageId: idOrUndefined(m.existingMessageId),
      }),
    ),
  });
}

function idOrUndefined(v: unknown): string | undefined {
  return typeof v === 'string' || typeof v === 'number' ? String(v) : undefined;
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
