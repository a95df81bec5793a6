/** /v1/flows: the flows this server knows, one with its compiled menu and diagram, stats. */
import { createRoute, z } from '@hono/zod-openapi';
import { FLOW_VERSION_HASH } from '../../calls/flow-history.ts';
import { FlowStats, flowStatsOf } from '../../calls/read.ts';
import type { FlowRegistry } from '../../calls/registry.ts';
import type { Db } from '../../db/client.ts';
import { AppError } from '../../errors.ts';
import { flowToMermaid, type LoadedFlow, PromptLanguage } from '../../flows/index.ts';
import { errorBody } from '../operation-errors.ts';
import { newRouter } from '../router.ts';
import { needs } from '../scopes.ts';

const Issue = z
  .object({
    file: z.string(),
    line: z.number().int(),
    column: z.number().int(),
    rule: z.string(),
    severity: z.enum(['error', 'warning']),
    message: z.string(),
    path: z.string(),
  })
  .meta({ id: 'FlowIssue' });

export const FlowSummary = z
  .object({
    id: z.string().meta({ example: 'appointment-reminder' }),
    title: z.string().nullable(),
    file: z.string(),
    version: z.string().nullable().meta({ description: 'null when the flow has errors' }),
    params: z.record(z.string(), z.object({ type: z.string(), optional: z.boolean() }).loose()),
    languages: z.array(z.string()),
    menus: z.array(z.string()).meta({ description: 'menus as written in the file' }),
    menuCount: z.number().int().nullable().meta({ description: 'provider menus after unrolling' }),
    checks: z.object({ errors: z.array(Issue), warnings: z.array(Issue) }),
  })
  .meta({ id: 'FlowSummary' });

export const FlowDetail = FlowSummary.extend({
  menuTemplate: z.unknown().meta({
    description:
      'the provider menu JSON in the default language, {{param}} templates kept and tokens as {{token:<node>:<key>}}',
  }),
  mermaid: z.string().nullable(),
}).meta({ id: 'FlowDetail' });

function summary(flow: LoadedFlow): z.infer<typeof FlowSummary> {
  const c = flow.compiled;
  const d = flow.definition;
  return {
    id: flow.id,
    title: c?.title ?? d?.title ?? null,
    file: flow.file,
    version: c?.version ?? null,
    params: Object.fromEntries(Object.entries(c?.params ?? {}).map(([k, v]) => [k, { ...v }])),
    languages: c?.languages ?? [],
    menus: c?.sourceMenus ?? Object.keys(d?.menus ?? {}),
    menuCount: c?.menuCount ?? null,
    checks: { errors: flow.errors, warnings: flow.warnings },
  };
}

/** `{id}` of the /v1/flows/{id} routes (versions, replay) */
export const FlowIdParam = z.object({
  id: z.string().meta({ param: { name: 'id', in: 'path' }, example: 'appointment-reminder' }),
});

const list = createRoute({
  method: 'get',
  path: '/v1/flows',
  operationId: 'listFlows',
  tags: ['flows'],
  security: needs('read'),
  summary: 'The flows in the flows directory, with version, params, menus and checks',
  responses: {
    200: {
      description: 'flows',
      content: { 'application/json': { schema: z.object({ items: z.array(FlowSummary) }) } },
    },
  },
});

const getOne = createRoute({
  method: 'get',
  path: '/v1/flows/{id}',
  operationId: 'getFlow',
  tags: ['flows'],
  security: needs('read'),
  summary: 'One flow with its compiled menu template and a Mermaid diagram',
  request: { params: FlowIdParam },
  responses: {
    200: { description: 'the flow', content: { 'application/json': { schema: FlowDetail } } },
    404: errorBody('no such flow'),
  },
});

const stats = createRoute({
  method: 'get',
  path: '/v1/flows/{id}/stats',
  operationId: 'getFlowStats',
  tags: ['flows'],
  security: needs('read'),
  summary: 'Per menu node: visits, each key, hang-ups; failures and outcomes',
  request: {
    params: FlowIdParam,
    query: z.object({
      version: z
        .string()
        .regex(FLOW_VERSION_HASH, { error: 'must be a flow version: 16 hex digits' })
        .optional()
        .meta({
          example: '3f9a1c0b7d2e4f68',
          description: 'only calls pinned to this version (GET /v1/flows/{id}/versions)',
        }),
      lang: PromptLanguage.optional().meta({
        example: 'uk',
        description: 'only calls in this language',
      }),
    }),
  },
  responses: {
    200: { description: 'counters', content: { 'application/json': { schema: FlowStats } } },
    400: errorBody('bad filter'),
    404: errorBody('no such flow'),
  },
});

export function flowRoutes(deps: { db: Db; flows: FlowRegistry }) {
  const app = newRouter();
  const find = async (id: string) => {
    const flow = await deps.flows.get(id);
    if (!flow) throw new AppError('NOT_FOUND', `no flow "${id}" in the flows directory`);
    return flow;
  };
  app.openapi(list, async (c) => c.json({ items: (await deps.flows.list()).map(summary) }, 200));
  app.openapi(getOne, async (c) => {
    const flow = await find(c.req.valid('param').id);
    return c.json(
      {
        ...summary(flow),
        menuTemplate: flow.compiled?.menuTemplate ?? null,
        mermaid: flow.compiled ? flowToMermaid(flow.compiled) : null,
      },
      200,
    );
  });
  app.openapi(stats, async (c) => {
    const { id } = c.req.valid('param');
    await find(id);
    return c.json(await flowStatsOf(deps.db, id, c.req.valid('query')), 200);
  });
  return app;
}
