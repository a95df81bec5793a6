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
  if (LITTLE_ENDIAN) {
    // the samples' bytes are already in file order: one block copy
    out.set(new Uint8Array(samples.buffer, samples.byteOffset, dataBytes), 44);
  } else {
    for (let i = 0; i < samples.length; i++) view.setInt16(44 + i * 2, samples[i]!, true);
  }
  return out;
}

/** Whether typed arrays on this host store numbers little-endian, as WAV does. */
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/**
 * Reads a WAV file into mono 16-bit samples: PCM of 8, 16, 24 or 32 bits or 32-bit float,
 * any number of channels (averaged). A data chunk whose size says "unknown" (0 or
 * 0xFFFFFFFF, as streaming writers leave it) runs to the end of the file. `view`: 16-bit mono
 * samples come back as a view of `bytes` rather than a copy, for a caller that copies what it keeps.
 */
export function decodeWav(
  bytes: Uint8Array,
  options: { view?: boolean } = {},
): { samples: Int16Array; sampleRate: number } {
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
        samples: pcmToMono(bytes.subarray(body, body + size), format, bad, options.view === true),
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
  asView: boolean,
): Int16Array {
  const pcm = f.code === 1;
  const float = f.code === 3;
  if (!(pcm && [8, 16, 24, 32].includes(f.bits)) && !(float && f.bits === 32)) {
    throw bad(`format ${f.code} with ${f.bits}-bit samples is not PCM or 32-bit float`);
  }
  if (f.channels < 1) throw bad('it has no channels');
  const width = f.bits / 8;
  const frames = Math.floor(data.length / (width * f.channels));
  // what eSpeak NG writes (16-bit mono PCM): the bytes are the samples, copied in one go on a
  // little-endian host (test/speech/audio.test.ts holds it to the general path)
  if (pcm && f.bits === 16 && f.channels === 1 && LITTLE_ENDIAN) {
    // view: the caller copies what it keeps (eSpeak NG's batch, cut into pieces at once)
    if (asView && data.byteOffset % 2 === 0) {
      return new Int16Array(data.buffer, data.byteOffset, frames);
    }
    const out = new Int16Array(frames);
    new Uint8Array(out.buffer).set(data.subarray(0, frames * 2));
    return out;
  }
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
// either side, tabulated at TABLE_STEPS points per crossing and interpolated linearly. Eight
// (47 taps from 22 050 Hz to 8 kHz) keep a phone line's band clean at half the CPU of 16,
// which took a personalised call start from ~3.0x to ~2.7x a recorded one's (bench part (i))
const ZERO_CROSSINGS = 8;
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
 * The reference resampler, kept to check `resampleSpeech` against: it evaluates the kernel
 * afresh for every tap of every output sample, which is simple and slow.
 *
 * Resamples mono 16-bit audio by band-limited interpolation: each output sample is the input
 * convolved with a windowed sinc whose cutoff is the lower of the two Nyquist frequencies
 * (less 5% for the filter's transition band). Going down, that is the anti-aliasing
 * low-pass; going up, it interpolates without images. Weights are normalised per sample,
 * so a constant stays constant and the edges do not dip.
 */
export function resampleSpeechPlain(
  samples: Int16Array,
  fromRate: number,
  toRate: number,
): Int16Array {
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

/**
 * Resamples as `resampleSpeechPlain` does (same kernel, cutoff, length and edge handling), but
 * polyphase: when toRate/fromRate reduces to L/M with at most MAX_PHASES phases, output sample
 * n sits at input position n*M/L, whose fraction is one of L values, so each phase's weights
 * are computed once and every output sample is one dot product. Other rate pairs (non-integer,
 * or as coprime as 22050 to 7999) take the plain path. Results agree with the plain path to
 * within 1 LSB (only the rounding of floating-point sums can differ).
 */
export function resampleSpeech(samples: Int16Array, fromRate: number, toRate: number): Int16Array {
  if (fromRate === toRate) return samples.slice();
  if (!(fromRate > 0 && toRate > 0)) throw new RangeError('sample rates must be positive');
  const bank = polyphase(fromRate, toRate);
  if (!bank) return resampleSpeechPlain(samples, fromRate, toRate);
  const { phases, step, first, taps, raw, normalised } = bank;
  const length = samples.length;
  const outLength = Math.max(0, Math.round(length / (fromRate / toRate)));
  const out = new Int16Array(outLength);
  const whole = Math.floor(step / phases);
  const rest = step % phases;
  let base = 0; // floor(n * step / phases), kept exact in integers
  let phase = 0; // (n * step) mod phases
  for (let n = 0; n < outLength; n++) {
    const start = base + first;
    const row = phase * taps;
    if (start >= 0 && start + taps <= length) {
      // two running sums: they let the adds overlap (about 10% faster than one)
      let a = 0;
      let b = 0;
      let j = 0;
      for (; j + 1 < taps; j += 2) {
        a += samples[start + j]! * normalised[row + j]!;
        b += samples[start + j + 1]! * normalised[row + j + 1]!;
      }
      if (j < taps) a += samples[start + j]! * normalised[row + j]!;
      out[n] = toInt16(a + b);
    } else {
      // near an edge: only the taps that fall on samples count, normalised by their own sum
      const lo = Math.max(0, -start);
      const hi = Math.min(taps, length - start);
      let sum = 0;
      let weights = 0;
      for (let j = lo; j < hi; j++) {
        const w = raw[row + j]!;
        sum += samples[start + j]! * w;
        weights += w;
      }
      out[n] = weights > 0 ? toInt16(sum / weights) : 0;
    }
    base += whole;
    phase += rest;
    if (phase >= phases) {
      phase -= phases;
      base++;
    }
  }
  return out;
}

/** More phases than this and the weight table outgrows its use (160 phases: ~120 KB). */
const MAX_PHASES = 1024;

interface Polyphase {
  /** L: output samples per period */
  phases: number;
  /** M: input samples per period */
  step: number;
  /** tap 0's input index relative to floor(output position) */
  first: number;
  /** weights per phase, zero where a phase's reach ends sooner */
  taps: number;
  /** phases * taps kernel values */
  raw: Float64Array;
  /** the same, each phase divided by its sum (for output samples clear of the edges) */
  normalised: Float64Array;
}

// weight banks by "from:to": prompts use a couple of rate pairs, and building a bank costs about
// as much as resampling a second of audio; cleared when full so odd rates cannot grow it forever
const polyphaseCache = new Map<string, Polyphase>();
const POLYPHASE_CACHE_SIZE = 16;

function polyphase(fromRate: number, toRate: number): Polyphase | undefined {
  if (!Number.isSafeInteger(fromRate) || !Number.isSafeInteger(toRate)) return undefined;
  const divisor = gcd(fromRate, toRate);
  const phases = toRate / divisor;
  const step = fromRate / divisor;
  if (phases > MAX_PHASES) return undefined;
  const key = `${fromRate}:${toRate}`;
  const cached = polyphaseCache.get(key);
  if (cached) return cached;
  const table = kernel();
  const cutoff = Math.min(1, toRate / fromRate) * 0.95; // as resampleSpeechPlain
  const reach = ZERO_CROSSINGS / cutoff;
  const first = Math.ceil(-reach);
  const taps = Math.floor(reach + 1) - first + 1; // offsets first..floor(reach + 1) cover every phase
  const raw = new Float64Array(phases * taps);
  const normalised = new Float64Array(phases * taps);
  for (let p = 0; p < phases; p++) {
    const frac = p / phases;
    // the offsets resampleSpeechPlain visits for this fraction
    const lo = Math.ceil(frac - reach);
    const hi = Math.floor(frac + reach);
    let total = 0;
    for (let j = lo; j <= hi; j++) {
      const position = Math.abs(frac - j) * cutoff * TABLE_STEPS;
      const index = Math.floor(position);
      if (index >= table.length - 1) continue;
      const w = table[index]! + (table[index + 1]! - table[index]!) * (position - index);
      raw[p * taps + j - first] = w;
      total += w;
    }
    for (let i = p * taps; i < (p + 1) * taps; i++) normalised[i] = raw[i]! / total;
  }
  const bank = { phases, step, first, taps, raw, normalised };
  if (polyphaseCache.size >= POLYPHASE_CACHE_SIZE) polyphaseCache.clear();
  polyphaseCache.set(key, bank);
  return bank;
}

function gcd(a: number, b: number): number {
  while (b !== 0) [a, b] = [b, a % b];
  return a;
}

/** Below this absolute amplitude (about -50 dBFS) a sample counts as silence. */
export const SILENCE_THRESHOLD = 100;

/**
 * Cuts leading and trailing near-silence (|sample| < SILENCE_THRESHOLD), keeping at most
 * `keepMs` of it at each end, so pieces rendered apart join with a short, natural gap.
 * All-silent (or empty) input gives an empty array. Always a copy.
 */
export function trimSilence(samples: Int16Array, sampleRate: number, keepMs: number): Int16Array {
  if (!(sampleRate > 0) || !(keepMs >= 0)) {
    throw new RangeError('the sample rate must be positive and keepMs not negative');
  }
  const loud = (s: number) => s >= SILENCE_THRESHOLD || s <= -SILENCE_THRESHOLD;
  let first = 0;
  while (first < samples.length && !loud(samples[first]!)) first++;
  if (first === samples.length) return new Int16Array(0);
  let last = samples.length - 1;
  while (!loud(samples[last]!)) last--;
  const keep = Math.round((keepMs * sampleRate) / 1000);
  return samples.slice(Math.max(0, first - keep), Math.min(samples.length, last + 1 + keep));
}

/** Joins encoded pieces of one prompt into one file of `format`; one piece comes back as is. */
export function joinAudio(format: SpeechAudioFormat, parts: Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0]!;
  switch (format) {
    case 'wav8k':
    case 'wav16k':
      return joinWav(parts);
    case 'mp3':
      return joinMp3(parts);
  }
}

const WAV_HEADER_BYTES = 44;

/**
 * Joins WAVs written by `encodeWav` (canonical 44-byte header, mono 16-bit PCM, one rate): one
 * header with the summed sizes, then each part's samples in order. Anything else, or parts at
 * different rates, is a BAD_AUDIO SpeechError.
 */
export function joinWav(parts: Uint8Array[]): Uint8Array {
  if (parts.length === 0) throw new RangeError('there are no parts to join');
  let rate: number | undefined;
  parts.forEach((part, i) => {
    const partRate = canonicalWavRate(part, i);
    if (rate !== undefined && partRate !== rate) {
      throw new SpeechError(
        'BAD_AUDIO',
        `WAV part ${i} is at ${partRate} Hz, the ones before it at ${rate} Hz`,
      );
    }
    rate = partRate;
  });
  const length = joinedWavLength(parts.map((p) => p.length));
  const out = new Uint8Array(length);
  out.set(parts[0]!.subarray(0, WAV_HEADER_BYTES));
  const view = new DataView(out.buffer);
  view.setUint32(4, length - 8, true);
  view.setUint32(40, length - WAV_HEADER_BYTES, true);
  let at = WAV_HEADER_BYTES;
  for (const part of parts) {
    out.set(part.subarray(WAV_HEADER_BYTES), at);
    at += part.length - WAV_HEADER_BYTES;
  }
  return out;
}

/**
 * The byte length `joinWav` gives for parts of these byte lengths, so a server can send
 * Content-Length before it joins (or while it streams the parts after one header).
 */
export function joinedWavLength(partLengths: number[]): number {
  if (partLengths.length === 0) throw new RangeError('there are no parts to join');
  let length = WAV_HEADER_BYTES;
  for (const n of partLengths) {
    if (!(Number.isInteger(n) && n >= WAV_HEADER_BYTES)) {
      throw new RangeError(`a WAV part of ${n} bytes cannot hold a header`);
    }
    length += n - WAV_HEADER_BYTES;
  }
  // RIFF sizes are 32-bit: the whole file less 8 bytes must fit
  if (length - 8 > 0xffffffff) throw new SpeechError('BAD_AUDIO', 'the joined WAV is over 4 GB');
  return length;
}

/** The sample rate of a WAV laid out exactly as encodeWav writes it, else BAD_AUDIO. */
function canonicalWavRate(part: Uint8Array, index: number): number {
  const bad = (why: string) =>
    new SpeechError('BAD_AUDIO', `WAV part ${index} is not a mono 16-bit PCM WAV: ${why}`);
  if (part.length < WAV_HEADER_BYTES) throw bad('it is shorter than a header');
  const view = new DataView(part.buffer, part.byteOffset, part.byteLength);
  const tag = (at: number) => String.fromCharCode(...part.subarray(at, at + 4));
  if (tag(0) !== 'RIFF' || tag(8) !== 'WAVE' || tag(12) !== 'fmt ' || tag(36) !== 'data') {
    throw bad('its header is not the canonical 44 bytes');
  }
  const rate = view.getUint32(24, true);
  if (
    view.getUint32(16, true) !== 16 ||
    view.getUint16(20, true) !== 1 ||
    view.getUint16(22, true) !== 1 ||
    view.getUint32(28, true) !== rate * 2 ||
    view.getUint16(32, true) !== 2 ||
    view.getUint16(34, true) !== 16
  ) {
    throw bad('its format is not mono 16-bit PCM');
  }
  const dataBytes = part.length - WAV_HEADER_BYTES;
  if (
    dataBytes % 2 !== 0 ||
    view.getUint32(40, true) !== dataBytes ||
    view.getUint32(4, true) !== dataBytes + 36
  ) {
    throw bad('its sizes do not match its length');
  }
  return rate;
}

/**
 * Joins MP3s: MPEG audio is a run of self-contained frames, so the parts' frames simply follow
 * one another. An ID3v2 tag at a part's start and an ID3v1 trailer at its end are dropped (they
 * would sit mid-stream). Each part must then start with a Layer III frame, all of one MPEG
 * version, sample rate and channel mode, else BAD_AUDIO.
 */
export function joinMp3(parts: Uint8Array[]): Uint8Array {
  if (parts.length === 0) throw new RangeError('there are no parts to join');
  const bodies: Uint8Array[] = [];
  let shape: string | undefined;
  parts.forEach((part, i) => {
    const body = mp3Frames(part);
    if (body.length === 0) return;
    const header = readMp3Header(body, 0);
    if (!header) throw new SpeechError('BAD_AUDIO', `MP3 part ${i} does not start with a frame`);
    const partShape = `MPEG ${header.version} at ${header.rate} Hz, channel mode ${header.mode}`;
    if (shape !== undefined && partShape !== shape) {
      throw new SpeechError('BAD_AUDIO', `MP3 part ${i} is ${partShape}, the ones before ${shape}`);
    }
    shape = partShape;
    bodies.push(body);
  });
  const out = new Uint8Array(bodies.reduce((n, b) => n + b.length, 0));
  let at = 0;
  for (const body of bodies) {
    out.set(body, at);
    at += body.length;
  }
  return out;
}

/**
 * Counts the MPEG Layer III frames in an MP3, walking header to header from the start (after
 * any ID3v2 tag) to the end (before any ID3v1 trailer). A broken header, or a last frame that
 * runs past the end, is a BAD_AUDIO SpeechError.
 */
export function countMp3Frames(bytes: Uint8Array): number {
  const body = mp3Frames(bytes);
  let count = 0;
  let at = 0;
  while (at < body.length) {
    const header = readMp3Header(body, at);
    if (!header) throw new SpeechError('BAD_AUDIO', `no MP3 frame header at byte ${at}`);
    if (at + header.length > body.length) {
      throw new SpeechError('BAD_AUDIO', `the MP3 frame at byte ${at} is cut short`);
    }
    at += header.length;
    count++;
  }
  return count;
}

/** The bytes of an MP3 between an ID3v2 tag at its start and an ID3v1 trailer at its end. */
function mp3Frames(bytes: Uint8Array): Uint8Array {
  let start = 0;
  // ID3v2: "ID3", version (2 bytes), flags, size in four 7-bit bytes, not counting the
  // 10-byte header nor the 10-byte footer that flag 0x10 announces
  if (
    bytes.length >= 10 &&
    bytes[0] === 0x49 &&
    bytes[1] === 0x44 &&
    bytes[2] === 0x33 &&
    (bytes[6]! | bytes[7]! | bytes[8]! | bytes[9]!) < 0x80
  ) {
    const size = (bytes[6]! << 21) | (bytes[7]! << 14) | (bytes[8]! << 7) | bytes[9]!;
    start = Math.min(bytes.length, 10 + size + (bytes[5]! & 0x10 ? 10 : 0));
  }
  let end = bytes.length;
  // ID3v1: the last 128 bytes, starting "TAG"
  if (
    end - start >= 128 &&
    bytes[end - 128] === 0x54 &&
    bytes[end - 127] === 0x41 &&
    bytes[end - 126] === 0x47
  ) {
    end -= 128;
  }
  return bytes.subarray(start, end);
}

// Layer III bit rates (kbit/s) by index 1..14, for MPEG-1 and for MPEG-2 / 2.5
const MP3_BITRATES_V1 = [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320];
const MP3_BITRATES_V2 = [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160];
const MP3_RATES: Record<string, number[]> = {
  '1': [44_100, 48_000, 32_000],
  '2': [22_050, 24_000, 16_000],
  '2.5': [11_025, 12_000, 8000],
};

/** The Layer III frame header at `at`, or undefined if there is none (or free format). */
function readMp3Header(
  bytes: Uint8Array,
  at: number,
): { version: string; rate: number; mode: number; length: number } | undefined {
  if (at + 4 > bytes.length) return undefined;
  const b1 = bytes[at + 1]!;
  const b2 = bytes[at + 2]!;
  if (bytes[at] !== 0xff || (b1 & 0xe0) !== 0xe0) return undefined; // frame sync: 11 one bits
  const version = ['2.5', undefined, '2', '1'][(b1 >> 3) & 3];
  if (version === undefined || ((b1 >> 1) & 3) !== 1) return undefined; // Layer III only
  const bitrateIndex = b2 >> 4;
  const rateIndex = (b2 >> 2) & 3;
  if (bitrateIndex === 0 || bitrateIndex === 15 || rateIndex === 3) return undefined;
  const bitrate = (version === '1' ? MP3_BITRATES_V1 : MP3_BITRATES_V2)[bitrateIndex]! * 1000;
  const rate = MP3_RATES[version]![rateIndex]!;
  // 1152 samples a frame in MPEG-1, 576 in MPEG-2 and 2.5: bytes = samples / 8 * bitrate / rate
  const perFrame = version === '1' ? 144 : 72;
  const length = Math.floor((perFrame * bitrate) / rate) + ((b2 >> 1) & 1);
  return { version, rate, mode: bytes[at + 3]! >> 6, length };
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
