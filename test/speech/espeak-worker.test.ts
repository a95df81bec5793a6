/**
 * eSpeak NG's worker thread and its memory tuning: the worker answers what the engine in this
 * thread answers, ends when idle and starts again when asked; the WAV written to a device
 * (instead of a file of the in-memory file system), the zeroing of only what a run wrote, and
 * decoding a batch's audio as a view each give exactly what the plain path gives.
 */
import { describe, expect, it } from 'vitest';
import { decodeWav, encodeWav } from '../../src/speech/audio.ts';
import type { SynthesizedSpeech } from '../../src/speech/engine.ts';
import {
  createEspeakEngine,
  createEspeakInProcess,
  espeakStartup,
  espeakWorkerRunning,
  lastNonZero,
} from '../../src/speech/espeak.ts';
import { eventually } from '../support/server.ts';

const TEXTS = ['Maria', 'Olena Kovalenko from Kyiv', 'the third of March at ten in the morning'];

function same(a: SynthesizedSpeech, b: SynthesizedSpeech): boolean {
  return (
    a.sampleRate === b.sampleRate &&
    a.samples.length === b.samples.length &&
    a.samples.every((v, i) => v === b.samples[i])
  );
}

describe('eSpeak NG in a worker thread', () => {
  it('answers what the engine in this thread answers, one text or several', async () => {
    const worker = createEspeakEngine();
    const here = createEspeakInProcess();
    expect(await worker.voices()).toEqual(await here.voices());
    const one = await worker.synthesize('Добрий день, Маріє', { lang: 'uk' });
    expect(same(one, await here.synthesize('Добрий день, Маріє', { lang: 'uk' }))).toBe(true);
    const many = await worker.synthesizeMany!(TEXTS, { lang: 'en' });
    const manyHere = await here.synthesizeMany!(TEXTS, { lang: 'en' });
    expect(many).toHaveLength(TEXTS.length);
    for (const [i, speech] of many.entries()) expect(same(speech, manyHere[i]!)).toBe(true);
    // bad input is the same SpeechError across the thread boundary
    const error = await worker.synthesize('hello', { lang: 'en', rate: 3 }).catch((e) => e);
    expect(error).toMatchObject({ name: 'SpeechError', reason: 'INVALID_RATE' });
    expect(error.details[0]).toMatchObject({ path: 'rate', code: 'INVALID_VALUE' });
  });

  it('ends when idle and starts again on the next request', async () => {
    const engine = createEspeakEngine({ idleMs: 50 });
    await engine.synthesize('one', { lang: 'en' });
    const first = espeakStartup()!.workers!;
    expect(espeakWorkerRunning()).toBe(true);
    await eventually(async () => !espeakWorkerRunning(), 10_000, 'the idle worker to end');
    const speech = await engine.synthesize('two', { lang: 'en' });
    expect(speech.samples.length).toBeGreaterThan(1000);
    expect(espeakStartup()!.workers).toBe(first + 1);
  });

  it('ends at once when told it is idle, never under a running request', async () => {
    // an hour: only idle() can end it within this test
    const engine = createEspeakEngine({ idleMs: 3_600_000 });
    await engine.voices();
    expect(espeakWorkerRunning()).toBe(true);
    const asked = espeakStartup()!.workers!;
    const running = engine.synthesize('a request still running', { lang: 'en' });
    // one turn of the event loop: the request (posted after a few promise steps) is with the
    // thread, which takes milliseconds to answer it
    await new Promise((resolve) => setImmediate(resolve));
    engine.idle!();
    // a request was waiting: the same thread stays and answers it
    expect(espeakWorkerRunning()).toBe(true);
    expect((await running).samples.length).toBeGreaterThan(1000);
    expect(espeakStartup()!.workers).toBe(asked);
    engine.idle!();
    expect(espeakWorkerRunning()).toBe(false);
    const first = espeakStartup()!.workers!;
    expect((await engine.synthesize('again', { lang: 'en' })).samples.length).toBeGreaterThan(1000);
    expect(espeakStartup()!.workers).toBe(first + 1);
    engine.idle!();
  });
});

describe('eSpeak NG worker thread that does not answer', () => {
  it('is ended, fails what waited on it with TIMEOUT, and the next request starts a new one', async () => {
    createEspeakEngine().idle!(); // no thread: the next request starts one (well over 1 ms)
    expect(espeakWorkerRunning()).toBe(false);
    const hurried = createEspeakEngine({ idleMs: 3_600_000, answerMs: 1 });
    const [first, second] = await Promise.all([
      hurried.synthesize('never in time', { lang: 'en' }).catch((e) => e),
      hurried.synthesize('nor this', { lang: 'en' }).catch((e) => e),
    ]);
    for (const err of [first, second]) {
      expect(err).toMatchObject({ name: 'SpeechError', reason: 'TIMEOUT', code: 'UNAVAILABLE' });
      expect(err.message).toMatch(/did not answer within 1 ms/);
    }
    expect(espeakWorkerRunning()).toBe(false);
    const engine = createEspeakEngine({ idleMs: 3_600_000 });
    expect((await engine.synthesize('in time', { lang: 'en' })).samples.length).toBeGreaterThan(
      1000,
    );
    engine.idle!();
  });
});

describe('eSpeak NG memory tuning holds to the plain path', () => {
  it('writes through the output device exactly what a plain file gets', async () => {
    const device = createEspeakInProcess();
    const plain = createEspeakInProcess({ plainOutput: true });
    // a long text first, then a short one: the device's buffer is reused, never stale
    const long = 'This is a longer sentence, said twice over. '.repeat(6);
    for (const [text, lang] of [
      [long, 'en'],
      ['Добрий день', 'uk'],
    ] as const) {
      expect(
        same(await device.synthesize(text, { lang }), await plain.synthesize(text, { lang })),
      ).toBe(true);
    }
    const many = await device.synthesizeMany!(TEXTS, { lang: 'en' });
    const manyPlain = await plain.synthesizeMany!(TEXTS, { lang: 'en' });
    for (const [i, speech] of many.entries()) expect(same(speech, manyPlain[i]!)).toBe(true);
  });

  it('finds the last non-zero byte as a plain scan does', () => {
    const plainScan = (m: Uint8Array, from: number) => {
      let end = m.length;
      while (end > from && m[end - 1] === 0) end--;
      return end;
    };
    const size = 300_000;
    for (const at of [-1, 0, 5, 65_535, 65_536, 65_537, 200_000, size - 1]) {
      const m = new Uint8Array(size);
      if (at >= 0) m[at] = 7;
      for (const from of [0, 10, 70_000]) expect(lastNonZero(m, from)).toBe(plainScan(m, from));
    }
    // a view into a larger buffer
    const backing = new Uint8Array(size);
    backing[1000] = 1;
    backing[size - 1] = 1;
    const view = backing.subarray(0, 100_000);
    expect(lastNonZero(view, 0)).toBe(plainScan(view, 0));
  });

  it('decodes 16-bit mono as a view when asked, with the same samples as a copy', () => {
    const samples = Int16Array.from({ length: 1000 }, (_, i) => ((i * 37) % 2000) - 1000);
    const wav = encodeWav(samples, 22_050);
    const copy = decodeWav(wav);
    const view = decodeWav(wav, { view: true });
    expect([...view.samples]).toEqual([...copy.samples]);
    expect(view.samples.buffer).toBe(wav.buffer);
    expect(copy.samples.buffer).not.toBe(wav.buffer);
  });
});
