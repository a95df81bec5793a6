/**
 * pipelinedTransaction (src/db/client.ts): BEGIN sent with the first statement, COMMIT with
 * the last. Sent early, each must still land inside the transaction: a rollback takes back
 * everything, the first statement included, and a failed last statement takes back what
 * came before it. The pool's connections come back out of any transaction.
 */
import { sql } from 'drizzle-orm';
import { beforeAll, expect, it } from 'vitest';
import { type Db, pipelinedTransaction, rowsOf } from '../../src/db/client.ts';
import { isUniqueViolation } from '../../src/db/errors.ts';
import { describeEachEngine } from '../support/db.ts';
import { onlyIf } from '../support/skip.ts';

describeEachEngine('pipelinedTransaction', (ctx) => {
  let db: Db;
  beforeAll(async () => {
    db = ctx.database().db;
    await db.execute(sql`create table pipelined_rows (id int primary key)`);
  });

  const ids = async (): Promise<number[]> =>
    rowsOf<{ id: number }>(await db.execute(sql`select id from pipelined_rows order by id`)).map(
      (r) => r.id,
    );
  const insert = (id: number) => sql`insert into pipelined_rows (id) values (${id}) returning id`;

  it('commits every statement, the last one included, and returns its rows', async () => {
    const rows = await pipelinedTransaction(db, async (tx, last) => {
      await tx.execute(insert(1));
      return last<{ id: number }>(insert(2));
    });
    expect(rows).toEqual([{ id: 2 }]);
    expect(await ids()).toEqual(expect.arrayContaining([1, 2]));
  });

  it('commits after fn when it never calls last', async () => {
    const out = await pipelinedTransaction(db, async (tx) => {
      await tx.execute(insert(3));
      return 'done';
    });
    expect(out).toBe('done');
    expect(await ids()).toContain(3);
  });

  it('rolls back the first statement too when fn throws (BEGIN went out before it)', async () => {
    await expect(
      pipelinedTransaction(db, async (tx) => {
        await tx.execute(insert(4));
        throw new Error('changed my mind');
      }),
    ).rejects.toThrow('changed my mind');
    expect(await ids()).not.toContain(4);
  });

  it('a failed last statement takes back what came before it and is the error thrown', async () => {
    const err = await pipelinedTransaction(db, async (tx, last) => {
      await tx.execute(insert(5));
      await tx.execute(insert(6));
      return last(insert(5));
    }).catch((e: unknown) => e);
    expect(isUniqueViolation(err, 'pipelined_rows_pkey')).toBe(true);
    // Postgres refused it, so COMMIT rolled back: not the error for a statement sent too late
    expect((err as Error).message).not.toMatch(/after COMMIT/);
    const now = await ids();
    expect(now).not.toContain(5);
    expect(now).not.toContain(6);
  });

  // the driver refuses a statement of 65 534 parameters or more without sending it
  it.runIf(ctx.engine === 'postgres')(
    onlyIf(
      ctx.engine === 'postgres',
      'says so when the last statement failed but what came before it was committed',
      "pipelining (COMMIT sent ahead) is the postgres driver's, not PGlite's",
    ),
    async () => {
      const many = sql.join(
        Array.from({ length: 65_535 }, (_, i) => sql`${i}`),
        sql`, `,
      );
      const err = await pipelinedTransaction(db, async (tx, last) => {
        await tx.execute(insert(7));
        return last(sql`select ${many}`);
      }).catch((e: unknown) => e);
      expect((err as Error).message).toMatch(/failed after COMMIT/);
      expect(await ids()).toContain(7);
    },
  );

  // the signal is the postgres driver's (a cancel request); PGlite has no other session to wait on
  it.runIf(ctx.engine === 'postgres')(
    onlyIf(
      ctx.engine === 'postgres',
      'stops at its signal, keeps nothing, and gives its connection back, aborted before or during',
      'a statement to cancel needs the postgres driver, not PGlite',
    ),
    async () => {
      const early = new AbortController();
      early.abort(new Error('too late already'));
      // more than the pool's connections: one kept by an aborted transaction would stall these
      const refused = await Promise.allSettled(
        Array.from({ length: 12 }, (_, i) =>
          pipelinedTransaction(db, (_tx, last) => last(insert(-1 - i)), early.signal),
        ),
      );
      expect(refused.map((r) => r.status)).toEqual(Array(12).fill('rejected'));
      const during = new AbortController();
      const err = await pipelinedTransaction(
        db,
        async (tx, last) => {
          await tx.execute(insert(-20));
          during.abort(new Error('the deadline'));
          return last(insert(-21));
        },
        during.signal,
      ).catch((e: unknown) => e);
      expect((err as Error).message).toBe('the deadline');
      // negative ids: the test below counts those from 100 up
      expect((await ids()).filter((id) => id < 0)).toEqual([]);
      // every pooled connection once more, each must start clean
      await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          pipelinedTransaction(db, (_tx, last) => last(insert(-30 - i))),
        ),
      );
      expect((await ids()).filter((id) => id < 0)).toHaveLength(10);
    },
  );

  it('leaves no connection inside a transaction, however the transactions ended', async () => {
    const runs = Array.from({ length: 30 }, (_, i) => 100 + i);
    await Promise.allSettled(
      runs.map((id) =>
        pipelinedTransaction(db, async (tx, last) => {
          await tx.execute(insert(id));
          if (id % 3 === 0) throw new Error('undone');
          return id % 3 === 1 ? last(insert(id + 1000)) : last(insert(id));
        }),
      ),
    );
    const kept = (await ids()).filter((id) => id >= 100);
    expect(kept).toEqual(
      runs
        .filter((id) => id % 3 === 1)
        .flatMap((id) => [id, id + 1000])
        .sort((a, b) => a - b),
    );
    if (ctx.engine === 'postgres') {
      // every pooled connection once more, each must start clean
      await Promise.all(
        Array.from({ length: 10 }, () =>
          pipelinedTransaction(db, (_tx, last) => last(sql`select 1 as one`)),
        ),
      );
      const [row] = rowsOf<{ n: number }>(
        await db.execute(sql`
          select count(*)::int as n from pg_stat_activity
          where datname = current_database() and state like 'idle in transaction%'`),
      );
      expect(row?.n).toBe(0);
    }
  });
});
