/**
 * Writing a flow file: `PUT /v1/flows/{id}` (admin scope, body `{ source }`), and the one
 * function the console's editor saves through as well (src/ui/flow-edit.tsx).
 *
 * Off unless FLOWS_WRITABLE is set (403 FLOWS_READ_ONLY): flows normally come from version
 * control, and a file written here reaches this instance's flows directory only. A draft is
 * parsed and compiled first; one that does not compile is refused (400 INVALID_FLOW, each
 * detail `file:line:column rule message`) and never touches the file. The new text goes to a
 * temporary file in the same directory, is flushed, then renamed over the flow: the registry
 * (which re-reads a file whose modification time changed) reads the old text or the new one,
 * never half of one. A temporary file is not a flow (`isFlowFile`: it ends in `.tmp`).
 *
 * @example
 * app.route('/', flowWriteRoutes({ flows, dir: config.flowsDir, writable: config.flowsWritable }));
 * // PUT /v1/flows/appointment-reminder  {"source": "title: ...\nmenus: ..."}
 * // -> 200 {"id": "appointment-reminder", "version": "3f2a...", "created": false, ...}
 */
import { randomBytes } from 'node:crypto';
import { open, rename, stat, unlink, utimes } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { createRoute, z } from '@hono/zod-openapi';
import type { FlowRegistry } from '../../calls/registry.ts';
import type { Clock } from '../../clock.ts';
import type { Queryable } from '../../db/client.ts';
import { AppError, type DetailCode, type ErrorDetail } from '../../errors.ts';
import { type LoadedFlow, parseFlowSource } from '../../flows/index.ts';
import type { Principal } from '../api-tokens.ts';
import { type AuditChanges, auditConsoleWrite, auditItems } from '../audit.ts';
import { errorBody, errorCodes } from '../operation-errors.ts';
import { newRouter } from '../router.ts';
import { needs } from '../scopes.ts';
import { FlowSummary } from './flows.ts';

/** A flow id as a file name may hold it (the loader's rule): no path, no dot first. */
const FLOW_ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;

export interface FlowWriteDeps {
  flows: FlowRegistry;
  /** where a new flow's file goes (FLOWS_DIR); an existing flow is written where it is */
  dir: string;
  /** FLOWS_WRITABLE */
  writable: boolean;
}

export interface FlowWriteResult {
  flow: LoadedFlow;
  /** the flow had no file before */
  created: boolean;
}

/** A flow's errors as the INVALID_FLOW details: where (`file:line:column`), rule, message. */
export function flowErrorDetails(flow: LoadedFlow, path = 'source'): ErrorDetail[] {
  return flow.errors.map((e) => ({
    path,
    code: e.rule as DetailCode,
    message: `${e.file}:${e.line}:${e.column} ${e.message}`,
  }));
}

/** Writes `text` to `file` through a temporary file beside it and a rename. */
async function replaceFile(file: string, text: string): Promise<void> {
  const tmp = join(dirname(file), `.${basename(file)}.${randomBytes(6).toString('hex')}.tmp`);
  // The registry re-reads a file when its modification time changes. Two saves within the
  // file system's timestamp granularity (a few ms on Linux) could keep the old time, so the
  // new file is dated at least 1 ms after the one it replaces.
  const before = await stat(file).then(
    (s) => s.mtimeMs,
    () => 0,
  );
  const handle = await open(tmp, 'wx', 0o644);
  try {
    try {
      await handle.writeFile(text, 'utf8');
      await handle.sync();
    } finally {
      await handle.close();
    }
    const at = new Date(Math.max(Date.now(), Math.floor(before) + 1));
    await utimes(tmp, at, at);
    await rename(tmp, file);
  } catch (err) {
    await unlink(tmp).catch(() => {});
    throw err;
  }
}

/**
 * Checks and writes a flow's new source; throws FLOWS_READ_ONLY when writing is off,
 * INVALID_FLOW (nothing written) when the draft does not compile.
 *
 * @example
 * const { flow, created } = await writeFlowSource(deps, 'appointment-reminder', source);
 */
