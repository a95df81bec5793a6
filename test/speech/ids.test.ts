/**
 * Prompt names: the request hash and the audio's content hash are plain SHA-256; the public
 * id is an HMAC of a hash under a secret, so it can be neither read back to the text nor
 * computed from a guessed text without the secret.
 */
import { createHash, createHmac } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import {
  audioContentHash,
  isSpeechPublicId,
  speechIdMatches,
  speechPublicId,
  speechRequestHash,
} from '../../src/speech/ids.ts';

const SECRET = 'a-secret-of-at-least-16-bytes-0001';
const OTHER = 'a-secret-of-at-least-16-bytes-0002';
const engine = { name: 'espeak-ng', version: '1.0.2+1' };

describe('request hash', () => {
  const base = { engine, lang: 'en', text: 'Hello Maria', format: 'wav8k' as const };

  test('every field that changes the sound changes the hash; spelling variants do not', () => {
    const hash = speechRequestHash(base);
    expect(hash).toMatch(/^[0-9a-f]{64}$/);
    for (const changed of [
      { ...base, text: 'Hello Mario' },
      { ...base, lang: 'uk' },
      { ...base, voice: 'belinda' },
      { ...base, rate: 1.5 },
      { ...base, format: 'mp3' as const },
      { ...base, engine: { ...engine, version: '1.0.3+1' } },
      { ...base, engine: { name: 'http', version: engine.version } },
    ]) {
      expect(speechRequestHash(changed)).not.toBe(hash);
    }
    expect(speechRequestHash({ ...base, lang: ' EN ' })).toBe(hash);
    expect(speechRequestHash({ ...base, rate: 1 })).toBe(hash);
    // é as one code point and as e + combining accent sound the same
    expect(speechRequestHash({ ...base, text: 'Caf\u00e9' })).toBe(
      speechRequestHash({ ...base, text: 'Cafe\u0301' }),
    );
  });

  test('no text can shift a separator into a collision', () => {
    const a = speechRequestHash({ ...base, lang: 'en', text: 'x' });
    const b = speechRequestHash({ ...base, lang: 'en","x', text: '' });
    expect(a).not.toBe(b);
  });
});

test('the content hash is SHA-256 of the audio bytes', () => {
  const body = new Uint8Array([1, 2, 3, 4]);
  expect(audioContentHash(body)).toBe(createHash('sha256').update(body).digest('hex'));
  expect(audioContentHash(new Uint8Array([1, 2, 3, 5]))).not.toBe(audioContentHash(body));
});

describe('public id', () => {
  const hashOf = (text: string) => speechRequestHash({ engine, lang: 'en', text, format: 'mp3' });

  test('HMAC-SHA256 of the hash, 144 bits of base64url, stable for one secret', () => {
    const hash = hashOf('Hello Maria, your appointment is on 3 March');
    const id = speechPublicId(SECRET, hash);
    expect(id).toHaveLength(24);
    expect(isSpeechPublicId(id)).toBe(true);
    expect(speechPublicId(SECRET, hash)).toBe(id);
    expect(speechPublicId(Buffer.from(SECRET), hash)).toBe(id);
    const mac = createHmac('sha256', SECRET).update(`switchboard-prompt-id\0${hash}`).digest();
    expect(id).toBe(mac.subarray(0, 18).toString('base64url'));
  });

  test('different secrets give different ids for the same prompt', () => {
    const hash = hashOf('Hello Maria');
    expect(speechPublicId(SECRET, hash)).not.toBe(speechPublicId(OTHER, hash));
    expect(speechIdMatches(OTHER, hash, speechPublicId(SECRET, hash))).toBe(false);
  });

  test('an id does not reveal the text, and guessing the text without the secret fails', () => {
    const text = 'Hello Maria Kowalska, your appointment is on 3 March at 10:30';
    const hash = hashOf(text);
    const id = speechPublicId(SECRET, hash);
    const hashBytes = Buffer.from(hash, 'hex');
    // nothing of the text or of its (computable) hash shows in the id
    for (const leak of [
      'Maria',
      'Kowalska',
      Buffer.from('Maria').toString('base64url').slice(0, 6),
      hash.slice(0, 8),
      hashBytes.subarray(0, 6).toString('base64url'),
    ]) {
      expect(id).not.toContain(leak);
    }
    // ids of nearby texts share nothing beyond chance: an id cannot be narrowed by guessing
    const near = speechPublicId(SECRET, hashOf(text.replace('10:30', '10:31')));
    const same = [...id].filter((c, i) => near[i] === c).length;
    expect(same).toBeLessThan(6);
    // an attacker who knows the text computes its hash, but with a guessed secret the id differs
    for (const guess of ['', 'switchboard', SECRET.slice(0, -1)]) {
      const key = guess.padEnd(16, '0');
      expect(speechPublicId(key, hash)).not.toBe(id);
    }
  });

  test('verification: right id only, in constant time, whatever the candidate', () => {
    const hash = hashOf('Hello Maria');
    const id = speechPublicId(SECRET, hash);
    expect(speechIdMatches(SECRET, hash, id)).toBe(true);
    const flipped = `${id.slice(0, 23)}${id[23] === 'A' ? 'B' : 'A'}`;
    expect(speechIdMatches(SECRET, hash, flipped)).toBe(false);
    expect(speechIdMatches(SECRET, hash, id.slice(0, 23))).toBe(false);
    expect(speechIdMatches(SECRET, hash, `${id}A`)).toBe(false);
    expect(speechIdMatches(SECRET, hash, '')).toBe(false);
    expect(speechIdMatches(SECRET, hash, 'é'.repeat(12))).toBe(false);
    expect(speechIdMatches(SECRET, hashOf('Hello Mario'), id)).toBe(false);
  });

  test('the id shape, and a secret too short to trust', () => {
    expect(isSpeechPublicId('A'.repeat(24))).toBe(true);
    expect(isSpeechPublicId('A'.repeat(23))).toBe(false);
    expect(isSpeechPublicId(`${'A'.repeat(23)}/`)).toBe(false);
    expect(isSpeechPublicId(`${'A'.repeat(23)}=`)).toBe(false);
    expect(() => speechPublicId('short', hashOf('x'))).toThrow(RangeError);
  });
});
