/**
 * A speech engine that is an HTTP service: for a better voice than eSpeak NG's, run any
 * text-to-speech server behind a small adapter that takes
 * `POST {"text","lang","voice","rate"}` (JSON) and answers `200` with `audio/wav`.
 *
 * The URL is the operator's configuration, never a flow author's: flows only choose the text,
 * language, voice and rate. The URL can carry a credential, so it is never put in an error
 * message; messages name its host only. One deadline covers the whole exchange, headers and
 * body, and the body is capped, so a stuck or runaway service cannot hold a render forever.
 *
 * @example
 * const engine = createHttpSpeechEngine({
 *   url: 'http://tts.internal:5002/speak',
 *   languages: [{ lang: 'uk', name: 'Ukrainian' }],
 * });
 * const { samples, sampleRate } = await engine.synthesize('Привіт', { lang: 'uk' });
 */
import { createHash } from 'node:crypto';
import { decodeWav } from './audio.ts';
import {
  checkSpeechRequest,
  type SpeechEngine,
  SpeechError,
  type SpeechLanguage,
  type SynthesizedSpeech,
} from './engine.ts';

export interface HttpSpeechEngineOptions {
  /**
   * where to POST; from configuration only. A user and password in it (`https://u:p@host/`)
   * are sent as HTTP Basic authorization, never in an error message.
   */
  url: string;
  /** more request headers, e.g. an API key the service wants; never in an error message */
  headers?: Readonly<Record<string, string>>;
  /** the languages the service speaks (it is not asked: adapters differ in how they say) */
  languages: readonly SpeechLanguage[];
  /**
   * Bump when the service's voice changes so every prompt renders again; the URL is part of
   * the version too (as a hash), so pointing at another service renders again by itself.
   */
  version?: string;
  /** the whole exchange's deadline; default 15 s */
  timeoutMs?: number;
  /** default 1000 characters */
  maxTextLength?: number;
  /** the largest answer accepted; default 32 MB (about 17 minutes of 16 kHz 16-bit mono) */
  maxResponseBytes?: number;
}

const WAV_TYPES = new Set(['audio/wav', 'audio/x-wav', 'audio/wave', 'audio/vnd.wave']);

export function createHttpSpeechEngine(options: HttpSpeechEngineOptions): SpeechEngine {
  const url = new URL(options.url);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new TypeError('the speech service URL must be http or https');
  }
  const where = url.host;
  const headers: Record<string, string> = {
    ...options.headers,
    'content-type': 'application/json',
    accept: 'audio/wav',
  };
  if (url.username || url.password) {
    const user = decodeURIComponent(url.username);
    const password = decodeURIComponent(url.password);
    headers.authorization = `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
    // fetch refuses a URL with credentials in it
    url.username = '';
    url.password = '';
  }
  const urlHash = createHash('sha256').update(url.href).digest('hex').slice(0, 12);
  const timeoutMs = options.timeoutMs ?? 15_000;
  const maxResponseBytes = options.maxResponseBytes ?? 32 * 1024 * 1024;
  const languages = options.languages.map((l) => ({ lang: l.lang.toLowerCase(), name: l.name }));

  const engine: SpeechEngine = {
    name: 'http',
    version: `${options.version ?? '1'}@${urlHash}`,
    maxTextLength: options.maxTextLength ?? 1000,
    async voices() {
      return languages;
    },
    async synthesize(text, request): Promise<SynthesizedSpeech> {
      const checked = checkSpeechRequest(text, request, engine, languages);
      const signal = AbortSignal.timeout(timeoutMs);
      let response: Response;
      try {
        response = await fetch(url, {
          method: 'POST',
          headers,
          body: JSON.stringify({
            text: checked.text,
            lang: checked.lang,
            voice: checked.voice ?? null,
            rate: checked.rate,
          }),
          redirect: 'error',
          signal,
        });
      } catch (e) {
        throw failure(e, signal);
      }
      if (response.status !== 200) {
        await response.body?.cancel().catch(() => undefined);
        throw new SpeechError(
          'BAD_STATUS',
          `the speech service at ${where} answered ${response.status} instead of 200`,
        );
      }
      const type = (response.headers.get('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
      if (!WAV_TYPES.has(type)) {
        await response.body?.cancel().catch(() => undefined);
        throw new SpeechError(
          'BAD_AUDIO',
          `the speech service at ${where} answered ${type || 'no content type'}, not audio/wav`,
        );
      }
      let bytes: Uint8Array;
      try {
        bytes = await readCapped(response, maxResponseBytes, where);
      } catch (e) {
        if (e instanceof SpeechError) throw e;
        throw failure(e, signal);
      }
      return decodeWav(bytes);
    },
  };

  function failure(e: unknown, signal: AbortSignal): SpeechError {
    if (signal.aborted) {
      return new SpeechError(
        'TIMEOUT',
        `the speech service at ${where} did not answer within ${timeoutMs} ms`,
      );
    }
    const cause = e instanceof Error && e.cause instanceof Error ? e.cause.message : String(e);
    return new SpeechError('ENGINE_FAILED', `the speech service at ${where} failed: ${cause}`);
  }

  return engine;
}

/** The body, refused as soon as it passes `limit` bytes rather than after it is all read. */
async function readCapped(response: Response, limit: number, where: string): Promise<Uint8Array> {
  const declared = Number(response.headers.get('content-length') ?? Number.NaN);
  const tooBig = () =>
    new SpeechError(
      'BAD_AUDIO',
      `the speech service at ${where} answered more than ${limit} bytes`,
    );
  if (declared > limit) {
    await response.body?.cancel().catch(() => undefined);
    throw tooBig();
  }
  const chunks: Uint8Array[] = [];
  let total = 0;
  if (response.body) {
    for await (const chunk of response.body) {
      total += chunk.length;
      // leaving the loop by a throw cancels the stream
      if (total > limit) throw tooBig();
      chunks.push(chunk);
    }
  }
  const out = new Uint8Array(total);
  let at = 0;
  for (const chunk of chunks) {
    out.set(chunk, at);
    at += chunk.length;
  }
  return out;
}
