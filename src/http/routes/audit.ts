/** GET /v1/audit: the audit log (src/http/audit.ts), newest first, one page at a time. */
import { createRoute, z } from '@hono/zod-openapi';
import type { Db } from '../../db/client.ts';
import { ErrorBody } from '../../messages/views.ts';
import { IsoDateTime } from '../../provider/message.ts';
import { NameOfToken } from '../api-tokens.ts';
import { AuditPage, listAudit } from '../audit.ts';
import { newRouter } from '../router.ts';
import { needs } from '../scopes.ts';

const list = createRoute({
  method: 'get',
  path: '/v1/audit',
  operationId: 'listAuditEntries',
  tags: ['audit'],
  summary: 'Every request that changed (or tried to change) something through the API',
  description:
    "One entry per non-GET /v1 request made with a valid token (or while the API is open): the token's name, the route, the answer's status and what it created or removed (ids and counts; never texts or phone numbers). Requests refused for want of a valid token are not entered.",
  security: needs('admin'),
  request: {
    query: z.object({
      since: IsoDateTime.optional().meta({ description: 'at or after (ISO 8601)' }),
      until: IsoDateTime.optional().meta({ description: 'at or before (ISO 8601)' }),
      token: NameOfToken.optional().meta({
        description: "a token's name (API_TOKEN, open, or a made token's)",
        example: 'API_TOKEN',
      }),
      route: z
        .string()
        .max(200)
        .regex(/^\/v1\/[A-Za-z0-9/{}._-]*$/, 'a route pattern, such as /v1/subjects/{phone}')
        .optional()
        .meta({ example: '/v1/messages' }),
      limit: z.coerce.number().int().min(1).max(500).optional().meta({ example: 50 }),
      cursor: z
        .string()
        .max(64)
        .optional()
        .meta({ description: 'nextCursor of the previous page' }),
    }),
  },
  responses: {
    200: { description: 'a page', content: { 'application/json': { schema: AuditPage } } },
    400: {
      description: 'bad filter or cursor',
      content: { 'application/json': { schema: ErrorBody } },
    },
  },
});

export function auditRoutes(deps: { db: Db }) {
  const app = newRouter();
  app.openapi(list, async (c) => {
    const q = c.req.valid('query');
    return c.json(
      await listAudit(deps.db, {
        ...q,
        since: q.since ? new Date(q.since) : undefined,
        until: q.until ? new Date(q.until) : undefined,
      }),
      200,
    );
  });
  return app;
}
