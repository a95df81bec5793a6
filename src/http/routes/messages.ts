/**
 * /v1/messages: submit, read one with its timeline, list. Each handler parses, calls one
 * domain verb and returns its result; errors travel as AppError to the one envelope.
 */

import { createRoute, z } from '@hono/zod-openapi';
import { type LimitSettings, SendLimitsInput } from '../../campaigns/limits.ts';
import type { Clock } from '../../clock.ts';
import type { Db } from '../../db/client.ts';
import { getMessage, listMessages } from '../../messages/read.ts';
import { MessageStatus } from '../../messages/status.ts';
import { MAX_MESSAGES_PER_REQUEST, submitMessages } from '../../messages/submit.ts';
import { ErrorBody, MessageList, MessageView, SubmitResponse } from '../../messages/views.ts';
import { IsoDateTime } from '../../provider/message.ts';
import { auditItems } from '../audit.ts';
import { newRouter } from '../router.ts';
import { needs } from '../scopes.ts';

const errorResponse = (description: string) => ({
  description,
  content: { 'application/json': { schema: ErrorBody } },
});

export const SubmitRequest = z
  .object({
    messages: z.array(z.record(z.string(), z.unknown())).min(1).max(MAX_MESSAGES_PER_REQUEST).meta({
      description:
        'message objects of the provider\'s messagelist (docs/provider.md: sms, viber_trans, viber_promo, viber_carousel, viber_survey, viber_otp, viber_session, rcs, flashcall, flashcall_callback, speechcall), or `type: "cascade"` for one message through the cascade API; customerMessageId optional (generated when absent)',
    }),
    ...SendLimitsInput,
  })
  .meta({
    id: 'SubmitRequest',
    example: {
      messages: [
        {
          from: 'Acme',
          to: '+380501234567',
          type: 'sms',
          text: 'Your order 42 has shipped',
          customerMessageId: 'order-42-shipped',
        },
        {
          from: 'Acme',
          to: '+380501234567',
          type: 'rcs',
          text: 'Your order 42 is ready for pickup',
          messageData: {
            buttons: [
              { text: 'Track', action: { type: 'openUrl', url: 'https://example.com/track/42' } },
            ],
          },
          fallback: { type: 'sms', text: 'Order 42 is ready: https://example.com/track/42' },
        },
        {
          type: 'cascade',
          from: 'Acme',
          to: '+380501234567',
          messageType: 'transaction',
          text: 'Hi %name=1%, order 42 has shipped',
          variables: [{ id: 1, type: 'name', value: 'Ann' }],
        },
      ],
    },
  });

const submit = createRoute({
  method: 'post',
  path: '/v1/messages',
  operationId: 'sendMessages',
  tags: ['messages'],
  security: needs('send'),
  summary: 'Submit up to 5000 messages; each is accepted (queued) or rejected on its own',
  request: { body: { required: true, content: { 'application/json': { schema: SubmitRequest } } } },
  responses: {
    202: {
      description: 'per-message results, in request order',
      content: { 'application/json': { schema: SubmitResponse } },
    },
    400: errorResponse('not a well-formed list of messages (each is answered on its own)'),
    413: errorResponse('body too large'),
  },
});

const RefParam = z.object({
  ref: z
    .string()
    .min(1)
    .max(200)
    .meta({
      param: { name: 'ref', in: 'path' },
      description: "Switchboard id, customerMessageId or the provider's messageId",
      example: 'order-42-shipped',
    }),
});

const getOne = createRoute({
  method: 'get',
  path: '/v1/messages/{ref}',
  operationId: 'getMessage',
  tags: ['messages'],
  security: needs('read'),
  summary: 'One message with its status timeline and what was sent',
  description:
    "`sent` is the message as Switchboard sends it (text, messageData, fallbacks; a call's follow-up with its rendered text). After RETENTION_DAYS its texts are removed: `sent` is null and `contentRemoved` says when. A message an erasure removed (DELETE /v1/subjects/{phone}) is not found: its 404 names it erased, with when (a detail with code `ERASED`).",
  request: { params: RefParam },
  responses: {
    200: { description: 'the message', content: { 'application/json': { schema: MessageView } } },
    404: errorResponse('no such message (a detail with code ERASED when an erasure removed it)'),
  },
});

const ListQuery = z.object({
  to: z.string().optional().meta({ example: '+380501234567' }),
  status: MessageStatus.optional(),
  type: z.string().optional().meta({ example: 'sms' }),
  callId: z.uuid().optional(),
  since: IsoDateTime.optional().meta({ description: 'created at or after (ISO 8601)' }),
  until: IsoDateTime.optional().meta({ description: 'created at or before (ISO 8601)' }),
  limit: z.coerce.number().int().min(1).max(500).optional().meta({ example: 50 }),
  cursor: z.string().optional().meta({ description: 'nextCursor of the previous page' }),
});

const list = createRoute({
  method: 'get',
  path: '/v1/messages',
  operationId: 'listMessages',
  tags: ['messages'],
  security: needs('read'),
  summary: 'Messages, newest first, filtered, one page at a time',
  request: { query: ListQuery },
  responses: {
    200: { description: 'a page', content: { 'application/json': { schema: MessageList } } },
    400: errorResponse('bad filter or cursor'),
  },
});

export function messageRoutes(deps: {
  db: Db;
  /** what the reads query (a read replica's routed db, src/db/replica.ts); default db */
  readDb?: Db;
  clock: Clock;
  /** the project's window, holidays and cap, for a request that asks for them */
  limits?: LimitSettings;
  maxSmsParts?: number;
  lifetimeSeconds?: number;
  onQueued?: () => void;
}) {
  const app = newRouter();
  app.openapi(submit, async (c) => {
    const { messages, window, cap } = c.req.valid('json');
    const idempotency = c.get('idempotency');
    // 202 whatever the mix, all rejected too: a well-formed list is answered per message
    const { results, created } = await submitMessages(
      deps,
      messages,
      {
        ...(deps.maxSmsParts !== undefined && { maxSmsParts: deps.maxSmsParts }),
        ...(deps.lifetimeSeconds !== undefined && { lifetimeSeconds: deps.lifetimeSeconds }),
        ...((window !== undefined || cap === true) &&
          deps.limits && { limits: { asked: { window, cap }, settings: deps.limits } }),
      },
      // an Idempotency-Key's answer commits with the messages it names
      idempotency && ((tx, answer) => idempotency.save(tx, 202, { messages: answer })),
    );
    if (created.length > 0) deps.onQueued?.();
    c.set('audit', {
      created: { messages: auditItems(created) },
      rejected: { messages: results.filter((r) => r.status === 'rejected').length },
    });
    return c.json({ messages: results }, 202);
  });
  app.openapi(getOne, async (c) =>
    c.json(await getMessage(deps.readDb ?? deps.db, c.req.valid('param').ref), 200),
  );
  app.openapi(list, async (c) => {
    const q = c.req.valid('query');
    const page = await listMessages(deps.readDb ?? deps.db, {
      ...q,
      since: q.since ? new Date(q.since) : undefined,
      until: q.until ? new Date(q.until) : undefined,
    });
    return c.json(page, 200);
  });
  return app;
}
