/**
 * A campaign's recipients are stored in one statement from one JSON parameter
 * (`insertRecipients`, src/campaigns/create.ts), a speed-up over drizzle's multi-row insert.
 * Held to that plain insert: the same rows through both, into two campaigns, leave the same
 * rows and count the same new ones, on each engine, for rows that stress the JSON road (numbers
 * twice, within the batch and against rows already stored; vars nested, unicode, quotes,
 * backslashes, big and fractional numbers, nulls; lang given or not).
 */
import { randomUUID } from 'node:crypto';
import { asc, eq } from 'drizzle-orm';
import { expect, it } from 'vitest';
import { type CheckedRecipient, insertRecipients } from '../../src/campaigns/create.ts';
import type { Db, Tx } from '../../src/db/client.ts';
import { campaignRecipients } from '../../src/db/schema/index.ts';
import { createRandom } from '../../src/sandbox/random.ts';
import { describeEachEngine } from '../support/db.ts';
import { ODD_JSON_VALUES } from '../support/odd-json.ts';

/** The plain insert the JSON one replaces, as it was: drizzle's multi-row insert. */
async function plainInsert(
  tx: Tx,
  id: string,
  rows: readonly CheckedRecipient[],
  startAt: Date,
  now: Date,
): Promise<number> {
  if (rows.length === 0) return 0;
  const stored = await tx
    .insert(campaignRecipients)
    .values(
      rows.map((r) => ({
        campaignId: id,
        line: r.line,
        phone: r.phone,
        vars: r.vars,
        lang: r.lang,
        state: 'pending',
        nextAt: startAt,
        updatedAt: now,
      })),
    )
    .onConflictDoNothing({ target: [campaignRecipients.campaignId, campaignRecipients.phone] })
    .returning({ id: campaignRecipients.id });
  return stored.length;
}

function recipients(seed: number, count: number, firstLine: number): CheckedRecipient[] {
  const random = createRandom(seed);
  const pick = <T>(xs: readonly T[]) => xs[random.int(xs.length)]!;
  // a small pool of numbers, so that some come twice within the batch
  const phones = Array.from({ length: Math.ceil(count * 0.7) }, (_, i) => `+38050${1000000 + i}`);
  return Array.from({ length: count }, (_, i) => ({
    line: firstLine + i,
    phone: pick(phones),
    vars: Object.fromEntries(
      Array.from({ length: 1 + random.int(3) }, (_, k) => [`v${k}`, pick(ODD_JSON_VALUES)]),
    ),
    lang: random.next() < 0.5 ? null : pick(['en', 'uk', 'pl']),
  }));
}

async function stored(db: Db, id: string) {
  const rows = await db
    .select()
    .from(campaignRecipients)
    .where(eq(campaignRecipients.campaignId, id))
    .orderBy(asc(campaignRecipients.line));
  return rows.map(({ id: _, campaignId: __, ...rest }) => rest);
}

describeEachEngine('campaign recipients, stored from JSON', (ctx) => {
  it('stores what the plain multi-row insert stores, and counts the same new rows', async () => {
    const db = ctx.database().db;
    const startAt = new Date('2026-03-02T07:00:00.123Z');
    const now = new Date('2026-03-01T10:00:00.456Z');
    for (const seed of [1, 2, 3]) {
      const plain = randomUUID();
      const json = randomUUID();
      // two batches each: the second meets numbers the first stored
      for (const [batch, rows] of [
        recipients(seed, 400, 2),
        recipients(seed + 100, 300, 402),
      ].entries()) {
        const fromPlain = await db.transaction((tx) => plainInsert(tx, plain, rows, startAt, now));
        const fromJson = await db.transaction((tx) =>
          insertRecipients(tx, json, rows, startAt, now),
        );
        expect(fromJson, `seed ${seed}, batch ${batch}`).toBe(fromPlain);
      }
      const want = await stored(db, plain);
      expect(want.length).toBeGreaterThan(0);
      expect(await stored(db, json)).toEqual(want);
    }
    expect(await db.transaction((tx) => insertRecipients(tx, randomUUID(), [], startAt, now))).toBe(
      0,
    );
  });
});
