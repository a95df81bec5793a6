/**
 * Group commit of delivery callbacks (src/messages/ingest-batch.ts) when a batch holds the
 * awkward cases: the same body twice, a callback for a message not known yet, a body that is
 * not JSON, and one callback whose processing throws. Each callback gets the answer it would
 * have got alone, and the poisonous one does not take its neighbours down.
 */
import { randomUUID } from 'node:crypto';
import { eq, sql } from 'drizzle-orm';
import { beforeAll, expect, it } from 'vitest';
import { systemClock } from '../../src/clock.ts';
import { rowsOf } from '../../src/db/client.ts';
import { isDatabaseUnavailable } from '../../src/db/errors.ts';
import { inbox, messages } from '../../src/db/schema/index.ts';
import { statusMapWith } from '../../src/messages/delivery-parse.ts';
import { keysTimedSince, storeRaw } from '../../src/messages/inbox.ts';
import type { IngestDeps } from '../../src/messages/ingest.ts';
import { createDeliveryBatcher, ingestDeliveries } from '../../src/messages/ingest-batch.ts';
import { submitMessages } from '../../src/messages/submit.ts';
import { statusOf } from '../../src/messages/timeline.ts';
import { phone, uniq } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';
import { ONE_CONNECTION, onlyIf } from '../support/skip.ts';
import { waitUntil } from './helpers.ts';

const raw = (body: unknown) => ({ contentType: 'application/json', body: JSON.stringify(body) });

