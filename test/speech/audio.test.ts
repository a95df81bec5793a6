/**
 * The files a provider plays: WAV headers checked byte by byte against the RIFF/WAVE spec,
 * resampling that keeps a tone's pitch and level and keeps what the new rate cannot carry from
 * folding back as noise (the fast polyphase resampler held to the plain one), MP3 frames walked
 * header by header, silence trimmed, and pieces joined into one WAV or MP3.
 */
import { describe, expect, test } from 'vitest';
import {
  countMp3Frames,
  decodeWav,
  encodeAudio,
  encodeMp3,
  encodeWav,
  joinAudio,
  joinedWavLength,
  joinMp3,
  joinWav,
  MP3_BITRATE_KBPS,
  MP3_SAMPLE_RATE,
  resampleSpeech,
  resampleSpeechPlain,
  SILENCE_THRESHOLD,
  SPEECH_AUDIO_FORMATS,
  trimSilence,
} from '../../src/speech/audio.ts';

function tone(hz: number, rate: number, seconds: number, amplitude = 10_000): Int16Array {
  const out = new Int16Array(Math.round(rate * seconds));
  for (let i = 0; i < out.length; i++) {
    out[i] = Math.round(amplitude * Math.sin((2 * Math.PI * hz * i) / rate));
  }
  return out;
}

/** The amplitude of the `hz` component (Goertzel), away from the edges. */
function amplitudeAt(samples: Int16Array, rate: number, hz: number): number {
  const part = samples.subarray(Math.floor(samples.length * 0.1), Math.floor(samples.length * 0.9));
  let re = 0;
  let im = 0;
  for (let i = 0; i < part.length; i++) {
    const phase = (2 * Math.PI * hz * i) / rate;
    re += part[i]! * Math.cos(phase);
    im += part[i]! * Math.sin(phase);
  }
  return (2 * Math.hypot(re, im)) / part.length;
}

const le32 = (n: number) => [n & 0xff, (n >>> 8) & 0xff, (n >>> 16) & 0xff, (n >>> 24) & 0xff];
const le16 = (n: number) => [n & 0xff, (n >>> 8) & 0xff];
const ascii = (s: string) => [...s].map((c) => c.charCodeAt(0));

