/**
 * The request and answer bodies of /v1/campaigns (docs/campaigns.md). The retry policy is the
 * flow language's too (a flow's `campaign.retry`): it is defined there.
 */
import { z } from 'zod';
import { CampaignRetryPolicy } from '../flows/schema.ts';
import { ErrorDetailView } from '../messages/views.ts';
import { IsoDateTime } from '../provider/message.ts';
import { UPLOAD_ROWS_PER_TRANSACTION } from './uploads.ts';
import { CallingWindowSchema } from './windows.ts';

/** `uploading`: a large campaign still being stored, never started (src/campaigns/uploads.ts). */
export const CAMPAIGN_STATES = [
  'uploading',
  'scheduled',
  'running',
  'paused',
  'done',
  'cancelled',
] as const;
export type CampaignState = (typeof CAMPAIGN_STATES)[number];

export const RECIPIENT_STATES = [
  'pending',
  'waiting',
  'calling',
  'sending',
  'retry',
  'done',
  'skipped',
  'cancelled',
] as const;
export type RecipientState = (typeof RECIPIENT_STATES)[number];

/** Recipients still to be called, or being called: a campaign is done when it has none. */
export const OPEN_RECIPIENT_STATES: readonly RecipientState[] = [
  'pending',
  'waiting',
  'calling',
  'sending',
  'retry',
];

/** A recipient's attempt in progress: a call (flow campaign) or a message (message campaign). */
export const IN_FLIGHT_STATES: readonly RecipientState[] = ['calling', 'sending'];

/** No retry unless asked: one attempt per recipient. */
export const NO_RETRY: CampaignRetryPolicy = { on: ['failed'], after: '1h', maxAttempts: 1 };

export const CampaignRecipientInput = z.strictObject({
  to: z.string(),
  vars: z.record(z.string(), z.unknown()).optional(),
  lang: z.string().optional(),
});

export const CreateCampaignRequest = z
  .strictObject({
    name: z.string().min(1).max(200).optional(),
    flow: z.string().min(1).optional().meta({
      description: 'The flow each recipient is called with. Give `flow` or `message`.',
      example: 'appointment-reminder',
    }),
    message: z
      .record(z.string(), z.unknown())
      .optional()
      .meta({
        description:
          "The message each recipient is sent, instead of a call: a message as `POST /v1/messages` takes it (any `type`) without `to`, `from` and `customerMessageId`, its strings templates filled from each recipient's `vars` (`{{name}}`). Give `flow` or `message`.",
        example: { type: 'sms', text: 'Hi {{name}}, your parcel {{parcel}} arrives tomorrow.' },
      }),
    from: z.string().min(1).meta({ example: 'Clinic' }),
    lang: z
      .string()
      .optional()
      .meta({ description: "recipients' default language (a flow campaign's)" }),
    recipients: z.array(z.record(z.string(), z.unknown())).min(1).max(100_000).meta({
      description:
        '`[{ to, vars?, lang? }]`; a bad row is reported by its index and field, and the good rows still go. For more rows, upload CSV.',
    }),
    startAt: IsoDateTime.optional().meta({ description: 'default: now' }),
    perMinute: z.number().int().min(1).max(100_000).optional().meta({
      description: 'Calls started (or messages sent) per minute at most (default 60).',
    }),
    maxConcurrent: z.number().int().min(1).max(100_000).optional().meta({
      description:
        'Calls in progress (or messages not yet delivered or failed) at once at most; unset: no cap but the pace.',
    }),
    window: CallingWindowSchema.optional().meta({
      description:
        "When calls may start, in each recipient's time zones (from the number); unset: CALLING_WINDOW.",
    }),
    retry: CampaignRetryPolicy.optional(),
  })
  .meta({
    id: 'CreateCampaignRequest',
    example: {
      flow: 'appointment-reminder',
      from: 'Clinic',
      recipients: [{ to: '+380501234567', vars: { name: 'Ann', date: 'Monday 10:00' } }],
      startAt: '2026-12-01T07:00:00Z',
      perMinute: 120,
      maxConcurrent: 20,
      window: { from: '09:00', to: '20:00', days: ['mon', 'tue', 'wed', 'thu', 'fri', 'sat'] },
      retry: { on: ['failed', 'no-outcome'], after: '2h', maxAttempts: 3 },
    },
  });
export type CreateCampaignRequest = z.infer<typeof CreateCampaignRequest>;

export const RowRejection = z.object({
  /** the row: its index in `recipients` (0-based), or its line in a CSV upload (1-based) */
  row: z.number().int(),
  code: z.string(),
  message: z.string(),
  details: z.array(ErrorDetailView),
});

export const CampaignView = z
  .object({
    id: z.string(),
    name: z.string().nullable(),
    flow: z.string().nullable().meta({ description: "a flow campaign's flow" }),
    message: z
      .record(z.string(), z.unknown())
      .nullable()
      .meta({ description: "a message campaign's template" }),
    from: z.string(),
    state: z.enum(CAMPAIGN_STATES).meta({
      description: `\`uploading\` while a campaign of more than ${UPLOAD_ROWS_PER_TRANSACTION} recipients (JSON or CSV) is being stored: its recipients so far, never started; \`scheduled\` once all of them are in`,
    }),
    startAt: z.string(),
    perMinute: z.number().int(),
    maxConcurrent: z.number().int().nullable(),
    window: CallingWindowSchema.nullable(),
    retry: CampaignRetryPolicy,
    recipients: z.number().int(),
    progress: z.object({
      byState: z.record(z.string(), z.number().int()),
      byOutcome: z.record(z.string(), z.number().int()),
      attempts: z.number().int(),
    }),
    createdAt: z.string(),
    finishedAt: z.string().nullable(),
  })
  .meta({ id: 'Campaign' });
export type CampaignView = z.infer<typeof CampaignView>;

export const CampaignCreated = CampaignView.extend({
  accepted: z.number().int(),
  duplicates: z.number().int().meta({ description: 'rows whose number was listed before' }),
  rejected: z.array(RowRejection).meta({ description: 'the rows refused (the first 1000)' }),
  rejectedCount: z.number().int().meta({ description: 'how many rows were refused' }),
}).meta({ id: 'CampaignCreated' });

export const RecipientResult = z
  .object({
    line: z.number().int(),
    to: z.string(),
    state: z.enum(RECIPIENT_STATES),
    attempts: z.number().int(),
    outcome: z.string().nullable().meta({
      description:
        "its best attempt's outcome: the flow's (a call), or `delivered` / `read` (a message)",
    }),
    status: z.string().nullable().meta({
      description: "its best attempt's state: the call's, or the message's status",
    }),
    path: z
      .array(z.object({ node: z.string(), key: z.string() }))
      .meta({ description: "its best call's way through the flow, key by key" }),
    followUps: z
      .array(z.object({ id: z.string(), type: z.string(), status: z.string() }))
      .meta({ description: 'the messages its best call sent, with their statuses' }),
    reason: z.string().nullable().meta({ description: 'why it was skipped' }),
    nextAt: z.string().nullable(),
    history: z
      .array(
        z.object({
          attempt: z.number().int(),
          callId: z.string().nullable(),
          messageId: z.string().nullable(),
          state: z.string().nullable(),
          outcome: z.string().nullable(),
          startedAt: z.string(),
          endedAt: z.string().nullable(),
        }),
      )
      .meta({ description: 'every attempt: a call, or a message' }),
  })
  .meta({ id: 'CampaignRecipientResult' });
export type RecipientResult = z.infer<typeof RecipientResult>;
