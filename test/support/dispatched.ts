/**
 * A message the provider accepted, recorded as the dispatcher records it (recordOutcomes: the
 * one statement that gives a message its provider id and writes that id's key), for tests
 * that need a dispatched message without a dispatcher round.
 *
 * @example
 * await recordAccepted(db, [{ id: messageId, providerMessageId: 'p-1' }], new Date());
 */
import { sql } from 'drizzle-orm';
import { type Db, idList, rowsOf } from '../../src/db/client.ts';
import { recordOutcomes } from '../../src/messages/dispatch-write.ts';

export async function recordAccepted(
  db: Db,
  accepted: readonly { id: string; providerMessageId: string; messagelistId?: number }[],
  at: Date,
): Promise<void> {
  if (accepted.length === 0) return;
  await db.transaction(async (tx) => {
    const outbox = rowsOf<{ id: string; message_id: string }>(
      await tx.execute(sql`select id::text, message_id::text from outbox
        where message_id in ${idList(
          accepted.map((a) => a.id),
          'uuid',
        )}`),
    );
    const outboxOf = new Map(outbox.map((o) => [o.message_id, o.id]));
    await recordOutcomes(
      tx,
      accepted.map((a) => ({
        id: a.id,
        // none left (taken by hand): the delete of the outbox row finds nothing
        outboxId: outboxOf.get(a.id) ?? 0,
        role: null,
        status: 'accepted',
        providerMessageId: a.providerMessageId,
        messagelistId: a.messagelistId ?? null,
        parts: null,
        error: null,
        text: null,
      })),
      at,
    );
  });
}
