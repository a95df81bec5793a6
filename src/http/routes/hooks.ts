/**
 * The provider's callbacks. Each handler reads the raw body, checks the shared token, and
 * answers 200 only after the body is committed (rule 2); a database outage becomes a 503 in
 * onError, so the provider retries. Bodies are read raw (not through a zod validator) because
 * they are undocumented and must be kept even when they cannot be parsed.
 */
import { z } from '@hono/zod-openapi';
import type { Context } from 'hono';
import { createSpeechWebhooks, type EventDeps } from '../../calls/events.ts';
import type { Config } from '../../config.ts';
import { AppError } from '../../errors.ts';
import { ingestViber } from '../../messages/inbound.ts';
import type { RawCallback } from '../../messages/inbox.ts';
import type { IngestDeps, IngestResult } from '../../messages/ingest.ts';
import { createDeliveryBatcher } from '../../messages/ingest-batch.ts';
import { ErrorBody } from '../../messages/views.ts';
import { presentedCallbackToken, tokenMatcher } from '../auth.ts';
import { readText } from '../body.ts';
import type { AppEnv } from '../env.ts';
import { errorResponse } from '../errors.ts';
import { header } from '../headers.ts';
import type { Metrics } from '../metrics.ts';
import { errorCodes } from '../operation-errors.ts';
import { newRouter } from '../router.ts';

export const HookAnswer = z
  .object({
    received: z.literal(true),
    duplicate: z
      .boolean()
      .meta({ description: 'the same body was received before; nothing changed' }),
    events: z.number().int(),
    matched: z.number().int(),
    pending: z.number().int().meta({ description: 'events kept until their message appears' }),
    problems: z
      .array(z.string())
      .meta({ description: 'what could not be read; the raw body is kept' }),
  })
  .meta({ id: 'HookAnswer' });

/** The provider's status webhook (docs/provider.md, "Callbacks"). */
const DELIVERY_EXAMPLE = {
  messageId: 'abc123def456',
  deliverystatus: 'delivered',
  timestamp: '2025-01-23T10:30:00Z',
  cost: 0.05,
};

