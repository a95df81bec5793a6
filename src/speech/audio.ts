/**
 * Rendered speech as files the provider can play: WAV (16-bit PCM, mono, 8 or 16 kHz) and
 * MP3 (mono, 16 kHz, 32 kbit/s), plus reading WAV back (an HTTP speech service answers WAV).
 *
 * Engines speak at their own rate (eSpeak NG: 22050 Hz); `resampleSpeech` brings it to the
 * file's rate with a windowed-sinc filter, which low-passes below the new Nyquist frequency
 * while it interpolates, so nothing above 4 kHz folds back into an 8 kHz file as noise.
 *
 * @example
 * const { body, contentType, extension } = encodeAudio(samples, 22050, 'wav8k');
 * // contentType 'audio/wav', extension 'wav', body: RIFF header + 8 kHz PCM
 */
import { Mp3Encoder } from '@breezystack/lamejs';
import { SpeechError } from './engine.ts';

/** The files a prompt can be served as. */
export type SpeechAudioFormat = 'wav8k' | 'wav16k' | 'mp3';

export const SPEECH_AUDIO_FORMATS: readonly SpeechAudioFormat[] = ['wav8k', 'wav16k', 'mp3'];

/** One encoded prompt, ready to store and serve. */
export interface EncodedSpeech {
  body: Uint8Array;
  contentType: string;
  /** the file name's extension, without the dot */
  extension: string;
}

/**
 * MP3 at 16 kHz, 32 kbit/s: MPEG-2 Layer III. The phone network narrows it to 8 kHz anyway;
 * 16 kHz keeps the consonants clean until then, and 32 kbit/s is transparent for one voice.
 */
export const MP3_SAMPLE_RATE = 16_000;
export const MP3_BITRATE_KBPS = 32;

/** Encodes mono 16-bit samples at `sampleRate` as `format`, resampling as it needs. */
export function encodeAudio(
  samples: Int16Array,
  sampleRate: number,
  format: SpeechAudioFormat,
): EncodedSpeech {
  switch (format) {
    case 'wav8k':
      return {
        body: encodeWav(resampleSpeech(samples, sampleRate, 8000), 8000),
        contentType: 'audio/wav',
        extension: 'wav',
      };
    case 'wav16k':
      return {
        body: encodeWav(resampleSpeech(samples, sampleRate, 16_000), 16_000),
        contentType: 'audio/wav',
        extension: 'wav',
      };
    case 'mp3':
      return {
        body: encodeMp3(resampleSpeech(samples, sampleRate, MP3_SAMPLE_RATE), MP3_SAMPLE_RATE),
        contentType: 'audio/mpeg',
        extension: 'mp3',
      };
  }
}

/** A RIFF/WAVE file of 16-bit PCM, mono: the canonical 44-byte header, then the samples. */
export function encodeWav(samples: Int16Array, sampleRate: number): Uint8Array {
  const dataBytes = samples.length * 2;
  const out = new Uint8Array(44 + dataBytes);
  const view = new DataView(out.buffer);
  const ascii = (offset: number, text: string) => {
    for (let i = 0; i < text.length; i++) out[offset + i] = text.charCodeAt(i);
  };
  ascii(0, 'RIFF');
  view.setUint32(4, 36 + dataBytes, true);
  ascii(8, 'WAVE');
  ascii(12, 'fmt ');
  view.setUint32(16, 16, true); // the fmt chunk's size for plain PCM
  view.setUint16(20, 1, true); // PCM
  view.setUint16(22, 1, true); // mono
  view.setUint32(24, sampleRate, true);
  view.setUint32(28, sampleRate * 2, true); // bytes per second
  view.setUint16(32, 2, true); // bytes per frame
  view.setUint16(34, 16, true); // bits per sample
  ascii(36, 'data');
  view.setUint32(40, dataBytes, true);
  for (let i = 0; i < samples.length; i++) view.setInt16(44 + i * 2, samples[i]!, true);
  return out;
}

/**
 * Reads a WAV file into mono 16-bit samples: PCM of 8, 16, 24 or 32 bits or 32-bit float,
 * any number of channels (averaged). A data chunk whose size says "unknown" (0 or
 * 0xFFFFFFFF, as streaming writers leave it) runs to the end of the file.
 */