describeEachEngine('delivery callbacks in one transaction', (ctx) => {
  let deps: IngestDeps;
  beforeAll(() => {
    deps = { db: ctx.database().db, clock: systemClock, statusMap: statusMapWith({}) };
  });

  async function message(): Promise<{ id: string; cmid: string }> {
    const cmid = uniq('batch');
    const { results } = await submitMessages(deps, [
      { from: 'Acme', to: phone(), type: 'sms', text: 'hi', customerMessageId: cmid },
    ]);
    return { id: results[0]!.id!, cmid };
  }

  it('answers duplicates, early callbacks and unreadable bodies as one by one would', async () => {
    const a = await message();
    const early = uniq('not-yet');
    const sent = raw({
      customerMessageId: a.cmid,
      status: 'sent',
      timestamp: '2026-01-01T00:00:01Z',
    });
    const delivered = raw({
      customerMessageId: a.cmid,
      status: 'delivered',
      timestamp: '2026-01-01T00:00:02Z',
      channel: 'sms',
    });
    const results = await ingestDeliveries(deps, [
      delivered,
      sent,
      sent,
      raw({ customerMessageId: early, status: 'delivered' }),
      { contentType: 'application/json', body: '{not json' },
    ]);
    expect(results.map((r) => r.duplicate)).toEqual([false, false, true, false, false]);
    expect(results[0]).toMatchObject({ events: 1, matched: 1, pending: 0 });
    expect(results[3]).toMatchObject({ events: 1, matched: 0, pending: 1 });
    expect(results[4]).toMatchObject({ events: 0, matched: 0, pending: 0 });
    expect(results[4]!.problems).toHaveLength(1);
    // sent after delivered in arrival order, but not in event time: delivered stays
    expect(await statusOf(deps.db, a.id)).toBe('delivered');
    const [row] = await deps.db.select().from(messages).where(eq(messages.id, a.id));
    expect(row?.deliveredVia).toBe('sms');
    // the same body again, in a later batch: a duplicate, nothing changes
    const again = await ingestDeliveries(deps, [sent]);
    expect(again[0]!.duplicate).toBe(true);
    const stored = await deps.db.select().from(inbox).where(eq(inbox.id, results[3]!.inboxId!));
    expect(stored[0]?.pending).toBe(1);
  });

  it('retries a failed batch one callback at a time: only the poisonous one fails', async () => {
    const ok = await message();
    const poison = await message();
    // a message of a call: the only kind the hook is called for
    await deps.db
      .update(messages)
      .set({ callId: randomUUID(), role: 'call' })
      .where(eq(messages.id, poison.id));
    const batcher = createDeliveryBatcher(
      {
        ...deps,
        onRecorded: async (_tx, result) => {
          if (result.messageId === poison.id) throw new Error('poison');
        },
      },
      { concurrency: 1 },
    );
    // the first goes alone; the three others queue behind it and share one transaction
    const answers = await Promise.allSettled([
      batcher.ingest(raw({ customerMessageId: ok.cmid, status: 'sent' })),
      batcher.ingest(raw({ customerMessageId: ok.cmid, status: 'delivered' })),
      batcher.ingest(raw({ customerMessageId: poison.cmid, status: 'delivered' })),
      batcher.ingest(raw({ customerMessageId: uniq('unknown'), status: 'delivered' })),
    ]);
    expect(answers.map((a) => a.status)).toEqual([
      'fulfilled',
      'fulfilled',
      'rejected',
      'fulfilled',
    ]);
    expect(await statusOf(deps.db, ok.id)).toBe('delivered');
    expect(await statusOf(deps.db, poison.id)).toBe('queued');
  });

  // two connections at once: real Postgres only (PGlite runs one transaction at a time)
  it.runIf(ctx.engine === 'postgres')(
    onlyIf(
      ctx.engine === 'postgres',
      'a body stored by another transaction after the batch looked is still one duplicate',
      ONE_CONNECTION,
    ),
    async () => {
      const a = await message();
      const body = raw({ customerMessageId: a.cmid, status: 'delivered' });
      const batcher = createDeliveryBatcher(deps);
      let release!: () => void;
      const held = new Promise<void>((r) => {
        release = r;
      });
      let stored!: () => void;
      const inserted = new Promise<void>((r) => {
        stored = r;
      });
      // another instance stores the same body and holds its transaction open
      let otherPid = 0;
      const since = await keysTimedSince(deps.db);
      const other = deps.db.transaction(async (tx) => {
        otherPid = rowsOf<{ pid: number }>(
          await tx.execute(sql`select pg_backend_pid() as pid`),
        )[0]!.pid;
        await storeRaw(tx, 'delivery', body, new Date(), since);
        stored();
        await held;
      });
      await inserted;
      // the batch finds no such key, then waits on the other's insert, which commits
      const answer = batcher.ingest(body);
      // barrier: the batch's backend waits on a lock the other transaction holds
      const blocked = async () =>
        rowsOf<{ n: number }>(
          await deps.db.execute(
            sql`select count(*)::int as n from pg_stat_activity
                where ${otherPid}::int = any(pg_blocking_pids(pid))`,
          ),
        )[0]!.n;
      await waitUntil(async () => (await blocked()) === 1, 'the batch to wait on the lock', 10_000);
      release();
      await other;
      expect(await answer).toMatchObject({ duplicate: true, events: 0 });
      // the event was recorded by neither: the other transaction stored only the body
      expect(await statusOf(deps.db, a.id)).toBe('queued');
    },
  );

  // two connections at once: real Postgres only
  it.runIf(ctx.engine === 'postgres')(
    onlyIf(
      ctx.engine === 'postgres',
      "a batch waiting past its deadline on another instance's lock gives its connection back",
      ONE_CONNECTION,
    ),
    async () => {
      const a = await message();
      const body = raw({ customerMessageId: a.cmid, status: 'delivered' });
      const batcher = createDeliveryBatcher(deps, { deadlineMs: 3000 });
      let release!: () => void;
      const held = new Promise<void>((r) => {
        release = r;
      });
      let locked!: () => void;
      const holding = new Promise<void>((r) => {
        locked = r;
      });
      // another instance holds the message's row lock and does not let go (lost, or hung)
      let otherPid = 0;
      const other = deps.db.transaction(async (tx) => {
        otherPid = rowsOf<{ pid: number }>(
          await tx.execute(sql`select pg_backend_pid() as pid`),
        )[0]!.pid;
        await tx.execute(sql`select id from messages where id = ${a.id} for update`);
        locked();
        await held;
      });
      await holding;
      const waiting = async () =>
        rowsOf<{ n: number }>(
          await deps.db.execute(
            sql`select count(*)::int as n from pg_stat_activity
                where ${otherPid}::int = any(pg_blocking_pids(pid))`,
          ),
        )[0]!.n;
      const answer = batcher.ingest(body).then(
        () => 'stored',
        (err: unknown) => err,
      );
      await waitUntil(async () => (await waiting()) === 1, 'the batch to wait on the lock', 10_000);
      // the deadline answers the caller "unavailable" (503: the provider retries) ...
      expect(isDatabaseUnavailable(await answer)).toBe(true);
      // ... and the batch's statement is cancelled: nothing waits on the lock any more, which
      // is still held, so it was not the lock's release that ended the wait
      await waitUntil(async () => (await waiting()) === 0, 'the batch to stop waiting', 10_000);
      // every pooled connection is usable: none was given back inside a transaction
      await Promise.all(Array.from({ length: 20 }, () => deps.db.execute(sql`select 1`)));
      release();
      await other;
      // nothing of the cancelled batch was kept: the retry stores the callback, once
      expect(await batcher.ingest(body)).toMatchObject({ duplicate: false, events: 1 });
      expect(await statusOf(deps.db, a.id)).toBe('delivered');
      expect(await batcher.ingest(body)).toMatchObject({ duplicate: true });
    },
  );
});
