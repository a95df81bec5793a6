/**
 * The checks every engine makes before it speaks, in one place (src/speech/engine.ts), and
 * the error they make: a SpeechError that is an AppError with the envelope's code.
 */
import { describe, expect, test } from 'vitest';
import { AppError } from '../../src/errors.ts';
import {
  checkSpeechRequest,
  matchSpeechLanguage,
  SPEECH_RATE_MAX,
  SPEECH_RATE_MIN,
  SpeechError,
} from '../../src/speech/engine.ts';

const SPOKEN = [
  { lang: 'en', name: 'English' },
  { lang: 'en-us', name: 'English (America)' },
  { lang: 'uk', name: 'Ukrainian' },
];

describe('matchSpeechLanguage', () => {
  test('the same code in any case or separator, else its primary subtag', () => {
    expect(matchSpeechLanguage('EN_us', SPOKEN)?.lang).toBe('en-us');
    expect(matchSpeechLanguage('en-GB', SPOKEN)?.lang).toBe('en');
    expect(matchSpeechLanguage(' uk-UA ', SPOKEN)?.lang).toBe('uk');
    expect(matchSpeechLanguage('de', SPOKEN)).toBeUndefined();
    expect(matchSpeechLanguage('', SPOKEN)).toBeUndefined();
  });
});

describe('checkSpeechRequest', () => {
  const engine = { maxTextLength: 5 };

  test('trims, resolves the language, defaults the rate', () => {
    expect(checkSpeechRequest('  hi  ', { lang: 'UK' }, engine, SPOKEN)).toEqual({
      text: 'hi',
      lang: 'uk',
      rate: 1,
    });
    expect(
      checkSpeechRequest('hi', { lang: 'en', voice: 'm3', rate: SPEECH_RATE_MAX }, engine, SPOKEN),
    ).toEqual({ text: 'hi', lang: 'en', voice: 'm3', rate: SPEECH_RATE_MAX });
  });

  test('counts characters as people do: five emoji are five', () => {
    expect(checkSpeechRequest('😀😀😀😀😀', { lang: 'en' }, engine, SPOKEN).text).toHaveLength(10);
    expect(() => checkSpeechRequest('😀😀😀😀😀😀', { lang: 'en' }, engine, SPOKEN)).toThrow(
      expect.objectContaining({ reason: 'TEXT_TOO_LONG' }),
    );
  });

  test('each bad input has its reason, envelope code and detail', () => {
    const cases: [string, object, string, string, string][] = [
      [' ', { lang: 'en' }, 'EMPTY_TEXT', 'VALIDATION_ERROR', 'text'],
      ['toolong', { lang: 'en' }, 'TEXT_TOO_LONG', 'VALIDATION_ERROR', 'text'],
      ['hi', { lang: 'xx' }, 'UNKNOWN_LANGUAGE', 'INVALID_LANGUAGE', 'lang'],
      [
        'hi',
        { lang: 'en', rate: SPEECH_RATE_MIN - 0.01 },
        'INVALID_RATE',
        'VALIDATION_ERROR',
        'rate',
      ],
      ['hi', { lang: 'en', rate: Number.NaN }, 'INVALID_RATE', 'VALIDATION_ERROR', 'rate'],
    ];
    for (const [text, options, reason, code, path] of cases) {
      let caught: unknown;
      try {
        checkSpeechRequest(text, options as { lang: string }, engine, SPOKEN);
      } catch (e) {
        caught = e;
      }
      expect(caught).toBeInstanceOf(SpeechError);
      expect(caught).toBeInstanceOf(AppError);
      const error = caught as SpeechError;
      expect(error.reason).toBe(reason);
      expect(error.code).toBe(code);
      expect(error.details[0]?.path).toBe(path);
    }
  });
});