export function decodeWav(bytes: Uint8Array): { samples: Int16Array; sampleRate: number } {
  const bad = (why: string) =>
    new SpeechError('BAD_AUDIO', `the audio is not a usable WAV: ${why}`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const tag = (offset: number) =>
    String.fromCharCode(...bytes.subarray(offset, Math.min(offset + 4, bytes.length)));
  if (bytes.length < 12 || tag(0) !== 'RIFF' || tag(8) !== 'WAVE') {
    throw bad('it does not start with a RIFF/WAVE header');
  }
  let format: { code: number; channels: number; rate: number; bits: number } | undefined;
  let offset = 12;
  while (offset + 8 <= bytes.length) {
    const id = tag(offset);
    let size = view.getUint32(offset + 4, true);
    const body = offset + 8;
    if (id === 'fmt ') {
      if (size < 16 || body + size > bytes.length) throw bad('its fmt chunk is cut short');
      let code = view.getUint16(body, true);
      // WAVE_FORMAT_EXTENSIBLE: the real format is the first two bytes of the sub-format GUID
      if (code === 0xfffe && size >= 40) code = view.getUint16(body + 24, true);
      format = {
        code,
        channels: view.getUint16(body + 2, true),
        rate: view.getUint32(body + 4, true),
        bits: view.getUint16(body + 14, true),
      };
    } else if (id === 'data') {
      if (!format) throw bad('its data comes before its fmt chunk');
      if (size === 0 || size === 0xffffffff || body + size > bytes.length) {
        size = bytes.length - body;
      }
      return {
        samples: pcmToMono(bytes.subarray(body, body + size), format, bad),
        ...rate(format),
      };
    }
    offset = body + size + (size % 2); // chunks are padded to an even length
  }
  throw bad('it has no data chunk');

  function rate(f: { rate: number }) {
    if (f.rate < 1000 || f.rate > 384_000) throw bad(`its sample rate ${f.rate} Hz is implausible`);
    return { sampleRate: f.rate };
  }
}

function pcmToMono(
  data: Uint8Array,
  f: { code: number; channels: number; bits: number },
  bad: (why: string) => SpeechError,
): Int16Array {
  const pcm = f.code === 1;
  const float = f.code === 3;
  if (!(pcm && [8, 16, 24, 32].includes(f.bits)) && !(float && f.bits === 32)) {
    throw bad(`format ${f.code} with ${f.bits}-bit samples is not PCM or 32-bit float`);
  }
  if (f.channels < 1) throw bad('it has no channels');
  const width = f.bits / 8;
  const frames = Math.floor(data.length / (width * f.channels));
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  // each sample as a float from -1 to 1
  const read = (at: number): number => {
    if (float) return view.getFloat32(at, true);
    switch (f.bits) {
      case 8:
        return (data[at]! - 128) / 128;
      case 16:
        return view.getInt16(at, true) / 32768;
      case 24:
        return ((view.getUint8(at + 2) << 24) | (view.getUint16(at, true) << 8)) / 2 ** 31;
      default:
        return view.getInt32(at, true) / 2 ** 31;
    }
  };
  const out = new Int16Array(frames);
  for (let i = 0; i < frames; i++) {
    let sum = 0;
    for (let c = 0; c < f.channels; c++) sum += read((i * f.channels + c) * width);
    out[i] = toInt16((sum / f.channels) * 32768);
  }
  return out;
}

function toInt16(value: number): number {
  if (Number.isNaN(value)) return 0; // a float file can hold NaN
  return Math.max(-32768, Math.min(32767, Math.round(value)));
}

// the resampler's kernel: a Blackman-windowed sinc reaching ZERO_CROSSINGS zero crossings
// either side, tabulated at TABLE_STEPS points per crossing and interpolated linearly
const ZERO_CROSSINGS = 16;
const TABLE_STEPS = 512;
let kernelTable: Float64Array | undefined;

function kernel(): Float64Array {
  if (kernelTable) return kernelTable;
  const table = new Float64Array(ZERO_CROSSINGS * TABLE_STEPS + 2);
  for (let i = 0; i < table.length; i++) {
    const x = i / TABLE_STEPS; // in zero crossings
    const sinc = x === 0 ? 1 : Math.sin(Math.PI * x) / (Math.PI * x);
    const w =
      x >= ZERO_CROSSINGS
        ? 0
        : 0.42 +
          0.5 * Math.cos((Math.PI * x) / ZERO_CROSSINGS) +
          0.08 * Math.cos((2 * Math.PI * x) / ZERO_CROSSINGS);
    table[i] = sinc * w;
  }
  kernelTable = table;
  return table;
}

/**
 * Resamples mono 16-bit audio by band-limited interpolation: each output sample is the input
 * convolved with a windowed sinc whose cutoff is the lower of the two Nyquist frequencies
 * (less 5% for the filter's transition band). Going down, that is the anti-aliasing
 * low-pass; going up, it interpolates without images. Weights are normalised per sample,
 * so a constant stays constant and the edges do not dip.
 */
export function resampleSpeech(samples: Int16Array, fromRate: number, toRate: number): Int16Array {
  if (fromRate === toRate) return samples.slice();
  if (!(fromRate > 0 && toRate > 0)) throw new RangeError('sample rates must be positive');
  const table = kernel();
  const ratio = fromRate / toRate; // input samples per output sample
  // the cutoff relative to the input's Nyquist frequency
  const cutoff = Math.min(1, toRate / fromRate) * 0.95;
  const reach = ZERO_CROSSINGS / cutoff; // how many input samples either side matter
  const outLength = Math.max(0, Math.round(samples.length / ratio));
  const out = new Int16Array(outLength);
  for (let n = 0; n < outLength; n++) {
    const t = n * ratio; // where this output sample falls on the input's time line
    const first = Math.max(0, Math.ceil(t - reach));
    const last = Math.min(samples.length - 1, Math.floor(t + reach));
    let sum = 0;
    let weights = 0;
    for (let k = first; k <= last; k++) {
      const position = Math.abs(t - k) * cutoff * TABLE_STEPS;
      const index = Math.floor(position);
      if (index >= table.length - 1) continue;
      const frac = position - index;
      const w = table[index]! + (table[index + 1]! - table[index]!) * frac;
      sum += samples[k]! * w;
      weights += w;
    }
    out[n] = weights > 0 ? toInt16(sum / weights) : 0;
  }
  return out;
}

/** MP3 (MPEG Layer III), mono, constant MP3_BITRATE_KBPS. */
export function encodeMp3(samples: Int16Array, sampleRate: number): Uint8Array {
  const encoder = new Mp3Encoder(1, sampleRate, MP3_BITRATE_KBPS);
  const parts: Uint8Array[] = [];
  // lamejs hands back Int8Array views; take their bytes as they are
  const keep = (chunk: ArrayLike<number> & { buffer: ArrayBufferLike; byteOffset: number }) => {
    if (chunk.length > 0) {
      parts.push(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.length).slice());
    }
  };
  const block = 1152 * 8;
  for (let i = 0; i < samples.length; i += block) {
    keep(encoder.encodeBuffer(samples.subarray(i, i + block)));
  }
  keep(encoder.flush());
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}
