/**
 * Rendered prompts with a person's details are personal data: erasure removes those of the
 * person's calls (audio the same words gave someone else stays with them), retention removes
 * a call's prompts a grace period after it ended; shared prompts stay.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Clock } from '../../src/clock.ts';
import { rowsOf } from '../../src/db/client.ts';
import { calls } from '../../src/db/schema/index.ts';
import { removeEndedPrompts } from '../../src/privacy/retention.ts';
import { createEspeakEngine } from '../../src/speech/espeak.ts';
import { createPromptService, type PromptScope } from '../../src/speech/prompts.ts';
import { createPromptStore } from '../../src/speech/store.ts';
import { buildTestApp, phone } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';

const T0 = new Date('2026-03-02T09:00:00.000Z');
const HOUR = 3_600_000;
const SECRET = 'a-test-secret-that-is-long-enough-for-hmac';
const engine = createEspeakEngine();

describeEachEngine('prompts as personal data', (ctx) => {
  const db = () => ctx.database().db;
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sb-prompts-privacy-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const render = (text: string, scope: PromptScope = {}, at = T0, inDir = false) => {
    const clock: Clock = { now: () => at };
    return createPromptService({
      engine,
      store: createPromptStore(db(), inDir ? { dir } : {}),
      secret: SECRET,
      format: 'wav8k',
      publicUrl: 'http://localhost:3000',
      clock,
    }).render({ text, lang: 'en' }, scope);
  };

  async function call(to: string, endedAt: Date | null): Promise<string> {
    const id = randomUUID();
    await db()
      .insert(calls)
      .values({
        id,
        flowId: 'appointment-reminder',
        flowVersion: 'v1',
        to,
        from: 'Clinic',
        lang: 'en',
        vars: {},
        state: endedAt ? 'ended' : 'in-progress',
        snapshot: {},
        messageId: randomUUID(),
        endedAt,
      });
    return id;
  }

  const served = async (url: string) =>
    (
      await buildTestApp(ctx.database(), { env: { PROMPTS_DIR: dir } }).app.request(
        new URL(url).pathname,
      )
    ).status;
  const usesOf = async (callId: string) =>
    rowsOf<{ n: number }>(
      await db().execute(sql`select count(*)::int as n from prompt_uses where call_id = ${callId}`),
    )[0]?.n;

  it("erasure removes the prompts of the person's calls, and only theirs", async () => {
    const P = phone();
    const Q = phone();
    const p1 = await call(P, null);
    const p2 = await call(P, T0);
    const q1 = await call(Q, null);
    const mine = await render('Hello Olena, your appointment is on Friday.', { callId: p1 });
    const mineToo = await render('Olena, press 1 to confirm Friday.', { callId: p2 }, T0, true);
    const both = await render('Press 1 to confirm.', { callId: p2 });
    const theirs = await render('Press 1 to confirm.', { callId: q1 });
    const everyone = await render('Goodbye.');
    expect(both.id).toBe(theirs.id);
    const filesBefore = await readdir(dir);
    expect(filesBefore).toHaveLength(1);

    const res = await buildTestApp(ctx.database(), { env: { PROMPTS_DIR: dir } }).app.request(
      `/v1/subjects/${P}`,
      { method: 'DELETE' },
    );
    expect(res.status).toBe(200);
    // the answer counts them: mine, mineToo and p2's use of the shared words
    expect(((await res.json()) as { removed: { prompts: number } }).removed.prompts).toBe(3);

    expect(await usesOf(p1)).toBe(0);
    expect(await usesOf(p2)).toBe(0);
    expect(await served(mine.url)).toBe(404);
    expect(await served(mineToo.url)).toBe(404);
    // its file in PROMPTS_DIR went too
    expect(await readdir(dir)).toEqual([]);
    // the same words for someone else, and the shared prompt, stay
    expect(await usesOf(q1)).toBe(1);
    expect(await served(theirs.url)).toBe(200);
    expect(await served(everyone.url)).toBe(200);
  });

  it("retention removes a call's prompts a grace period after it ended; shared ones stay", async () => {
    const grace = HOUR;
    const now = new Date(T0.getTime() + 10 * HOUR);
    const endedLongAgo = await call(phone(), new Date(now.getTime() - 2 * HOUR));
    const endedJustNow = await call(phone(), new Date(now.getTime() - HOUR / 2));
    const stillOn = await call(phone(), null);
    const old = await render('Hello Petro, see you Monday.', { callId: endedLongAgo });
    const oldFile = await render('Petro, press 2 to cancel.', { callId: endedLongAgo }, T0, true);
    const recent = await render('Hello Iryna, see you Tuesday.', { callId: endedJustNow });
    const ongoing = await render('Hello Taras, see you Sunday.', { callId: stillOn });
    const expired = await render('Your code is 4 2 7.', { expiresAt: new Date(now.getTime() - 1) });
    const notYet = await render('Your code is 9 1 3.', {
      expiresAt: new Date(now.getTime() + HOUR),
    });
    // a call that is gone (never started, or erased): its prompt goes a grace period after rendering
    const orphan = await render('Hello Marko.', { callId: randomUUID() });
    const shared = await render('Thank you for calling.');
    const filesBefore = (await readdir(dir)).length;

    let removed = await removeEndedPrompts(db(), now, grace, 2);
    const files = [...removed.files];
    let uses = removed.uses;
    while (removed.more) {
      removed = await removeEndedPrompts(db(), now, grace, 2);
      files.push(...removed.files);
      uses += removed.uses;
    }
    expect(uses).toBe(4); // old, oldFile, expired, orphan
    expect(files).toHaveLength(1);
    await createPromptStore(db(), { dir }).removeFiles(files);
    expect(await readdir(dir)).toHaveLength(filesBefore - 1);

    for (const gone of [old, oldFile, expired, orphan]) expect(await served(gone.url)).toBe(404);
    for (const kept of [recent, ongoing, notYet, shared]) expect(await served(kept.url)).toBe(200);
    // nothing more to do
    expect(await removeEndedPrompts(db(), now, grace, 500)).toMatchObject({
      uses: 0,
      audio: 0,
      more: false,
    });
  });

  it('keeps audio a render has just reused, though its last use was removed', async () => {
    const now = new Date(T0.getTime() + 10 * HOUR);
    const ended = await call(phone(), new Date(now.getTime() - 2 * HOUR));
    const first = await render('Hello Sofia.', { callId: ended });
    // the same words for a new call, rendered now: a hit, which marks the audio used
    const fresh = await call(phone(), null);
    const again = await render('Hello Sofia.', { callId: fresh }, now);
    expect(again.id).toBe(first.id);
    await removeEndedPrompts(db(), now, HOUR, 500);
    expect(await usesOf(ended)).toBe(0);
    expect(await served(again.url)).toBe(200);
  });
});