describe('WAV', () => {
  for (const [format, rate] of [
    ['wav8k', 8000],
    ['wav16k', 16_000],
  ] as const) {
    test(`${format}: the canonical 44-byte RIFF header, field by field`, () => {
      const source = tone(440, 22_050, 0.5);
      const { body, contentType, extension } = encodeAudio(source, 22_050, format);
      expect(contentType).toBe('audio/wav');
      expect(extension).toBe('wav');
      const frames = Math.round((source.length * rate) / 22_050);
      const dataBytes = frames * 2;
      expect(body.length).toBe(44 + dataBytes);
      const expected = [
        ...ascii('RIFF'),
        ...le32(36 + dataBytes), // ChunkSize: the rest of the file
        ...ascii('WAVE'),
        ...ascii('fmt '),
        ...le32(16), // Subchunk1Size: 16 for PCM
        ...le16(1), // AudioFormat: 1 = PCM
        ...le16(1), // NumChannels: mono
        ...le32(rate), // SampleRate
        ...le32(rate * 2), // ByteRate = SampleRate * NumChannels * BitsPerSample / 8
        ...le16(2), // BlockAlign = NumChannels * BitsPerSample / 8
        ...le16(16), // BitsPerSample
        ...ascii('data'),
        ...le32(dataBytes), // Subchunk2Size
      ];
      expect([...body.subarray(0, 44)]).toEqual(expected);
      // and it reads back as what was written
      const back = decodeWav(body);
      expect(back.sampleRate).toBe(rate);
      expect(back.samples.length).toBe(frames);
    });
  }

  test('16-bit mono reads back sample for sample, as the general path reads it', () => {
    // the fast path (16-bit mono, copied in one go) against the general one: the same
    // samples as two identical channels, which averages back to each sample
    const samples = Int16Array.from({ length: 4001 }, (_, i) =>
      i % 97 === 0 ? (i % 2 ? 32767 : -32768) : Math.round(Math.sin(i * 1.3) * 20000),
    );
    const mono = decodeWav(encodeWav(samples, 8000));
    expect(mono.samples).toEqual(samples);
    const stereo = new Uint8Array(44 + samples.length * 4);
    const view = new DataView(stereo.buffer);
    stereo.set(encodeWav(new Int16Array(0), 8000).subarray(0, 44));
    view.setUint16(22, 2, true); // two channels
    view.setUint32(28, 8000 * 4, true);
    view.setUint16(32, 4, true);
    view.setUint32(40, samples.length * 4, true);
    view.setUint32(4, 36 + samples.length * 4, true);
    samples.forEach((v, i) => {
      view.setInt16(44 + i * 4, v, true);
      view.setInt16(46 + i * 4, v, true);
    });
    expect(decodeWav(stereo).samples).toEqual(mono.samples);
  });

  test('samples are little-endian signed 16-bit', () => {
    const body = encodeWav(Int16Array.from([1, -2, 32767, -32768]), 8000);
    expect([...body.subarray(44)]).toEqual([1, 0, 0xfe, 0xff, 0xff, 0x7f, 0x00, 0x80]);
  });

  test('samples from a view into a larger buffer are written from the view only', () => {
    const big = Int16Array.from([9, 9, 9, 1, -2, 32767, -32768, 9]);
    const body = encodeWav(big.subarray(3, 7), 8000);
    expect(body.length).toBe(44 + 8);
    expect([...body.subarray(44)]).toEqual([1, 0, 0xfe, 0xff, 0xff, 0x7f, 0x00, 0x80]);
    expect(new DataView(body.buffer).getUint32(40, true)).toBe(8);
  });

  test('reads other WAV shapes: stereo, 8-bit, float, unknown data size', () => {
    const stereo = new Uint8Array(44 + 8);
    stereo.set(encodeWav(new Int16Array(0), 8000).subarray(0, 44));
    const view = new DataView(stereo.buffer);
    view.setUint16(22, 2, true); // two channels
    view.setUint32(40, 0xffffffff, true); // size left unknown by a streaming writer
    view.setInt16(44, 1000, true);
    view.setInt16(46, 3000, true);
    view.setInt16(48, -1000, true);
    view.setInt16(50, -3000, true);
    expect([...decodeWav(stereo).samples]).toEqual([2000, -2000]);

    const float = new Uint8Array(44 + 8);
    float.set(encodeWav(new Int16Array(0), 16_000).subarray(0, 44));
    const fv = new DataView(float.buffer);
    fv.setUint16(20, 3, true);
    fv.setUint16(34, 32, true);
    fv.setUint32(40, 8, true);
    fv.setFloat32(44, 0.5, true);
    fv.setFloat32(48, -1, true);
    expect([...decodeWav(float).samples]).toEqual([16384, -32768]);

    const eight = new Uint8Array(44 + 2);
    eight.set(encodeWav(new Int16Array(0), 8000).subarray(0, 44));
    const ev = new DataView(eight.buffer);
    ev.setUint16(34, 8, true);
    ev.setUint32(40, 2, true);
    eight[44] = 128;
    eight[45] = 255;
    expect([...decodeWav(eight).samples]).toEqual([0, 32512]);
  });

  test('what is not a WAV is a BAD_AUDIO SpeechError', () => {
    for (const bytes of [
      new Uint8Array(0),
      new TextEncoder().encode('<html>nope</html>'),
      encodeWav(new Int16Array(4), 8000).subarray(0, 30), // cut inside fmt
      (() => {
        const b = encodeWav(new Int16Array(4), 8000);
        new DataView(b.buffer).setUint16(20, 85, true); // MPEG in a WAV: not PCM
        return b;
      })(),
    ]) {
      expect(() => decodeWav(bytes)).toThrow(expect.objectContaining({ reason: 'BAD_AUDIO' }));
    }
  });
});

