/**
 * What the API says about messages: one zod schema per shape, reused by the routes for
 * validation and by the OpenAPI document (the `.meta()` ids name the components).
 */
import { z } from 'zod';
import { DETAIL_CODES } from '../errors.ts';
import { MessageStatus } from './status.ts';

export const ErrorDetailView = z
  .object({
    path: z.string().meta({ example: 'messages[0].to' }),
    code: z.enum(DETAIL_CODES).meta({ example: 'INVALID_RECIPIENT' }),
    message: z.string(),
    line: z
      .number()
      .int()
      .optional()
      .meta({ description: 'JSON_SYNTAX only: line of the first error, from 1' }),
    column: z
      .number()
      .int()
      .optional()
      .meta({ description: 'JSON_SYNTAX only: column of the first error, from 1' }),
  })
  .meta({ id: 'ErrorDetail' });

export const ErrorBody = z
  .object({
    error: z.object({
      code: z.string().meta({ example: 'VALIDATION_ERROR' }),
      message: z.string(),
      details: z.array(ErrorDetailView),
      requestId: z.string().optional(),
    }),
  })
  .meta({ id: 'Error', description: 'The one error envelope of every non-2xx answer.' });

export const TimelineEvent = z
  .object({
    status: z.string().meta({
      description: 'a canonical status, or a vendor status kept verbatim',
      example: 'queued',
    }),
    at: z.string().meta({ description: "the event's own time (ISO 8601)" }),
    receivedAt: z.string().meta({ description: 'when Switchboard stored it (ISO 8601)' }),
    source: z.enum(['api', 'dispatch', 'provider', 'callback', 'poll', 'call', 'expiry']),
    detail: z.unknown().optional(),
    claimedAt: z.string().optional().meta({
      description:
        'the time the event claimed, when it was not believed (see timeRejected); `at` is then when it was received (ISO 8601)',
    }),
    timeRejected: z.enum(['before-created', 'future']).optional().meta({
      description:
        'why the claimed time was not believed: before the message was created, or more than 5 minutes after it was received',
    }),
  })
  .meta({ id: 'TimelineEvent' });
export type TimelineEvent = z.infer<typeof TimelineEvent>;

export const MessageSummary = z
  .object({
    id: z.string().meta({ example: '0193f1c2-7b4e-7c1a-9f3d-2a6b8c0d1e2f' }),
    customerMessageId: z.string(),
    providerMessageId: z.string().nullable(),
    messagelistId: z.number().int().nullable(),
    type: z.string().meta({ example: 'sms' }),
    from: z.string().meta({ example: 'Acme' }),
    to: z.string().meta({ example: '+380501234567' }),
    status: MessageStatus,
    parts: z.number().int().nullable(),
    callId: z.string().nullable(),
    deliveredVia: z
      .string()
      .nullable()
      .meta({ description: 'the channel that finally delivered, when fallbacks were used' }),
    error: z.unknown().nullable(),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .meta({ id: 'MessageSummary' });
export type MessageSummary = z.infer<typeof MessageSummary>;

/** What the provider answered a flash call with (flashcall.md, "Response Format"). */
export const FlashcallAnswer = z
  .object({
    callerId: z
      .string()
      .optional()
      .meta({ description: 'the number that calls', example: '+380123456789' }),
    pattern: z
      .string()
      .optional()
      .meta({ description: 'the caller id with digits masked by *', example: '***456789' }),
    ttl: z.number().int().optional().meta({ description: 'seconds the call is valid' }),
    code: z
      .string()
      .optional()
      .meta({ description: 'the code the provider chose, when it answers with one' }),
  })
  .meta({ id: 'FlashcallAnswer' });
export type FlashcallAnswer = z.infer<typeof FlashcallAnswer>;

/** One channel of what was sent: the message itself, or one of its fallbacks. */
export const SentFallback = z
  .looseObject({
    type: z.string().meta({ example: 'sms' }),
    from: z.string().meta({ example: 'Acme' }),
    to: z.string().meta({ example: '+380501234567' }),
    text: z.string().optional().meta({ example: 'Your order 42 has shipped' }),
    messageData: z
      .unknown()
      .optional()
      .meta({ description: "the type's messageData (buttons, files, survey, flash call, ...)" }),
  })
  .meta({
    id: 'SentFallback',
    description: 'a fallback as sent, with its own from and to; other fields (ttl, ...) as given',
  });
export type SentFallback = z.infer<typeof SentFallback>;

export const SentMessage = SentFallback.extend({
  fallbacks: z
    .array(SentFallback)
    .optional()
    .meta({ description: 'in the order they are tried; a single `fallback` is shown here too' }),
}).meta({
  id: 'SentMessage',
  description:
    "The message as Switchboard sends it, in the canonical form POST /v1/messages takes: fallbacks as a `fallbacks` list, each with its own from and to; a cascade in Switchboard's field names (from, to, dtSend) with its own `fallback`; other fields (dtSend, dtExpire, ttl, messageType, variables, ...) as given. A call's follow-up shows its rendered text. Left out: customerMessageId (above) and a speechcall's menu (the compiled flow, with signed webhook tokens).",
});
export type SentMessage = z.infer<typeof SentMessage>;

export const ContentRemoved = z
  .object({
    reason: z.enum(['retention']).meta({
      description:
        'retention: RETENTION_DAYS passed and the texts were removed (an erasure removes the whole message: its reads answer 404 with a detail ERASED)',
    }),
    at: z.string().nullable().meta({
      description: 'when (ISO 8601); null for texts removed before Switchboard recorded the time',
    }),
  })
  .meta({ id: 'ContentRemoved' });
export type ContentRemoved = z.infer<typeof ContentRemoved>;

export const MessageView = MessageSummary.extend({
  timeline: z.array(TimelineEvent),
  flashcall: FlashcallAnswer.optional().meta({
    description: "a flash call's answer from the provider, once it was sent",
  }),
  sent: SentMessage.nullable().meta({
    description: 'what was (or, while queued, will be) sent; null once its texts were removed',
  }),
  contentRemoved: ContentRemoved.optional().meta({
    description: 'present when `sent` is null: why and when the texts were removed',
  }),
}).meta({
  id: 'Message',
});
export type MessageView = z.infer<typeof MessageView>;

export const MessageList = z
  .object({
    items: z.array(MessageSummary),
    nextCursor: z.string().nullable().meta({ description: 'pass as `cursor` for the next page' }),
  })
  .meta({ id: 'MessageList' });
export type MessageList = z.infer<typeof MessageList>;

export const SubmitResult = z
  .object({
    id: z.string().optional().meta({ description: 'absent when rejected: nothing was stored' }),
    customerMessageId: z.string().optional(),
    status: z.enum(['queued', 'rejected']),
    parts: z.number().int().optional(),
    error: z
      .object({ code: z.string(), message: z.string(), details: z.array(ErrorDetailView) })
      .optional(),
  })
  .meta({ id: 'SubmitResult' });
export type SubmitResult = z.infer<typeof SubmitResult>;

export const SubmitResponse = z
  .object({ messages: z.array(SubmitResult) })
  .meta({ id: 'SubmitResponse' });
