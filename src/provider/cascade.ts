/**
 * The cascade client: one message routed by the provider across Telegram bot, Viber bot,
 * Viber business messages, RCS and SMS (docs/api/cascade/index.md). Two endpoints, the
 * general one and the Telegram-prioritised one, with one of three auth headers.
 *
 * Forms accepted on input (each message is judged by its own fields; docs/provider.md lists
 * where the pages disagree):
 * - the endpoint's own form (send.md "Request Body"): a bare array of `{id, fromName,
 *   toPhone, messageType, text, ttl?, scheduledSent?}`, with `surveyOptions` for viber_survey
 *   (send.md "Viber Survey"), inline `variables` (message-types.md "With Variables") and a
 *   `fallback` (message-types.md "Example with Fallback");
 * - the condensed form (index.md "Request Example"): `{messages: [{recipient, text,
 *   variables: [{id, value}]}]}`, or its messages as an array (the client's old signature),
 *   with the `ttl` and `scheduledTime` of index.md's "Key Features";
 * - variables typed `{id, type: name|url|short_url, value}` (variables.md, message-types.md)
 *   or untyped `{id, value}` (index.md). `%type=id%` resolves to the variable of that type
 *   and id, or to an untyped one of that id; else to one uploaded with `POST /api/items`;
 *   else it is refused (UNKNOWN_VARIABLE). A variable no placeholder names is not sent.
 * - `scheduledTime` (index.md "Message Scheduling") as another spelling of send.md's
 *   `scheduledSent` on the endpoint form too (not both on one message); sent as
 *   `scheduledSent`.
 *
 * What is sent is the endpoint's form (send.md): a bare array, `scheduledSent`, typed
 * variables. The messages' variables are uploaded first in one `POST /api/items` and the
 * messages carry only placeholders (variables.md "Using Variables": step 1 upload, step 2
 * send; send.md's parameters have no `variables`), unless `variables: 'inline'` asks for
 * message-types.md's inline form. See `createCascadeClient` for how uploaded ids are chosen.
 *
 * A condensed-form message has no sender, tracking id or type; mapped to the endpoint form it
 * gets `fromName` from the client's (or the send's) `fromName` option, `id` a fresh UUID
 * (answered back as `trackingId`), and `messageType: 'transaction'` (message-types.md
 * "Decision Tree": transaction is the default). A send made only of condensed messages with
 * no `fromName` configured goes out in the condensed form as it is, as before.
 *
 * No maximum of messages per request is documented, so none is imposed here.
 */
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { AppError, type DetailCode, type ErrorDetail, formatPath } from '../errors.ts';
import { INSTANT_RULE, isStorableInstant } from '../instants.ts';
import { type ClientOptions, clientTransport } from './client.ts';
import { type CallBudget, ProviderError } from './http.ts';
import { addRule, issuesToDetails } from './issues.ts';
import { isE164 } from './message.ts';

/** One of the three cascade auth headers (send.md "Authentication"). */
export type CascadeAuth = { apiKey: string } | { viberBotToken: string } | { tgBotKey: string };

export function cascadeAuthHeaders(auth: CascadeAuth): Record<string, string> {
  if ('apiKey' in auth) return { 'X-Authorization-Key': auth.apiKey };
  if ('viberBotToken' in auth) return { 'X-Viber-Auth-Token': auth.viberBotToken };
  return { 'X-Tg-Bot-Key': auth.tgBotKey };
}

// ---------------------------------------------------------------------------------------
// Limits (each a single place to change)

/** send.md "Parameters". */
export const CASCADE_MESSAGE_TYPES = ['transaction', 'promo', 'viber_survey', 'flashcall'] as const;
export type CascadeMessageType = (typeof CASCADE_MESSAGE_TYPES)[number];

/** variables.md "Variable Types". */
export const PLACEHOLDER_KINDS = ['name', 'url', 'short_url'] as const;
export type VariableType = (typeof PLACEHOLDER_KINDS)[number];

/** send.md "Viber Survey" and message-types.md "Constraints": text at most 85, 2-5 options. */
export const CASCADE_SURVEY = { maxText: 85, minOptions: 2, maxOptions: 5, maxOption: 50 };

/** send.md "Tracking IDs": keep IDs under 255 characters. */
export const MAX_TRACKING_ID = 255;

// ---------------------------------------------------------------------------------------
// Field rules

function required(field: string, type = 'a string') {
  return {
    error: (issue: { input?: unknown }) =>
      issue.input === undefined ? `${field} is required` : `${field} must be ${type}`,
  };
}

const codePoints = (s: string) => [...s].length;

function phoneField(field: string) {
  return z.string(required(field)).superRefine((v, ctx) => {
    if (!isE164(v)) {
      addRule(
        ctx,
        [],
        'INVALID_RECIPIENT',
        `${field} must be a valid phone number written in E.164, such as +380501234567`,
      );
    }
  });
}

