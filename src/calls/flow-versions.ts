/**
 * The compiled flow versions calls are pinned to, read from `flow_versions` and cached by
 * `flowId@version`.
 */
import { and, eq } from 'drizzle-orm';
import type { Tx } from '../db/client.ts';
import { flowVersions } from '../db/schema/index.ts';
import type { CompiledFlow } from '../flows/index.ts';

export interface FlowVersionCache {
  readonly limit: number;
  readonly entries: Map<string, CompiledFlow>;
}

export function createFlowVersionCache(limit = 200): FlowVersionCache {
  return { limit, entries: new Map() };
}

/**
 * The cache deps use when they bring none. Process-wide on purpose: a version is the hash of
 * its compiled form, so an entry can never go stale whichever database it was read from;
 * bounded (200 versions, oldest out first).
 */
export const processFlowVersions = createFlowVersionCache(200);

/** The compiled form of a pinned version: from the cache, else read (and cached). */
export async function compiledVersion(
  tx: Tx,
  cache: FlowVersionCache,
  flowId: string,
  version: string,
): Promise<CompiledFlow> {
  const key = `${flowId}@${version}`;
  const hit = cache.entries.get(key);
  if (hit) return hit;
  const [row] = await tx
    .select({ compiled: flowVersions.compiled })
    .from(flowVersions)
    .where(and(eq(flowVersions.flowId, flowId), eq(flowVersions.version, version)));
  if (!row) throw new Error(`flow version ${key} is missing`);
  const compiled = row.compiled as CompiledFlow;
  if (cache.entries.size >= cache.limit) cache.entries.delete(cache.entries.keys().next().value!);
  cache.entries.set(key, compiled);
  return compiled;
}
