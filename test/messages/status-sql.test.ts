/**
 * The status rule is written once (`nextStatus`) and `nextStatusSql` is generated from it;
 * every (current, incoming) pair, a vendor's word among them, goes through both and must
 * answer alike. And the case where they once disagreed: a message a callback marked
 * `delivered` stays delivered when the dispatcher later gives up on it.
 */
import { sql } from 'drizzle-orm';
import { expect, it } from 'vitest';
import { systemClock } from '../../src/clock.ts';
import { rowsOf } from '../../src/db/client.ts';
import { createLogger } from '../../src/logger.ts';
import { statusMapWith } from '../../src/messages/delivery-parse.ts';
import { dispatchOnce } from '../../src/messages/dispatcher.ts';
import { ingestDelivery } from '../../src/messages/ingest.ts';
import { getMessage } from '../../src/messages/read.ts';
import { MESSAGE_STATUSES, nextStatus, nextStatusSql } from '../../src/messages/status.ts';
import { submitMessages } from '../../src/messages/submit.ts';
import { phone, uniq } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';

describeEachEngine('the status rule in SQL', (ctx) => {
  it('answers as nextStatus for every (current, incoming) pair', async () => {
    const incoming = [...MESSAGE_STATUSES, 'HANDSET_ACK', 'not_used'];
    const pairs = MESSAGE_STATUSES.flatMap((c) => incoming.map((i) => [c, i] as const));
    const rows = rowsOf<{ c: string; i: string; next: string }>(
      await ctx.database().db.execute(sql`
        select p.value->>0 as c, p.value->>1 as i,
          ${nextStatusSql(sql`(p.value->>0)`, sql`(p.value->>1)`)} as next
        from jsonb_array_elements(${JSON.stringify(pairs)}::jsonb) with ordinality as p(value, n)
        order by p.n`),
    );
    expect(rows.map((r) => `${r.c}+${r.i}=${r.next}`)).toEqual(
      pairs.map(([c, i]) => `${c}+${i}=${nextStatus(c, i)}`),
    );
    expect(pairs).toHaveLength(MESSAGE_STATUSES.length * incoming.length);
  });

  it('keeps delivered when the dispatcher gives up on a message a callback delivered', async () => {
    const db = ctx.database().db;
    const cmid = uniq('given-up');
    await submitMessages({ db, clock: systemClock }, [
      { from: 'Acme', to: phone(), type: 'sms', text: 'x', customerMessageId: cmid },
    ]);
    // the provider took it but its answer was lost; its callback came anyway
    const callback = await ingestDelivery(
      { db, clock: systemClock, statusMap: statusMapWith({}) },
      {
        contentType: 'application/json',
        body: JSON.stringify({ customerMessageId: cmid, status: 'delivered' }),
      },
    );
    expect(callback).toMatchObject({ matched: 1 });
    expect((await getMessage(db, cmid)).status).toBe('delivered');
    // every send of the dispatcher fails, and it gives up after one attempt
    const result = await dispatchOnce(
      {
        db,
        clock: systemClock,
        logger: createLogger('silent'),
        provider: {
          async sendMessagelist() {
            throw new Error('provider unreachable');
          },
        },
      },
      { maxAttempts: 1 },
    );
    expect(result).toMatchObject({ rejected: 1, failed: 0 });
    const v = await getMessage(db, cmid);
    expect(v.status).toBe('delivered');
    // the give-up is on the timeline, the status is not moved by it
    expect(v.timeline.map((e) => `${e.status}/${e.source}`)).toEqual([
      'queued/api',
      'delivered/callback',
      'rejected/dispatch',
    ]);
  });
});
