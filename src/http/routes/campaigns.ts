/**
 * /v1/campaigns: create a campaign, read it with its progress, list them, pause, resume or
 * cancel one, and read its results per recipient (JSON, or CSV with `Accept: text/csv`).
 */
import { createRoute, z } from '@hono/zod-openapi';
import type { Context } from 'hono';
import { stream } from 'hono/streaming';
import {
  type CampaignDeps,
  type CreateOutcome,
  createCampaign,
  createCampaignFromCsv,
} from '../../campaigns/create.ts';
import {
  campaignResults,
  campaignResultsCsv,
  getCampaign,
  listCampaigns,
} from '../../campaigns/read.ts';
import { changeCampaignState } from '../../campaigns/scheduler.ts';
import {
  CAMPAIGN_STATES,
  CampaignCreated,
  CampaignView,
  CreateCampaignRequest,
  RecipientResult,
} from '../../campaigns/schemas.ts';
import { parseWindowSetting } from '../../campaigns/windows.ts';
import type { Db } from '../../db/client.ts';
import { AppError, type ErrorDetail } from '../../errors.ts';
import { issuesToDetails } from '../../zod-issues.ts';
import { auditItems } from '../audit.ts';
import { CAMPAIGN_CSV_BODY, incompleteBody } from '../body.ts';
import type { AppEnv } from '../env.ts';
import { errorBody, errorCodes } from '../operation-errors.ts';
import { newRouter } from '../router.ts';
import { needs } from '../scopes.ts';

const IdParam = z.object({
  id: z
    .string()
    .meta({ param: { name: 'id', in: 'path' }, example: '019a0000-0000-7000-8000-000000000000' }),
});

/** A CSV upload's settings, in the query (the body is the recipients). */
const CsvSettings = z.strictObject({
  flow: z.string().min(1).optional(),
  message: z
    .string()
    .optional()
    .meta({ description: "a message campaign's template, as JSON (`message` of the JSON form)" }),
  from: z.string().min(1),
  name: z.string().optional(),
  lang: z.string().optional(),
  startAt: z.string().optional(),
  perMinute: z.string().regex(/^\d+$/, 'a whole number').optional(),
  maxConcurrent: z.string().regex(/^\d+$/, 'a whole number').optional(),
  window: z.string().optional().meta({ description: 'as CALLING_WINDOW: `09:00-20:00 mon-fri`' }),
  retryOn: z.string().optional().meta({ description: 'comma-separated, as `retry.on`' }),
  retryAfter: z.string().optional(),
  maxAttempts: z.string().regex(/^\d+$/, 'a whole number').optional(),
});

/** The query of a CSV upload as the JSON request's settings, checked by the same schema. */
function csvSettings(query: Record<string, string>) {
  const q = CsvSettings.safeParse(query);
  if (!q.success) throw validationError(issuesToDetails(q.error.issues, ['query']));
  const v = q.data;
  let window: unknown;
  if (v.window !== undefined) {
    try {
      window = parseWindowSetting(v.window);
    } catch (err) {
      throw validationError([
        {
          path: 'query.window',
          code: 'INVALID_VALUE',
          message: err instanceof Error ? err.message : String(err),
        },
      ]);
    }
  }
  let message: unknown;
  if (v.message !== undefined) {
    try {
      message = JSON.parse(v.message);
    } catch (err) {
      throw validationError([
        {
          path: 'query.message',
          code: 'JSON_SYNTAX',
          message: `must be a JSON object: ${err instanceof Error ? err.message : String(err)}`,
        },
      ]);
    }
  }
  const settings = {
    ...(v.flow !== undefined && { flow: v.flow }),
    ...(message !== undefined && { message }),
    from: v.from,
    ...(v.name !== undefined && { name: v.name }),
    ...(v.lang !== undefined && { lang: v.lang }),
    ...(v.startAt !== undefined && { startAt: v.startAt }),
    ...(v.perMinute !== undefined && { perMinute: Number(v.perMinute) }),
    ...(v.maxConcurrent !== undefined && { maxConcurrent: Number(v.maxConcurrent) }),
    ...(window !== undefined && { window }),
    ...((v.retryOn ?? v.retryAfter ?? v.maxAttempts) !== undefined && {
      retry: {
        on: (v.retryOn ?? '')
          .split(',')
          .map((s) => s.trim())
          .filter((s) => s !== ''),
        after: v.retryAfter,
        maxAttempts: v.maxAttempts === undefined ? undefined : Number(v.maxAttempts),
      },
    }),
    recipients: [{}],
  };
  const parsed = CreateCampaignRequest.safeParse(settings);
  if (!parsed.success) throw validationError(issuesToDetails(parsed.error.issues, ['query']));
  const { recipients: _, ...rest } = parsed.data;
  return rest;
}

/**
 * The body's chunks as they arrive, refused once they pass `max` bytes (nothing is held); a
 * body the client stopped sending is INCOMPLETE_BODY.
 */
