/**
 * eSpeak NG in WebAssembly speaks English and Ukrainian offline: audio that is speech (not
 * silence, not a tone), its length growing with the text, from one instance started once.
 */
import { beforeAll, describe, expect, test } from 'vitest';
import type { SpeechEngine, SpeechError, SynthesizedSpeech } from '../../src/speech/engine.ts';
import { createEspeakEngine, espeakStartup } from '../../src/speech/espeak.ts';

const EN = 'Hello Maria, your appointment is on Monday at ten thirty. Press 1 to confirm.';
const UK = 'Добрий день, Маріє. Ваш запис на понеділок о десятій. Натисніть 1, щоб підтвердити.';

const seconds = (s: SynthesizedSpeech) => s.samples.length / s.sampleRate;
const words = (text: string) => text.split(/\s+/).filter(Boolean).length;

function rms(samples: Int16Array): number {
  let sum = 0;
  for (const x of samples) sum += x * x;
  return Math.sqrt(sum / Math.max(1, samples.length));
}

/** RMS of each 20 ms frame. */
function frameLevels(s: SynthesizedSpeech): number[] {
  const size = Math.round(s.sampleRate * 0.02);
  const levels: number[] = [];
  for (let at = 0; at + size <= s.samples.length; at += size) {
    levels.push(rms(s.samples.subarray(at, at + size)));
  }
  return levels;
}

async function failure(promise: Promise<unknown>): Promise<SpeechError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(Error);
  expect((error as Error).name).toBe('SpeechError');
  return error as SpeechError;
}

let engine: SpeechEngine;

beforeAll(async () => {
  engine = createEspeakEngine({ maxTextLength: 300 });
  await engine.voices();
});

