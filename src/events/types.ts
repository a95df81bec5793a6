/**
 * The event catalog: every type Switchboard sends to the user's endpoints, with its version,
 * what it reports, and the zod schema of its `data`. The body sent is `{ type, timestamp,
 * data }` (Standard Webhooks); the OpenAPI document lists each type under `webhooks`
 * (src/events/webhooks-doc.ts), and `events: [...]` on an endpoint is checked against
 * EVENT_TYPES. Field names are the API's own (GET /v1/calls/{id}, GET /v1/messages/{ref},
 * GET /v1/inbound), so a receiver can reuse the types it has for those.
 *
 * A type's data only grows: a new field is added as optional within a version; a field that
 * changes meaning or goes away makes a new version.
 *
 * @example
 * EVENT_CATALOG['call.outcome'].data.parse({ callId, flow: 'delivery', outcome: 'confirmed', at });
 * EVENT_TYPES.includes('message.status'); // true
 */
import { z } from 'zod';
import { CALL_STATES } from '../calls/deps.ts';
import { CallPathStep } from '../calls/read.ts';
import { MessageStatus } from '../messages/status.ts';

const iso = (description: string) =>
  z
    .string()
    .meta({ description: `${description} (ISO 8601)`, example: '2025-01-01T12:00:00.000Z' });

const callId = z.string().meta({
  description: 'the call (GET /v1/calls/{id})',
  example: '0193f1c2-7b4e-7c1a-9f3d-2a6b8c0d1e2f',
});
const flow = z.string().meta({ description: 'the flow id (flows/<id>.yaml)', example: 'delivery' });
const flowVersion = z
  .string()
  .meta({ description: "the flow version the call is pinned to (the compiled flow's hash)" });

export const MessageStatusData = z
  .object({
    messageId: z.string().meta({
      description: 'the message (GET /v1/messages/{ref})',
      example: '0193f1c2-7b4e-7c1a-9f3d-2a6b8c0d1e2f',
    }),
    customerMessageId: z.string().meta({ example: 'order-42' }),
    callId: z.string().optional().meta({
      description: "the call, when the message is a call's own message or one of its follow-ups",
    }),
    status: z.string().meta({
      description:
        'the timeline step: a canonical status (queued, accepted, sent, delivered, read, rejected, failed, expired) or a vendor status kept verbatim; a step may leave the message where it was (a per-channel status, a failure with fallbacks left)',
      example: 'delivered',
    }),
    at: iso("the event's own time"),
    source: z.enum(['api', 'dispatch', 'provider', 'callback', 'poll', 'call', 'expiry']).meta({
      description: 'where the step came from, as on the timeline (TimelineEvent.source)',
    }),
    detail: z
      .record(z.string(), z.unknown())
      .optional()
      .meta({ description: "the timeline event's detail, when it has one" }),
  })
  .meta({ id: 'MessageStatusEventData' });

export const CallStartedData = z
  .object({
    callId,
    flow,
    flowVersion,
    to: z.string().meta({ example: '+380501234567' }),
    from: z.string(),
    lang: z.string().meta({ example: 'uk' }),
    vars: z.record(z.string(), z.unknown()),
    messageId: z.string().meta({ description: "the call's own speechcall message" }),
    at: iso('when the call was accepted'),
  })
  .meta({ id: 'CallStartedEventData' });

export const CallKeyData = CallPathStep.pick({ node: true, menu: true, attempt: true, key: true })
  .extend({
    callId,
    flow,
    input: z.string().optional().meta({
      example: '1',
      description:
        'what the caller did: the key pressed (`0`-`9`, `*`, `#`), or `timeout` (silence). Absent only on a `wrong` step of a call whose menu did not tell the two apart',
    }),
    at: iso('when the key was applied'),
  })
  .meta({ id: 'CallKeyEventData' });

export const CallOutcomeData = z
  .object({
    callId,
    flow,
    outcome: z.string().meta({ example: 'confirmed' }),
    at: iso('when the outcome was recorded'),
  })
  .meta({ id: 'CallOutcomeEventData' });

