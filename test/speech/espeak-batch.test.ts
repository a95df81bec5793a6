/**
 * eSpeak NG says several texts in one run (`synthesizeMany`), a long break apart, and cuts
 * its audio at the breaks: each text's audio as `synthesize` would give it, in order, and a
 * text's markup is spoken, never obeyed.
 */
import { describe, expect, it } from 'vitest';
import { SILENCE_THRESHOLD } from '../../src/speech/audio.ts';
import { createEspeakEngine, splitAtBreaks } from '../../src/speech/espeak.ts';

const engine = createEspeakEngine();
const seconds = (s: { samples: Int16Array; sampleRate: number }) => s.samples.length / s.sampleRate;
const loudShare = (s: { samples: Int16Array }) =>
  s.samples.filter((v) => Math.abs(v) >= SILENCE_THRESHOLD).length / s.samples.length;

describe('eSpeak NG: several texts in one run', () => {
  it('answers one speech per text, in order, each about as long as alone', async () => {
    const texts = [
      'Maria',
      'Olena Kovalenko from Kyiv',
      'the third of March at ten in the morning',
    ];
    const many = await engine.synthesizeMany!(texts, { lang: 'en' });
    expect(many).toHaveLength(3);
    for (const [i, text] of texts.entries()) {
      const alone = await engine.synthesize(text, { lang: 'en' });
      expect(many[i]!.sampleRate).toBe(alone.sampleRate);
      expect(loudShare(many[i]!)).toBeGreaterThan(0.3);
      // the cut keeps a short edge of silence; alone has the engine's own lead-in and tail
      expect(Math.abs(seconds(many[i]!) - seconds(alone))).toBeLessThan(0.6);
    }
    expect(seconds(many[0]!)).toBeLessThan(seconds(many[1]!));
    expect(seconds(many[1]!)).toBeLessThan(seconds(many[2]!));
  });

  it('speaks markup in a text instead of obeying it', async () => {
    const [a, b] = await engine.synthesizeMany!(['one <break time="5s"/> two', 'three & four'], {
      lang: 'en',
    });
    // obeyed, the break would have cut the first text in two (and made three pieces)
    expect(seconds(a!)).toBeLessThan(4);
    expect(loudShare(b!)).toBeGreaterThan(0.3);
  });

  it('checks every text as synthesize does', async () => {
    await expect(engine.synthesizeMany!(['fine', '   '], { lang: 'en' })).rejects.toMatchObject({
      reason: 'EMPTY_TEXT',
    });
  });

  it('cuts only where the silence is long enough, into exactly the pieces asked for', () => {
    const rate = 1000;
    const tone = (ms: number) => new Int16Array(ms).fill(5000);
    const quiet = (ms: number) => new Int16Array(ms);
    const audio = new Int16Array([
      ...tone(200),
      ...quiet(1000),
      ...tone(300),
      ...quiet(300),
      ...tone(100),
    ]);
    const pieces = splitAtBreaks(audio, rate, 2)!;
    expect(pieces).toHaveLength(2);
    // the short pause stays inside the second piece
    expect(pieces[1]!.filter((v) => v !== 0).length).toBe(400);
    expect(splitAtBreaks(audio, rate, 3)).toBeUndefined();
  });
});
