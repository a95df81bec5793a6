/**
 * The speech engine contract: what turns a prompt's text into audio samples. Flows say
 * `{ say: "Hello {{name}}" }`; an engine synthesizes the filled-in text, src/speech/audio.ts
 * encodes the samples for the provider (WAV 8/16 kHz or MP3), src/speech/ids.ts names the result.
 *
 * Two engines implement it: eSpeak NG compiled to WebAssembly, in process, offline and with
 * no system package (src/speech/espeak.ts), and an HTTP text-to-speech service configured by
 * URL (src/speech/http-engine.ts). Bad input is never a crash: it is a `SpeechError`, an
 * `AppError` whose `reason` says exactly what was wrong (see `SpeechFailure`).
 *
 * Adding an engine:
 *
 * 1. Write `src/speech/<name>.ts` exporting a `create…Engine(options)` that returns a
 *    `SpeechEngine`. Give it a stable `name`, a `version` that changes whenever the same
 *    request could sound different (it is part of every cache key, so a change renders every
 *    prompt again), and the `maxTextLength` it can take in one request.
 * 2. `voices()` lists the languages it speaks, lower case (`en`, `en-us`, `uk`); flows are
 *    checked against it, so a language it lists must really be spoken.
 * 3. `synthesize` starts with `checkSpeechRequest(text, options, engine, await voices())`:
 *    every engine then answers the same bad input (empty or too long text, unknown language,
 *    rate out of range) with the same error. It resolves with mono 16-bit samples at the
 *    engine's own rate (audio.ts resamples); anything the engine itself gets wrong is a
 *    `SpeechError` with reason ENGINE_FAILED, TIMEOUT, BAD_STATUS or BAD_AUDIO, never a bare
 *    Error, and never a message holding a credential.
 * 4. Test it in `test/speech/` the way test/speech/espeak.test.ts tests eSpeak NG: audio that
 *    is speech (not silence), its length growing with the text, different texts differing.
 *
 * @example
 * const engine = createEspeakEngine();
 * const { samples, sampleRate } = await engine.synthesize('Привіт', { lang: 'uk' });
 * // samples: Int16Array of mono PCM, sampleRate: 22050
 */
import { AppError, type DetailCode, type ErrorCode } from '../errors.ts';

/** How to speak a text (the text itself is `synthesize`'s first argument). */
export interface SpeechOptions {
  /** a language the engine speaks (`voices()`), e.g. `en`, `en-us`, `uk`; case does not matter */
  lang: string;
  /** an engine-specific voice; unset: the language's default voice */
  voice?: string;
  /** speed relative to the engine's normal pace, SPEECH_RATE_MIN..SPEECH_RATE_MAX; unset: 1 */
  rate?: number;
}

/** Synthesized speech: mono PCM samples, 16-bit signed, at the engine's own rate. */
export interface SynthesizedSpeech {
  samples: Int16Array;
  sampleRate: number;
}

/** A language an engine speaks. */
export interface SpeechLanguage {
  /** the code a request names it by, lower case (`en-us`, `uk`) */
  lang: string;
  /** what people call it, as the engine names it */
  name: string;
}

export interface SpeechEngine {
  /** a short stable name, e.g. `espeak-ng`; part of every cache key */
  readonly name: string;
  /**
   * Changes whenever the same request could sound different (a new engine build, another
   * service): it is part of the cache key, so a new version renders every prompt again.
   */
  readonly version: string;
  /** the longest text, in characters (Unicode code points, after trimming), it accepts */
  readonly maxTextLength: number;
  /** the languages it speaks */
  voices(): Promise<readonly SpeechLanguage[]>;
  /**
   * Speaks `text` (plain text, already filled in; never markup: `<` is read out, not obeyed).
   * Rejects with a `SpeechError` for bad input or a failed engine.
   */
  synthesize(text: string, options: SpeechOptions): Promise<SynthesizedSpeech>;
  /**
   * Optional: several texts in one go, each answered as `synthesize` would (the same checks,
   * one result per text, in order), for engines whose cost is mostly per request. Callers
   * fall back to `synthesize` per text when it is absent.
   */
  synthesizeMany?(texts: readonly string[], options: SpeechOptions): Promise<SynthesizedSpeech[]>;
  /**
   * Optional: nothing is expected soon (the server's start-up renders are done), so let go
   * now of what the engine keeps while idle instead of after its idle timeout; the next
   * request starts it again. Requests still running are not cut short.
   */
  idle?(): void;
}

/** The slowest and fastest `rate` a request may ask for. */
export const SPEECH_RATE_MIN = 0.5;
export const SPEECH_RATE_MAX = 2;