export const CallFollowUp = z
  .object({
    id: z.string(),
    customerMessageId: z
      .string()
      .meta({ example: '0193f1c2-7b4e-7c1a-9f3d-2a6b8c0d1e2f:main:1:1' }),
    type: z.string().meta({ example: 'sms' }),
    status: MessageStatus,
  })
  .meta({ id: 'CallFollowUp' });

export const CallEndedData = z
  .object({
    callId,
    flow,
    flowVersion,
    to: z.string().meta({ example: '+380501234567' }),
    state: z
      .enum(CALL_STATES.filter((s) => s === 'ended' || s === 'failed') as ['ended', 'failed'])
      .meta({
        description:
          'ended (the menu ran to its end) or failed (its message was rejected, failed or expired)',
      }),
    outcome: z.string().nullable(),
    path: z.array(CallPathStep).meta({ description: 'every key whose actions ran, in order' }),
    followUps: z.array(CallFollowUp).meta({
      description:
        "the call's follow-up messages, as stored when it ended (in customerMessageId order)",
    }),
    at: iso('when the call ended (endedAt)'),
  })
  .meta({ id: 'CallEndedEventData' });

export const InboundViberData = z
  .object({
    id: z.string().meta({ description: 'the row of GET /v1/inbound' }),
    channel: z.literal('viber'),
    from: z.string().meta({ example: '+380501234567' }),
    to: z.string().nullable(),
    text: z.string().nullable().meta({ example: 'STOP' }),
    providerMessageId: z.string().nullable(),
    at: iso('when the customer sent it'),
    receivedAt: iso('when Switchboard stored it'),
  })
  .meta({ id: 'InboundViberEventData' });

export const EndpointDisabledData = z
  .object({
    endpointId: z.string().meta({ example: 'ep_2x8Kf0aQ' }),
    name: z.string().nullable(),
    url: z.string().meta({ example: 'https://crm.example.org/switchboard' }),
    reason: z.string().meta({ description: 'why, in words (disabled_reason)' }),
    failingSince: iso('since when every attempt to it failed'),
    at: iso('when it was disabled'),
  })
  .meta({ id: 'EndpointDisabledEventData' });

export const FlowNotifyData = z
  .object({
    callId,
    flow,
    flowVersion,
    node: z.string().nullable().meta({
      description:
        'the node whose key ran the `notify:` action; null for an `on:` reaction (a status, a timer)',
    }),
    endpoint: z
      .string()
      .meta({ description: 'the endpoint name the action names', example: 'crm' }),
    to: z.string().meta({ example: '+380501234567' }),
    vars: z.record(z.string(), z.unknown()).meta({ description: "the call's vars" }),
    data: z
      .record(z.string(), z.unknown())
      .optional()
      .meta({
        description:
          "the action's own `data:`, its `{{param}}` templates rendered; absent when it has none",
        example: { source: 'ivr' },
      }),
    path: z.array(CallPathStep.omit({ at: true })).meta({
      description:
        "the keys whose actions ran so far, this one last (their times are on the call's timeline)",
    }),
    outcome: z.string().nullable().meta({
      description:
        "the outcome as the step leaves it: the last `outcome:` so far, of this key's list too; null if none",
    }),
    at: iso('when the action ran (the key, status or timer was applied)'),
  })
  .meta({ id: 'FlowNotifyEventData' });

const campaignId = z.string().meta({
  description: 'the campaign (GET /v1/campaigns/{id})',
  example: '0193f1c2-6a00-7000-8000-1a2b3c4d5e6f',
});

export const CampaignStartedData = z
  .object({
    campaignId,
    name: z.string().nullable(),
    flow: flow.nullable().meta({ description: 'the flow it calls with; null: it sends a message' }),
    recipients: z.number().int().meta({ description: 'recipients stored' }),
    at: iso('when it started (its startAt had come)'),
  })
  .meta({ id: 'CampaignStartedEventData' });