export async function writeFlowSource(
  deps: FlowWriteDeps,
  id: string,
  source: string,
): Promise<FlowWriteResult> {
  if (!deps.writable) {
    throw new AppError(
      'FLOWS_READ_ONLY',
      'writing flows is off on this instance: set FLOWS_WRITABLE=true on a single instance, or change the flow in version control and deploy it',
    );
  }
  if (!FLOW_ID.test(id)) {
    throw new AppError('VALIDATION_ERROR', `"${id}" is not a flow id`, [
      {
        path: 'id',
        code: 'INVALID_FORMAT',
        message:
          'a flow id is letters, digits, _ or - (at most 64), starting with a letter or digit',
      },
    ]);
  }
  const existing = await deps.flows.get(id);
  const file = existing?.file ?? join(deps.dir, `${id}.yaml`);
  const flow = parseFlowSource(source, file, { id });
  if (!flow.compiled) {
    throw new AppError(
      'INVALID_FLOW',
      `the flow "${id}" has ${flow.errors.length} error${flow.errors.length === 1 ? '' : 's'}; nothing was written`,
      flowErrorDetails(flow),
    );
  }
  await replaceFile(file, source);
  return { flow, created: existing === undefined };
}

/** What a write changed, for the audit log: the flow's id, nothing of its text. */
export function flowWriteAudit(id: string, created: boolean): AuditChanges {
  return created
    ? { created: { flows: auditItems([id]) } }
    : { changed: { flows: auditItems([id]) } };
}

/** An audit row for the console's save of a flow (the token the form was given). */
export async function auditConsoleFlowWrite(
  db: Queryable,
  clock: Clock,
  row: { principal: Principal; id: string; status: number; requestId: string; created: boolean },
): Promise<void> {
  await auditConsoleWrite(db, clock, {
    token: row.principal.name,
    route: '/ui/flows/{id}/save',
    status: row.status,
    requestId: row.requestId,
    changes: row.status < 400 ? flowWriteAudit(row.id, row.created) : {},
  });
}

const IdParam = z.object({
  id: z
    .string()
    .regex(FLOW_ID, 'letters, digits, _ or - (at most 64), starting with a letter or digit')
    .meta({ param: { name: 'id', in: 'path' }, example: 'appointment-reminder' }),
});

const FlowSource = z
  .object({
    source: z.string().meta({ description: 'the flow file, as YAML text' }),
  })
  .meta({ id: 'FlowSource' });

export const FlowWritten = z
  .object({
    id: z.string(),
    file: z.string(),
    version: z.string().meta({ description: 'the compiled version of what was written' }),
    created: z.boolean().meta({ description: 'true when the flow had no file before' }),
    checks: FlowSummary.shape.checks,
  })
  .meta({ id: 'FlowWritten' });

const put = createRoute({
  method: 'put',
  path: '/v1/flows/{id}',
  operationId: 'updateFlow',
  tags: ['flows'],
  security: needs('admin'),
  summary:
    "Write a flow's file (FLOWS_WRITABLE only): checked and compiled first, written whole or not at all",
  description:
    "A single-instance convenience: the file is written to this instance's flows directory only. Several instances should take flows from version control. A draft with errors is refused with INVALID_FLOW (each detail names file:line:column and the rule) and nothing is written.",
  request: {
    params: IdParam,
    body: { required: true, content: { 'application/json': { schema: FlowSource } } },
  },
  ...errorCodes({ also: ['FLOWS_READ_ONLY', 'INVALID_FLOW'], never: ['NOT_FOUND'] }),
  responses: {
    200: {
      description: 'the flow was replaced',
      content: { 'application/json': { schema: FlowWritten } },
    },
    201: {
      description: 'the flow was created',
      content: { 'application/json': { schema: FlowWritten } },
    },
    400: errorBody('the draft has errors; nothing was written'),
    403: errorBody('writing flows is off on this instance, or the token is not an admin'),
  },
});

export function flowWriteRoutes(deps: FlowWriteDeps) {
  const app = newRouter();
  app.openapi(put, async (c) => {
    const { id } = c.req.valid('param');
    const { source } = c.req.valid('json');
    const { flow, created } = await writeFlowSource(deps, id, source);
    c.set('audit', flowWriteAudit(id, created));
    return c.json(
      {
        id: flow.id,
        file: flow.file,
        version: flow.compiled!.version,
        created,
        checks: { errors: flow.errors, warnings: flow.warnings },
      },
      created ? 201 : 200,
    );
  });
  return app;
}
