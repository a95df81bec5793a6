/** The request and answer bodies of POST /v1/calls and /v1/calls/batch. */
import { z } from 'zod';
import { SendLimitsInput } from '../campaigns/limits.ts';
import { ErrorDetailView } from '../messages/views.ts';

export const StartCallRequest = z
  .strictObject({
    flow: z.string().min(1).meta({ example: 'appointment-reminder' }),
    to: z.string().min(1).meta({ example: '+380501234567' }),
    from: z.string().min(1).meta({ example: 'Clinic' }),
    vars: z
      .record(z.string(), z.unknown())
      .optional()
      .meta({ example: { name: 'Ann', date: 'Monday 10:00' } }),
    lang: z
      .string()
      .optional()
      .meta({ description: "one of the flow's languages; default its first", example: 'en' }),
    ...SendLimitsInput,
  })
  .meta({ id: 'StartCallRequest' });
export type StartCallRequest = z.infer<typeof StartCallRequest>;

export const CallStarted = z
  .object({
    id: z.string(),
    flow: z.string(),
    flowVersion: z.string(),
    messageId: z.string(),
    customerMessageId: z.string(),
    state: z.literal('queued'),
  })
  .meta({ id: 'CallStarted' });
export type CallStarted = z.infer<typeof CallStarted>;

/**
 * One call of a batch. The request takes any object per call and start.ts checks each with
 * this schema on its own, so a call that does not fit it is rejected alone (202 with
 * per-call results) instead of failing the batch; the OpenAPI document shows this shape.
 */
export const BatchCall = z.strictObject({
  to: z.string(),
  vars: z.record(z.string(), z.unknown()).optional(),
  lang: z.string().optional(),
});
export type BatchCall = z.infer<typeof BatchCall>;

const { $schema: _, ...batchCallShape } = z.toJSONSchema(BatchCall, { io: 'input' });

export const BatchCallsRequest = z
  .strictObject({
    flow: z.string().min(1),
    from: z.string().min(1),
    lang: z.string().optional(),
    ...SendLimitsInput,
    calls: z.array(z.record(z.string(), z.unknown()).meta(batchCallShape)).min(1).max(10_000),
  })
  .meta({
    id: 'BatchCallsRequest',
    example: {
      flow: 'appointment-reminder',
      from: 'Clinic',
      calls: [{ to: '+380501234567', vars: { name: 'Ann', date: 'Monday 10:00' } }],
    },
  });
export type BatchCallsRequest = z.infer<typeof BatchCallsRequest>;

export const BatchItemResult = z
  .object({
    id: z.string().optional(),
    messageId: z.string().optional(),
    customerMessageId: z.string().optional(),
    status: z.enum(['queued', 'rejected']),
    error: z
      .object({
        code: z.string(),
        message: z.string(),
        details: z.array(ErrorDetailView),
      })
      .optional(),
  })
  .meta({ id: 'BatchCallResult' });
export type BatchItemResult = z.infer<typeof BatchItemResult>;
