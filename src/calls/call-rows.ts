/**
 * Calls under their row lock: one locked by drizzle (`lockCall`), or many locked by the
 * caller's statement and returned as JSON (`lockedCalls`), with their pinned flows and the
 * held webhooks read right after the lock (`readHeld`).
 */
import { eq, sql } from 'drizzle-orm';
import { executePrepared, type Tx } from '../db/client.ts';
import { type CallRow, calls, heldWebhooks } from '../db/schema/index.ts';
import type { CompiledFlow } from '../flows/index.ts';
import { compiledVersion } from './flow-versions.ts';
import { jsonRowMapper, type RowJson } from './row-json.ts';

/** A webhook held until its call reaches its node (`id` once it is stored). */
export type HeldWebhook = Omit<typeof heldWebhooks.$inferSelect, 'id'> & { id?: number };

/** A call under its row lock, with its pinned flow. */
export interface LockedCall {
  row: CallRow;
  compiled: CompiledFlow;
  /** the provider's id of the call's message, when it was read with the lock */
  providerMessageId?: string | null;
  /** the call's held webhooks in arrival order, when they were read with the lock */
  held?: HeldWebhook[];
}

/** A locked call whose held webhooks were read with its lock (what a key needs). */
export type KeyCall = LockedCall & { held: HeldWebhook[] };

/** A calls row as `to_json` writes it, with the provider's id when the statement joined it. */
export type CallRowJson = RowJson & { id: string; provider_message_id?: string | null };

const callFromJson = jsonRowMapper(calls);
const heldFromJson = jsonRowMapper(heldWebhooks);

/** Locks the call row (FOR UPDATE) and loads its pinned flow version. */
export async function lockCall(tx: Tx, callId: string): Promise<LockedCall | undefined> {
  const [row] = await tx.select().from(calls).where(eq(calls.id, callId)).for('update');
  if (!row) return undefined;
  return { row, compiled: await compiledVersion(tx, row.flowId, row.flowVersion) };
}

/**
 * Calls locked by the caller's statement (events.ts locks with the inbox insert, in one
 * round trip), with their pinned flows and their held webhooks (`readHeld`). Rows in lock
 * order.
 */
export async function lockedCalls(
  tx: Tx,
  rows: CallRowJson[],
  held: HeldWebhook[],
): Promise<Map<string, KeyCall>> {
  const out = new Map<string, KeyCall>();
  for (const json of rows) {
    const row = callFromJson(json);
    const compiled = await compiledVersion(tx, row.flowId, row.flowVersion);
    out.set(row.id, {
      row,
      compiled,
      providerMessageId: json.provider_message_id ?? null,
      held: held.filter((h) => h.callId === row.id),
    });
  }
  return out;
}

/**
 * The held webhooks of calls, in arrival order. It must run after the statement that locks
 * the calls, in the same transaction: only then does it see what the transaction that held
 * a lock before us committed. Sent right after that statement, without waiting for its
 * answer, it costs no round trip of its own (the driver pipelines the two; Postgres runs
 * them in order). Rows of calls that did not get locked are to be ignored.
 */
export async function readHeld(tx: Tx, callIds: string[]): Promise<HeldWebhook[]> {
  if (callIds.length === 0) return [];
  const [row] = await executePrepared<{ held: string | RowJson[] }>(
    tx,
    sql`
      select coalesce(json_agg(h order by h.id), '[]') as held
      from held_webhooks h
      where h.call_id = any(string_to_array(${callIds.join(',')}, ',')::uuid[])`,
  );
  const held: RowJson[] = typeof row!.held === 'string' ? JSON.parse(row!.held) : row!.held;
  return held.map(heldFromJson);
}
