/**
 * The prompt service and its store: a render looks its request up first (a hit, a restart or
 * another instance renders nothing again), stores the audio once by content hash under an
 * HMAC id, on Postgres (bytea) or in PROMPTS_DIR; the id secret is generated once per
 * database and agreed on by every instance.
 */
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Clock } from '../../src/clock.ts';
import { rowsOf } from '../../src/db/client.ts';
import { decodeWav } from '../../src/speech/audio.ts';
import type { SpeechEngine } from '../../src/speech/engine.ts';
import { createEspeakEngine } from '../../src/speech/espeak.ts';
import { audioContentHash, isSpeechPublicId, speechPublicId } from '../../src/speech/ids.ts';
import {
  createPromptService,
  loadPromptSecret,
  PROMPT_SECRET_KEY,
} from '../../src/speech/prompts.ts';
import { createPromptStore, promptFilePath } from '../../src/speech/store.ts';
import { describeEachEngine } from '../support/db.ts';

const NOW = new Date('2026-03-02T09:00:00.000Z');
const clock: Clock = { now: () => NOW };
const SECRET = 'a-test-secret-that-is-long-enough-for-hmac';
const espeak = createEspeakEngine();

/** eSpeak NG, with every synthesis counted. */
function counted(engine: SpeechEngine = espeak) {
  const texts: string[] = [];
  const wrapped: SpeechEngine = {
    name: engine.name,
    version: engine.version,
    maxTextLength: engine.maxTextLength,
    voices: () => engine.voices(),
    synthesize(text, options) {
      texts.push(text);
      return engine.synthesize(text, options);
    },
  };
  return { engine: wrapped, texts };
}

function rms(samples: Int16Array): number {
  let sum = 0;
  for (const x of samples) sum += x * x;
  return Math.sqrt(sum / Math.max(1, samples.length));
}

