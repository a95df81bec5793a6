/**
 * Migration 0027 gives the audit log an index per filter of `GET /v1/audit` (token, route),
 * on PGlite and on Postgres: over a populated log, every row stays as it was, the listing by
 * token and by route answers as before, and a new row gets the next id. How few rows such a
 * listing reads is test/db/lists-at-scale.test.ts's.
 */
import { sql } from 'drizzle-orm';
import { expect, it } from 'vitest';
import { type Db, rowsOf } from '../../src/db/client.ts';
import { migrateDatabase } from '../../src/db/migrate.ts';
import { listAudit } from '../../src/http/audit.ts';
import { insertAuditRow } from '../support/db.ts';
import { describeMigration } from '../support/migrations.ts';

/** Every row of the audit log as its JSON text, in id order. */
async function rowsAsJson(db: Db): Promise<string[]> {
  return rowsOf<{ r: string }>(
    await db.execute(sql`select row_to_json(t)::text as r from audit_log t order by id`),
  ).map((r) => r.r);
}

describeMigration(27, 'over a populated audit log', (migrated) => {
  it('keeps every row, answers the filters as before, and indexes them', async () => {
    const database = migrated();
    const db = database.db;
    for (let k = 0; k < 6; k++) {
      await db.execute(sql`
        insert into audit_log (at, token, method, route, status, request_id, changes)
        values (${new Date(Date.UTC(2026, 0, 1 + k)).toISOString()}::timestamptz,
                ${k % 2 ? 'ops' : 'API_TOKEN'}, 'POST',
                ${k < 3 ? '/v1/messages' : '/v1/opt-outs'}, 202, ${`r-${k}`},
                ${JSON.stringify({ created: { messages: { count: k } } })}::jsonb)`);
    }
    const before = await rowsAsJson(db);
    const byToken = await listAudit(db, { token: 'ops' });
    const byRoute = await listAudit(db, { route: '/v1/opt-outs', limit: 2 });

    await migrateDatabase(database);

    expect(await rowsAsJson(db)).toEqual(before);
    expect(await listAudit(db, { token: 'ops' })).toEqual(byToken);
    expect(byToken.items.map((i) => i.requestId)).toEqual(['r-5', 'r-3', 'r-1']);
    expect(await listAudit(db, { route: '/v1/opt-outs', limit: 2 })).toEqual(byRoute);
    const indexes = rowsOf<{ name: string }>(
      await db.execute(sql`
        select indexname as name from pg_indexes where tablename = 'audit_log' order by 1`),
    ).map((r) => r.name);
    expect(indexes).toEqual([
      'audit_log_at_idx',
      'audit_log_pkey',
      'audit_log_route_idx',
      'audit_log_token_idx',
    ]);
    const ids = (await listAudit(db, {})).items.map((i) => i.id);
    expect(await insertAuditRow(db, new Date())).toBeGreaterThan(Math.max(...ids));
  });
});
