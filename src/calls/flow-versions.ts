/**
 * The compiled flow versions calls are pinned to, read from `flow_versions` and cached by
 * `flowId@version`.
 */
import { and, eq } from 'drizzle-orm';
import type { Tx } from '../db/client.ts';
import { flowVersions } from '../db/schema/index.ts';
import type { CompiledFlow } from '../flows/index.ts';

/**
 * Process-wide on purpose: a version is the hash of its compiled form, so an entry can never
 * go stale whichever database it was read from; bounded, oldest out first.
 */
const processFlowVersions = new Map<string, CompiledFlow>();
const FLOW_VERSIONS_KEPT = 200;

/** The compiled form of a pinned version: from the cache, else read (and cached). */
export async function compiledVersion(
  tx: Tx,
  flowId: string,
  version: string,
): Promise<CompiledFlow> {
  const key = `${flowId}@${version}`;
  const hit = processFlowVersions.get(key);
  if (hit) return hit;
  const [row] = await tx
    .select({ compiled: flowVersions.compiled })
    .from(flowVersions)
    .where(and(eq(flowVersions.flowId, flowId), eq(flowVersions.version, version)));
  if (!row) throw new Error(`flow version ${key} is missing`);
  const compiled = row.compiled as CompiledFlow;
  if (processFlowVersions.size >= FLOW_VERSIONS_KEPT)
    processFlowVersions.delete(processFlowVersions.keys().next().value!);
  processFlowVersions.set(key, compiled);
  return compiled;
}