describeEachEngine('rendered prompts', (ctx) => {
  const db = () => ctx.database().db;
  const service = (engine: SpeechEngine, dir?: string) =>
    createPromptService({
      engine,
      store: createPromptStore(db(), { dir }),
      secret: SECRET,
      format: 'wav8k',
      publicUrl: 'https://sb.example',
      clock,
    });
  const audioRows = async (hash: string) =>
    rowsOf<{ n: number; size: number; has_body: boolean }>(
      await db().execute(
        sql`select count(*)::int as n, max(size_bytes) as size, bool_and(body is not null) as has_body
            from prompt_audio where content_hash = ${hash}`,
      ),
    )[0];

  it('renders speech once, stores it by content hash and serves it under the HMAC id', async () => {
    const { engine, texts } = counted();
    const first = await service(engine).render({ text: 'Press 1 to confirm.', lang: 'en' });
    expect(texts).toEqual(['Press 1 to confirm.']);
    expect(isSpeechPublicId(first.id)).toBe(true);
    expect(first).toMatchObject({ ext: 'wav', contentType: 'audio/wav' });
    expect(first.url).toBe(`https://sb.example/prompts/${first.id}.wav`);
    expect(first.durationMs).toBeGreaterThan(500);

    const file = await createPromptStore(db()).read(first.id);
    if (!file) throw new Error('the rendered prompt is not stored');
    // the id is the HMAC of the bytes' hash: nothing derivable from the words
    expect(file.contentHash).toBe(audioContentHash(file.body));
    expect(first.id).toBe(speechPublicId(SECRET, file.contentHash));
    expect(file.shared).toBe(true);
    // real speech at 8 kHz: not silence, as long as it says
    const wav = decodeWav(file.body);
    expect(wav.sampleRate).toBe(8000);
    expect(rms(wav.samples)).toBeGreaterThan(500);
    expect(Math.abs((wav.samples.length / 8000) * 1000 - first.durationMs)).toBeLessThan(5);
    expect(await audioRows(file.contentHash)).toMatchObject({ n: 1, has_body: true });

    // the same request again, and after a "restart" (a new service): nothing is rendered
    const again = counted();
    expect(
      await service(again.engine).render({ text: ' Press 1 to confirm. ', lang: 'EN' }),
    ).toEqual(first);
    expect(again.texts).toEqual([]);
  });

  it('stores one audio row and one use when two instances render the same text at once', async () => {
    const a = counted();
    const b = counted();
    const text = 'Your appointment is on Tuesday.';
    const [one, two] = await Promise.all([
      service(a.engine).render({ text, lang: 'en' }),
      service(b.engine).render({ text, lang: 'en' }),
    ]);
    expect(one).toEqual(two);
    const [uses] = rowsOf<{ n: number; hashes: number }>(
      await db().execute(sql`select count(*)::int as n, count(distinct content_hash)::int as hashes
        from prompt_uses u join prompt_audio a using (content_hash) where a.public_id = ${one.id}`),
    );
    expect(uses).toEqual({ n: 1, hashes: 1 });
    // and in one process, concurrent renders of one request share a synthesis
    const c = counted();
    const shared = service(c.engine);
    const texts = await Promise.all([
      shared.render({ text: 'Goodbye.', lang: 'en' }),
      shared.render({ text: 'Goodbye.', lang: 'en' }),
    ]);
    expect(texts[0]).toEqual(texts[1]);
    expect(c.texts).toEqual(['Goodbye.']);
  });

  it("keeps a call's prompt as that call's, reusing audio the same words already have", async () => {
    const { engine, texts } = counted();
    const prompts = service(engine);
    const callA = '0193f1c2-7b4e-7c1a-9f3d-2a6b8c0d1e01';
    const callB = '0193f1c2-7b4e-7c1a-9f3d-2a6b8c0d1e02';
    const a = await prompts.render({ text: 'Hello Maria.', lang: 'en' }, { callId: callA });
    const b = await prompts.render({ text: 'Hello Maria.', lang: 'en' }, { callId: callB });
    expect(b).toEqual(a);
    expect(texts).toEqual(['Hello Maria.']);
    const uses = rowsOf<{ call_id: string | null }>(
      await db().execute(sql`select u.call_id from prompt_uses u join prompt_audio a
        using (content_hash) where a.public_id = ${a.id} order by u.call_id`),
    );
    expect(uses.map((u) => u.call_id)).toEqual([callA, callB]);
    // no shared use: the file is personal
    expect((await createPromptStore(db()).read(a.id))?.shared).toBe(false);
  });

  it('after the secret changes, a render gives the stored audio its new id and the old id is gone', async () => {
    const text = 'Press 2 to cancel.';
    const before = await service(espeak).render({ text, lang: 'en' });
    const other = counted();
    const rotated = await createPromptService({
      engine: other.engine,
      store: createPromptStore(db()),
      secret: 'another-secret-that-is-long-enough-too',
      format: 'wav8k',
      publicUrl: 'https://sb.example',
      clock,
    }).render({ text, lang: 'en' });
    expect(other.texts).toEqual([]); // the audio is reused, only its name changes
    expect(rotated.id).not.toBe(before.id);
    expect(await createPromptStore(db()).read(before.id)).toBeUndefined();
    expect((await createPromptStore(db()).read(rotated.id))?.ext).toBe('wav');
  });

  it('generates the id secret once per database, the same for every instance', async () => {
    const [a, b] = await Promise.all([
      loadPromptSecret(db(), { promptSecret: undefined }),
      loadPromptSecret(db(), { promptSecret: undefined }),
    ]);
    expect(a).toBe(b);
    expect(Buffer.from(a, 'base64url').length).toBe(32);
    expect(await loadPromptSecret(db(), { promptSecret: undefined })).toBe(a);
    const [row] = rowsOf<{ value: string }>(
      await db().execute(sql`select value from settings where key = ${PROMPT_SECRET_KEY}`),
    );
    expect(row?.value).toBe(a);
    // PROMPT_SECRET wins
    expect(await loadPromptSecret(db(), { promptSecret: SECRET })).toBe(SECRET);
  });

  describeDirectory();

  function describeDirectory() {
    let dir: string;
    beforeAll(async () => {
      dir = await mkdtemp(join(tmpdir(), 'sb-prompts-'));
    });
    afterAll(async () => {
      await rm(dir, { recursive: true, force: true });
    });

    it('keeps the audio as files in PROMPTS_DIR, named by content hash, with no body in the row', async () => {
      const { engine, texts } = counted();
      const rendered = await service(engine, dir).render(
        { text: 'Thank you, goodbye.', lang: 'en' },
        {},
      );
      const store = createPromptStore(db(), { dir });
      const file = await store.read(rendered.id);
      if (!file) throw new Error('not stored');
      expect(await readdir(dir)).toEqual([`${file.contentHash}.wav`]);
      expect(new Uint8Array(await readFile(join(dir, `${file.contentHash}.wav`)))).toEqual(
        file.body,
      );
      expect(await audioRows(file.contentHash)).toMatchObject({ n: 1, has_body: false });
      // a hit whose file was lost renders it again
      await rm(join(dir, `${file.contentHash}.wav`));
      expect(await store.read(rendered.id)).toBeUndefined();
      await service(engine, dir).render({ text: 'Thank you, goodbye.', lang: 'en' });
      expect(texts).toHaveLength(2);
      expect((await store.read(rendered.id))?.body).toEqual(file.body);
    });

    it('names files only from hashes and extensions: no path can leave the directory', () => {
      const hash = 'a'.repeat(64);
      expect(promptFilePath('/var/prompts', { contentHash: hash, ext: 'mp3' })).toBe(
        `/var/prompts/${hash}.mp3`,
      );
      for (const bad of [
        { contentHash: '../../etc/passwd', ext: 'wav' },
        { contentHash: hash, ext: '../x' },
        { contentHash: `${hash}/..`, ext: 'wav' },
        { contentHash: 'A'.repeat(64), ext: 'wav' },
      ]) {
        expect(() => promptFilePath('/var/prompts', bad)).toThrow(RangeError);
      }
    });
  }
});