describe('resampling', () => {
  test('keeps a tone in the band at its pitch and level, 22050 Hz to 8 and 16 kHz', () => {
    const source = tone(1000, 22_050, 1);
    for (const rate of [8000, 16_000]) {
      const out = resampleSpeech(source, 22_050, rate);
      expect(out.length).toBe(rate);
      expect(amplitudeAt(out, rate, 1000)).toBeGreaterThan(9_500);
      expect(amplitudeAt(out, rate, 1000)).toBeLessThan(10_500);
      // not a neighbouring pitch: sped up or slowed down, the energy would sit elsewhere
      expect(amplitudeAt(out, rate, 1100)).toBeLessThan(1_000);
    }
  });

  test('removes what 8 kHz cannot carry instead of folding it back', () => {
    // 6 kHz is above 8 kHz's Nyquist frequency (4 kHz); dropped samples would alias it to 2 kHz
    const source = tone(6000, 22_050, 1);
    const out = resampleSpeech(source, 22_050, 8000);
    expect(amplitudeAt(out, 8000, 2000)).toBeLessThan(100);
    // the naive way (nearest sample) does fold it back: the check above can fail
    const naive = Int16Array.from({ length: 8000 }, (_, i) => source[Math.floor(i * 2.75625)]!);
    expect(amplitudeAt(naive, 8000, 2000)).toBeGreaterThan(5_000);
  });

  test('upsamples too, and a constant stays constant', () => {
    const out = resampleSpeech(tone(500, 8000, 1), 8000, 16_000);
    expect(out.length).toBe(16_000);
    expect(amplitudeAt(out, 16_000, 500)).toBeGreaterThan(9_500);
    const flat = resampleSpeech(new Int16Array(1000).fill(1234), 22_050, 8000);
    expect(new Set(flat)).toEqual(new Set([1234]));
  });
});

describe('fast resampling against the plain resampler', () => {
  // a fixed-seed generator, so a failure can be reproduced
  let seed = 12_345;
  const random = () => {
    seed = (Math.imul(seed, 1_103_515_245) + 12_345) >>> 0;
    return seed / 2 ** 32;
  };
  const inputs: Record<string, Int16Array> = {
    noise: Int16Array.from({ length: 4000 }, () => Math.round((random() * 2 - 1) * 32_767)),
    sine: tone(1234, 22_050, 0.2, 20_000),
    silence: new Int16Array(2000),
    // full scale at the Nyquist frequency: outputs sit near -0.5, right on a rounding boundary
    extremes: Int16Array.from({ length: 2000 }, (_, i) => (i % 2 ? 32_767 : -32_768)),
    ...Object.fromEntries(
      [0, 1, 2, 3, 4, 5].map((n) => [
        `length ${n}`,
        Int16Array.from({ length: n }, (_, i) => 1000 * (i + 1) * (i % 2 ? -1 : 1)),
      ]),
    ),
  };
  const pairs = [
    [22_050, 8000],
    [22_050, 16_000],
    [16_000, 8000],
    [8000, 16_000],
    [44_100, 8000],
    [22_050, 7999], // coprime: 7999 phases, the plain path
  ] as const;

  for (const [from, to] of pairs) {
    test(`${from} Hz to ${to} Hz: within 1 LSB of the plain path, every sample`, () => {
      for (const [name, input] of Object.entries(inputs)) {
        const fast = resampleSpeech(input, from, to);
        const plain = resampleSpeechPlain(input, from, to);
        expect(fast.length, name).toBe(plain.length);
        let worst = 0;
        for (let i = 0; i < fast.length; i++)
          worst = Math.max(worst, Math.abs(fast[i]! - plain[i]!));
        // the same weighted terms, summed in another order (and pre-divided away from the
        // edges): only a result lying within rounding error of .5 can round the other way
        expect(worst, name).toBeLessThanOrEqual(1);
      }
    });
  }

  test('a constant stays constant to the very edges, at every rate pair', () => {
    for (const [from, to] of pairs) {
      for (const length of [1, 7, 300]) {
        const out = resampleSpeech(new Int16Array(length).fill(-4321), from, to);
        expect(out.length).toBe(Math.round((length * to) / from));
        expect([...new Set(out)]).toEqual(out.length ? [-4321] : []);
      }
    }
  });

  test('the same rate is a copy; a bad rate is a RangeError', () => {
    const input = Int16Array.from([1, 2, 3]);
    const out = resampleSpeech(input, 8000, 8000);
    expect(out).toEqual(input);
    expect(out).not.toBe(input);
    expect(() => resampleSpeech(input, 0, 8000)).toThrow(RangeError);
    expect(() => resampleSpeech(input, 8000, -1)).toThrow(RangeError);
  });
});

