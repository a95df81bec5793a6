/**
 * A flow's history in the API (src/calls/flow-history.ts): the versions it ran, one version's
 * source and compiled summary, and two versions compared (source diff, menus node by node,
 * counters side by side per node and per language, with rates). All `read`.
 *
 * @example
 * app.route('/', flowVersionRoutes({ db, flows }));
 * // GET /v1/flows/appointment-reminder/diff?from=3f9a1c0b7d2e4f68&to=current
 */
import { createRoute, z } from '@hono/zod-openapi';
import {
  diffFlowVersions,
  FLOW_VERSION_PATTERN,
  FlowDiff,
  FlowVersionDetail,
  FlowVersionList,
  flowHasRun,
  flowVersionDetail,
  listFlowVersions,
} from '../../calls/flow-history.ts';
import type { FlowRegistry } from '../../calls/registry.ts';
import type { Db } from '../../db/client.ts';
import { AppError } from '../../errors.ts';
import { errorBody, errorCodes } from '../operation-errors.ts';
import { newRouter } from '../router.ts';
import { needs } from '../scopes.ts';
import { FlowIdParam } from './flows.ts';

const VERSION_HINT = 'a version (16 hex digits, as GET /v1/flows/{id}/versions lists) or current';

const Version = () => z.string().regex(FLOW_VERSION_PATTERN, { error: `must be ${VERSION_HINT}` });

const list = createRoute({
  method: 'get',
  path: '/v1/flows/{id}/versions',
  operationId: 'listFlowVersions',
  tags: ['flows'],
  security: needs('read'),
  summary: 'The versions of a flow that ran, newest first, and the file’s own',
  request: { params: FlowIdParam },
  responses: {
    200: {
      description: 'versions',
      content: { 'application/json': { schema: FlowVersionList } },
    },
    404: errorBody('no such flow'),
  },
});

const getOne = createRoute({
  method: 'get',
  path: '/v1/flows/{id}/versions/{version}',
  operationId: 'getFlowVersion',
  tags: ['flows'],
  security: needs('read'),
  summary: 'One version of a flow: its source and its compiled menus, languages and params',
  ...errorCodes({ also: ['UNKNOWN_FLOW_VERSION'] }),
  request: {
    params: FlowIdParam.extend({
      version: Version().meta({
        param: { name: 'version', in: 'path' },
        example: '3f9a1c0b7d2e4f68',
        description: VERSION_HINT,
      }),
    }),
  },
  responses: {
    200: {
      description: 'the version',
      content: { 'application/json': { schema: FlowVersionDetail } },
    },
    404: errorBody('no such flow, or no such version of it'),
  },
});

const diff = createRoute({
  method: 'get',
  path: '/v1/flows/{id}/diff',
  operationId: 'getFlowDiff',
  tags: ['flows'],
  security: needs('read'),
  summary:
    'Two versions of a flow compared: source diff, menus node by node, counters side by side',
  ...errorCodes({ also: ['UNKNOWN_FLOW_VERSION'] }),
  request: {
    params: FlowIdParam,
    query: z.object({
      from: Version().meta({ example: '3f9a1c0b7d2e4f68', description: VERSION_HINT }),
      to: Version()
        .optional()
        .meta({ example: 'current', description: `${VERSION_HINT}; default current` }),
    }),
  },
  responses: {
    200: { description: 'the comparison', content: { 'application/json': { schema: FlowDiff } } },
    400: errorBody('bad query'),
    404: errorBody('no such flow, or no such version of it'),
  },
});

export function flowVersionRoutes(deps: { db: Db; flows: FlowRegistry }) {
  const app = newRouter();
  // the file, if any; a flow with neither a file nor a version run is unknown (a plain 404,
  // before any version is looked for): its history outlives the file
  const known = async (id: string) => {
    const file = await deps.flows.get(id);
    if (!file && !(await flowHasRun(deps.db, id)))
      throw new AppError('NOT_FOUND', `no flow "${id}" in the flows directory`);
    return file;
  };
  app.openapi(list, async (c) => {
    const { id } = c.req.valid('param');
    return c.json(await listFlowVersions(deps.db, id, await deps.flows.get(id)), 200);
  });
  app.openapi(getOne, async (c) => {
    const { id, version } = c.req.valid('param');
    return c.json(await flowVersionDetail(deps.db, id, version, await known(id)), 200);
  });
  app.openapi(diff, async (c) => {
    const { id } = c.req.valid('param');
    const { from, to } = c.req.valid('query');
    const file = await known(id);
    return c.json(await diffFlowVersions(deps.db, id, from, to ?? 'current', file), 200);
  });
  return app;
}
