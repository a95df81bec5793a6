/**
 * /v1/endpoints: the user's own systems that receive Switchboard's events (Standard
 * Webhooks; src/events/endpoints.ts), what was sent to them (attempts, the queue) and replay
 * (src/events/replay.ts). Making one or rotating its secret answers the secret, once.
 *
 * Scopes: managing endpoints and replaying are `admin`; so is reading them, since a URL can
 * itself be a credential (a catch-hook URL with its token in the path). Attempts and the
 * queue show no URL and no secret: `read`.
 */
import { createRoute, z } from '@hono/zod-openapi';
import type { Clock } from '../../clock.ts';
import type { Db } from '../../db/client.ts';
import {
  ATTEMPT_STATUSES,
  AttemptPage,
  DELIVERY_STATES,
  DeliveryPage,
  listAttempts,
  listDeliveries,
} from '../../events/attempts.ts';
import {
  CreateEndpoint,
  DEFAULT_OVERLAP_SECONDS,
  type EndpointStore,
  EndpointView,
  EndpointWithSecret,
  MAX_OVERLAP_SECONDS,
  UpdateEndpoint,
} from '../../events/endpoints.ts';
import { ReplayedEvent, ReplayedFailures, replayEvent, replayFailed } from '../../events/replay.ts';
import { IsoDateTime } from '../../provider/message.ts';
import { auditItems } from '../audit.ts';
import { errorBody, errorCodes } from '../operation-errors.ts';
import { newRouter } from '../router.ts';
import { needs } from '../scopes.ts';

const json = <T>(schema: T, description: string) => ({
  description,
  content: { 'application/json': { schema } },
});

const IdParam = z.object({
  id: z
    .string()
    .max(64)
    .meta({ param: { name: 'id', in: 'path' }, example: 'ep_4fQ9xk2LmB7wZr1c' }),
});

const Page = {
  limit: z.coerce.number().int().min(1).max(500).optional().meta({ example: 50 }),
  cursor: z.string().max(64).optional().meta({ description: 'nextCursor of the previous page' }),
};

const create = createRoute({
  method: 'post',
  path: '/v1/endpoints',
  operationId: 'createEndpoint',
  tags: ['endpoints'],
  summary: 'Add an endpoint for events; the answer holds its signing secret, shown this once',
  security: needs('admin'),
  ...errorCodes({ also: ['CONFLICT'] }),
  request: {
    body: { required: true, content: { 'application/json': { schema: CreateEndpoint } } },
  },
  responses: {
    201: json(EndpointWithSecret, 'made: `secret` is shown this once'),
    400: errorBody('bad url (or an address the outbound policy refuses), unknown event type'),
    409: errorBody('another endpoint has that name'),
  },
});

const list = createRoute({
  method: 'get',
  path: '/v1/endpoints',
  operationId: 'listEndpoints',
  tags: ['endpoints'],
  summary: 'Every endpoint, newest first (never a secret)',
  security: needs('admin'),
  responses: {
    200: json(
      z.object({ items: z.array(EndpointView) }).meta({ id: 'EndpointList' }),
      'the endpoints',
    ),
  },
});

const getOne = createRoute({
  method: 'get',
  path: '/v1/endpoints/{id}',
  operationId: 'getEndpoint',
  tags: ['endpoints'],
  summary: 'One endpoint, by id or name (never a secret)',
  security: needs('admin'),
  request: { params: IdParam },
  responses: { 200: json(EndpointView, 'the endpoint'), 404: errorBody('no such endpoint') },
});

const update = createRoute({
  method: 'patch',
  path: '/v1/endpoints/{id}',
  operationId: 'updateEndpoint',
  tags: ['endpoints'],
  summary: 'Change an endpoint: the fields given, the rest as they are',
  security: needs('admin'),
  ...errorCodes({ also: ['CONFLICT', 'ENDPOINT_READ_ONLY'] }),
  request: {
    params: IdParam,
    body: { required: true, content: { 'application/json': { schema: UpdateEndpoint } } },
  },
  responses: {
    200: json(EndpointView, 'changed'),
    400: errorBody('bad url (or an address the outbound policy refuses), unknown event type'),
    404: errorBody('no such endpoint'),
    409: errorBody('another endpoint has that name, or this one is declared in ENDPOINTS_FILE'),
  },
});

