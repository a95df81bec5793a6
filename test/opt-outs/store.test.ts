/**
 * The opt-out list's store (src/opt-outs/store.ts) on a real database, and the reply words
 * (words.ts): the whole reply counts, a sentence that mentions "stop" does not.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../src/db/client.ts';
import {
  addOptOut,
  getOptOut,
  listOptOuts,
  optedOutAmong,
  removeOptOut,
} from '../../src/opt-outs/store.ts';
import { DEFAULT_OPT_OUT_WORDS, isOptOutReply } from '../../src/opt-outs/words.ts';
import { phone } from '../support/app.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';

describe('opt-out replies', () => {
  it.each([
    'STOP',
    'stop',
    ' Stop! ',
    '"STOP."',
    'Stop 🙏',
    'unsubscribe',
    'Opt-out',
    'стоп',
    'Відписатися',
    'ВІДПИСАТИСЬ!!',
  ])('%j is an opt-out', (text) => {
    expect(isOptOutReply(text, DEFAULT_OPT_OUT_WORDS)).toBe(true);
  });

  it.each([
    'please stop calling me at night',
    'stop it, I want to reschedule',
    'Stopped by yesterday',
    'ok',
    '',
    '   ',
    'зупиніть будь ласка стоп',
    'cancel',
  ])('%j is not', (text) => {
    expect(isOptOutReply(text, DEFAULT_OPT_OUT_WORDS)).toBe(false);
  });

  it('takes the configured words, compared the same way', () => {
    expect(isOptOutReply('Halt!', ['halt'])).toBe(true);
    expect(isOptOutReply('stop', ['halt'])).toBe(false);
  });
});

describe('opt-out store', () => {
  let test: TestDatabase;
  let database: Database;
  const at = (s: number) => new Date(Date.UTC(2026, 10, 27, 10, 0, s));

  beforeAll(async () => {
    test = await createTestDatabase('pglite');
    database = test.database;
  });
  afterAll(async () => {
    await test.drop();
  });

  it('adds once: the first entry stays, a second add says it was there', async () => {
    const n = phone();
    expect(await addOptOut(database.db, n, 'inbound', { inboundId: 'x' }, at(1))).toEqual({
      created: true,
    });
    expect(await addOptOut(database.db, n, 'api', null, at(2))).toEqual({ created: false });
    expect(await getOptOut(database.db, n)).toEqual({
      phone: n,
      source: 'inbound',
      detail: { inboundId: 'x' },
      createdAt: at(1).toISOString(),
    });
  });

  it('finds the opted-out numbers among many, duplicates and unknown ones included', async () => {
    const [a, b, c] = [phone(), phone(), phone()];
    await addOptOut(database.db, a, 'api', null, at(3));
    await addOptOut(database.db, c, 'flow', { callId: 'id', node: 'main' }, at(3));
    expect(await optedOutAmong(database.db, [a, b, c, a])).toEqual(new Set([a, c]));
    expect(await optedOutAmong(database.db, [])).toEqual(new Set());
  });

  it('removes: true when it was there, false after', async () => {
    const n = phone();
    await addOptOut(database.db, n, 'api', null, at(4));
    expect(await removeOptOut(database.db, n)).toBe(true);
    expect(await removeOptOut(database.db, n)).toBe(false);
    expect(await getOptOut(database.db, n)).toBeUndefined();
    expect(await optedOutAmong(database.db, [n])).toEqual(new Set());
  });

  it('lists newest first, page by page, ties at one instant included', async () => {
    const fresh = await createTestDatabase('pglite');
    try {
      const db = fresh.database.db;
      const numbers = [phone(), phone(), phone(), phone(), phone()];
      // two at the same instant: the cursor must not skip or repeat either
      const times = [at(10), at(11), at(11), at(12), at(13)];
      for (const [i, n] of numbers.entries()) await addOptOut(db, n, 'api', null, times[i]!);
      const seen: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await listOptOuts(db, { limit: 2, ...(cursor && { cursor }) });
        expect(page.items.length).toBeLessThanOrEqual(2);
        seen.push(...page.items.map((i) => i.phone));
        cursor = page.nextCursor ?? undefined;
      } while (cursor);
      expect(seen).toHaveLength(5);
      expect(new Set(seen)).toEqual(new Set(numbers));
      expect(seen[0]).toBe(numbers[4]);
      expect(seen[4]).toBe(numbers[0]);
      await expect(listOptOuts(db, { limit: 2, cursor: 'bm9wZQ' })).rejects.toMatchObject({
        code: 'VALIDATION_ERROR',
      });
    } finally {
      await fresh.drop();
    }
  });
});