/** Why a render failed: one reason per way it can fail, for callers and tests to match on. */
export type SpeechFailure =
  | 'EMPTY_TEXT'
  | 'TEXT_TOO_LONG'
  | 'UNKNOWN_LANGUAGE'
  | 'UNKNOWN_VOICE'
  | 'INVALID_RATE'
  // the engine itself: the WebAssembly program or the HTTP service
  | 'ENGINE_FAILED'
  | 'TIMEOUT'
  | 'BAD_STATUS'
  | 'BAD_AUDIO';

/**
 * A failed render. `code` is the envelope's code (a 400 for bad input, `UNAVAILABLE` when the
 * engine failed); `reason` is the precise cause.
 */
export class SpeechError extends AppError {
  readonly reason: SpeechFailure;
  constructor(reason: SpeechFailure, message: string, detail?: { path: string; code: DetailCode }) {
    super(
      speechErrorCode(reason),
      message,
      detail ? [{ path: detail.path, code: detail.code, message }] : [],
    );
    this.name = 'SpeechError';
    this.reason = reason;
  }
}

function speechErrorCode(reason: SpeechFailure): ErrorCode {
  switch (reason) {
    case 'UNKNOWN_LANGUAGE':
      return 'INVALID_LANGUAGE';
    case 'EMPTY_TEXT':
    case 'TEXT_TOO_LONG':
    case 'UNKNOWN_VOICE':
    case 'INVALID_RATE':
      return 'VALIDATION_ERROR';
    case 'ENGINE_FAILED':
    case 'TIMEOUT':
    case 'BAD_STATUS':
    case 'BAD_AUDIO':
      return 'UNAVAILABLE';
  }
}

/** Text and options that passed `checkSpeechRequest`: trimmed text, a language the engine speaks. */
export interface CheckedSpeechRequest {
  text: string;
  /** the engine's own code for the language (from `voices()`) */
  lang: string;
  voice?: string;
  rate: number;
}

/**
 * Picks the language an engine speaks for a requested code: the same code in any case, else
 * its primary subtag (`uk-UA` is spoken as `uk`). Undefined when neither is spoken.
 */
export function matchSpeechLanguage(
  requested: string,
  spoken: readonly SpeechLanguage[],
): SpeechLanguage | undefined {
  const wanted = requested.trim().toLowerCase().replaceAll('_', '-');
  const exact = spoken.find((l) => l.lang === wanted);
  if (exact) return exact;
  const primary = wanted.split('-')[0];
  return spoken.find((l) => l.lang === primary);
}

/**
 * The checks every engine makes before rendering, in one place so every engine answers the
 * same input with the same error.
 */
export function checkSpeechRequest(
  rawText: string,
  request: SpeechOptions,
  engine: { maxTextLength: number },
  spoken: readonly SpeechLanguage[],
): CheckedSpeechRequest {
  const text = typeof rawText === 'string' ? rawText.trim() : '';
  if (text === '') {
    throw new SpeechError('EMPTY_TEXT', 'there is no text to speak', {
      path: 'text',
      code: 'EMPTY_TEXT',
    });
  }
  // counted in code points, as people count characters (an emoji is one)
  const length = [...text].length;
  if (length > engine.maxTextLength) {
    throw new SpeechError(
      'TEXT_TOO_LONG',
      `the text is ${length} characters long; at most ${engine.maxTextLength} can be spoken at once`,
      { path: 'text', code: 'TEXT_TOO_LONG' },
    );
  }
  const language =
    typeof request.lang === 'string' ? matchSpeechLanguage(request.lang, spoken) : undefined;
  if (!language) {
    throw new SpeechError(
      'UNKNOWN_LANGUAGE',
      `the speech engine does not speak the language ${JSON.stringify(String(request.lang))}`,
      { path: 'lang', code: 'UNKNOWN_LANGUAGE' },
    );
  }
  const rate = request.rate ?? 1;
  if (
    typeof rate !== 'number' ||
    !Number.isFinite(rate) ||
    rate < SPEECH_RATE_MIN ||
    rate > SPEECH_RATE_MAX
  ) {
    throw new SpeechError(
      'INVALID_RATE',
      `rate must be a number from ${SPEECH_RATE_MIN} to ${SPEECH_RATE_MAX}`,
      { path: 'rate', code: 'INVALID_VALUE' },
    );
  }
  const checked: CheckedSpeechRequest = { text, lang: language.lang, rate };
  if (request.voice !== undefined) checked.voice = request.voice;
  return checked;
}
