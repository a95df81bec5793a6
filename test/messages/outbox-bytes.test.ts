/**
 * `outbox.payload_bytes` (migration 0032, src/db/schema/outbox.ts): the size the dispatcher's
 * claim fits a list to, kept on the outbox row so the claim reads only the payloads it sends.
 * It must be exactly what measuring the payload would give, `octet_length(payload::text)`,
 * the text that is sent: for every kind of message that is queued (SMS, Viber with text
 * beyond ASCII, a cascade with fallbacks, a call's own message with its menu, a call's
 * follow-up), and for rows waiting when the migration runs. The claim's budget on it is held
 * to the payloads' own sizes in test/messages/dispatcher.test.ts ("a budget of one byte").
 */
import { sql } from 'drizzle-orm';
import { beforeAll, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import { type Db, rowsOf } from '../../src/db/client.ts';
import { migrateDatabase } from '../../src/db/migrate.ts';
import { signNodeToken } from '../../src/flows/index.ts';
import { buildTestApp, json, phone, readJson, uniq } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';
import { describeMigration } from '../support/migrations.ts';

/** Every outbox row with the size it keeps and the size of its message's payload as sent. */
const sizes = async (db: Db) =>
  rowsOf<{ type: string; role: string | null; kept: number; sent: number }>(
    await db.execute(sql`
      select m.type, m.role, o.payload_bytes as kept, octet_length(m.payload::text) as sent
      from outbox o join messages m on m.id = o.message_id
      order by o.id`),
  ).map((r) => ({ ...r, kept: Number(r.kept), sent: Number(r.sent) }));

describeEachEngine('outbox payload bytes', (ctx) => {
  let app: App;
  let built: ReturnType<typeof buildTestApp>;
  const db = () => ctx.database().db;

  beforeAll(() => {
    built = buildTestApp(ctx.database());
    app = built.app;
  });

  it('keeps, for every kind of queued message, the bytes of the payload as it is sent', async () => {
    const to = phone();
    const res = await app.request(
      '/v1/messages',
      json({
        messages: [
          {
            from: 'Acme',
            to,
            type: 'sms',
            text: 'Your order has shipped',
            customerMessageId: uniq('s'),
          },
          // multi-byte UTF-8: bytes, not characters, count against the list's budget
          {
            from: 'Acme',
            to,
            type: 'viber_trans',
            text: 'Замовлення в дорозі 🚚',
            customerMessageId: uniq('v'),
          },
          {
            from: 'Acme',
            to,
            type: 'viber_trans',
            text: 'Ваш код: 1234',
            customerMessageId: uniq('c'),
            fallbacks: [{ from: 'Acme', to, type: 'sms', text: 'Код: 1234' }],
          },
        ],
      }),
    );
    expect(res.status).toBe(202);
    const call = await app.request(
      '/v1/calls',
      json({
        flow: 'appointment-reminder',
        from: 'Clinic',
        to: phone(),
        vars: { name: 'Ann', date: 'Monday 10:00' },
      }),
    );
    expect(call.status).toBe(202);
    const callId = (await readJson(call)).id as string;
    // key 1 of the first menu queues the flow's follow-up SMS
    const hook = await app.request(
      '/hooks/speechcall',
      json({
        from: 'Clinic',
        action: {
          token: signNodeToken({ callId, node: 'main', key: '1' }, built.calls.signingSecret),
        },
      }),
    );
    expect(hook.status).toBe(200);

    const rows = await sizes(db());
    expect(rows.map((r) => [r.type, r.role])).toEqual(
      expect.arrayContaining([
        ['sms', null],
        ['viber_trans', null],
        ['speechcall', 'call'],
        ['sms', 'follow-up'],
      ]),
    );
    // a call's menu makes its payload kilobytes long: the case the column is there for
    expect(rows.find((r) => r.role === 'call')!.sent).toBeGreaterThan(2000);
    for (const r of rows) expect(r.kept).toBe(r.sent);
  });
});

describeMigration(32, 'over messages waiting in the outbox', (migrated) => {
  it("gives each waiting row its payload's bytes, and the column is required from then on", async () => {
    const database = migrated();
    const db = database.db;
    const payloads = [
      { from: 'Acme', to: '+380501112233', type: 'sms', text: 'plain' },
      { from: 'Acme', to: '+380501112233', type: 'sms', text: 'Привіт, світе' },
      { from: 'Acme', to: '+380501112233', type: 'sms', text: 'x'.repeat(5000) },
    ];
    for (const [i, payload] of payloads.entries()) {
      const id = `019b0000-0000-7000-8200-${String(i).padStart(12, '0')}`;
      await db.execute(sql`
        insert into messages (id, customer_message_id, type, "from", "to", payload, status)
        values (${id}, ${`mig-${i}`}, 'sms', 'Acme', '+380501112233', ${JSON.stringify(payload)}::jsonb,
                'queued')`);
      await db.execute(sql`insert into outbox (message_id) values (${id})`);
    }
    await migrateDatabase(database);

    const rows = await sizes(db);
    expect(rows).toHaveLength(3);
    for (const r of rows) expect(r.kept).toBe(r.sent);
    const [column] = rowsOf<{ is_nullable: string }>(
      await db.execute(sql`
        select is_nullable from information_schema.columns
        where table_name = 'outbox' and column_name = 'payload_bytes'`),
    );
    expect(column?.is_nullable).toBe('NO');
  });
});