const remove = createRoute({
  method: 'delete',
  path: '/v1/endpoints/{id}',
  operationId: 'deleteEndpoint',
  tags: ['endpoints'],
  summary: 'Delete an endpoint, its queue and its attempts',
  security: needs('admin'),
  ...errorCodes({ also: ['ENDPOINT_READ_ONLY'] }),
  request: { params: IdParam },
  responses: {
    200: json(EndpointView, 'deleted: what it was'),
    404: errorBody('no such endpoint'),
    409: errorBody('declared in ENDPOINTS_FILE: remove it from the file'),
  },
});

const rotate = createRoute({
  method: 'post',
  path: '/v1/endpoints/{id}/secret/rotate',
  operationId: 'rotateEndpointSecret',
  tags: ['endpoints'],
  summary:
    'Make a new signing secret (shown this once); the old one signs too until the overlap ends',
  description: `Each request is signed with every live secret (one \`v1,\` signature each), so the receiver can switch to the new secret at any time within the overlap. \`overlapSeconds\` defaults to ${DEFAULT_OVERLAP_SECONDS} (24 h); 0 drops the old secrets at once.`,
  security: needs('admin'),
  ...errorCodes({ also: ['ENDPOINT_READ_ONLY'] }),
  request: {
    params: IdParam,
    body: {
      required: false,
      content: {
        'application/json': {
          schema: z
            .strictObject({
              overlapSeconds: z
                .number()
                .int()
                .min(0)
                .max(MAX_OVERLAP_SECONDS)
                .optional()
                .meta({ description: 'how long the old secrets keep signing', example: 3600 }),
            })
            .meta({ id: 'RotateEndpointSecret' }),
        },
      },
    },
  },
  responses: {
    200: json(EndpointWithSecret, 'rotated: `secret` is the new one, shown this once'),
    400: errorBody('bad overlap'),
    404: errorBody('no such endpoint'),
    409: errorBody('declared in ENDPOINTS_FILE: change the secret in its environment variable'),
  },
});

const attempts = createRoute({
  method: 'get',
  path: '/v1/endpoints/{id}/attempts',
  operationId: 'listEndpointAttempts',
  tags: ['endpoints'],
  summary: 'Every request made to an endpoint, newest first: status, response, duration',
  security: needs('read'),
  request: {
    params: IdParam,
    query: z.object({ status: z.enum(ATTEMPT_STATUSES).optional(), ...Page }),
  },
  responses: {
    200: json(AttemptPage, 'a page'),
    400: errorBody('bad filter or cursor'),
    404: errorBody('no such endpoint'),
  },
});

const deliveries = createRoute({
  method: 'get',
  path: '/v1/endpoints/{id}/deliveries',
  operationId: 'listEndpointDeliveries',
  tags: ['endpoints'],
  summary: "An endpoint's queue, newest first; `state=exhausted`: what gave up",
  security: needs('read'),
  request: {
    params: IdParam,
    query: z.object({ state: z.enum(DELIVERY_STATES).optional(), ...Page }),
  },
  responses: {
    200: json(DeliveryPage, 'a page'),
    400: errorBody('bad filter or cursor'),
    404: errorBody('no such endpoint'),
  },
});

const replayOne = createRoute({
  method: 'post',
  path: '/v1/events/{id}/replay',
  operationId: 'replayEvent',
  tags: ['endpoints'],
  summary: 'Send an event again (same webhook-id): to every endpoint it went to, or to one',
  description:
    'The id is the `webhook-id` the endpoint received (`evt_...`). With `endpoint` (an id or a name) only to that endpoint, queued anew if the event never went there.',
  security: needs('admin'),
  request: {
    params: z.object({
      id: z
        .string()
        .max(64)
        .meta({
          param: { name: 'id', in: 'path' },
          example: 'evt_0193f1c27b4e7c1a9f3d2a6b8c0d1e2f',
        }),
    }),
    body: {
      required: false,
      content: {
        'application/json': {
          schema: z
            .strictObject({
              endpoint: z
                .string()
                .min(1)
                .max(64)
                .optional()
                .meta({ description: "an endpoint's id or name", example: 'crm' }),
            })
            .meta({ id: 'ReplayEvent' }),
        },
      },
    },
  },
  responses: {
    202: json(ReplayedEvent, 'queued again'),
    404: errorBody('no such event, or no such endpoint'),
  },
});

