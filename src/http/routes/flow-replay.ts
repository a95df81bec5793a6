/**
 * POST /v1/flows/{id}/replay: the flow's stored calls of a period, replayed through a changed
 * flow (its YAML in the body), and where they would differ (src/calls/replay.ts). It changes
 * nothing, so a `read` token may run it; it is a POST because the draft travels in the body.
 *
 * @example
 * // POST /v1/flows/appointment-reminder/replay
 * // { "source": "menus: ...", "since": "7d" }
 * // 200 { "replayed": 120, "same": 117, "differing": 3, "skipped": 0, "items": [...] }
 */
import { createRoute, z } from '@hono/zod-openapi';
import type { FlowRegistry } from '../../calls/registry.ts';
import {
  compileReplayDraft,
  REPLAY_SKIP_REASONS,
  REPLAY_TIME_RULE,
  replayFlow,
  replayPeriod,
  replayTime,
} from '../../calls/replay.ts';
import type { Clock } from '../../clock.ts';
import type { Db } from '../../db/client.ts';
import { AppError } from '../../errors.ts';
import { ErrorBody } from '../../messages/views.ts';
import { errorCodes } from '../operation-errors.ts';
import { newRouter } from '../router.ts';
import { needs } from '../scopes.ts';
import { FlowIdParam } from './flows.ts';

const TIME_RULE = REPLAY_TIME_RULE;
const isTime = (v: string) => replayTime(v, new Date()) !== null;

export const FlowReplayRequest = z
  .strictObject({
    source: z
      .string()
      .min(1)
      .max(1_000_000)
      .meta({ description: "the changed flow's YAML, as its file would hold it" }),
    since: z
      .string()
      .refine(isTime, { message: `must be ${TIME_RULE}` })
      .meta({ description: `replay the calls started since then: ${TIME_RULE}`, example: '7d' }),
    until: z
      .string()
      .refine(isTime, { message: `must be ${TIME_RULE}` })
      .optional()
      .meta({ description: 'and before then (default: now)' }),
    limit: z
      .number()
      .int()
      .min(1)
      .max(1_000_000)
      .optional()
      .meta({ description: 'at most this many calls, the oldest first' }),
  })
  .meta({ id: 'FlowReplayRequest' });

const Step = z
  .object({ node: z.string(), key: z.string(), input: z.string().optional() })
  .meta({ id: 'FlowReplayStep' });
const FollowUp = z
  .object({ type: z.string(), text: z.string().nullable() })
  .meta({ id: 'FlowReplayFollowUp' });
const Counts = z.record(z.string(), z.number().int());

export const FlowReplayReportSchema = z
  .object({
    flowId: z.string(),
    version: z.string().meta({ description: "the changed flow's version" }),
    since: z.string(),
    until: z.string().nullable(),
    calls: z.number().int().meta({ description: 'calls of the period: replayed + skipped' }),
    replayed: z.number().int(),
    same: z.number().int(),
    differing: z.number().int(),
    skipped: z.number().int(),
    differingBy: z.object({
      path: z.number().int(),
      outcome: z.number().int(),
      followUps: z.number().int(),
    }),
    skippedBy: z.record(z.enum(REPLAY_SKIP_REASONS), z.number().int()),
    outcomes: z
      .object({ before: Counts, after: Counts })
      .meta({ description: 'outcomes of the replayed calls; `(none)` for no outcome' }),
    inOrder: z
      .number()
      .int()
      .meta({ description: 'calls replayed event by event in stored order' }),
    menuMismatches: z.number().int().meta({
      description: "calls on which the changed flow's machine and provider menu disagree",
    }),
    items: z.array(
      z.object({
        id: z.string(),
        flowVersion: z.string(),
        createdAt: z.string(),
        lang: z.string(),
        inputs: z.array(z.string()),
        differs: z.array(z.enum(['path', 'outcome', 'followUps'])),
        path: z
          .object({
            before: z.array(Step),
            after: z.array(Step),
            partsAt: z.object({
              step: z.number().int(),
              before: Step.nullable(),
              after: Step.nullable(),
            }),
          })
          .optional(),
        outcome: z
          .object({ before: z.string().nullable(), after: z.string().nullable() })
          .optional(),
        followUps: z.object({ before: z.array(FollowUp), after: z.array(FollowUp) }).optional(),
        menuDifferences: z.array(z.string()).optional(),
      }),
    ),
    skippedCalls: z.array(
      z.object({ id: z.string(), reason: z.enum(REPLAY_SKIP_REASONS), message: z.string() }),
    ),
    truncated: z.boolean(),
    limited: z.boolean(),
  })
  .meta({ id: 'FlowReplayReport' });

const replay = createRoute({
  method: 'post',
  path: '/v1/flows/{id}/replay',
  operationId: 'replayFlow',
  tags: ['flows'],
  security: needs('read'),
  ...errorCodes({ also: ['INVALID_FLOW'] }),
  summary: 'Replay stored calls through a changed flow and report where they would differ',
  description:
    "Rebuilds each stored call's inputs (keys, silence, statuses, timers fired) and runs them through the flow in `source`; compares path, outcome and follow-ups with what the call did. Changes nothing.",
  request: {
    params: FlowIdParam,
    body: {
      required: true,
      content: { 'application/json': { schema: FlowReplayRequest } },
    },
  },
  responses: {
    200: {
      description: 'the report',
      content: { 'application/json': { schema: FlowReplayReportSchema } },
    },
    400: {
      description: 'a bad since/until, or a draft that does not compile (INVALID_FLOW)',
      content: { 'application/json': { schema: ErrorBody } },
    },
    404: {
      description: 'no such flow',
      content: { 'application/json': { schema: ErrorBody } },
    },
  },
});

export function flowReplayRoutes(deps: { db: Db; flows: FlowRegistry; clock: Clock }) {
  const app = newRouter();
  app.openapi(replay, async (c) => {
    const { id } = c.req.valid('param');
    const body = c.req.valid('json');
    if (!(await deps.flows.get(id))) {
      throw new AppError('NOT_FOUND', `no flow "${id}" in the flows directory`);
    }
    const period = replayPeriod(body, deps.clock.now());
    const draft = compileReplayDraft(id, body.source);
    const report = await replayFlow(deps.db, {
      flowId: id,
      compiled: draft.compiled,
      ...period,
      ...(body.limit !== undefined && { limit: body.limit }),
    });
    return c.json(report, 200);
  });
  return app;
}
