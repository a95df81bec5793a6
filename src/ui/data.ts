/**
 * Reads the console needs beyond the API's own: the compiled flow a call is pinned to (its
 * diagram is that version's, whatever the file says now).
 */
import { and, eq } from 'drizzle-orm';
import type { FlowRegistry } from '../calls/registry.ts';
import type { Queryable } from '../db/client.ts';
import { flowVersions } from '../db/schema/index.ts';
import type { CompiledFlow } from '../flows/index.ts';

/**
 * The compiled flow of `flowId` at `version`: the file's, when it still compiles to that
 * version, else the stored copy; undefined when neither has it.
 *
 * @example
 * const compiled = await pinnedFlow(db, flows, call.flow, call.flowVersion);
 */
export async function pinnedFlow(
  db: Queryable,
  flows: FlowRegistry,
  flowId: string,
  version: string,
): Promise<CompiledFlow | undefined> {
  const current = (await flows.get(flowId))?.compiled;
  if (current?.version === version) return current;
  const [row] = await db
    .select({ compiled: flowVersions.compiled })
    .from(flowVersions)
    .where(and(eq(flowVersions.flowId, flowId), eq(flowVersions.version, version)));
  return row?.compiled as CompiledFlow | undefined;
}