describe('eSpeak NG (WebAssembly)', () => {
  test('speaks English and Ukrainian, among its languages', async () => {
    const voices = await engine.voices();
    const langs = voices.map((v) => v.lang);
    expect(langs).toContain('en');
    expect(langs).toContain('en-us');
    expect(langs).toContain('uk');
    expect(voices.find((v) => v.lang === 'uk')?.name).toBe('Ukrainian');
    expect(engine.name).toBe('espeak-ng');
    expect(engine.version).toMatch(/^\d+\.\d+\.\d+\+\d+$/);
  });

  for (const [lang, text] of [
    ['en', EN],
    ['uk', UK],
  ] as const) {
    test(`${lang}: audible speech of a plausible length, growing with the text`, async () => {
      const once = await engine.synthesize(text, { lang });
      const thrice = await engine.synthesize(`${text} ${text} ${text}`, { lang });
      expect(once.sampleRate).toBe(22_050);
      // between 1 and 5 words a second: the pace of speech, not a blip and not a drone
      const pace = words(text) / seconds(once);
      expect(pace).toBeGreaterThan(1);
      expect(pace).toBeLessThan(5);
      const ratio = seconds(thrice) / seconds(once);
      expect(ratio).toBeGreaterThan(2.5);
      expect(ratio).toBeLessThan(3.5);
      // loud enough to hear (full scale is 32767; silence is 0)
      expect(rms(once.samples)).toBeGreaterThan(1000);
      // speech comes and goes between words; a tone or noise holds one level
      const levels = frameLevels(once);
      const loud = Math.max(...levels);
      const quiet = levels.filter((l) => l < loud * 0.05).length / levels.length;
      const voiced = levels.filter((l) => l > loud * 0.2).length / levels.length;
      expect(quiet).toBeGreaterThan(0.05);
      expect(voiced).toBeGreaterThan(0.3);
    });
  }

  test('different texts give different audio; the same text the same audio', async () => {
    const maria = await engine.synthesize('Hello Maria', { lang: 'en' });
    const mario = await engine.synthesize('Hello Mario', { lang: 'en' });
    const again = await engine.synthesize('Hello Maria', { lang: 'en' });
    expect(Buffer.from(maria.samples.buffer).equals(Buffer.from(mario.samples.buffer))).toBe(false);
    expect(Buffer.from(maria.samples.buffer).equals(Buffer.from(again.samples.buffer))).toBe(true);
  });

  test('syntheses started together each get their own audio', async () => {
    const texts = ['one two three', 'Привіт, Маріє', 'four five six seven eight'];
    const langs = ['en', 'uk', 'en'];
    const apart: SynthesizedSpeech[] = [];
    for (const [i, text] of texts.entries()) {
      apart.push(await engine.synthesize(text, { lang: langs[i]! }));
    }
    const together = await Promise.all(
      texts.map((text, i) => engine.synthesize(text, { lang: langs[i]! })),
    );
    for (const [i, speech] of together.entries()) {
      expect(Buffer.from(speech.samples.buffer).equals(Buffer.from(apart[i]!.samples.buffer))).toBe(
        true,
      );
    }
  });

  test('rate, voice and a regional language code are honoured', async () => {
    const normal = await engine.synthesize(EN, { lang: 'en' });
    const fast = await engine.synthesize(EN, { lang: 'en', rate: 2 });
    const slow = await engine.synthesize(EN, { lang: 'en', rate: 0.5 });
    expect(seconds(fast)).toBeLessThan(seconds(normal) * 0.7);
    expect(seconds(slow)).toBeGreaterThan(seconds(normal) * 1.4);
    const other = await engine.synthesize(EN, { lang: 'en', voice: 'Belinda' });
    expect(Buffer.from(other.samples.buffer).equals(Buffer.from(normal.samples.buffer))).toBe(
      false,
    );
    const regional = await engine.synthesize(UK, { lang: 'uk-UA' });
    expect(rms(regional.samples)).toBeGreaterThan(1000);
  });

  test('text is spoken, never obeyed as options or markup', async () => {
    const option = await engine.synthesize('--help -v xx -w /etc/passwd', { lang: 'en' });
    expect(seconds(option)).toBeGreaterThan(1);
    expect(rms(option.samples)).toBeGreaterThan(1000);
    const markup = await engine.synthesize('<speak><break time="10s"/>hi</speak>', { lang: 'en' });
    expect(seconds(markup)).toBeLessThan(8);
  });

  test('bad input is a SpeechError naming the reason, and the engine keeps working', async () => {
    expect((await failure(engine.synthesize('  ', { lang: 'en' }))).reason).toBe('EMPTY_TEXT');
    const long = await failure(engine.synthesize('a'.repeat(301), { lang: 'en' }));
    expect(long.reason).toBe('TEXT_TOO_LONG');
    expect(long.code).toBe('VALIDATION_ERROR');
    // 300 characters is the limit, counted in characters, not bytes
    await expect(engine.synthesize('ї'.repeat(300), { lang: 'uk' })).resolves.toBeDefined();
    const lang = await failure(engine.synthesize('hello', { lang: 'tlh' }));
    expect(lang.reason).toBe('UNKNOWN_LANGUAGE');
    expect(lang.code).toBe('INVALID_LANGUAGE');
    const voice = await failure(engine.synthesize('hello', { lang: 'en', voice: 'nobody' }));
    expect(voice.reason).toBe('UNKNOWN_VOICE');
    const rate = await failure(engine.synthesize('hello', { lang: 'en', rate: 3 }));
    expect(rate.reason).toBe('INVALID_RATE');
    const after = await engine.synthesize(EN, { lang: 'en' });
    expect(rms(after.samples)).toBeGreaterThan(1000);
  });

  test('starts once: one instance serves every synthesis, faster than real time', async () => {
    const before = espeakStartup();
    expect(before).toBeDefined();
    expect(before!.instances).toBe(1);
    expect(before!.instantiateCpuMs).toBeGreaterThan(0);
    // the snapshot leaves out the 17 MB of built-in language data and the zeros
    expect(before!.snapshotBytes).toBeGreaterThan(0);
    expect(before!.snapshotBytes).toBeLessThan(before!.memoryBytes / 8);
    // a second engine shares the process's instance
    const second = createEspeakEngine();
    let audio = 0;
    const cpu = process.cpuUsage();
    for (let i = 0; i < 5; i++) {
      audio += seconds(await second.synthesize(EN, { lang: 'en' }));
      audio += seconds(await engine.synthesize(UK, { lang: 'uk' }));
    }
    const used = process.cpuUsage(cpu);
    const cpuSeconds = (used.user + used.system) / 1e6;
    const after = espeakStartup()!;
    expect(after.instances).toBe(1);
    expect(after.runs).toBe(before!.runs + 10);
    expect(after.instantiateCpuMs).toBe(before!.instantiateCpuMs);
    // measured at roughly 200-500 seconds of audio per CPU second; 10 is a loose floor
    // that still fails if each synthesis started the program again (about 0.3 s each)
    expect(audio / cpuSeconds).toBeGreaterThan(10);
  });
});