const replayMany = createRoute({
  method: 'post',
  path: '/v1/endpoints/{id}/replay',
  operationId: 'replayFailedDeliveries',
  tags: ['endpoints'],
  summary: 'Send again what failed for an endpoint since a time (exhausted, or being retried)',
  security: needs('admin'),
  request: {
    params: IdParam,
    body: {
      required: true,
      content: {
        'application/json': {
          schema: z
            .strictObject({
              since: IsoDateTime.meta({ description: 'events at or after this (ISO 8601)' }),
            })
            .meta({ id: 'ReplayFailedDeliveries', example: { since: '2026-03-01T00:00:00Z' } }),
        },
      },
    },
  },
  responses: {
    202: json(ReplayedFailures, 'queued again'),
    400: errorBody('bad time'),
    404: errorBody('no such endpoint'),
  },
});

export function endpointRoutes(deps: { db: Db; clock: Clock; store: EndpointStore }) {
  const { db, clock, store } = deps;
  const app = newRouter();
  /** The endpoint's id, or NOT_FOUND (routes under an endpoint answer 404 for an unknown one). */
  const idOf = async (ref: string) => (await store.get(ref)).id;

  app.openapi(create, async (c) => {
    const made = await store.create(c.req.valid('json'));
    c.set('audit', { created: { endpoints: auditItems([made.id], made.name ? [made.name] : []) } });
    return c.json(made, 201);
  });
  app.openapi(list, async (c) => c.json({ items: await store.list() }, 200));
  app.openapi(getOne, async (c) => c.json(await store.get(c.req.valid('param').id), 200));
  app.openapi(update, async (c) => {
    const changed = await store.update(c.req.valid('param').id, c.req.valid('json'));
    c.set('audit', {
      changed: { endpoints: auditItems([changed.id], changed.name ? [changed.name] : []) },
    });
    return c.json(changed, 200);
  });
  app.openapi(remove, async (c) => {
    const gone = await store.remove(c.req.valid('param').id);
    c.set('audit', { removed: { endpoints: auditItems([gone.id], gone.name ? [gone.name] : []) } });
    return c.json(gone, 200);
  });
  app.openapi(rotate, async (c) => {
    // the body is optional: without one, the default overlap
    const body = (c.req.valid('json') ?? {}) as { overlapSeconds?: number };
    const rotated = await store.rotate(c.req.valid('param').id, body);
    // which endpoint's secret, never the secret
    c.set('audit', { changed: { endpointSecrets: auditItems([rotated.id]) } });
    return c.json(rotated, 200);
  });
  app.openapi(attempts, async (c) => {
    const { status, limit, cursor } = c.req.valid('query');
    const id = await idOf(c.req.valid('param').id);
    return c.json(await listAttempts(db, id, { status, limit, cursor }), 200);
  });
  app.openapi(deliveries, async (c) => {
    const { state, limit, cursor } = c.req.valid('query');
    const id = await idOf(c.req.valid('param').id);
    return c.json(await listDeliveries(db, id, { state, limit, cursor }), 200);
  });
  app.openapi(replayOne, async (c) => {
    const body = (c.req.valid('json') ?? {}) as { endpoint?: string };
    const result = await replayEvent(
      { db, clock },
      { eventId: c.req.valid('param').id, endpoint: body.endpoint },
    );
    c.set('audit', {
      changed: { deliveries: auditItems(result.requeued.map((r) => String(r.deliveryId))) },
    });
    return c.json(result, 202);
  });
  app.openapi(replayMany, async (c) => {
    const { since } = c.req.valid('json');
    const result = await replayFailed({ db, clock }, c.req.valid('param').id, new Date(since));
    c.set('audit', { changed: { deliveries: { count: result.requeued } } });
    return c.json(result, 202);
  });
  return app;
}
