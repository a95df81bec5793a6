/**
 * The HTTP speech engine against a real HTTP server started here: what it sends, what it
 * accepts, and a clear SpeechError (never a hang, never the URL's credentials) for each way
 * the service can fail.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { encodeWav } from '../../src/speech/audio.ts';
import type { SpeechError } from '../../src/speech/engine.ts';
import { createHttpSpeechEngine } from '../../src/speech/http-engine.ts';

const SPOKEN = Int16Array.from({ length: 1600 }, (_, i) => Math.round(8000 * Math.sin(i / 3)));
const WAV = encodeWav(SPOKEN, 16_000);
const LANGUAGES = [
  { lang: 'en', name: 'English' },
  { lang: 'uk', name: 'Ukrainian' },
];

interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
}

let server: Server;
let base: string;
let seen: Seen[] = [];
let answer: (req: IncomingMessage, res: ServerResponse) => void;

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen.push({
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
      });
      answer(req, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

beforeEach(() => {
  seen = [];
  answer = (_req, res) => {
    res.writeHead(200, { 'content-type': 'audio/wav' });
    res.end(WAV);
  };
});

async function failure(promise: Promise<unknown>): Promise<SpeechError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(Error);
  expect((error as Error).name).toBe('SpeechError');
  return error as SpeechError;
}

describe('HTTP speech engine', () => {
  test('POSTs the checked request as JSON and reads the WAV it answers', async () => {
    const engine = createHttpSpeechEngine({ url: `${base}/speak?model=x`, languages: LANGUAGES });
    const speech = await engine.synthesize('  Привіт, Маріє  ', {
      lang: 'UK-ua',
      voice: 'anna',
      rate: 1.25,
    });
    expect(speech.sampleRate).toBe(16_000);
    expect([...speech.samples]).toEqual([...SPOKEN]);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.method).toBe('POST');
    expect(seen[0]!.url).toBe('/speak?model=x');
    expect(seen[0]!.headers['content-type']).toBe('application/json');
    expect(seen[0]!.headers.accept).toBe('audio/wav');
    expect(JSON.parse(seen[0]!.body)).toEqual({
      text: 'Привіт, Маріє',
      lang: 'uk',
      voice: 'anna',
      rate: 1.25,
    });
    expect(await engine.voices()).toEqual(LANGUAGES);
    expect(engine.name).toBe('http');
  });

  test('the version follows the service: another URL, another version', () => {
    const a = createHttpSpeechEngine({ url: `${base}/a`, languages: LANGUAGES });
    const b = createHttpSpeechEngine({ url: `${base}/b`, languages: LANGUAGES });
    const a2 = createHttpSpeechEngine({ url: `${base}/a`, languages: LANGUAGES, version: '2' });
    expect(a.version).not.toBe(b.version);
    expect(a.version).not.toBe(a2.version);
    expect(createHttpSpeechEngine({ url: `${base}/a`, languages: LANGUAGES }).version).toBe(
      a.version,
    );
  });

  test('credentials in the URL go as Basic authorization and never into an error', async () => {
    const url = `http://robot:s3cr%40t@127.0.0.1:${new URL(base).port}/speak`;
    const engine = createHttpSpeechEngine({
      url,
      languages: LANGUAGES,
      headers: { 'x-api-key': 'k-123' },
    });
    await engine.synthesize('hello', { lang: 'en' });
    expect(seen[0]!.headers.authorization).toBe(
      `Basic ${Buffer.from('robot:s3cr@t').toString('base64')}`,
    );
    expect(seen[0]!.headers['x-api-key']).toBe('k-123');
    answer = (_req, res) => {
      res.writeHead(503);
      res.end('down');
    };
    const error = await failure(engine.synthesize('hello', { lang: 'en' }));
    expect(error.reason).toBe('BAD_STATUS');
    expect(error.code).toBe('UNAVAILABLE');
    expect(error.message).toContain('503');
    expect(error.message).toContain(`127.0.0.1:${new URL(base).port}`);
    for (const secret of ['s3cr', 'robot', 'k-123', '/speak']) {
      expect(error.message).not.toContain(secret);
    }
  });

  test('a service that does not answer in time is a TIMEOUT, headers or body', async () => {
    const engine = createHttpSpeechEngine({
      url: `${base}/slow`,
      languages: LANGUAGES,
      timeoutMs: 300,
    });
    answer = () => {
      // never answers; the connection is closed in afterAll
    };
    const started = performance.now();
    const silent = await failure(engine.synthesize('hello', { lang: 'en' }));
    expect(silent.reason).toBe('TIMEOUT');
    expect(silent.message).toContain('300 ms');
    expect(performance.now() - started).toBeLessThan(5_000);

    answer = (_req, res) => {
      // the headers and half the file, then nothing
      res.writeHead(200, { 'content-type': 'audio/wav', 'content-length': String(WAV.length) });
      res.write(WAV.subarray(0, 100));
    };
    const stalled = await failure(engine.synthesize('hello', { lang: 'en' }));
    expect(stalled.reason).toBe('TIMEOUT');
  });

  test('what is not a usable WAV is BAD_AUDIO', async () => {
    const engine = createHttpSpeechEngine({
      url: `${base}/speak`,
      languages: LANGUAGES,
      maxResponseBytes: 10_000,
    });
    answer = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<html>login</html>');
    };
    const html = await failure(engine.synthesize('hello', { lang: 'en' }));
    expect(html.reason).toBe('BAD_AUDIO');
    expect(html.message).toContain('text/html');

    answer = (_req, res) => {
      res.writeHead(200, { 'content-type': 'audio/wav' });
      res.end('RIFF....not really');
    };
    expect((await failure(engine.synthesize('hello', { lang: 'en' }))).reason).toBe('BAD_AUDIO');

    // too big, declared or streamed without a length
    const big = encodeWav(new Int16Array(20_000), 16_000);
    answer = (_req, res) => {
      res.writeHead(200, { 'content-type': 'audio/wav', 'content-length': String(big.length) });
      res.end(big);
    };
    const declared = await failure(engine.synthesize('hello', { lang: 'en' }));
    expect(declared.reason).toBe('BAD_AUDIO');
    expect(declared.message).toContain('10000 bytes');
    answer = (_req, res) => {
      res.writeHead(200, { 'content-type': 'audio/wav', 'transfer-encoding': 'chunked' });
      for (let at = 0; at < big.length; at += 4096) res.write(big.subarray(at, at + 4096));
      res.end();
    };
    const streamed = await failure(engine.synthesize('hello', { lang: 'en' }));
    expect(streamed.reason).toBe('BAD_AUDIO');
  });

  test('a redirect or a refused connection is ENGINE_FAILED', async () => {
    const engine = createHttpSpeechEngine({ url: `${base}/speak`, languages: LANGUAGES });
    answer = (_req, res) => {
      res.writeHead(302, { location: 'http://example.com/' });
      res.end();
    };
    expect((await failure(engine.synthesize('hello', { lang: 'en' }))).reason).toBe(
      'ENGINE_FAILED',
    );

    // a port that was just free: nothing listens there
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const port = (probe.address() as AddressInfo).port;
    await new Promise((resolve) => probe.close(resolve));
    const closed = createHttpSpeechEngine({
      url: `http://127.0.0.1:${port}/speak`,
      languages: LANGUAGES,
    });
    const refused = await failure(closed.synthesize('hello', { lang: 'en' }));
    expect(refused.reason).toBe('ENGINE_FAILED');
    expect(refused.message).toContain(`127.0.0.1:${port}`);
  });

  test('bad input is refused before anything is sent', async () => {
    const engine = createHttpSpeechEngine({
      url: `${base}/speak`,
      languages: LANGUAGES,
      maxTextLength: 20,
    });
    expect((await failure(engine.synthesize('hello', { lang: 'de' }))).reason).toBe(
      'UNKNOWN_LANGUAGE',
    );
    expect((await failure(engine.synthesize('x'.repeat(21), { lang: 'en' }))).reason).toBe(
      'TEXT_TOO_LONG',
    );
    expect((await failure(engine.synthesize('', { lang: 'en' }))).reason).toBe('EMPTY_TEXT');
    expect((await failure(engine.synthesize('hi', { lang: 'en', rate: 0 }))).reason).toBe(
      'INVALID_RATE',
    );
    expect(seen).toHaveLength(0);
  });

  test('only an http or https URL configures it', () => {
    expect(() =>
      createHttpSpeechEngine({ url: 'file:///etc/passwd', languages: LANGUAGES }),
    ).toThrow(TypeError);
    expect(() => createHttpSpeechEngine({ url: 'not a url', languages: LANGUAGES })).toThrow();
  });
});
