/**
 * Names for rendered prompts. Three of them, for three jobs:
 *
 * - the request hash (SHA-256 over engine, version, language, voice, rate, text and format)
 *   finds a prompt before it is rendered: the same prompt renders once, and a new engine
 *   version renders again;
 * - the content hash (SHA-256 of the encoded audio file's bytes) keys the stored audio: two
 *   requests that sound the same are stored once, and it is the file's `ETag`;
 * - the public id, `HMAC-SHA256(secret, hash)` cut to 144 bits in base64url, is what goes
 *   into `PUBLIC_URL/prompts/{id}.{ext}`. A prompt can carry a person's name, so its URL must
 *   not be derivable from the text: without the secret nobody can compute the id of
 *   "Hello Maria", and 144 bits cannot be guessed.
 *
 * @example
 * const key = speechRequestHash({ engine, lang: 'uk', text: 'Привіт', format: 'mp3' });
 * const hash = audioContentHash(encoded.body);
 * const id = speechPublicId(secret, hash); // 'q9y1V0...' (24 characters)
 * speechIdMatches(secret, hash, id); // true, compared in constant time
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { SpeechAudioFormat } from './audio.ts';

/** What makes two requests render the same file. */
export interface SpeechRequestContent {
  engine: { name: string; version: string };
  lang: string;
  voice?: string;
  rate?: number;
  text: string;
  format: SpeechAudioFormat;
}

/**
 * The request's key: SHA-256, hex. The fields are hashed as one JSON array, so no choice of
 * text can make two different prompts collide by shifting a separator. The language is
 * compared in lower case and the text in Unicode NFC, as neither changes the sound; an
 * unset rate is rate 1.
 */
export function speechRequestHash(content: SpeechRequestContent): string {
  const canonical = JSON.stringify([
    'switchboard-speech-1',
    content.engine.name,
    content.engine.version,
    content.lang.trim().toLowerCase(),
    content.voice ?? null,
    content.rate ?? 1,
    content.text.normalize('NFC'),
    content.format,
  ]);
  return createHash('sha256').update(canonical, 'utf8').digest('hex');
}

/** The audio file's content hash: SHA-256 of its bytes, hex (64 characters). */
export function audioContentHash(body: Uint8Array): string {
  return createHash('sha256').update(body).digest('hex');
}

/** Bytes of HMAC kept in a public id: 144 bits, 24 base64url characters with no padding. */
const PUBLIC_ID_BYTES = 18;
const PUBLIC_ID = /^[A-Za-z0-9_-]{24}$/;

/** The shortest secret accepted: 128 bits. */
const MIN_SECRET_BYTES = 16;

/** The id a prompt is served under; stable for one secret and hash. */
export function speechPublicId(secret: string | Uint8Array, hash: string): string {
  const key = typeof secret === 'string' ? Buffer.from(secret, 'utf8') : secret;
  if (key.length < MIN_SECRET_BYTES) {
    throw new RangeError(`the prompt id secret needs at least ${MIN_SECRET_BYTES} bytes`);
  }
  return createHmac('sha256', key)
    .update(`switchboard-prompt-id\0${hash}`, 'utf8')
    .digest()
    .subarray(0, PUBLIC_ID_BYTES)
    .toString('base64url');
}

/** Whether a string has the shape of a public id (before any lookup). */
export function isSpeechPublicId(value: string): boolean {
  return PUBLIC_ID.test(value);
}

/**
 * Whether `candidate` is the public id of `hash`, compared in constant time, so response
 * timing does not tell how many leading characters of a guess were right.
 */
export function speechIdMatches(
  secret: string | Uint8Array,
  hash: string,
  candidate: string,
): boolean {
  const expected = Buffer.from(speechPublicId(secret, hash), 'utf8');
  const given = Buffer.from(candidate, 'utf8');
  // the length of a public id is no secret: it is the same for every prompt
  if (given.length !== expected.length) return false;
  return timingSafeEqual(given, expected);
}
