/**
 * Spoken prompts of flows (src/speech/spoken.ts) on the real engine (eSpeak NG) and a real
 * database (PGlite): planning is pure and repeatable and its URL tells nothing of the words;
 * a flow's prompts without params are stored and rendered when it loads, shared; a call's
 * own are rendered by `renderPending`, reusing every piece rendered before (by this
 * instance or another), and joined into one WAV when read; a preview stores nothing of
 * anyone's; a piece whose audio went is rendered again when its prompt is read.
 */
import { randomUUID } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Clock } from '../../src/clock.ts';
import { rowsOf } from '../../src/db/client.ts';
import { compileFlow, FlowDefinition, type SpokenPrompt } from '../../src/flows/index.ts';
import { decodeWav } from '../../src/speech/audio.ts';
import type { SpeechEngine } from '../../src/speech/engine.ts';
import { createEspeakEngine } from '../../src/speech/espeak.ts';
import { isSpeechPublicId } from '../../src/speech/ids.ts';
import { createPromptService } from '../../src/speech/prompts.ts';
import { createSpokenPrompts, storeCompositions } from '../../src/speech/spoken.ts';
import { createPromptStore } from '../../src/speech/store.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';

const NOW = new Date('2026-03-02T09:00:00.000Z');
const clock: Clock = { now: () => NOW };
const SECRET = 'a-test-secret-that-is-long-enough-for-hmac';
const espeak = createEspeakEngine();

/** eSpeak NG, with the text of every synthesis recorded. */
function counted(): { engine: SpeechEngine; texts: string[] } {
  const texts: string[] = [];
  const engine: SpeechEngine = {
    name: espeak.name,
    version: espeak.version,
    maxTextLength: espeak.maxTextLength,
    voices: () => espeak.voices(),
    synthesize(text, options) {
      texts.push(text);
      return espeak.synthesize(text, options);
    },
  };
  return { engine, texts };
}

const HELLO: SpokenPrompt = { say: 'Hello {{name}}, press 1 to confirm.' };

const FLOW = FlowDefinition.parse({
  params: { name: 'string' },
  languages: ['en', 'uk'],
  menus: {
    main: {
      intro: { say: { en: HELLO.say, uk: 'Привіт, {{name}}. Натисніть 1.' } },
      reprompt: { say: 'Sorry, once more.', rate: 0.9 },
      retries: 1,
      keys: { '1': [{ goto: 'thanks' }] },
      wrong: [{ outcome: 'no-answer' }],
    },
    thanks: {
      intro: { en: { say: 'Thank you.' }, uk: { say: 'Дякую.' } },
      wrong: [{ outcome: 'confirmed' }],
    },
  },
});