async function* countedBody(
  body: AsyncIterable<Uint8Array>,
  max: number,
): AsyncGenerator<Uint8Array> {
  let seen = 0;
  const chunks = body[Symbol.asyncIterator]();
  for (;;) {
    let next: IteratorResult<Uint8Array>;
    try {
      next = await chunks.next();
    } catch (err) {
      throw incompleteBody(err);
    }
    if (next.done) return;
    const chunk = next.value;
    seen += chunk.byteLength;
    if (seen > max) {
      throw new AppError(
        'PAYLOAD_TOO_LARGE',
        `the request body is larger than ${max / 1024 / 1024} MiB`,
      );
    }
    yield chunk;
  }
}

function validationError(details: ErrorDetail[]) {
  const first = details[0];
  return new AppError(
    'VALIDATION_ERROR',
    first ? `${first.path}: ${first.message}` : 'invalid query',
    details,
  );
}

const create = createRoute({
  method: 'post',
  path: '/v1/campaigns',
  operationId: 'createCampaign',
  tags: ['campaigns'],
  summary:
    'Call a list of recipients with a flow, or send them a message: at a time, at a pace, inside a calling window',
  description:
    "Checks every recipient (its number; for a flow its language and vars against the flow's params; for a message the template filled with its vars, checked as `POST /v1/messages` checks a message) and stores the campaign; a bad row is reported by its index and field and the good rows still go; a number listed twice is called once. Nothing is sent here: the scheduler starts calls (or sends messages) from `startAt`, at most `perMinute` a minute and `maxConcurrent` at once, only inside the calling window in each recipient's time zones, never to an opted-out number, and retries as `retry` says (docs/campaigns.md).",
  security: needs('send'),
  ...errorCodes({ also: ['UNKNOWN_FLOW', 'INVALID_FLOW', 'INVALID_LANGUAGE', 'INVALID_MESSAGE'] }),
  request: {
    query: CsvSettings.partial().meta({
      description: 'With a `text/csv` body only: the settings the JSON body would carry.',
    }),
    body: {
      required: true,
      content: {
        'application/json': { schema: CreateCampaignRequest },
        'text/csv': {
          schema: z.string().meta({
            description:
              "The recipients, streamed: a header row with `to`, an optional `lang` (a flow campaign's), and a column per var (`name` or `vars.name`); then a row per recipient. A bad line is reported by its line number and the good ones still go. Settings in the query (a message template as JSON in `message`).",
            example: 'to,name,date\n+380501234567,Maria,the third of March\n',
          }),
        },
      },
    },
  },
  responses: {
    201: {
      description: 'stored, with the rows refused one by one',
      content: { 'application/json': { schema: CampaignCreated } },
    },
    400: errorBody(
      'unknown flow, a bad message template, or not a well-formed campaign (rows are answered one by one)',
    ),
  },
});

const list = createRoute({
  method: 'get',
  path: '/v1/campaigns',
  operationId: 'listCampaigns',
  tags: ['campaigns'],
  security: needs('read'),
  summary: 'Campaigns, newest first, with their progress',
  request: {
    query: z.object({
      state: z.enum(CAMPAIGN_STATES).optional(),
      limit: z.coerce.number().int().min(1).max(200).optional(),
      cursor: z.string().optional(),
    }),
  },
  responses: {
    200: {
      description: 'a page',
      content: {
        'application/json': {
          schema: z
            .object({ items: z.array(CampaignView), nextCursor: z.string().nullable() })
            .meta({ id: 'CampaignList' }),
        },
      },
    },
    400: errorBody('bad filter'),
  },
});

const getOne = createRoute({
  method: 'get',
  path: '/v1/campaigns/{id}',
  operationId: 'getCampaign',
  tags: ['campaigns'],
  security: needs('read'),
  summary: 'A campaign: its state and progress (recipients by state, results by outcome)',
  request: { params: IdParam },
  responses: {
    200: { description: 'the campaign', content: { 'application/json': { schema: CampaignView } } },
    404: errorBody('no such campaign'),
  },
});

const results = createRoute({
  method: 'get',
  path: '/v1/campaigns/{id}/results',
  operationId: 'getCampaignResults',
  tags: ['campaigns'],
  security: needs('read'),
  summary: 'One row per recipient: attempts, result, why it was skipped (JSON pages, or CSV)',
  description:
    'With `Accept: text/csv`, every recipient as CSV (`line,to,state,attempts,outcome,reason,calls`, `calls` as `attempt:callId:state:outcome` separated by spaces), streamed; otherwise JSON pages in the order of the upload.',
  request: {
    params: IdParam,
    query: z.object({
      limit: z.coerce.number().int().min(1).max(1000).optional(),
      cursor: z.string().regex(/^\d+$/, 'a cursor from nextCursor').optional(),
    }),
  },
  responses: {
    200: {
      description: 'a page of results (or the CSV)',
      content: {
        'application/json': {
          schema: z
            .object({ items: z.array(RecipientResult), nextCursor: z.string().nullable() })
            .meta({ id: 'CampaignResults' }),
        },
        'text/csv': { schema: z.string() },
      },
    },
    404: errorBody('no such campaign'),
  },
});