describe('trimming silence', () => {
  const rate = 8000;
  /** `lead` silent samples, then the sound, then `trail` silent ones (quiet, not zero). */
  const padded = (lead: number, sound: number[], trail: number) =>
    Int16Array.from([
      ...Array.from({ length: lead }, (_, i) => (i % 2 ? 40 : -40)),
      ...sound,
      ...Array.from({ length: trail }, (_, i) => (i % 2 ? 99 : -99)),
    ]);

  test('keeps keepMs of silence at each end, and the sound with its inner pauses', () => {
    const sound = [500, 0, 0, 0, -700, 3, 200];
    // 10 ms at 8 kHz = 80 samples either side
    const out = trimSilence(padded(1000, sound, 500), rate, 10);
    expect(out.length).toBe(80 + sound.length + 80);
    expect([...out.subarray(80, 80 + sound.length)]).toEqual(sound);
    expect(out.subarray(0, 80).every((s) => Math.abs(s) < SILENCE_THRESHOLD)).toBe(true);
    expect(out.subarray(80 + sound.length).every((s) => Math.abs(s) < SILENCE_THRESHOLD)).toBe(
      true,
    );
  });

  test('keeps less than keepMs where there is less; keepMs 0 cuts to the sound', () => {
    expect(trimSilence(padded(5, [1000], 3), rate, 10).length).toBe(5 + 1 + 3);
    expect([...trimSilence(padded(50, [1000, -2000], 50), rate, 0)]).toEqual([1000, -2000]);
  });

  test('the threshold: |99| is silence, 100 and -100 are not', () => {
    expect([...trimSilence(Int16Array.from([99, -99, 100, 0, -100, 99]), rate, 0)]).toEqual([
      100, 0, -100,
    ]);
    expect([...trimSilence(Int16Array.from([-32_768, 0]), rate, 0)]).toEqual([-32_768]);
  });

  test('all silence, or nothing, gives an empty array; the result is a copy', () => {
    expect(trimSilence(padded(400, [], 400), rate, 50).length).toBe(0);
    expect(trimSilence(new Int16Array(0), rate, 50).length).toBe(0);
    const input = Int16Array.from([1000, 2000]);
    const out = trimSilence(input, rate, 10);
    expect(out).toEqual(input);
    out[0] = 0;
    expect(input[0]).toBe(1000);
    expect(() => trimSilence(input, 0, 10)).toThrow(RangeError);
    expect(() => trimSilence(input, rate, -1)).toThrow(RangeError);
  });
});

describe('joining WAV pieces', () => {
  const a = tone(440, 8000, 0.1);
  const b = Int16Array.from([1, -2, 3]);
  const c = tone(660, 8000, 0.05);

  test('one header with the summed sizes, then each piece in order', () => {
    const parts = [
      encodeWav(a, 8000),
      encodeWav(new Int16Array(0), 8000),
      encodeWav(b, 8000),
      encodeWav(c, 8000),
    ];
    const joined = joinWav(parts);
    // byte for byte what encoding the whole at once writes, header included
    expect(
      Buffer.from(joined).equals(Buffer.from(encodeWav(Int16Array.from([...a, ...b, ...c]), 8000))),
    ).toBe(true);
    expect(joinedWavLength(parts.map((p) => p.length))).toBe(joined.length);
    const back = decodeWav(joined);
    expect(back.sampleRate).toBe(8000);
    expect(back.samples.length).toBe(a.length + b.length + c.length);
  });

  test('pieces at different rates, or not as encodeWav writes them, are BAD_AUDIO', () => {
    const bad = expect.objectContaining({ reason: 'BAD_AUDIO' });
    const ok = encodeWav(b, 8000);
    expect(() => joinWav([ok, encodeWav(b, 16_000)])).toThrow(bad);
    expect(() =>
      joinWav([ok, new TextEncoder().encode('not a wav at all, not at all, not at all')]),
    ).toThrow(bad);
    expect(() => joinWav([ok, ok.subarray(0, 40)])).toThrow(bad);
    const stereo = encodeWav(b, 8000);
    new DataView(stereo.buffer).setUint16(22, 2, true);
    expect(() => joinWav([ok, stereo])).toThrow(bad);
    expect(() => joinWav([ok, ok.subarray(0, ok.length - 2)])).toThrow(bad); // sizes now lie
    const float = encodeWav(b, 8000);
    new DataView(float.buffer).setUint16(20, 3, true);
    expect(() => joinWav([float, ok])).toThrow(bad);
    expect(() => joinWav([])).toThrow(RangeError);
  });
});