export function hookRoutes(deps: {
  config: Config;
  ingest: IngestDeps;
  calls: EventDeps;
  metrics: Metrics;
}) {
  const app = newRouter();
  // every token of CALLBACK_TOKEN is taken (rotation: the new one first, the old one until
  // the provider's side is changed)
  const tokens = deps.config.callbackTokens;
  const callbackToken = tokenMatcher(tokens);

  const handle =
    (
      kind: 'delivery' | 'viber',
      ingest: (d: IngestDeps, raw: RawCallback) => Promise<IngestResult>,
    ) =>
    async (c: Context<AppEnv>) => {
      if (tokens.length > 0 && !callbackToken(presentedCallbackToken(c))) {
        deps.metrics.callbacks.inc({ kind, outcome: 'unauthorized' });
        return errorResponse(c, 'UNAUTHORIZED', 'missing or wrong callback token');
      }
      const raw = { contentType: header(c, 'content-type'), body: await readText(c) };
      const result = await ingest(deps.ingest, raw);
      deps.metrics.callbacks.inc({
        kind,
        outcome: result.duplicate ? 'duplicate' : result.problems.length > 0 ? 'invalid' : 'stored',
      });
      return c.json(
        {
          received: true as const,
          duplicate: result.duplicate,
          events: result.events,
          matched: result.matched,
          pending: result.pending,
          problems: result.problems,
        },
        200,
      );
    };

  // concurrent delivery callbacks share a transaction (group commit); see ingest-batch.ts
  const deliveries = createDeliveryBatcher(deps.ingest);
  app.post(
    '/hooks/delivery',
    handle('delivery', (_, raw) => deliveries.ingest(raw)),
  );
  // and so do speech webhooks; see calls/events.ts
  const webhooks = createSpeechWebhooks(deps.calls);
  app.post('/hooks/speechcall', async (c) => {
    const raw = { contentType: header(c, 'content-type'), body: await readText(c) };
    let result: Awaited<ReturnType<typeof webhooks.ingest>>;
    try {
      result = await webhooks.ingest(raw);
    } catch (err) {
      if (err instanceof AppError && err.code === 'UNAUTHORIZED') {
        deps.metrics.callbacks.inc({ kind: 'speechcall', outcome: 'unauthorized' });
      }
      throw err;
    }
    deps.metrics.callbacks.inc({
      kind: 'speechcall',
      outcome: result.duplicate ? 'duplicate' : 'stored',
    });
    return c.json({ received: true as const, ...result }, 200);
  });
  app.post('/hooks/viber', handle('viber', ingestViber));

  // documented whether or not this deployment sets CALLBACK_TOKEN: it says how to send one
  const security: Record<string, string[]>[] = [
    { callbackBearer: [] },
    { callbackHeader: [] },
    { callbackQuery: [] },
    {},
  ];
  const common = {
    responses: {
      200: {
        description: 'stored (committed before this answer)',
        content: { 'application/json': { schema: HookAnswer } },
      },
      401: {
        description: 'CALLBACK_TOKEN missing or wrong',
        content: { 'application/json': { schema: ErrorBody } },
      },
      413: {
        description: 'body too large',
        content: { 'application/json': { schema: ErrorBody } },
      },
      503: {
        description: 'the database is down: nothing was stored, retry',
        content: { 'application/json': { schema: ErrorBody } },
      },
    },
    security,
    ...errorCodes({ also: ['UNAVAILABLE'] }),
  };
  app.openAPIRegistry.registerPath({
    method: 'post',
    path: '/hooks/delivery',
    operationId: 'receiveDeliveryStatus',
    tags: ['hooks'],
    summary: 'Status callbacks from the provider, keyed by its messageId or your customerMessageId',
    description:
      "The provider's status webhook is `{messageId, deliverystatus, timestamp, cost}` (docs/provider.md); any other JSON or form body is read too: one event or an array (also under `events`, `messages`, `results`, `data`), the message found by customerMessageId / cmid / messageId / msg_id / mid, the status by deliverystatus / status / state / dlr_status / stat / event, the provider's words (scheduled, processing, delivered, undeliverable, permanenterror) and other vendors' mapped onto canonical statuses (extended with DELIVERY_STATUS_MAP), unknown ones kept verbatim; a record's extendedStatuses become per-channel timeline events. Every raw body is kept; an event for a message not yet known is attached when it appears.",
    request: {
      body: {
        content: {
          'application/json': { schema: z.unknown(), example: DELIVERY_EXAMPLE },
          'application/x-www-form-urlencoded': {
            schema: z.record(z.string(), z.string()),
            example: { cmid: 'order-42-shipped', stat: 'DELIVRD' },
          },
        },
      },
    },
    ...common,
  });
  app.openAPIRegistry.registerPath({
    method: 'post',
    path: '/hooks/viber',
    operationId: 'receiveViberMessage',
    tags: ['hooks'],
    summary: 'Incoming Viber messages',
    description:
      "The provider's shape is `{idUuid, alphaName, phoneNumber, text, dt}` (docs/provider.md); `{messageId, from, to, text, timestamp}` is read too. Stored raw, listed at GET /v1/inbound with the sender in E.164; a message the provider sends again (same idUuid) is stored once.",
    request: {
      body: {
        content: {
          'application/json': {
            schema: z.unknown(),
            example: {
              idUuid: '123e4567-e89b-12d3-a456-426614174000',
              alphaName: 'ViberBotName',
              phoneNumber: '380936670003',
              text: 'Hello, I need help with my order',
              dt: '2025-01-20T14:30:00.000Z',
            },
          },
        },
      },
    },
    ...common,
  });
  app.openAPIRegistry.registerPath({
    method: 'post',
    path: '/hooks/speechcall',
    operationId: 'receiveSpeechCallKey',
    tags: ['hooks'],
    // no token of the request's own: the signed one is in the body (action.token)
    security: [],
    ...errorCodes({ also: ['UNAUTHORIZED', 'UNAVAILABLE'] }),
    summary: 'Speech-call webhooks: one per key pressed, from the tracking webhook of the menu',
    description:
      'The body is `{from, to, mid, action}`; `action.token` is the signed token Switchboard put in the menu, naming call, node and key. A missing, forged or altered token (or one from another call) gets 401. Exact duplicates change nothing; a webhook for a node the call has not reached yet is held and applied when it gets there.',
    request: {
      body: {
        content: {
          'application/json': {
            schema: z.object({
              from: z.string().optional(),
              to: z.string().optional(),
              mid: z.string().optional(),
              action: z.object({ token: z.string() }).loose(),
            }),
            example: {
              from: 'Clinic',
              to: '+380501234567',
              mid: 'f3b0c2d4',
              action: { token: 'v1.k1.eyJjIjoi...' },
            },
          },
        },
      },
    },
    responses: {
      200: {
        description: 'stored and applied (or held, or a duplicate)',
        content: {
          'application/json': {
            schema: z
              .object({
                received: z.literal(true),
                duplicate: z.boolean(),
                result: z
                  .enum(['applied', 'held', 'duplicate', 'stale', 'unknown-call'])
                  .optional(),
                callId: z.string().optional(),
                node: z.string().optional(),
                key: z.string().optional(),
              })
              .meta({ id: 'SpeechHookAnswer' }),
          },
        },
      },
      401: {
        description: 'missing, forged or altered token',
        content: { 'application/json': { schema: ErrorBody } },
      },
      503: {
        description: 'the database is down: nothing was stored, retry',
        content: { 'application/json': { schema: ErrorBody } },
      },
    },
  });
  app.openAPIRegistry.registerComponent('securitySchemes', 'callbackBearer', {
    type: 'http',
    scheme: 'bearer',
    description: 'CALLBACK_TOKEN, when set',
  });
  app.openAPIRegistry.registerComponent('securitySchemes', 'callbackHeader', {
    type: 'apiKey',
    in: 'header',
    name: 'X-Callback-Token',
  });
  app.openAPIRegistry.registerComponent('securitySchemes', 'callbackQuery', {
    type: 'apiKey',
    in: 'query',
    name: 'token',
  });
  return app;
}
