/**
 * The files a provider plays: WAV headers checked byte by byte against the RIFF/WAVE spec,
 * resampling that keeps a tone's pitch and level and keeps what the new rate cannot carry from
 * folding back as noise, and MP3 frames walked header by header.
 */
import { describe, expect, test } from 'vitest';
import {
  decodeWav,
  encodeAudio,
  encodeMp3,
  encodeWav,
  MP3_BITRATE_KBPS,
  MP3_SAMPLE_RATE,
  resampleSpeech,
  SPEECH_AUDIO_FORMATS,
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

  test('samples are little-endian signed 16-bit', () => {
    const body = encodeWav(Int16Array.from([1, -2, 32767, -32768]), 8000);
    expect([...body.subarray(44)]).toEqual([1, 0, 0xfe, 0xff, 0xff, 0x7f, 0x00, 0x80]);
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
});

test('every format has a content type and an extension', () => {
  const types = SPEECH_AUDIO_FORMATS.map((f) => {
    const { contentType, extension } = encodeAudio(tone(440, 8000, 0.1), 8000, f);
    return `${f} ${contentType} ${extension}`;
  });
  expect(types).toEqual(['wav8k audio/wav wav', 'wav16k audio/wav wav', 'mp3 audio/mpeg mp3']);
});
