/**
 * The dispatcher's writes: the plan's outcomes rendered to SQL, inside the round's
 * transaction. It sends:
 * - `recordOutcomes`: one prepared statement per round, whatever its size, that moves the
 *   messages' statuses, adds their `dispatch` timeline events (and their `message.status`
 *   events when an endpoint wants them) and deletes their outbox rows, so a recorded send
 *   can never be sent again;
 * - `postpone`: after a failed send, one statement that puts the rows back with a backoff
 *   (or until the provider's rate limit lets them go);
 * - `lease`: the claimed rows out of the queue while a round sends outside its claim's
 *   transaction (the embedded database).
 */
import { sql } from 'drizzle-orm';
import { executePrepared, type Tx, valueArray } from '../db/client.ts';
import { eventsFrom } from '../events/record.ts';
import { messageStatusSource } from '../events/sources.ts';
import type { Claimed } from './dispatch-claim.ts';
import type { Outcome } from './dispatch-plan.ts';
import { nextStatusSql } from './status.ts';

/** `message.status` for the answers `u` recorded (it returns the message's ids). */
function dispatchSource(at: string) {
  return messageStatusSource(sql`select u.id as message_id, u.customer_message_id, u.call_id,
      u.status, 'dispatch' as source, u.detail, ${at}::timestamptz as at,
      ${at}::timestamptz as received_at
    from u`);
}

/**
 * One outcome as a JSON object for `jsonb_to_recordset`, written directly rather than built
 * and stringified (5000 objects a round were much of this process's garbage), with no nulls
 * (a missing key reads as null). `detail` (the timeline event's) is left out when it is just
 * the provider message id, messagelist id and parts, as for nearly every message: Postgres
 * builds it then, cheaper than parsing it twice.
 */
export function outcomeJson(o: Outcome): string {
  // ids (uuid, bigint) and the status need no escaping; the provider's words do
  const pmid = o.providerMessageId === null ? undefined : JSON.stringify(o.providerMessageId);
  let row = `{"messageId":"${o.id}","outboxId":"${o.outboxId}","status":"${o.status}"`;
  if (pmid !== undefined) row += `,"providerMessageId":${pmid}`;
  if (o.messagelistId !== null) row += `,"messagelistId":${o.messagelistId}`;
  if (o.parts !== null) row += `,"parts":${o.parts}`;
  const error = o.error == null ? undefined : JSON.stringify(o.error);
  if (error !== undefined) row += `,"error":${error}`;
  const plain =
    o.providerMessageId &&
    o.messagelistId !== null &&
    o.parts !== null &&
    o.text === null &&
    o.flash === undefined &&
    !o.resent &&
    error === undefined;
  if (plain) return `${row}}`;
  let detail = '';
  if (o.providerMessageId) detail += `,"messageId":${pmid}`;
  if (o.messagelistId !== null) detail += `,"messagelistId":${o.messagelistId}`;
  if (o.parts !== null) detail += `,"parts":${o.parts}`;
  if (o.text !== null) detail += `,"text":${JSON.stringify(o.text)}`;
  if (o.flash?.callerId !== undefined) detail += `,"callerId":${JSON.stringify(o.flash.callerId)}`;
  if (o.flash?.pattern !== undefined) detail += `,"pattern":${JSON.stringify(o.flash.pattern)}`;
  if (o.flash?.ttl !== undefined) detail += `,"ttl":${o.flash.ttl}`;
  if (o.resent) detail += ',"resent":true';
  if (error !== undefined) detail += `,"error":${error}`;
  return `${row},"detail":{${detail.slice(1)}}}`;
}

/**
 * Records the provider's answers for many messages in one set-based statement; with
 * `events`, their `message.status` events too (src/events/record.ts), in the same statement.
 * With `onlyQueued` (a round that sent outside its claim's transaction), only the answers of
 * rows still in the outbox (an erasure may have taken one meanwhile), and it answers their
 * outbox ids; otherwise the round holds its rows locked and it answers undefined.
 */
