/**
 * A log line about a failed statement carries Postgres's own words (errorFields,
 * src/db/errors.ts): its SQLSTATE, message, constraint, table and column. Drizzle's message
 * names only the query, so before, a worker step or a 500 said "Failed query: ..." and not
 * why. Postgres's `detail`, which quotes the row's values, stays out of the line.
 */
import { sql } from 'drizzle-orm';
import { beforeAll, expect, it } from 'vitest';
import { errorFields } from '../../src/db/errors.ts';
import { createLogger } from '../../src/logger.ts';
import { ProviderError } from '../../src/provider/http.ts';
import { loop } from '../../src/workers.ts';
import { buildTestApp, readJson, uniq } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';
import { captureLog } from '../support/log-capture.ts';

describeEachEngine('errorFields', (ctx) => {
  const db = () => ctx.database().db;
  beforeAll(async () => {
    await db().execute(sql`
      create table err_fields (k text primary key, n int not null constraint n_positive check (n > 0))`);
  });

  /** The error of a statement that fails, as the code that ran it catches it. */
  async function failure(statement: ReturnType<typeof sql>): Promise<unknown> {
    return db()
      .transaction(async (tx) => {
        await tx.execute(statement);
      })
      .then(
        () => {
          throw new Error('the statement did not fail');
        },
        (err: unknown) => err,
      );
  }

  it("names a unique violation's code, constraint and table, and not the duplicated value", async () => {
    const key = uniq('secret-key-value');
    await db().execute(sql`insert into err_fields (k, n) values (${key}, 1)`);
    const err = await failure(sql`insert into err_fields (k, n) values (${key}, 2)`);
    const fields = errorFields(err);
    expect(fields.message).toMatch(/^Failed query: insert into err_fields/);
    expect(fields.db).toEqual({
      code: '23505',
      message: 'duplicate key value violates unique constraint "err_fields_pkey"',
      constraint: 'err_fields_pkey',
      table: 'err_fields',
    });
    // Postgres's detail ("Key (k)=(...) already exists") is not carried
    expect(JSON.stringify(fields.db)).not.toContain(key);
  });

  it('names the column of a not-null violation and the constraint of a check', async () => {
    const nulled = errorFields(
      await failure(sql`insert into err_fields (k, n) values (${uniq('k')}, null)`),
    );
    expect(nulled.db).toMatchObject({ code: '23502', table: 'err_fields', column: 'n' });
    const checked = errorFields(
      await failure(sql`insert into err_fields (k, n) values (${uniq('k')}, 0)`),
    );
    expect(checked.db).toMatchObject({
      code: '23514',
      constraint: 'n_positive',
      table: 'err_fields',
    });
  });

  it("gives only the message of an error that is not the database's", () => {
    const pipe = Object.assign(new Error('write EPIPE'), { code: 'EPIPE', syscall: 'write' });
    expect(errorFields(pipe)).toEqual({ message: 'write EPIPE' });
    // a provider's failure wrapping a system error is about the provider
    const provider = new ProviderError('network', 'POST /bat/messagelist: fetch failed', {
      cause: pipe,
    });
    expect(errorFields(provider)).toEqual({ message: 'POST /bat/messagelist: fetch failed' });
    expect(errorFields('a string thrown')).toEqual({ message: 'a string thrown' });
  });

  it("a worker step that fails logs the database's code and message", async () => {
    const out = captureLog();
    const logger = createLogger('info', out.stream);
    const key = uniq('k');
    await db().execute(sql`insert into err_fields (k, n) values (${key}, 1)`);
    let steps = 0;
    let secondStep!: () => void;
    const stepped = new Promise<void>((resolve) => {
      secondStep = resolve;
    });
    const worker = loop('err-fields', logger, 10, async () => {
      steps++;
      if (steps === 1) await db().execute(sql`insert into err_fields (k, n) values (${key}, 1)`);
      secondStep();
      return false;
    });
    // the failure's line is written before the loop runs its next step
    await stepped;
    await worker.stop();
    const line = out.lines.map((l) => JSON.parse(l)).find((l) => l.msg === 'worker step failed');
    expect(line).toMatchObject({
      worker: 'err-fields',
      err: { db: { code: '23505', constraint: 'err_fields_pkey', table: 'err_fields' } },
    });
  });

  it("an unhandled error's log line carries the database's words; the answer does not", async () => {
    const out = captureLog();
    const { app } = buildTestApp(ctx.database(), { logger: createLogger('info', out.stream) });
    app.get('/boom-db', async (c) => {
      await db().execute(sql`insert into err_fields (k, n) values (${uniq('k')}, -1)`);
      return c.text('stored');
    });
    const res = await app.request('/boom-db');
    expect(res.status).toBe(500);
    const body = await readJson(res);
    expect(body.error.code).toBe('INTERNAL');
    expect(JSON.stringify(body)).not.toMatch(/23514|n_positive|err_fields/);
    const line = out.lines.map((l) => JSON.parse(l)).find((l) => l.msg === 'unhandled error');
    expect(line).toMatchObject({
      db: { code: '23514', constraint: 'n_positive', table: 'err_fields' },
      err: { type: 'DrizzleQueryError' },
    });
    expect(line.requestId).toBe(body.error.requestId);
  });
});