function dateTimeField(field: string) {
  return z.string(required(field)).superRefine((v, ctx) => {
    if (!z.iso.datetime({ offset: true }).safeParse(v).success) {
      addRule(
        ctx,
        [],
        'INVALID_DATETIME',
        `${field} must be an ISO 8601 date and time with a zone, such as 2025-01-25T10:00:00Z`,
      );
    } else if (!isStorableInstant(Date.parse(v))) {
      addRule(ctx, [], 'INVALID_DATETIME', `${field} ${v} is not ${INSTANT_RULE}`);
    }
  });
}

const Ttl = z
  .number(required('ttl', 'a number of seconds'))
  .int('ttl must be a whole number of seconds')
  .positive('ttl must be at least 1 second');

/**
 * A variable: typed (variables.md) or untyped (index.md). A `short_url` value must be an
 * http(s) URL (variables.md "Troubleshooting": the shortener needs one); a `url` is not
 * checked, since index.md's own example puts an order number in `%url=2%`.
 */
export const CascadeVariable = z
  .strictObject({
    id: z
      .number(required('id', 'an integer'))
      .int('id must be an integer')
      .nonnegative('id must not be negative'),
    type: z
      .enum(PLACEHOLDER_KINDS, { error: 'type must be one of name, url, short_url' })
      .optional(),
    value: z.string(required('value')),
  })
  .superRefine((v, ctx) => {
    if (v.type === 'short_url') checkShortUrl(ctx, ['value'], v.value, `variable ${v.id}`);
  });
export type CascadeVariable = z.infer<typeof CascadeVariable>;
export type CascadeVariableInput = z.input<typeof CascadeVariable>;

/** A variable as uploaded or sent: always typed. */
export interface TypedCascadeVariable {
  id: number;
  type: VariableType;
  value: string;
}

type Ctx = z.RefinementCtx;

function checkShortUrl(ctx: Ctx, path: PropertyKey[], value: string, what: string): void {
  if (!/^https?:\/\/[^\s/]+/i.test(value)) {
    addRule(
      ctx,
      path,
      'INVALID_URL',
      `${what} is a short_url, so its value must be an http:// or https:// URL`,
    );
  }
}

/** Two variables of one id clash when their types are equal or one has none. */
function variableClashes(
  variables: readonly CascadeVariableInput[],
): Array<{ index: number; code: DetailCode; message: string }> {
  const out: Array<{ index: number; code: DetailCode; message: string }> = [];
  variables.forEach((v, i) => {
    const clash = variables.findIndex(
      (w, j) => j < i && w.id === v.id && (w.type === v.type || !w.type || !v.type),
    );
    if (clash >= 0) {
      out.push({
        index: i,
        code: 'DUPLICATE_VARIABLE',
        message: `variable id ${v.id} appears twice${v.type ? ` for type ${v.type}` : ''} (variables[${clash}] has it)`,
      });
    }
  });
  return out;
}

/** `%kind=id%` spans in a text; `id` is kept as written so a non-integer can be reported. */
export function placeholders(text: string): Array<{ kind: string; id: string; raw: string }> {
  return Array.from(text.matchAll(/%([a-z_]+)=([^%\s]*)%/g), (m) => ({
    kind: m[1] ?? '',
    id: m[2] ?? '',
    raw: m[0],
  }));
}

/** Whether an uploaded variable of this type and id is known. */
export type UploadedVariables = (type: VariableType, id: number) => boolean;

/**
 * The variable a placeholder names: inline first (the same type and id, or an untyped one of
 * that id), else `undefined` (an uploaded one may still answer).
 */
export function findVariable(
  variables: readonly CascadeVariable[],
  type: VariableType,
  id: number,
): CascadeVariable | undefined {
  return (
    variables.find((v) => v.id === id && v.type === type) ??
    variables.find((v) => v.id === id && v.type === undefined)
  );
}

/**
 * Problems with the placeholders of `text`: an unknown kind, an id that is not an integer,
 * or a variable found neither inline nor (when `uploaded` is given) among uploaded ones.
 */
