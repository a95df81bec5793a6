/**
 * The inbox's dedup keys in time order (src/messages/inbox.ts `dedupKey`, migration 0023): a
 * body that carries a date and time gets a key that begins with those seconds, so keys lie in
 * the index in their callbacks' order and a callback touches the index's recent end; any other
 * body, or one timed before the database's `inbox_keys.timed_since`, keeps the plain SHA-256.
 * A retry is the same bytes and gets the same key, and one of a callback stored before the
 * migration (a plain key) is still a duplicate after it.
 *
 * The provider's status webhook is the one of smsbat/help `docs/api/smsbat/status.md`
 * ("Webhook Alternative"), as test/provider/docs keeps it.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { sql } from 'drizzle-orm';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type Db, rowsOf } from '../../src/db/client.ts';
import { migrateDatabase } from '../../src/db/migrate.ts';
import { ingestViber } from '../../src/messages/inbound.ts';
import {
  bodySeconds,
  dedupKey,
  KEYS_TIMED_SINCE,
  keysTimedSince,
  storeRaw,
} from '../../src/messages/inbox.ts';
import { ingestDelivery } from '../../src/messages/ingest.ts';
import { DEFAULT_STATUS_MAP } from '../../src/provider/statuses.ts';
import { describeEachEngine } from '../support/db.ts';
import { describeMigration } from '../support/migrations.ts';

const WEBHOOK = readFileSync(
  new URL('../provider/docs/smsbat/status/webhook.json', import.meta.url),
  'utf8',
);

const sha256 = (kind: string, body: string) =>
  createHash('sha256').update(kind).update('\n').update(body).digest('hex');

/** The seconds a key begins with (its first four bytes). */
const keySeconds = (key: string) => Buffer.from(key, 'hex').readUInt32BE(0);

describe("a body's time", () => {
  it("reads the provider's webhook timestamp, and the same written in a form", () => {
    const seconds = Date.parse('2025-01-23T10:30:00Z') / 1000;
    expect(WEBHOOK).toContain('"timestamp": "2025-01-23T10:30:00Z"');
    expect(bodySeconds(WEBHOOK)).toBe(seconds);
    expect(bodySeconds('messageId=abc&timestamp=2025-01-23T10%3A30%3A00Z')).toBe(seconds);
    expect(bodySeconds('timestamp=2025-01-23+10%3a30%3a00')).toBe(seconds);
    expect(bodySeconds('{"at":"2025-01-23 10:30:00.123+02:00"}')).toBe(seconds);
  });

  it('has none without a date and time, or before 1970, or past four bytes of seconds', () => {
    expect(bodySeconds('{"messageId":"abc","status":"delivered"}')).toBeUndefined();
    expect(bodySeconds('{"date":"2025-01-23"}')).toBeUndefined();
    expect(bodySeconds('{"at":"1969-12-31T23:59:59Z"}')).toBeUndefined();
    expect(bodySeconds('{"at":"0099-01-01T00:00:00Z"}')).toBeUndefined();
    expect(bodySeconds('{"at":"2106-02-07T06:28:16Z"}')).toBeUndefined();
    expect(bodySeconds('{"at":"2106-02-07T06:28:15Z"}')).toBe(2 ** 32 - 1);
  });
});

describe('dedupKey', () => {
  it("begins with the body's seconds, then the first 28 bytes of the SHA-256", () => {
    const key = dedupKey('delivery', WEBHOOK, 0);
    expect(key).toHaveLength(64);
    expect(keySeconds(key)).toBe(Date.parse('2025-01-23T10:30:00Z') / 1000);
    expect(key.slice(8)).toBe(sha256('delivery', WEBHOOK).slice(0, 56));
  });

  it('is the plain SHA-256 for a body without a time, or timed before the switch', () => {
    const plain = '{"messageId":"abc","status":"delivered"}';
    expect(dedupKey('delivery', plain, 0)).toBe(sha256('delivery', plain));
    const timedSince = Date.parse('2025-01-23T10:30:01Z') / 1000;
    expect(dedupKey('delivery', WEBHOOK, timedSince)).toBe(sha256('delivery', WEBHOOK));
    // a database before migration 0023 (keysTimedSince: never): every key plain
    expect(dedupKey('delivery', WEBHOOK, Number.POSITIVE_INFINITY)).toBe(
      sha256('delivery', WEBHOOK),
    );
  });

  it('hashes as createHash().update() does, for any body, lone surrogates included', () => {
    // dedupKey hashes kind and body in one string with the one-shot hash(): held here to the
    // plain digest of the three parts, over bodies with no time (whose key is the digest)
    fc.assert(
      fc.property(
        fc.constantFrom('delivery', 'viber', 'speechcall'),
        fc.string({ unit: 'binary' }),
        (kind, body) => {
          fc.pre(bodySeconds(body) === undefined);
          expect(dedupKey(kind, body, 0)).toBe(sha256(kind, body));
        },
      ),
      { numRuns: 500 },
    );
  });

  it('orders the keys of timed bodies by their times, and tells kinds and bytes apart', () => {
    const instant = fc.integer({ min: Date.UTC(1970, 0, 1, 0, 0, 1), max: Date.UTC(2105, 11, 31) });
    fc.assert(
      fc.property(instant, instant, fc.string(), fc.string(), (a, b, x, y) => {
        const body = (ms: number, s: string) =>
          JSON.stringify({ s, timestamp: new Date(ms).toISOString() });
        const [ka, kb] = [dedupKey('delivery', body(a, x), 0), dedupKey('delivery', body(b, y), 0)];
        const [sa, sb] = [Math.floor(a / 1000), Math.floor(b / 1000)];
        if (sa !== sb) expect(ka < kb).toBe(sa < sb);
        expect(ka === kb).toBe(body(a, x) === body(b, y));
        expect(dedupKey('viber', body(a, x), 0)).not.toBe(ka);
      }),
    );
  });
});