export async function recordOutcomes(
  tx: Tx,
  outcomes: Outcome[],
  now: Date,
  events = false,
  onlyQueued = false,
): Promise<Set<string> | undefined> {
  let list = '[';
  for (let i = 0; i < outcomes.length; i++) {
    if (i > 0) list += ',';
    list += outcomeJson(outcomes[i]!);
  }
  list += ']';
  const at = now.toISOString();
  // one statement, one round trip and one parse of the list, whatever the batch size: the
  // status moves up a rank only (a callback may already have said `delivered`), and the
  // messages the update found (so no event without its message: message_events has no
  // foreign key) get their timeline events and lose their outbox rows
  const rows = await executePrepared<{ id: string | number }>(
    tx,
    sql`
    with u as (
      update messages as m set
        provider_message_id = coalesce(v."providerMessageId", m.provider_message_id),
        messagelist_id = coalesce(v."messagelistId", m.messagelist_id),
        parts = coalesce(v.parts, m.parts),
        error = coalesce(v.error, m.error),
        status = ${nextStatusSql(sql`m.status`, sql`v.status`)},
        updated_at = ${at}::timestamptz
      from jsonb_to_recordset(${list}::jsonb)
        as v("messageId" uuid, "outboxId" bigint, status text, "providerMessageId" text,
             "messagelistId" bigint, parts int, error jsonb, detail jsonb)
      where m.id = v."messageId"${onlyQueued ? sql` and exists (select 1 from outbox o where o.id = v."outboxId")` : sql``}
      returning m.id, v."providerMessageId" as pmid, v."outboxId" as outbox_id, v.status,
        coalesce(v.detail, jsonb_build_object('messageId', v."providerMessageId",
          'messagelistId', v."messagelistId", 'parts', v.parts)) as detail
        ${events ? sql`, m.customer_message_id, m.call_id` : sql``}),
    e as (
      insert into message_events (message_id, status, source, detail, at, received_at)
      select u.id, u.status, 'dispatch', u.detail, ${at}::timestamptz, ${at}::timestamptz
      from u),
    -- the provider id's key (src/db/schema/message-keys.ts), written here and not by a row
    -- trigger, which would cost a plpgsql call per message; one already there is kept
    pk as (
      insert into message_provider_ids (provider_message_id, message_id)
      select u.pmid, u.id from u where u.pmid is not null
      on conflict do nothing)${events ? sql`, ${eventsFrom(dispatchSource(at))}` : sql``}
    delete from outbox where id = any(array(select outbox_id from u))${onlyQueued ? sql` returning id` : sql``}`,
  );
  return onlyQueued ? new Set(rows.map((r) => String(r.id))) : undefined;
}

/** The outbox ids of `rows`, as one array parameter. */
const outboxIds = (rows: readonly Claimed[]) =>
  valueArray(
    rows.map((c) => c.outbox_id),
    'bigint',
  );

/** Takes claimed rows out of the queue until `until` (a round that sends outside its claim). */
export async function lease(tx: Tx, rows: readonly Claimed[], until: Date): Promise<void> {
  await tx.execute(sql`
    update outbox set available_at = ${until.toISOString()}::timestamptz
    where id = any(${outboxIds(rows)})`);
}

/** Puts rows whose send failed back in the outbox, due again at `availableAt`. */
export async function postpone(
  tx: Tx,
  rows: readonly Claimed[],
  error: string,
  availableAt: Date,
  /** false when the provider processed nothing (rate limited): not one of maxAttempts */
  attempted: boolean,
): Promise<void> {
  await tx.execute(sql`
    update outbox set attempts = attempts + ${attempted ? 1 : 0}, last_error = ${error},
      available_at = ${availableAt.toISOString()}::timestamptz
    where id = any(${outboxIds(rows)})`);
}
