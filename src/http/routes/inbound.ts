/** GET /v1/inbound: incoming Viber messages, newest first. */
import { createRoute, z } from '@hono/zod-openapi';
import type { Db } from '../../db/client.ts';
import { listInbound } from '../../messages/inbound.ts';
import { ErrorBody } from '../../messages/views.ts';
import { IsoDateTime } from '../../provider/message.ts';
import { newRouter } from '../router.ts';
import { needs } from '../scopes.ts';

export const InboundMessage = z
  .object({
    id: z.string(),
    channel: z.string().meta({ example: 'viber' }),
    from: z.string().meta({ example: '+380501234567' }),
    to: z.string().nullable(),
    text: z.string().nullable().meta({ example: 'STOP' }),
    providerMessageId: z.string().nullable(),
    at: z.string(),
    receivedAt: z.string(),
  })
  .meta({ id: 'InboundMessage' });

const InboundList = z
  .object({ items: z.array(InboundMessage), nextCursor: z.string().nullable() })
  .meta({ id: 'InboundList' });

const list = createRoute({
  method: 'get',
  path: '/v1/inbound',
  operationId: 'listInboundMessages',
  tags: ['inbound'],
  security: needs('read'),
  summary: 'Incoming Viber messages',
  request: {
    query: z.object({
      from: z.string().optional().meta({ example: '+380501234567' }),
      since: IsoDateTime.optional(),
      limit: z.coerce.number().int().min(1).max(500).optional(),
      cursor: z.string().optional(),
    }),
  },
  responses: {
    200: { description: 'a page', content: { 'application/json': { schema: InboundList } } },
    400: { description: 'bad filter', content: { 'application/json': { schema: ErrorBody } } },
  },
});

export function inboundRoutes(deps: { db: Db }) {
  const app = newRouter();
  app.openapi(list, async (c) => {
    const q = c.req.valid('query');
    return c.json(
      await listInbound(deps.db, { ...q, since: q.since ? new Date(q.since) : undefined }),
      200,
    );
  });
  return app;
}