describe('MP3', () => {
  /** Walks MPEG-2 Layer III frames from the first byte to the last. */
  function frames(body: Uint8Array) {
    const found: { bitrate: number; rate: number; length: number }[] = [];
    let at = 0;
    while (at < body.length) {
      const b1 = body[at + 1]!;
      const b2 = body[at + 2]!;
      expect(body[at]).toBe(0xff); // frame sync: eleven 1 bits
      expect(b1 & 0xe0).toBe(0xe0);
      expect((b1 >> 3) & 3).toBe(2); // version 2: MPEG-2 (16, 22.05, 24 kHz)
      expect((b1 >> 1) & 3).toBe(1); // layer III
      const bitrate = [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160][b2 >> 4]!;
      const rate = [22_050, 24_000, 16_000][(b2 >> 2) & 3]!;
      const padding = (b2 >> 1) & 1;
      // MPEG-2 layer III: 576 samples a frame, so 72 * bitrate / rate bytes (+ padding)
      const length = Math.floor((72 * bitrate * 1000) / rate) + padding;
      found.push({ bitrate, rate, length });
      at += length;
    }
    expect(at).toBe(body.length); // the last frame ends at the last byte
    return found;
  }

  test('mono 16 kHz 32 kbit/s frames from sync to sync, as long as the audio', () => {
    const seconds = 3;
    const { body, contentType, extension } = encodeAudio(tone(440, 22_050, seconds), 22_050, 'mp3');
    expect(contentType).toBe('audio/mpeg');
    expect(extension).toBe('mp3');
    const found = frames(body);
    expect(new Set(found.map((f) => f.bitrate))).toEqual(new Set([MP3_BITRATE_KBPS]));
    expect(new Set(found.map((f) => f.rate))).toEqual(new Set([MP3_SAMPLE_RATE]));
    // mono: the channel mode bits (the fourth byte's top two) are 11
    expect(body[3]! >> 6).toBe(3);
    const decodable = (found.length * 576) / MP3_SAMPLE_RATE;
    // the encoder adds its delay and pads the last frame: a little over, never under
    expect(decodable).toBeGreaterThanOrEqual(seconds);
    expect(decodable).toBeLessThan(seconds + 0.2);
    // constant bitrate: the size follows from the length
    expect(body.length).toBeGreaterThan(((seconds * MP3_BITRATE_KBPS * 1000) / 8) * 0.95);
  });

  test('different audio, different files; empty audio is still a valid file', () => {
    const a = encodeMp3(tone(440, 16_000, 1), 16_000);
    const b = encodeMp3(tone(660, 16_000, 1), 16_000);
    expect(Buffer.from(a).equals(Buffer.from(b))).toBe(false);
    const empty = encodeMp3(new Int16Array(0), 16_000);
    expect(empty.length).toBeGreaterThan(0);
    expect(frames(empty).length).toBeGreaterThan(0);
  });

  test('countMp3Frames walks the same frames', () => {
    const body = encodeMp3(tone(440, 16_000, 1), 16_000);
    expect(countMp3Frames(body)).toBe(frames(body).length);
    const bad = expect.objectContaining({ reason: 'BAD_AUDIO' });
    expect(() => countMp3Frames(body.subarray(0, body.length - 1))).toThrow(bad); // cut short
    expect(() => countMp3Frames(new TextEncoder().encode('<html>'))).toThrow(bad);
  });

  /** An ID3v2.4 tag with a footer (flag 0x10), `size` bytes of frames inside. */
  function id3v2(size: number): Uint8Array {
    const tag = new Uint8Array(10 + size + 10);
    tag.set([0x49, 0x44, 0x33, 4, 0, 0x10, 0, 0, size >> 7, size & 0x7f]);
    tag.fill(0xff, 10, 10 + size); // looks like frame sync: must not be taken for audio
    tag.set([0x33, 0x44, 0x49, 4, 0, 0x10, 0, 0, size >> 7, size & 0x7f], 10 + size);
    return tag;
  }
  /** A 128-byte ID3v1 trailer. */
  const id3v1 = () => {
    const tag = new Uint8Array(128).fill(0xff);
    tag.set([0x54, 0x41, 0x47]);
    return tag;
  };
  const concat = (...arrays: Uint8Array[]) => Uint8Array.from(arrays.flatMap((a) => [...a]));

  test('joined MP3 pieces walk frame by frame, as many frames as the pieces had', () => {
    const parts = [0.4, 1, 0.1].map((s, i) => encodeMp3(tone(300 + 200 * i, 16_000, s), 16_000));
    const joined = joinMp3(parts);
    expect(frames(joined).length).toBe(parts.reduce((n, p) => n + frames(p).length, 0));
    expect(joined.length).toBe(parts.reduce((n, p) => n + p.length, 0));
    expect(countMp3Frames(joined)).toBe(frames(joined).length);
  });

  test('ID3v2 tags at the start and ID3v1 trailers at the end of pieces are dropped', () => {
    const a = encodeMp3(tone(440, 16_000, 0.3), 16_000);
    const b = encodeMp3(tone(660, 16_000, 0.2), 16_000);
    const tagged = joinMp3([concat(id3v2(300), a, id3v1()), concat(id3v2(5), b)]);
    expect(Buffer.from(tagged).equals(Buffer.from(concat(a, b)))).toBe(true);
    expect(frames(tagged).length).toBe(frames(a).length + frames(b).length);
    expect(countMp3Frames(concat(id3v2(300), a, id3v1()))).toBe(frames(a).length);
  });

  test('pieces that are not MP3, or not at one rate, are BAD_AUDIO', () => {
    const bad = expect.objectContaining({ reason: 'BAD_AUDIO' });
    const ok = encodeMp3(tone(440, 16_000, 0.2), 16_000);
    expect(() => joinMp3([ok, new TextEncoder().encode('RIFF....WAVE')])).toThrow(bad);
    // 8 kHz is MPEG-2.5: its frames cannot follow 16 kHz ones in one stream
    expect(() => joinMp3([ok, encodeMp3(tone(440, 8000, 0.2), 8000)])).toThrow(bad);
    expect(() => joinMp3([])).toThrow(RangeError);
  });
});

test('joinAudio: one piece as it is; WAV formats join as WAV, mp3 as MP3', () => {
  const piece = encodeAudio(tone(440, 22_050, 0.2), 22_050, 'wav8k').body;
  expect(joinAudio('wav8k', [piece])).toBe(piece);
  for (const format of SPEECH_AUDIO_FORMATS) {
    const parts = [0.2, 0.3].map((s) => encodeAudio(tone(440, 22_050, s), 22_050, format).body);
    const joined = joinAudio(format, parts);
    const expected = format === 'mp3' ? joinMp3(parts) : joinWav(parts);
    expect(Buffer.from(joined).equals(Buffer.from(expected)), format).toBe(true);
  }
});

test('every format has a content type and an extension', () => {
  const types = SPEECH_AUDIO_FORMATS.map((f) => {
    const { contentType, extension } = encodeAudio(tone(440, 8000, 0.1), 8000, f);
    return `${f} ${contentType} ${extension}`;
  });
  expect(types).toEqual(['wav8k audio/wav wav', 'wav16k audio/wav wav', 'mp3 audio/mpeg mp3']);
});