function placeholderProblems(
  text: string,
  variables: readonly CascadeVariable[],
  uploaded: UploadedVariables | undefined,
): Array<{ code: DetailCode; message: string }> {
  const out: Array<{ code: DetailCode; message: string }> = [];
  for (const p of placeholders(text)) {
    if (!(PLACEHOLDER_KINDS as readonly string[]).includes(p.kind)) {
      out.push({
        code: 'UNKNOWN_PLACEHOLDER',
        message: `${p.raw}: placeholders are ${PLACEHOLDER_KINDS.map((k) => `%${k}=id%`).join(', ')}`,
      });
      continue;
    }
    if (!/^[0-9]+$/.test(p.id)) {
      out.push({ code: 'INVALID_PLACEHOLDER', message: `${p.raw}: the id must be an integer` });
      continue;
    }
    const kind = p.kind as VariableType;
    const id = Number(p.id);
    const inline = findVariable(variables, kind, id);
    if (inline !== undefined) {
      if (kind === 'short_url' && !/^https?:\/\//i.test(inline.value)) {
        out.push({
          code: 'INVALID_URL',
          message: `${p.raw} shortens variable ${id}, whose value is not an http:// or https:// URL`,
        });
      }
      continue;
    }
    if (uploaded?.(kind, id)) continue;
    out.push({
      code: 'UNKNOWN_VARIABLE',
      message: `${p.raw} names variable ${id} of type ${kind}, which is not in variables${uploaded ? ' nor uploaded with POST /api/items' : ''}`,
    });
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Messages

function checkTypeRules(
  ctx: Ctx,
  m: { messageType: CascadeMessageType; text?: string | undefined; surveyOptions?: string[] },
): void {
  if (m.messageType !== 'flashcall' && m.text === undefined) {
    addRule(ctx, ['text'], 'REQUIRED', `text is required for messageType ${m.messageType}`);
  }
  if (m.text !== undefined && m.messageType !== 'flashcall' && m.text.trim() === '') {
    addRule(ctx, ['text'], 'EMPTY_TEXT', 'text must not be empty');
  }
  if (m.messageType === 'viber_survey') {
    if (m.text !== undefined && codePoints(m.text) > CASCADE_SURVEY.maxText) {
      addRule(
        ctx,
        ['text'],
        'TEXT_TOO_LONG',
        `text of a viber_survey is at most ${CASCADE_SURVEY.maxText} characters (got ${codePoints(m.text)})`,
      );
    }
    const n = m.surveyOptions?.length;
    if (n === undefined) {
      addRule(
        ctx,
        ['surveyOptions'],
        'REQUIRED',
        `surveyOptions is required for messageType viber_survey (${CASCADE_SURVEY.minOptions}-${CASCADE_SURVEY.maxOptions} options)`,
      );
    } else if (n < CASCADE_SURVEY.minOptions || n > CASCADE_SURVEY.maxOptions) {
      addRule(
        ctx,
        ['surveyOptions'],
        'SURVEY_OPTIONS_COUNT',
        `surveyOptions must hold ${CASCADE_SURVEY.minOptions} to ${CASCADE_SURVEY.maxOptions} options (got ${n})`,
      );
    }
  } else if (m.surveyOptions !== undefined) {
    addRule(
      ctx,
      ['surveyOptions'],
      'SURVEY_OPTIONS_NOT_ALLOWED',
      `surveyOptions is only for messageType viber_survey, not ${m.messageType}`,
    );
  }
}

const MessageTypeField = z.enum(CASCADE_MESSAGE_TYPES, {
  error: (issue) =>
    issue.input === undefined
      ? 'messageType is required'
      : `messageType must be one of ${CASCADE_MESSAGE_TYPES.join(', ')}`,
});

/**
 * A survey option: 1 to 50 characters. message-types.md "Constraints" advises keeping each
 * under 30; 50 is the Viber survey's own limit (docs viber.md), which a cascade survey goes
 * out on, so 30-50 is not refused.
 */
const SurveyOption = z.string(required('a survey option')).superRefine((s, ctx) => {
  if (s.trim() === '') addRule(ctx, [], 'EMPTY_OPTION', 'a survey option must not be empty');
  else if (codePoints(s) > CASCADE_SURVEY.maxOption) {
    addRule(
      ctx,
      [],
      'OPTION_TOO_LONG',
      `a survey option is at most ${CASCADE_SURVEY.maxOption} characters (got ${codePoints(s)})`,
    );
  }
});

/** message-types.md "Example with Fallback": `{messageType, text}`, tried when the primary fails. */
export const CascadeFallback = z
  .strictObject({
    messageType: MessageTypeField,
    text: z.string(required('text')).optional(),
    surveyOptions: z.array(SurveyOption, required('surveyOptions', 'an array')).optional(),
  })
  .superRefine((f, ctx) => checkTypeRules(ctx, f));
export type CascadeFallback = z.infer<typeof CascadeFallback>;

const Scheduling = {
  ttl: Ttl.optional(),
  scheduledSent: dateTimeField('scheduledSent').optional(),
  /** index.md "Message Scheduling" spells it so; sent as scheduledSent. */
  scheduledTime: dateTimeField('scheduledTime').optional(),
};

function checkScheduling(ctx: Ctx, m: { scheduledSent?: string; scheduledTime?: string }) {
  if (m.scheduledSent !== undefined && m.scheduledTime !== undefined) {
    addRule(
      ctx,
      ['scheduledTime'],
      'CONFLICTING_FIELDS',
      'give scheduledSent or scheduledTime (its other spelling), not both',
    );
  }
}

function schedulingOut<T extends { scheduledSent?: string; scheduledTime?: string }>(
  m: T,
): Omit<T, 'scheduledTime'> {
  const { scheduledTime, ...rest } = m;
  const at = m.scheduledSent ?? scheduledTime;
  return (at === undefined ? rest : { ...rest, scheduledSent: at }) as Omit<T, 'scheduledTime'>;
}

/** The endpoint's form (send.md "Request Body", "Message Types"), one message. */
export const EndpointCascadeMessage = z
  .strictObject({
    id: z
      .string(required('id'))
      .min(1, 'id must not be empty')
      .max(MAX_TRACKING_ID, `id is at most ${MAX_TRACKING_ID} characters`),
    fromName: z.string(required('fromName')).superRefine((v, ctx) => {
      if (v.trim() === '') addRule(ctx, [], 'INVALID_SENDER', 'fromName must not be empty');
    }),
    toPhone: phoneField('toPhone'),
    messageType: MessageTypeField,
    text: z.string(required('text')).optional(),
    ...Scheduling,
    surveyOptions: z.array(SurveyOption, required('surveyOptions', 'an array')).optional(),
    variables: z.array(CascadeVariable, required('variables', 'an array')).optional(),
    fallback: CascadeFallback.optional(),
  })
  .superRefine((m, ctx) => {
    checkTypeRules(ctx, m);
    checkScheduling(ctx, m);
  })
  .transform(schedulingOut);
export type EndpointCascadeMessage = z.output<typeof EndpointCascadeMessage>;
export type EndpointCascadeMessageInput = z.input<typeof EndpointCascadeMessage>;

/** The condensed form (index.md "Request Example"), one message, with index.md's ttl and scheduledTime. */
export const CondensedCascadeMessage = z.strictObject({
  recipient: phoneField('recipient'),
  text: z.string(required('text')).min(1, 'text is required'),
  variables: z.array(CascadeVariable, required('variables', 'an array')).default([]),
  /** index.md "Time-to-Live" and "Message Scheduling", the page of this form. */
  ttl: Ttl.optional(),
  scheduledTime: dateTimeField('scheduledTime').optional(),
});
export type CondensedCascadeMessage = z.output<typeof CondensedCascadeMessage>;
export type CondensedCascadeMessageInput = z.input<typeof CondensedCascadeMessage>;

export type CascadeMessage = EndpointCascadeMessage | CondensedCascadeMessage;
export type CascadeMessageInput = EndpointCascadeMessageInput | CondensedCascadeMessageInput;

export function isCondensed(m: CascadeMessage): m is CondensedCascadeMessage {
  return 'recipient' in m;
}

/** The condensed form is told by `recipient` without `toPhone`; anything else is judged as the endpoint's. */
function schemaFor(item: unknown) {
  const o = item && typeof item === 'object' ? (item as Record<string, unknown>) : {};
  return 'recipient' in o && !('toPhone' in o) ? CondensedCascadeMessage : EndpointCascadeMessage;
}

/** How a cascade request body was written: send.md's bare array, or index.md's `{messages}`. */
export type CascadeBodyForm = 'array' | 'messages';

export type CheckedCascade =
  | { ok: true; form: CascadeBodyForm; messages: CascadeMessage[] }
  | { ok: false; details: ErrorDetail[] };

/**
 * Checks a cascade request body (a bare array, or `{messages: [...]}`) of messages in either
 * form: structure, type rules, then each placeholder against its message's variables and,
 * when `uploaded` is given, the uploaded ones. Detail codes are UPPER_SNAKE_CASE and paths
 * are written as the body is (`[1].toPhone`, `messages[0].text`), or always under
 * `messages` with `pathPrefix: 'messages'`.
 */
export function checkCascade(
  body: unknown,
  opts: { uploaded?: UploadedVariables; pathPrefix?: 'messages' } = {},
): CheckedCascade {
  let form: CascadeBodyForm;
  let list: unknown;
  if (Array.isArray(body)) {
    form = 'array';
    list = body;
  } else if (body && typeof body === 'object' && 'messages' in body) {
    form = 'messages';
    const extra = Object.keys(body).filter((k) => k !== 'messages');
    if (extra.length > 0) {
      return {
        ok: false,
        details: extra.map((k) => ({
          path: k,
          code: 'UNKNOWN_FIELD',
          message: `${k} is not a field of a cascade request`,
        })),
      };
    }
    list = (body as { messages: unknown }).messages;
  } else {
    return {
      ok: false,
      details: [
        {
          path: '',
          code: 'INVALID_TYPE',
          message:
            'a cascade request is an array of messages (send.md) or {"messages": [...]} (index.md)',
        },
      ],
    };
  }
  const base: PropertyKey[] = form === 'messages' || opts.pathPrefix ? ['messages'] : [];
  if (!Array.isArray(list)) {
    return {
      ok: false,
      details: [{ path: 'messages', code: 'INVALID_TYPE', message: 'messages must be an array' }],
    };
  }
  if (list.length === 0) {
    return {
      ok: false,
      details: [
        {
          path: formatPath(base) || 'messages',
          code: 'NO_MESSAGES',
          message: 'messages must hold at least one message',
        },
      ],
    };
  }
  const details: ErrorDetail[] = [];
  const messages: CascadeMessage[] = [];
  list.forEach((item, i) => {
    const parsed = schemaFor(item).safeParse(item, { reportInput: true });
    if (!parsed.success) {
      details.push(...cascadeDetails(parsed.error.issues, [...base, i]));
      return;
    }
    const m = parsed.data;
    messages.push(m);
    const vars = m.variables ?? [];
    for (const c of variableClashes(vars)) {
      const path = formatPath([...base, i, 'variables', c.index, 'id']);
      details.push({ path, code: c.code, message: c.message });
    }
    const texts: Array<[PropertyKey[], string | undefined]> = [
      [['text'], m.text],
      [['fallback', 'text'], isCondensed(m) ? undefined : m.fallback?.text],
    ];
    for (const [path, text] of texts) {
      if (text === undefined) continue;
      for (const p of placeholderProblems(text, vars, opts.uploaded)) {
        details.push({ path: formatPath([...base, i, ...path]), ...p });
      }
    }
  });
  // Tracking ids come back as trackinId: two messages with one id could not be told apart.
  const seen = new Map<string, number>();
  messages.forEach((m, i) => {
    if (isCondensed(m)) return;
    const first = seen.get(m.id);
    if (first !== undefined) {
      details.push({
        path: formatPath([...base, i, 'id']),
        code: 'DUPLICATE_ID',
        message: `id ${JSON.stringify(m.id)} is also the id of message ${first}; tracking ids must be unique`,
      });
    } else seen.set(m.id, i);
  });
  return details.length > 0 ? { ok: false, details } : { ok: true, form, messages };
}

/** zod issues to details with UPPER_SNAKE_CASE codes; a missing field is `REQUIRED`. */
function cascadeDetails(issues: readonly z.core.$ZodIssue[], prefix: PropertyKey[]) {
  const marked = issues.map((issue) =>
    (issue.code === 'invalid_type' || issue.code === 'invalid_value') &&
    'input' in issue &&
    issue.input === undefined
      ? ({ ...issue, code: 'custom', params: { rule: 'REQUIRED' } } as z.core.$ZodIssue)
      : issue,
  );
  return issuesToDetails(marked, prefix).map((d) => ({
    ...d,
    message:
      d.code === 'UNKNOWN_FIELD'
        ? `${d.path.split(/[.\]]/).pop()} is not a field of a cascade message`
        : d.message,
  }));
}

/**
 * Validates cascade messages (an array, or `{messages: [...]}`); throws an `AppError`
 * (VALIDATION_ERROR, or INVALID_RECIPIENT when a phone number is the problem) with a detail
 * per problem, paths like `messages[1].text`. `uploaded` says which placeholders may name a
 * variable uploaded earlier rather than one of the message's own.
 */
export function validateCascade(
  messages: unknown,
  opts: { uploaded?: UploadedVariables } = {},
): { form: CascadeBodyForm; messages: CascadeMessage[] } {
  const checked = checkCascade(messages, { ...opts, pathPrefix: 'messages' });
  if (checked.ok) return { form: checked.form, messages: checked.messages };
  const recipient = checked.details.find((d) => d.code === 'INVALID_RECIPIENT');
  const first = recipient ?? checked.details[0];
  throw new AppError(
    recipient ? 'INVALID_RECIPIENT' : 'VALIDATION_ERROR',
    first ? `${first.path}: ${first.message}` : 'invalid cascade request',
    checked.details,
  );
}

// ---------------------------------------------------------------------------------------
// Variable uploads (variables.md "Step 1: Upload Variable Values")

export const UploadVariablesRequest = z
  .strictObject({
    variables: z
      .array(
        z.strictObject({
          id: z
            .number(required('id', 'an integer'))
            .int('id must be an integer')
            .nonnegative('id must not be negative'),
          type: z.enum(PLACEHOLDER_KINDS, {
            error: (issue) =>
              issue.input === undefined
                ? 'type is required: an uploaded variable is named by %type=id%'
                : 'type must be one of name, url, short_url',
          }),
          value: z.string(required('value')),
        }),
        required('variables', 'an array'),
      )
      .min(1, 'variables must hold at least one variable'),
  })
  .superRefine((r, ctx) => {
    r.variables.forEach((v, i) => {
      if (v.type === 'short_url') {
        checkShortUrl(ctx, ['variables', i, 'value'], v.value, `variable ${v.id}`);
      }
    });
    for (const c of variableClashes(r.variables)) {
      addRule(ctx, ['variables', c.index, 'id'], c.code, c.message);
    }
  });
export type UploadVariablesRequest = z.infer<typeof UploadVariablesRequest>;

/** Checks an upload body; details as `checkCascade`'s. */
export function checkUploadVariables(
  body: unknown,
): { ok: true; variables: TypedCascadeVariable[] } | { ok: false; details: ErrorDetail[] } {
  const parsed = UploadVariablesRequest.safeParse(body, { reportInput: true });
  if (parsed.success) return { ok: true, variables: parsed.data.variables };
  return { ok: false, details: cascadeDetails(parsed.error.issues, []) };
}

// ---------------------------------------------------------------------------------------
// Responses

/** Per message: the provider's GUID and its tracking id (`trackinId` on the wire). */
export const CascadeResult = z.object({
  messageId: z.string(),
  trackingId: z.string().optional(),
});
export type CascadeResult = z.infer<typeof CascadeResult>;

const WireResult = z
  .looseObject({
    messageId: z.union([z.string(), z.number()]).transform(String),
    trackinId: z.union([z.string(), z.number()]).transform(String).optional(),
    trackingId: z.union([z.string(), z.number()]).transform(String).optional(),
  })
  .transform((r): CascadeResult => {
    const trackingId = r.trackinId ?? r.trackingId;
    return trackingId === undefined
      ? { messageId: r.messageId }
      : { messageId: r.messageId, trackingId };
  });

/**
 * The response: an array of `{messageId, trackinId}` (send.md "Success Response", index.md
 * "Response Format"); also one such object alone, or a list under `messages`.
 */
export function parseCascadeResponse(body: unknown): CascadeResult[] | undefined {
  const list = Array.isArray(body)
    ? body
    : body && typeof body === 'object' && Array.isArray((body as { messages?: unknown }).messages)
      ? (body as { messages: unknown[] }).messages
      : [body];
  const parsed = z.array(WireResult).safeParse(list);
  return parsed.success ? parsed.data : undefined;
}

// ---------------------------------------------------------------------------------------
// The wire form

export const CASCADE_PATHS = {
  general: '/api/CascadeMessage/send_message/async',
  'tg-viber': '/api/CascadeMessage/send_message/tg-viber/async',
} as const;

/** variables.md "Step 1: Upload Variable Values". */
export const CASCADE_ITEMS_PATH = '/api/items';

/** A message as POSTed (send.md "Request Body"). */
export interface WireCascadeMessage {
  id: string;
  fromName: string;
  toPhone: string;
  messageType: CascadeMessageType;
  text?: string;
  ttl?: number;
  scheduledSent?: string;
  surveyOptions?: string[];
  variables?: TypedCascadeVariable[];
  fallback?: CascadeFallback;
}

/**
 * The typed variables a text's placeholders use, from the message's own (an untyped one
 * takes the type of each placeholder naming it); placeholders they do not answer are left
 * to uploaded variables. A variable no placeholder names is not sent.
 */
export function usedVariables(
  texts: ReadonlyArray<string | undefined>,
  variables: readonly CascadeVariable[],
): TypedCascadeVariable[] {
  const out = new Map<string, TypedCascadeVariable>();
  for (const text of texts) {
    for (const p of placeholders(text ?? '')) {
      if (!(PLACEHOLDER_KINDS as readonly string[]).includes(p.kind) || !/^\d+$/.test(p.id)) {
        continue;
      }
      const type = p.kind as VariableType;
      const v = findVariable(variables, type, Number(p.id));
      if (v !== undefined) out.set(`${type}=${v.id}`, { id: v.id, type, value: v.value });
    }
  }
  return [...out.values()];
}

/** Rewrites `%type=id%` for the pairs in `ids` (key `type=id`). */
function renumber(text: string | undefined, ids: ReadonlyMap<string, number>): string | undefined {
  return text?.replace(/%([a-z_]+)=(\d+)%/g, (whole, kind: string, id: string) => {
    const to = ids.get(`${kind}=${Number(id)}`);
    return to === undefined ? whole : `%${kind}=${to}%`;
  });
}

/**
 * Chooses the ids under which message variables are uploaded, per type, so that a value
 * uploaded for one message is not overwritten by another's while the first may still be
 * waiting to be sent: one value keeps one id (variables.md "Best Practices": reuse IDs for
 * the same variables), a new value takes the next id of the range not given to another
 * value, and an id comes round again only after every other id of the range has been given
 * out since. Ids uploaded with `uploadVariables` are the caller's and are never taken.
 */
export function createVariableIds(range: { first: number; last: number }) {
  type Slot = { byValue: Map<string, number>; byId: Map<number, string>; next: number };
  const slots = new Map<VariableType, Slot>();
  const pinned = new Map<VariableType, Map<number, string>>();
  const size = range.last - range.first + 1;
  const slot = (t: VariableType): Slot => {
    let s = slots.get(t);
    if (s === undefined) {
      s = { byValue: new Map(), byId: new Map(), next: range.first };
      slots.set(t, s);
    }
    return s;
  };
  return {
    /** The id `value` is uploaded under (allocating one when new). */
    idFor(type: VariableType, value: string): number {
      const s = slot(type);
      const known = s.byValue.get(value);
      if (known !== undefined) return known;
      const pins = pinned.get(type);
      for (let tries = 0; tries < size; tries++) {
        const id = s.next;
        s.next = id >= range.last ? range.first : id + 1;
        if (pins?.has(id)) continue;
        const old = s.byId.get(id);
        if (old !== undefined) s.byValue.delete(old);
        s.byId.set(id, value);
        s.byValue.set(value, id);
        return id;
      }
      throw new AppError(
        'VALIDATION_ERROR',
        `no ${type} variable id is free in ${range.first}-${range.last}: every one was uploaded by uploadVariables`,
      );
    },
    /** Records ids the caller uploaded itself. */
    pin(variables: readonly TypedCascadeVariable[]): void {
      for (const v of variables) {
        let pins = pinned.get(v.type);
        if (pins === undefined) {
          pins = new Map();
          pinned.set(v.type, pins);
        }
        pins.set(v.id, v.value);
        const s = slot(v.type);
        const old = s.byId.get(v.id);
        if (old !== undefined) {
          s.byId.delete(v.id);
          s.byValue.delete(old);
        }
      }
    },
    /**
     * Whether the caller uploaded a variable of this type and id (`pin`). Ids chosen for
     * message variables do not count: a placeholder that names one by chance would be sent
     * another message's value.
     */
    has(type: VariableType, id: number): boolean {
      return pinned.get(type)?.has(id) === true;
    },
  };
}

/** Condensed -> endpoint form: what fills the fields the condensed form lacks (see the top). */
function endpointFields(
  m: CascadeMessage,
  fromName: string | undefined,
): Omit<WireCascadeMessage, 'variables'> & { variables: CascadeVariable[] } {
  if (!isCondensed(m)) {
    const { variables, ...rest } = m;
    return { ...rest, variables: variables ?? [] };
  }
  return {
    id: randomUUID(),
    fromName: fromName ?? '',
    toPhone: m.recipient,
    messageType: 'transaction',
    text: m.text,
    ...(m.ttl !== undefined && { ttl: m.ttl }),
    ...(m.scheduledTime !== undefined && { scheduledSent: m.scheduledTime }),
    variables: m.variables,
  };
}

/** How a send carries the messages' variables. */
export type CascadeVariableMode = 'upload' | 'inline';

export interface CascadeSendOptions extends CallBudget {
  endpoint?: keyof typeof CASCADE_PATHS;
  /** Overrides the client's `fromName` for condensed-form messages of this send. */
  fromName?: string;
  /** Overrides the client's `variables` mode for this send. */
  variables?: CascadeVariableMode;
  /**
   * Variables uploaded other than through this client (another process, an earlier run) that
   * placeholders may name; those this client uploaded are known already.
   */
  uploaded?: UploadedVariables;
}

export interface CascadeClient {
  /**
   * Validates, uploads the messages' variables when needed (one POST /api/items), then POSTs
   * the messages to the general endpoint (or `endpoint: 'tg-viber'`). Results are in the
   * order of the messages.
   */
  send(
    messages: readonly CascadeMessageInput[] | { messages: readonly CascadeMessageInput[] },
    opts?: CascadeSendOptions,
  ): Promise<CascadeResult[]>;
  /**
   * Uploads typed variables (`POST /api/items {"variables": [...]}`); later sends may name
   * them in placeholders without carrying them. Their ids are the caller's.
   */
  uploadVariables(
    variables: readonly TypedCascadeVariable[],
    opts?: { signal?: AbortSignal },
  ): Promise<void>;
}

export interface CascadeClientOptions extends ClientOptions {
  auth: CascadeAuth;
  /** fromName for condensed-form messages, which have none. */
  fromName?: string;
  /**
   * 'upload' (default): the messages' variables go in one POST /api/items before the send,
   * under ids this client chooses (`variableIds`), and the messages carry only placeholders
   * (variables.md). 'inline': each message carries its variables, typed, under their own ids
   * (message-types.md "With Variables"); nothing is uploaded.
   */
  variables?: CascadeVariableMode;
  /**
   * The ids this client uploads message variables under (default 1-100000). Processes that
   * share one account and send variables at the same time need ranges that do not overlap.
   */
  variableIds?: { first: number; last: number };
}

/**
 * Placeholders of message variables that this client uploads are renumbered into
 * `variableIds` (see `createVariableIds`): the provider keeps uploaded values per account,
 * and the docs do not say whether a message reads them when it is accepted or when it is
 * delivered, so two sends must never upload different values under one id. The condensed
 * form sent as it is (no fromName) keeps its variables inline, as before.
 *
 * @example
 * const cascade = createCascadeClient({ baseUrl, auth: { apiKey: 'k' }, fromName: 'Acme', limiter });
 * await cascade.send([{ recipient: '+380501234567', text: 'Hi %name=1%', variables: [{ id: 1, value: 'Ann' }] }]);
 * await cascade.send([{ id: 'o-1', fromName: 'Acme', toPhone: '+380501234567', messageType: 'transaction', text: 'Shipped' }]);
 */
export function createCascadeClient(opts: CascadeClientOptions): CascadeClient {
  const { transport } = clientTransport(opts, cascadeAuthHeaders(opts.auth));
  const ids = createVariableIds(opts.variableIds ?? { first: 1, last: 100_000 });

  async function post(path: string, json: unknown, o: CallBudget) {
    return transport.request({
      method: 'POST',
      path,
      limitClass: 'messaging',
      json,
      signal: o.signal,
      maxRateLimitWaitMs: o.maxRateLimitWaitMs,
    });
  }

  async function upload(variables: readonly TypedCascadeVariable[], o: CallBudget) {
    await post(CASCADE_ITEMS_PATH, { variables }, o);
  }

  return {
    async uploadVariables(variables, o = {}) {
      const checked = checkUploadVariables({ variables });
      if (!checked.ok) {
        const first = checked.details[0];
        throw new AppError(
          'VALIDATION_ERROR',
          first ? `${first.path}: ${first.message}` : 'invalid variables',
          checked.details,
        );
      }
      await upload(checked.variables, o);
      ids.pin(checked.variables);
    },

    async send(input, o = {}) {
      const known = o.uploaded;
      const { messages } = validateCascade(input, {
        uploaded: (type, id) => ids.has(type, id) || known?.(type, id) === true,
      });
      const path = CASCADE_PATHS[o.endpoint ?? 'general'];
      const fromName = o.fromName ?? opts.fromName;
      const mode = o.variables ?? opts.variables ?? 'upload';
      let body: unknown;
      if (fromName === undefined && messages.every(isCondensed)) {
        // No sender to map them with: the condensed form as it is (index.md).
        body = { messages };
      } else {
        const missing = messages.findIndex((m) => isCondensed(m));
        if (fromName === undefined && missing >= 0) {
          throw new AppError(
            'VALIDATION_ERROR',
            `messages[${missing}]: a condensed-form message sent with endpoint-form ones needs fromName (the client's or the send's fromName option)`,
            [
              {
                path: `messages[${missing}]`,
                code: 'REQUIRED',
                message:
                  'fromName is required to send a condensed-form message in the endpoint form',
              },
            ],
          );
        }
        const toUpload = new Map<string, TypedCascadeVariable>();
        const wire = messages.map((m): WireCascadeMessage => {
          const { variables, ...rest } = endpointFields(m, fromName);
          const used = usedVariables([rest.text, rest.fallback?.text], variables);
          if (used.length === 0) return rest;
          if (mode === 'inline') return { ...rest, variables: used };
          const renamed = new Map<string, number>();
          for (const v of used) {
            const id = ids.idFor(v.type, v.value);
            renamed.set(`${v.type}=${v.id}`, id);
            toUpload.set(`${v.type}=${id}`, { id, type: v.type, value: v.value });
          }
          const text = renumber(rest.text, renamed);
          const fallbackText = renumber(rest.fallback?.text, renamed);
          return {
            ...rest,
            ...(text !== undefined && { text }),
            ...(rest.fallback &&
              fallbackText !== undefined && { fallback: { ...rest.fallback, text: fallbackText } }),
          };
        });
        if (toUpload.size > 0) await upload([...toUpload.values()], o);
        body = wire;
      }
      const res = await post(path, body, o);
      const results = parseCascadeResponse(res.json);
      if (!results) {
        throw new ProviderError(
          'invalid_response',
          `POST ${path}: no messageId in ${res.text.slice(0, 200)}`,
          {
            status: res.status,
            body: res.json ?? res.text,
            method: 'POST',
            path,
          },
        );
      }
      return results;
    },
  };
}
