/**
 * Message campaigns (docs/campaigns.md, "Message campaigns"): the template's checks at
 * creation (one of flow and message, no per-recipient fields, well-formed `{{names}}`, a
 * template without names valid as a message, retries on `failed` only), each row's (its vars,
 * its filled message), the CSV form (the template as JSON in the query, every column a var),
 * and the scheduler on a clock the test moves: each recipient's message filled and stored with
 * its outbox row, `sending` while in flight, the cap on messages at once, a failed message
 * retried and a delivered one done. A message's end is written to its row as the dispatcher
 * and the delivery callbacks would leave it (status): the scheduler reads nothing else of it.
 * test/e2e/campaigns.test.ts runs one end to end through the sandbox.
 */
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCampaigns, type SchedulerDeps } from '../../src/campaigns/scheduler.ts';
import { NO_HOLIDAYS } from '../../src/campaigns/windows.ts';
import type { Clock } from '../../src/clock.ts';
import { campaignRecipients, messages, outbox } from '../../src/db/schema/index.ts';
import { createLogger } from '../../src/logger.ts';
import { buildTestApp, json, phone, readJson } from '../support/app.ts';
import { availableEngines, createTestDatabase, type TestDatabase } from '../support/db.ts';

const TEMPLATE = { type: 'sms', text: 'Hi {{name}}, parcel {{parcel}} arrives tomorrow.' };
const ALL_DAY = { from: '00:00', to: '24:00' };

