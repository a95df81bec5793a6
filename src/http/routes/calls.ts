/** /v1/calls: start one or many calls from a flow, read a call, list calls. */
import { createRoute, z } from '@hono/zod-openapi';
import { CALL_STATES } from '../../calls/deps.ts';
import { CallList, CallView, getCall, listCalls } from '../../calls/read.ts';
import {
  BatchCallsRequest,
  BatchItemResult,
  CallStarted,
  StartCallRequest,
  type StartDeps,
  startCall,
  startCalls,
} from '../../calls/start.ts';
import type { Db } from '../../db/client.ts';
import type { ErrorCode } from '../../errors.ts';
import { IsoDateTime } from '../../provider/message.ts';
import { auditItems } from '../audit.ts';
import { errorBody, errorCodes } from '../operation-errors.ts';
import { newRouter } from '../router.ts';
import { needs } from '../scopes.ts';

/** Why a flow cannot start calls (calls/start-prepare.ts `compiledFlow`). */
const FLOW_CODES: ErrorCode[] = ['UNKNOWN_FLOW', 'INVALID_FLOW'];
/** Why a call's message is refused (provider/message.ts `validateMessage`). */
const MESSAGE_CODES: ErrorCode[] = [
  'INVALID_RECIPIENT',
  'INVALID_SENDER',
  'MESSAGE_TOO_LONG',
  'INVALID_MESSAGE',
];

const start = createRoute({
  method: 'post',
  path: '/v1/calls',
  operationId: 'startCall',
  tags: ['calls'],
  summary: 'Start a call from a flow',
  security: needs('send'),
  ...errorCodes({
    also: [...FLOW_CODES, 'INVALID_VARS', 'INVALID_LANGUAGE', ...MESSAGE_CODES, 'OPTED_OUT'],
  }),
  description:
    'Validates the vars against the flow params and the numbers, renders the menu with signed tokens, and stores the call (pinned to the flow version), its speechcall message and the outbox row in one transaction. A number on the opt-out list (docs/opt-outs.md) is refused with 409 `OPTED_OUT`, and nothing is stored.',
  request: {
    body: {
      required: true,
      content: {
        'application/json': {
          schema: StartCallRequest,
          example: {
            flow: 'appointment-reminder',
            to: '+380501234567',
            from: 'Clinic',
            vars: { name: 'Ann', date: 'Monday 10:00' },
            lang: 'en',
          },
        },
      },
    },
  },
  responses: {
    202: { description: 'queued', content: { 'application/json': { schema: CallStarted } } },
    400: errorBody('unknown flow, missing or mistyped var, bad number or sender'),
    409: errorBody('the number is on the opt-out list (OPTED_OUT)'),
  },
});

const batch = createRoute({
  method: 'post',
  path: '/v1/calls/batch',
  operationId: 'startCalls',
  tags: ['calls'],
  security: needs('send'),
  ...errorCodes({ also: FLOW_CODES }),
  summary: 'Start up to 10 000 calls of one flow; each is queued or rejected on its own',
  description:
    'Each call is checked on its own; one to a number on the opt-out list is rejected in its result with `OPTED_OUT` (docs/opt-outs.md).',
  request: {
    body: { required: true, content: { 'application/json': { schema: BatchCallsRequest } } },
  },
  responses: {
    202: {
      description: 'per-call results in request order',
      content: {
        'application/json': {
          schema: z
            .object({
              flow: z.string(),
              flowVersion: z.string(),
              queued: z.number().int(),
              calls: z.array(BatchItemResult),
            })
            .meta({ id: 'BatchCallsResponse' }),
        },
      },
    },
    400: errorBody('unknown flow, or not a well-formed batch (each call is answered on its own)'),
  },
});

const getOne = createRoute({
  method: 'get',
  path: '/v1/calls/{id}',
  operationId: 'getCall',
  tags: ['calls'],
  security: needs('read'),
  summary: 'A call: state, outcome, vars, path of menus and keys, its messages, its timeline',
  request: {
    params: z.object({ id: z.string().meta({ param: { name: 'id', in: 'path' } }) }),
  },
  responses: {
    200: { description: 'the call', content: { 'application/json': { schema: CallView } } },
    404: errorBody('no such call'),
  },
});

const list = createRoute({
  method: 'get',
  path: '/v1/calls',
  operationId: 'listCalls',
  tags: ['calls'],
  security: needs('read'),
  summary: 'Calls, newest first, filtered by flow, number, state or outcome',
  request: {
    query: z.object({
      flow: z.string().optional(),
      to: z.string().optional().meta({ example: '+380501234567' }),
      state: z.enum(CALL_STATES).optional(),
      outcome: z.string().optional().meta({ example: 'confirmed' }),
      since: IsoDateTime.optional(),
      limit: z.coerce.number().int().min(1).max(500).optional(),
      cursor: z.string().optional(),
    }),
  },
  responses: {
    200: { description: 'a page', content: { 'application/json': { schema: CallList } } },
    400: errorBody('bad filter'),
  },
});

/** `reads`: what the reads query (a read replica's routed db, src/db/replica.ts); default deps.db */
export function callRoutes(deps: StartDeps, reads: Db = deps.db) {
  const app = newRouter();
  app.openapi(start, async (c) => {
    const idempotency = c.get('idempotency');
    // an Idempotency-Key's answer commits with the call it names
    const started = await startCall(
      deps,
      c.req.valid('json'),
      idempotency && ((tx, answer) => idempotency.save(tx, 202, answer)),
    );
    c.set('audit', {
      created: { calls: auditItems([started.id]), messages: auditItems([started.messageId]) },
    });
    return c.json(started, 202);
  });
  app.openapi(batch, async (c) => {
    const result = await startCalls(deps, c.req.valid('json'));
    const queued = result.calls.flatMap((r) => (r.id ? [r.id] : []));
    c.set('audit', {
      created: { calls: auditItems(queued) },
      rejected: { calls: result.calls.length - queued.length },
    });
    // 202 whatever the mix, all rejected too: a well-formed batch is answered per call
    return c.json(result, 202);
  });
  app.openapi(getOne, async (c) => c.json(await getCall(reads, c.req.valid('param').id), 200));
  app.openapi(list, async (c) => {
    const q = c.req.valid('query');
    return c.json(
      await listCalls(reads, { ...q, since: q.since ? new Date(q.since) : undefined }),
      200,
    );
  });
  return app;
}
