/**
 * /v1/opt-outs: the numbers that asked not to be contacted (src/opt-outs/, docs/opt-outs.md).
 * Adding one takes `send` (whoever sends may honour a request made elsewhere, by phone or in
 * a shop); taking one off takes `admin` (it lets messages reach a person who said stop);
 * reading takes `read`. The audit log counts the changes, never the numbers.
 */
import { createRoute, z } from '@hono/zod-openapi';
import type { Clock } from '../../clock.ts';
import type { Db } from '../../db/client.ts';
import { AppError } from '../../errors.ts';
import { addOptOut, getOptOut, listOptOuts, removeOptOut } from '../../opt-outs/store.ts';
import { isE164 } from '../../provider/message.ts';
import { errorBody } from '../operation-errors.ts';
import { newRouter } from '../router.ts';
import { needs } from '../scopes.ts';

const PHONE_RULE = 'must be a valid phone number in E.164, such as +380501234567';

const OptOut = z
  .object({
    phone: z.string().meta({ example: '+380501234567' }),
    source: z.enum(['api', 'inbound', 'flow']).meta({
      description:
        'api: POST /v1/opt-outs; inbound: a Viber reply that is an opt-out word (OPT_OUT_WORDS); flow: the `opt-out` action of a call',
    }),
    detail: z.record(z.string(), z.unknown()).nullable().meta({
      description:
        'where it came from: `{inboundId, providerMessageId}` for a reply, `{callId, node}` for a call; null from the API',
    }),
    createdAt: z.string().meta({ example: '2026-11-27T10:00:00.000Z' }),
  })
  .meta({ id: 'OptOut' });

const OptOutList = z
  .object({ items: z.array(OptOut), nextCursor: z.string().nullable() })
  .meta({ id: 'OptOutList' });

const PhoneParam = z.object({
  phone: z
    .string()
    .refine(isE164, PHONE_RULE)
    .meta({
      param: { name: 'phone', in: 'path' },
      description: 'the number, E.164 (the "+" may be sent as %2B)',
      example: '+380501234567',
    }),
});

const create = createRoute({
  method: 'post',
  path: '/v1/opt-outs',
  operationId: 'createOptOut',
  tags: ['opt-outs'],
  security: needs('send'),
  summary: 'Put a number on the opt-out list: no later message or call reaches it',
  description:
    'From then on, POST /v1/messages rejects a message to the number with `OPTED_OUT` (in its own result), POST /v1/calls answers 409 `OPTED_OUT`, and a batch rejects that call in its result. A number already on the list keeps its first entry (200).',
  request: {
    body: {
      required: true,
      content: {
        'application/json': {
          schema: z
            .object({ phone: z.string().refine(isE164, PHONE_RULE) })
            .meta({ id: 'OptOutRequest', example: { phone: '+380501234567' } }),
        },
      },
    },
  },
  responses: {
    201: { description: 'added', content: { 'application/json': { schema: OptOut } } },
    200: {
      description: 'already on the list: its first entry',
      content: { 'application/json': { schema: OptOut } },
    },
    400: errorBody('not an E.164 number'),
  },
});

const list = createRoute({
  method: 'get',
  path: '/v1/opt-outs',
  operationId: 'listOptOuts',
  tags: ['opt-outs'],
  security: needs('read'),
  summary: 'The opt-out list, newest first, one page at a time',
  request: {
    query: z.object({
      limit: z.coerce.number().int().min(1).max(500).optional().meta({ example: 50 }),
      cursor: z.string().optional().meta({ description: 'nextCursor of the previous page' }),
    }),
  },
  responses: {
    200: { description: 'a page', content: { 'application/json': { schema: OptOutList } } },
    400: errorBody('bad limit or cursor'),
  },
});

const getOne = createRoute({
  method: 'get',
  path: '/v1/opt-outs/{phone}',
  operationId: 'getOptOut',
  tags: ['opt-outs'],
  security: needs('read'),
  summary: "One number's opt-out: when and where from",
  request: { params: PhoneParam },
  responses: {
    200: { description: 'on the list', content: { 'application/json': { schema: OptOut } } },
    400: errorBody('not an E.164 number'),
    404: errorBody('the number is not on the list'),
  },
});

const remove = createRoute({
  method: 'delete',
  path: '/v1/opt-outs/{phone}',
  operationId: 'deleteOptOut',
  tags: ['opt-outs'],
  security: needs('admin'),
  summary: 'Take a number off the opt-out list (it can be messaged and called again)',
  request: { params: PhoneParam },
  responses: {
    204: { description: 'taken off the list' },
    400: errorBody('not an E.164 number'),
    404: errorBody('the number is not on the list'),
  },
});

const notOnList = () => new AppError('NOT_FOUND', 'the number is not on the opt-out list');

export function optOutRoutes(deps: { db: Db; clock: Clock }) {
  const app = newRouter();
  app.openapi(create, async (c) => {
    const { phone } = c.req.valid('json');
    const { created } = await addOptOut(deps.db, phone, 'api', null, deps.clock.now());
    const entry = await getOptOut(deps.db, phone);
    // removed between the two statements: answered as gone, like any later read
    if (!entry) throw notOnList();
    // counts only: the number stays out of the audit log
    c.set('audit', { created: { optOuts: { count: created ? 1 : 0 } } });
    return created ? c.json(entry, 201) : c.json(entry, 200);
  });
  app.openapi(list, async (c) => c.json(await listOptOuts(deps.db, c.req.valid('query')), 200));
  app.openapi(getOne, async (c) => {
    const entry = await getOptOut(deps.db, c.req.valid('param').phone);
    if (!entry) throw notOnList();
    return c.json(entry, 200);
  });
  app.openapi(remove, async (c) => {
    if (!(await removeOptOut(deps.db, c.req.valid('param').phone))) throw notOnList();
    c.set('audit', { removed: { optOuts: { count: 1 } } });
    return c.body(null, 204);
  });
  return app;
}