for (const engine of availableEngines())
  describe(`message campaigns [${engine}]`, () => {
    let db: TestDatabase;
    let app: ReturnType<typeof buildTestApp>;
    let at = new Date('2026-03-27T08:00:00Z');
    const clock: Clock = { now: () => new Date(at) };
    let deps: SchedulerDeps;

    beforeAll(async () => {
      db = await createTestDatabase(engine);
      app = buildTestApp(db.database, { clock });
      deps = {
        ...app.calls,
        logger: createLogger('silent'),
        window: ALL_DAY,
        holidays: NO_HOLIDAYS,
        capPerDay: undefined,
      };
    }, 60_000);
    afterAll(async () => db?.drop());

    const create = async (body: Record<string, unknown>) => {
      const res = await app.app.request('/v1/campaigns', json({ from: 'Shop', ...body }));
      return { status: res.status, body: await readJson(res) };
    };
    const recipients = (id: string) =>
      db.database.db
        .select()
        .from(campaignRecipients)
        .where(eq(campaignRecipients.campaignId, id))
        .orderBy(campaignRecipients.line);
    const settle = async () => {
      for (let i = 0; i < 20 && (await runCampaigns(deps)); i++);
    };
    const setStatus = (id: string, status: string) =>
      db.database.db
        .update(messages)
        .set({ status, updatedAt: clock.now() })
        .where(eq(messages.id, id));

    it('refuses a campaign with both or neither of flow and message, naming the field', async () => {
      const both = await create({
        flow: 'appointment-reminder',
        message: TEMPLATE,
        recipients: [{ to: phone() }],
      });
      expect(both.status).toBe(400);
      expect(both.body.error).toMatchObject({
        code: 'VALIDATION_ERROR',
        details: [{ path: 'message', code: 'CONFLICTING_FIELDS' }],
      });
      const neither = await create({ recipients: [{ to: phone() }] });
      expect(neither.status).toBe(400);
      expect(neither.body.error.details).toEqual([
        expect.objectContaining({ path: 'flow', code: 'REQUIRED' }),
      ]);
    });

    it('refuses a template with the fields the campaign sets, a bad {{, a language or a retry on an outcome', async () => {
      const res = await create({
        message: { ...TEMPLATE, to: phone(), text: 'Hi {{ name' },
        lang: 'uk',
        retry: { on: ['failed', 'no-input'], after: '1h', maxAttempts: 2 },
        recipients: [{ to: phone() }],
      });
      expect(res.status).toBe(400);
      expect(
        res.body.error.details.map((d: { path: string; code: string }) => [d.path, d.code]),
      ).toEqual([
        ['message.to', 'CONFLICTING_FIELDS'],
        ['lang', 'CONFLICTING_FIELDS'],
        ['retry.on[1]', 'INVALID_VALUE'],
        ['message.text', 'TEMPLATE_SYNTAX'],
      ]);
    });

    it('checks a template without names once, as a message', async () => {
      const res = await create({ message: { type: 'sms' }, recipients: [{ to: phone() }] });
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('INVALID_MESSAGE');
      expect(res.body.error.details[0].path).toMatch(/^message\b/);
      const fixed = await create({
        message: { type: 'sms', text: 'Your parcel arrives tomorrow.' },
        recipients: [{ to: phone() }],
      });
      expect(fixed.status).toBe(201);
      expect(fixed.body).toMatchObject({ flow: null, accepted: 1 });
    });

    it('reports a row without a var the template uses, or whose filled message breaks a rule', async () => {
      const res = await create({
        message: TEMPLATE,
        recipients: [
          { to: phone(), vars: { name: 'Ann', parcel: 'P-1' } },
          { to: phone(), vars: { name: 'Bob' } },
          { to: phone(), vars: { name: 'x'.repeat(2000), parcel: 'P-3' } },
          { to: phone(), vars: { name: 'Eve', parcel: 'P-4' }, lang: 'uk' },
        ],
        window: ALL_DAY,
      });
      expect(res.status).toBe(201);
      expect(res.body.accepted).toBe(1);
      expect(
        res.body.rejected.map((r: { row: number; code: string; details: { path: string }[] }) => [
          r.row,
          r.code,
          r.details[0]!.path,
        ]),
      ).toEqual([
        [1, 'INVALID_VARS', 'recipients[1].vars.parcel'],
        [2, 'MESSAGE_TOO_LONG', 'recipients[2].message.text'],
        [3, 'VALIDATION_ERROR', 'recipients[3].lang'],
      ]);
    });

    it('takes a CSV upload with the template in the query, every column a var', async () => {
      const upload = (query: string, body: string) =>
        app.app.request(`/v1/campaigns?${query}`, {
          method: 'POST',
          headers: { 'content-type': 'text/csv' },
          body,
        });
      const [a, b] = [phone(), phone()];
      const query = new URLSearchParams({
        from: 'Shop',
        message: JSON.stringify({ type: 'sms', text: 'Hi {{name}} ({{lang}})' }),
      });
      const res = await upload(query.toString(), `to,name,lang\n${a},Ann,uk\n${b},,en\n`);
      expect(res.status).toBe(201);
      const made = await readJson(res);
      expect(made).toMatchObject({ accepted: 1, rejectedCount: 1 });
      expect(made.rejected[0].details[0]).toMatchObject({
        path: 'line 3.vars.name',
        code: 'REQUIRED',
      });
      const [row] = await recipients(made.id);
      expect(row!.vars).toEqual({ name: 'Ann', lang: 'uk' });
      const bad = await upload('from=Shop&message=%7Bnot%20json', `to\n${a}\n`);
      expect(bad.status).toBe(400);
      expect((await readJson(bad)).error.details[0]).toMatchObject({
        path: 'query.message',
        code: 'JSON_SYNTAX',
      });
      const neither = await upload('from=Shop', `to\n${a}\n`);
      expect(neither.status).toBe(400);
      expect((await readJson(neither)).error.details[0].path).toBe('query.flow');
    });

    it('sends each recipient its filled message, caps those in flight, retries a failed one and settles a delivered one', async () => {
      at = new Date('2026-03-27T08:00:00Z');
      const [ann, bob, cid] = [phone(), phone(), phone()];
      const { body } = await create({
        message: TEMPLATE,
        recipients: [
          { to: ann, vars: { name: 'Ann', parcel: 'P-1' } },
          { to: bob, vars: { name: 'Bob', parcel: 'P-2' } },
          { to: cid, vars: { name: 'Cid', parcel: 'P-3' } },
        ],
        perMinute: 600,
        maxConcurrent: 2,
        window: ALL_DAY,
        retry: { on: ['failed'], after: '10m', maxAttempts: 2 },
      });
      // a second at 600 a minute: the pace allows all three, the cap two
      at = new Date(at.getTime() + 1000);
      await settle();
      let rows = await recipients(body.id);
      // two in flight at most: the third waits for one of them to end
      expect(rows.map((r) => r.state)).toEqual(['sending', 'sending', 'pending']);
      const sent = await db.database.db
        .select()
        .from(messages)
        .where(eq(messages.id, rows[0]!.messageId!));
      expect(sent[0]).toMatchObject({ to: ann, from: 'Shop', type: 'sms', status: 'queued' });
      expect(JSON.stringify(sent[0]!.payload)).toContain('Hi Ann, parcel P-1 arrives tomorrow.');
      const queued = await db.database.db
        .select()
        .from(outbox)
        .where(eq(outbox.messageId, rows[0]!.messageId!));
      expect(queued).toHaveLength(1);

      // a message still on its way settles nothing; delivered and failed do
      await setStatus(rows[0]!.messageId!, 'sent');
      await settle();
      expect((await recipients(body.id)).map((r) => r.state)).toEqual([
        'sending',
        'sending',
        'pending',
      ]);
      await setStatus(rows[0]!.messageId!, 'delivered');
      await setStatus(rows[1]!.messageId!, 'expired');
      at = new Date(at.getTime() + 1000);
      await settle();
      rows = await recipients(body.id);
      expect(rows.map((r) => [r.state, r.outcome])).toEqual([
        ['done', 'delivered'],
        ['retry', null],
        ['sending', null],
      ]);
      expect(rows[0]!.bestMessageId).not.toBeNull();

      // Bob's second attempt, after 10 minutes, is delivered: his result
      at = new Date(at.getTime() + 10 * 60_000);
      await settle();
      rows = await recipients(body.id);
      expect(rows[1]).toMatchObject({ state: 'sending', attempts: 2 });
      await setStatus(rows[1]!.messageId!, 'delivered');
      await setStatus(rows[2]!.messageId!, 'read');
      at = new Date(at.getTime() + 1000);
      await settle();
      const done = await readJson(await app.app.request(`/v1/campaigns/${body.id}`));
      expect(done.state).toBe('done');
      expect(done.progress.byOutcome).toEqual({ delivered: 2, read: 1 });
      const results = await readJson(await app.app.request(`/v1/campaigns/${body.id}/results`));
      const b = results.items[1];
      expect(b).toMatchObject({ outcome: 'delivered', status: 'delivered', path: [] });
      expect(b.history.map((h: { state: string; callId: null }) => [h.state, h.callId])).toEqual([
        ['failed', null],
        ['delivered', null],
      ]);
    });
  });