/** The keys in inbox_keys, in hex. */
async function storedKeys(db: Db): Promise<string[]> {
  return rowsOf<{ k: string }>(
    await db.execute(sql`select encode(dedup_key, 'hex') as k from inbox_keys order by 1`),
  ).map((r) => r.k);
}

const deps = (db: Db) => ({ db, clock: { now: () => new Date() }, statusMap: DEFAULT_STATUS_MAP });
const json = (body: string) => ({ contentType: 'application/json', body });

describeEachEngine('inbox keys of a new database', (ctx) => {
  const db = (): Db => ctx.database().db;

  it('begin with the time at once, for delivery callbacks and Viber messages alike', async () => {
    // no key was stored when migration 0023 ran: the new keys start with the first callback
    expect(await keysTimedSince(db())).toBe(0);
    const first = await ingestDelivery(deps(db()), json(WEBHOOK));
    expect(first.duplicate).toBe(false);
    expect(await storedKeys(db())).toEqual([dedupKey('delivery', WEBHOOK, 0)]);
    expect((await ingestDelivery(deps(db()), json(WEBHOOK))).duplicate).toBe(true);

    const viber = JSON.stringify({
      idUuid: 'in-keys-1',
      alphaName: 'Shop',
      phoneNumber: '380501234567',
      text: 'hello',
      dt: '2025-01-20T14:30:00.000Z',
    });
    expect((await ingestViber(deps(db()), json(viber))).duplicate).toBe(false);
    expect((await ingestViber(deps(db()), json(viber))).duplicate).toBe(true);
    const keys = await storedKeys(db());
    expect(keys).toContain(dedupKey('viber', viber, 0));
    // the Viber message's time is three days before the webhook's: its key sorts first
    expect(keys.map(keySeconds)).toEqual([
      Date.parse('2025-01-20T14:30:00Z') / 1000,
      Date.parse('2025-01-23T10:30:00Z') / 1000,
    ]);
  });
});

describeMigration(23, 'over keys stored before it', (migrated) => {
  it('keeps a retry of a callback stored before it a duplicate, and times keys a day later', async () => {
    const database = migrated();
    const db = database.db;
    const now = new Date();
    const body = (ms: number, id: string) =>
      JSON.stringify({
        messageId: id,
        deliverystatus: 'delivered',
        timestamp: new Date(ms).toISOString(),
      });
    // stored by the code of then: a plain key (its time is as recent as it gets)
    const old = body(now.getTime(), 'old-1');
    const id = await db.transaction((tx) =>
      storeRaw(tx, 'delivery', json(old), now, Number.POSITIVE_INFINITY),
    );
    expect(id).toBeTypeOf('number');
    await migrateDatabase(database);

    const [row] = rowsOf<{ value: string }>(
      await db.execute(sql`select value from settings where key = ${KEYS_TIMED_SINCE}`),
    );
    const since = Date.parse(row!.value);
    expect(since).toBeGreaterThan(now.getTime() + 86_400_000 - 60_000);
    expect(since).toBeLessThan(Date.now() + 86_400_000 + 1000);
    expect(await keysTimedSince(db)).toBe(since / 1000);

    // the provider's retry of it, after the upgrade
    expect((await ingestDelivery(deps(db), json(old))).duplicate).toBe(true);
    // a callback timed before the switch keeps a plain key; one timed after it, a timed one
    const soon = body(now.getTime() + 3_600_000, 'new-1');
    const later = body(since + 1000, 'new-2');
    expect((await ingestDelivery(deps(db), json(soon))).duplicate).toBe(false);
    expect((await ingestDelivery(deps(db), json(later))).duplicate).toBe(false);
    expect((await ingestDelivery(deps(db), json(later))).duplicate).toBe(true);
    expect(await storedKeys(db)).toEqual(
      [
        sha256('delivery', old),
        sha256('delivery', soon),
        dedupKey('delivery', later, since / 1000),
      ].sort(),
    );
    expect(keySeconds(dedupKey('delivery', later, since / 1000))).toBe(since / 1000 + 1);
  });
});