export const CampaignRecipientDoneData = z
  .object({
    campaignId,
    line: z.number().int().meta({ description: 'its row in the upload' }),
    to: z.string(),
    state: z.enum(['done', 'skipped']),
    attempts: z.number().int(),
    outcome: z.string().nullable().meta({ description: "its best attempt's outcome" }),
    callId: z
      .string()
      .nullable()
      .meta({ description: "its best attempt, a flow campaign's (GET /v1/calls/{id})" }),
    messageId: z
      .string()
      .nullable()
      .meta({ description: "its best attempt, a message campaign's (GET /v1/messages/{ref})" }),
    reason: z.string().nullable().meta({ description: 'why it was skipped' }),
    at: iso('when its result was settled'),
  })
  .meta({ id: 'CampaignRecipientDoneEventData' });

export const CampaignDoneData = z
  .object({
    campaignId,
    state: z.enum(['done', 'cancelled']),
    byState: z.record(z.string(), z.number().int()),
    byOutcome: z.record(z.string(), z.number().int()),
    at: iso('when it finished or was cancelled'),
  })
  .meta({ id: 'CampaignDoneEventData' });

export interface EventTypeInfo {
  version: number;
  /** when it is sent, in a sentence (the OpenAPI document and docs/events.md say the same) */
  description: string;
  /** the schema of `data` */
  data: z.ZodType;
  /** what the event is about: the unit of ordering (`ordered` endpoints) */
  subject: string;
}

export const EVENT_CATALOG = {
  'message.status': {
    version: 1,
    description:
      "Every step of a message's timeline, as GET /v1/messages/{ref} shows it: queued, the provider's answer, each status from a callback or a poll, an expiry. Follow-ups and a call's own message included.",
    data: MessageStatusData,
    subject: 'message:<messageId>',
  },
  'call.started': {
    version: 1,
    description: 'A call was accepted by POST /v1/calls (or the console) and queued.',
    data: CallStartedData,
    subject: 'call:<callId>',
  },
  'call.key': {
    version: 1,
    description:
      "The caller's input was applied at a node: a key, or silence (`timeout`); the step of the call's path.",
    data: CallKeyData,
    subject: 'call:<callId>',
  },
  'call.outcome': {
    version: 1,
    description: "A flow's `outcome:` action ran.",
    data: CallOutcomeData,
    subject: 'call:<callId>',
  },
  'call.ended': {
    version: 1,
    description:
      'A call ended (its menu hung up) or failed (its message was rejected, failed or expired), with its path, outcome and follow-ups.',
    data: CallEndedData,
    subject: 'call:<callId>',
  },
  'inbound.viber': {
    version: 1,
    description: "A customer's Viber message arrived (a new row of GET /v1/inbound).",
    data: InboundViberData,
    subject: 'inbound:<from>',
  },
  'endpoint.disabled': {
    version: 1,
    description: 'Switchboard disabled an endpoint because every attempt to it kept failing.',
    data: EndpointDisabledData,
    subject: 'endpoint:<endpointId>',
  },
  'flow.notify': {
    version: 1,
    description:
      "A flow's `notify: <endpoint>` action ran: the call's data, sent to that one endpoint only (whatever types it subscribes to).",
    data: FlowNotifyData,
    subject: 'call:<callId>',
  },
  'campaign.started': {
    version: 1,
    description: "A campaign's start time came: it runs (docs/campaigns.md).",
    data: CampaignStartedData,
    subject: 'campaign:<campaignId>',
  },
  'campaign.recipient.done': {
    version: 1,
    description:
      "A campaign's recipient has its result: its last attempt settled with no retry due, or it was skipped (opted out, no time fits its window, its call refused).",
    data: CampaignRecipientDoneData,
    subject: 'campaign:<campaignId>',
  },
  'campaign.done': {
    version: 1,
    description: 'A campaign finished (no recipient left to call) or was cancelled.',
    data: CampaignDoneData,
    subject: 'campaign:<campaignId>',
  },
} as const satisfies Record<string, EventTypeInfo>;

export type EventType = keyof typeof EVENT_CATALOG;

/** Every type, in catalog order (what `events: [...]` on an endpoint may name). */
export const EVENT_TYPES = Object.keys(EVENT_CATALOG) as [EventType, ...EventType[]];

export function isEventType(value: string): value is EventType {
  return Object.hasOwn(EVENT_CATALOG, value);
}

/** The data of an event of type `T`. */
export type EventData<T extends EventType> = z.infer<(typeof EVENT_CATALOG)[T]['data']>;