function stateRoute(action: 'pause' | 'resume' | 'cancel', summary: string) {
  const verb = { pause: 'Pause', resume: 'Resume', cancel: 'Cancel' }[action];
  return createRoute({
    method: 'post',
    path: `/v1/campaigns/{id}/${action}`,
    operationId: `update${verb}Campaign`,
    tags: ['campaigns'],
    security: needs('send'),
    ...errorCodes({ also: ['CONFLICT'] }),
    summary,
    request: { params: IdParam },
    responses: {
      200: {
        description: 'the campaign',
        content: { 'application/json': { schema: CampaignView } },
      },
      404: errorBody('no such campaign'),
      409: errorBody('the campaign is in a state this does not apply to'),
    },
  });
}

const pause = stateRoute('pause', 'Pause: no new calls start; calls in progress finish');
const resume = stateRoute('resume', 'Resume a paused campaign, at its pace from now');
const cancel = stateRoute(
  'cancel',
  'Cancel: recipients not yet called are cancelled; calls in progress finish',
);

/** A campaign stored, answered 201 with its rows' tallies (and its audit row told). */
async function created(c: Context<AppEnv>, db: Db, made: CreateOutcome) {
  c.set('audit', {
    created: { campaigns: auditItems([made.id]) },
    ...(made.rejectedCount > 0 && { rejected: { recipients: made.rejectedCount } }),
  });
  const view = await getCampaign(db, made.id);
  return c.json(
    {
      ...view,
      accepted: made.accepted,
      duplicates: made.duplicates,
      rejected: made.rejected,
      rejectedCount: made.rejectedCount,
    },
    201,
  );
}

export function campaignRoutes(deps: CampaignDeps & { readDb?: Db }) {
  const app = newRouter();
  // reads (the list, a campaign, its results) through the read replica when there is one
  const readDb = deps.readDb ?? deps.db;
  // a CSV body streams to a temporary file, then into the campaign (createCampaignFromCsv);
  // JSON goes on to the route's validator
  app.post('/v1/campaigns', async (c, next) => {
    if (!/^text\/csv\b/i.test(c.req.header('content-type') ?? '')) return next();
    const settings = csvSettings(c.req.query());
    const body = c.req.raw.body;
    if (!body) {
      throw validationError([{ path: 'body', code: 'REQUIRED', message: 'the CSV is missing' }]);
    }
    // the request's end (the client gone, or its connection closed at shutdown) stops the upload
    const made = await createCampaignFromCsv(deps, settings, countedBody(body, CAMPAIGN_CSV_BODY), {
      signal: c.req.raw.signal,
      logger: c.get('logger'),
    });
    return created(c, deps.db, made);
  });
  app.openapi(create, async (c) => {
    // a JSON body (a CSV one was taken by the handler above): as large a one is stored in
    // batches, and stopped by the request's end likewise
    const made = await createCampaign(deps, c.req.valid('json') as CreateCampaignRequest, {
      signal: c.req.raw.signal,
    });
    return created(c, deps.db, made);
  });
  app.openapi(list, async (c) => c.json(await listCampaigns(readDb, c.req.valid('query')), 200));
  app.openapi(getOne, async (c) => c.json(await getCampaign(readDb, c.req.valid('param').id), 200));
  app.openapi(results, async (c) => {
    const { id } = c.req.valid('param');
    const q = c.req.valid('query');
    if ((c.req.header('accept') ?? '').includes('text/csv')) {
      await getCampaign(readDb, id); // a 404 before the stream starts
      c.header('Content-Type', 'text/csv; charset=utf-8');
      c.header('Content-Disposition', `attachment; filename="campaign-${id}.csv"`);
      return stream(c, async (s) => {
        for await (const chunk of campaignResultsCsv(readDb, id)) await s.write(chunk);
      }) as never;
    }
    const page = await campaignResults(readDb, id, {
      limit: q.limit,
      afterLine: q.cursor === undefined ? undefined : Number(q.cursor),
    });
    return c.json(page, 200);
  });
  for (const [route, action] of [
    [pause, 'pause'],
    [resume, 'resume'],
    [cancel, 'cancel'],
  ] as const) {
    app.openapi(route, async (c) => {
      const { id } = c.req.valid('param');
      const changed = await changeCampaignState(deps, id, action);
      if (!changed) throw new AppError('NOT_FOUND', `no campaign with id "${id}"`);
      if ('refused' in changed) {
        throw new AppError('CONFLICT', `a campaign that is ${changed.refused} cannot ${action}`, [
          { path: 'id', code: 'INVALID_STATE', message: `the campaign is ${changed.refused}` },
        ]);
      }
      c.set('audit', { changed: { campaigns: auditItems([id]) } });
      return c.json(await getCampaign(deps.db, id), 200);
    });
  }
  return app;
}