describe('spoken prompts (eSpeak NG, pglite)', () => {
  let test: TestDatabase;
  const db = () => test.database.db;
  const count = async (table: 'prompt_audio' | 'prompt_uses' | 'prompt_compositions') =>
    rowsOf<{ n: number }>(
      await db().execute(sql`select count(*)::int as n from ${sql.identifier(table)}`),
    )[0]!.n;
  const composition = async (publicId: string, callId: string | null) =>
    rowsOf<{
      call_id: string | null;
      parts: string[] | null;
      duration_ms: number | null;
      rendered_at: unknown;
    }>(
      await db().execute(sql`
        select call_id, parts, duration_ms, rendered_at from prompt_compositions
        where public_id = ${publicId}
          and call_id is not distinct from ${callId}::uuid`),
    )[0];

  /** One instance's spoken prompts, over the shared store, on a counting engine. */
  const instance = (secret = SECRET) => {
    const { engine, texts } = counted();
    const store = createPromptStore(db());
    const common = {
      store,
      secret,
      format: 'wav8k' as const,
      publicUrl: 'https://sb.example',
      clock,
    };
    const prompts = createPromptService({ ...common, engine });
    const spoken = createSpokenPrompts({ ...common, db: db(), prompts, engine });
    return { spoken, store, texts };
  };

  /** Plans a call's prompt, stores its rows as a call start does, and renders them. */
  const startCall = async (
    spoken: ReturnType<typeof instance>['spoken'],
    vars: Record<string, unknown>,
  ) => {
    const callId = randomUUID();
    const plan = spoken.plan(HELLO, 'en', vars);
    await storeCompositions(db(), spoken.rowsFor([plan], callId, NOW));
    const rendered = await spoken.renderPending();
    return { callId, plan, rendered };
  };

  beforeAll(async () => {
    test = await createTestDatabase('pglite');
  }, 60_000);
  afterAll(async () => {
    await test?.drop();
  });

  describe('plan', () => {
    it('is deterministic and pure: the same inputs give the same URL, with nothing rendered or stored', async () => {
      const a = instance();
      const before = await count('prompt_compositions');
      const maria = a.spoken.plan(HELLO, 'en', { name: 'Maria' });
      expect(a.spoken.plan(HELLO, 'en', { name: 'Maria' })).toEqual(maria);
      // another instance (a restart) on the same secret agrees
      expect(instance().spoken.plan(HELLO, 'en', { name: 'Maria' }).url).toBe(maria.url);
      expect(maria.url).toBe(`https://sb.example/prompts/${maria.publicId}.wav`);
      expect(maria.pieces.map((p) => [p.text, p.personal])).toEqual([
        ['Hello', false],
        ['Maria', true],
        [', press 1 to confirm.', false],
      ]);
      expect(maria.personal).toBe(true);
      expect(a.texts).toEqual([]);
      expect(await count('prompt_compositions')).toBe(before);
    });

    it('gives another URL for another name, language, voice or rate, sharing the words’ pieces', () => {
      const { spoken } = instance();
      const maria = spoken.plan(HELLO, 'en', { name: 'Maria' });
      const ivan = spoken.plan(HELLO, 'en', { name: 'Ivan' });
      expect(ivan.url).not.toBe(maria.url);
      expect(ivan.pieces[0]!.requestHash).toBe(maria.pieces[0]!.requestHash);
      expect(ivan.pieces[1]!.requestHash).not.toBe(maria.pieces[1]!.requestHash);
      const others = [
        spoken.plan(HELLO, 'uk', { name: 'Maria' }),
        spoken.plan({ ...HELLO, voice: 'f2' }, 'en', { name: 'Maria' }),
        spoken.plan({ ...HELLO, rate: 1.2 }, 'en', { name: 'Maria' }),
      ];
      expect(new Set([maria, ivan, ...others].map((p) => p.url)).size).toBe(5);
    });

    it('plans a prompt without params once: every call gets the same object', () => {
      const { spoken } = instance();
      const shared = spoken.plan({ say: 'Sorry, once more.' }, 'en', {});
      expect(spoken.plan({ say: 'Sorry, once more.' }, 'en', { name: 'Maria' })).toBe(shared);
      expect(shared.personal).toBe(false);
      expect(shared.pieces).toHaveLength(1);
      // another language is another prompt
      expect(spoken.plan({ say: 'Sorry, once more.' }, 'uk', {})).not.toBe(shared);
    });

    it('names the prompt by an HMAC: its id shows nothing of the words', () => {
      const maria = instance().spoken.plan(HELLO, 'en', { name: 'Maria' });
      expect(isSpeechPublicId(maria.publicId)).toBe(true);
      expect(maria.url.toLowerCase()).not.toContain('maria');
      expect(maria.url).not.toContain(maria.compositionHash);
      // without the secret it cannot be computed: another secret, another id for the same words
      const other = instance('another-secret-also-long-enough-for-hmac').spoken.plan(HELLO, 'en', {
        name: 'Maria',
      });
      expect(other.compositionHash).toBe(maria.compositionHash);
      expect(other.publicId).not.toBe(maria.publicId);
    });

    it('refuses a prompt that has nothing to say once filled in', () => {
      expect(() => instance().spoken.plan({ say: '{{name}}.' }, 'en', {})).toThrow(
        /nothing to say/,
      );
    });
  });

  describe('rendering and reading', () => {
    it('stores and renders the flow’s prompts without params when it loads, shared, once', async () => {
      const { spoken, texts } = instance();
      const compiled = compileFlow({ id: 'reminder', definition: FLOW });
      const before = await count('prompt_compositions');
      await spoken.prepareFlow(compiled);
      // the reprompt in both languages and the thanks in each: never the prompt with {{name}}
      expect(texts.sort()).toEqual([
        'Sorry, once more.',
        'Sorry, once more.',
        'Thank you.',
        'Дякую.',
      ]);
      expect(await count('prompt_compositions')).toBe(before + 4);
      const thanks = spoken.plan({ say: 'Дякую.' }, 'uk', {});
      const row = await composition(thanks.publicId, null);
      expect(row?.call_id).toBeNull();
      expect(row?.parts).toHaveLength(1);
      expect(row?.rendered_at).not.toBeNull();
      const file = await spoken.read(thanks.publicId, 'wav');
      expect(file).toMatchObject({ contentType: 'audio/wav', shared: true });
      expect(file!.etag).toBe(thanks.compositionHash);
      expect(decodeWav(file!.body).samples.length).toBeGreaterThan(0);
      expect(await spoken.read(thanks.publicId, 'mp3')).toBeUndefined();
      // loading the flow again (a restart) renders nothing and stores nothing new
      const again = instance();
      await again.spoken.prepareFlow(compiled);
      expect(again.texts).toEqual([]);
      expect(await count('prompt_compositions')).toBe(before + 4);
    });

    it("renders a call's prompt before dispatch and reads it as one WAV of its pieces", async () => {
      const { spoken, store, texts } = instance();
      const { callId, plan, rendered } = await startCall(spoken, { name: 'Maria' });
      expect(rendered).toBe(1);
      expect(texts).toEqual(['Hello', 'Maria', ', press 1 to confirm.']);
      const row = await composition(plan.publicId, callId);
      expect(row?.parts).toHaveLength(3);
      // nothing left to render
      expect(await spoken.renderPending()).toBe(0);

      const file = await spoken.read(plan.publicId, 'wav');
      expect(file).toMatchObject({ contentType: 'audio/wav', ext: 'wav', shared: false });
      const joined = decodeWav(file!.body);
      const pieces = (await store.bodies(row!.parts!))!.map((b) => decodeWav(b));
      // the pieces' samples, in order, nothing added or lost
      expect(joined.samples.length).toBe(pieces.reduce((n, p) => n + p.samples.length, 0));
      expect(joined.samples.slice(0, pieces[0]!.samples.length)).toEqual(pieces[0]!.samples);
      const ms = (joined.samples.length / joined.sampleRate) * 1000;
      expect(Math.abs(ms - row!.duration_ms!)).toBeLessThanOrEqual(pieces.length);
      // nothing was rendered to read it
      expect(texts).toHaveLength(3);
    });

    it('renders a name once: a second call with it, here or on another instance, adds no audio', async () => {
      const first = instance();
      await startCall(first.spoken, { name: 'Olena' });
      expect(first.texts).toContain('Olena');
      const audio = await count('prompt_audio');

      const same = await startCall(first.spoken, { name: 'Olena' });
      const restarted = instance();
      const other = await startCall(restarted.spoken, { name: 'Olena' });
      expect(first.texts.filter((t) => t === 'Olena')).toHaveLength(1);
      expect(restarted.texts).toEqual([]);
      expect(await count('prompt_audio')).toBe(audio);
      // each call has its own use of the name's audio, so its removal takes only its own
      for (const { callId } of [same, other]) {
        const uses = rowsOf<{ n: number }>(
          await db().execute(
            sql`select count(*)::int as n from prompt_uses where call_id = ${callId}::uuid`,
          ),
        );
        expect(uses[0]!.n).toBe(1);
      }
      const file = await restarted.spoken.read(other.plan.publicId, 'wav');
      expect(file?.shared).toBe(false);
    });

    it("previews a prompt without storing the caller's piece", async () => {
      const { spoken, texts } = instance();
      const audio = await count('prompt_audio');
      const uses = await count('prompt_uses');
      const compositions = await count('prompt_compositions');
      const preview = await spoken.preview(HELLO, 'en', { name: 'Zenobia' });
      expect(preview).toMatchObject({ contentType: 'audio/wav', ext: 'wav' });
      expect(decodeWav(preview.body).samples.length).toBeGreaterThan(0);
      // the flow's words came from the store; only the name was synthesized
      expect(texts).toEqual(['Zenobia']);
      expect(await count('prompt_audio')).toBe(audio);
      expect(await count('prompt_uses')).toBe(uses);
      expect(await count('prompt_compositions')).toBe(compositions);
    });

    it('renders a piece again when its audio went before the prompt is read', async () => {
      const { spoken, store, texts } = instance();
      const { callId, plan } = await startCall(spoken, { name: 'Bohdan' });
      const row = await composition(plan.publicId, callId);
      const name = row!.parts![1]!;
      await db().execute(sql`delete from prompt_audio where content_hash = ${name}`);
      expect(await store.bodies(row!.parts!)).toBeUndefined();

      const file = await spoken.read(plan.publicId, 'wav');
      expect(texts.filter((t) => t === 'Bohdan')).toHaveLength(2);
      const now = await composition(plan.publicId, callId);
      const bodies = (await store.bodies(now!.parts!))!;
      expect(bodies).toHaveLength(3);
      const joined = decodeWav(file!.body);
      expect(joined.samples.length).toBe(
        bodies.reduce((n, b) => n + decodeWav(b).samples.length, 0),
      );
    });
  });
});
