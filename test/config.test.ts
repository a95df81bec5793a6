import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.ts';
import { configuredDatabase } from '../src/db/client.ts';

describe('loadConfig', () => {
  it('has the documented defaults with an empty environment', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({
      port: 3000,
      databaseUrl: undefined,
      dataDir: './.data',
      publicUrl: 'http://localhost:3000',
      providerBaseUrl: undefined,
      apiTokens: [],
      logLevel: 'info',
      logPii: false,
      logFormat: 'auto',
      // flows come from their files: the console and the API write none (FLOWS_WRITABLE)
      flowsWritable: false,
      // nothing guards /v1 and /ui: this machine only
      host: '127.0.0.1',
    });
  });

  it('listens on every interface by default only when API_TOKEN guards /v1 and /ui', () => {
    expect(loadConfig({ API_TOKEN: 'a-token' }).host).toBe('0.0.0.0');
    expect(loadConfig({ API_TOKEN: ' , ' }).host).toBe('127.0.0.1');
    expect(loadConfig({ UI_TOKEN: 'ui-only' }).host).toBe('127.0.0.1');
    // an explicit HOST always wins
    expect(loadConfig({ HOST: '0.0.0.0' }).host).toBe('0.0.0.0');
    expect(loadConfig({ HOST: '127.0.0.1', API_TOKEN: 'a-token' }).host).toBe('127.0.0.1');
  });

  it('reads LOG_FORMAT: auto by default, json or pretty when set', () => {
    expect(loadConfig({ LOG_FORMAT: 'json' }).logFormat).toBe('json');
    expect(loadConfig({ LOG_FORMAT: 'pretty' }).logFormat).toBe('pretty');
    expect(loadConfig({ LOG_FORMAT: '' }).logFormat).toBe('auto');
    expect(() => loadConfig({ LOG_FORMAT: 'yaml' })).toThrow(
      'LOG_FORMAT: must be auto, json or pretty, got "yaml"',
    );
  });

  it('derives PUBLIC_URL from PORT and splits API_TOKEN for rotation', () => {
    const c = loadConfig({ PORT: '8080', API_TOKEN: 'new-token, old-token' });
    expect(c.publicUrl).toBe('http://localhost:8080');
    expect(c.apiTokens).toEqual(['new-token', 'old-token']);
  });

  it.each([
    ['PORT', 'eighty'],
    ['PORT', '70000'],
    ['PORT', '-1'],
    ['DATABASE_URL', 'mysql://x'],
    ['PUBLIC_URL', 'not a url'],
    ['PROVIDER_BASE_URL', 'ftp://x'],
    ['LOG_LEVEL', 'loud'],
    ['LOG_PII', 'maybe'],
    ['LOG_FORMAT', 'colour'],
    ['FLOWS_WRITABLE', 'maybe'],
    ['SPEECH_ENGINE', 'festival'],
    ['SPEECH_FORMAT', 'ogg'],
    ['SPEECH_HTTP_URL', 'file:///tts'],
    ['SPEECH_HTTP_LANGUAGES', 'english!'],
    ['PROMPT_SECRET', 'short'],
    ['PROMPT_GRACE_MINUTES', '0'],
    ['POLL_EVERY_SECONDS', '0'],
    ['POLL_EVERY_MAX_SECONDS', 'hourly'],
  ])('a bad %s stops the start with a message naming it', (variable, value) => {
    let error: unknown;
    try {
      loadConfig({ [variable]: value });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems[0]?.variable).toBe(variable);
    expect((error as ConfigError).message).toContain(variable);
  });
});

describe("the status poller's backoff: POLL_EVERY_SECONDS up to POLL_EVERY_MAX_SECONDS", () => {
  it('waits at most an hour by default, or POLL_EVERY_SECONDS when that is longer', () => {
    expect(loadConfig({}).pollEveryMaxMs).toBe(3_600_000);
    expect(loadConfig({ POLL_EVERY_SECONDS: '7200' }).pollEveryMaxMs).toBe(7_200_000);
    expect(loadConfig({ POLL_EVERY_MAX_SECONDS: '600' }).pollEveryMaxMs).toBe(600_000);
  });

  it('refuses a longest wait shorter than the first, naming both', () => {
    expect(() => loadConfig({ POLL_EVERY_SECONDS: '600', POLL_EVERY_MAX_SECONDS: '300' })).toThrow(
      /POLL_EVERY_MAX_SECONDS: .*at least POLL_EVERY_SECONDS \(600\).*got 300/,
    );
  });
});

describe('behind a pooler: DATABASE_DIRECT_URL and DATABASE_PREPARE', () => {
  const URL = 'postgres://sb@pgbouncer:6432/sb';
  const DIRECT = 'postgres://sb@db:5432/sb';

  it('prepares statements, on DATABASE_URL alone, unless told otherwise', () => {
    expect(loadConfig({ DATABASE_URL: URL })).toMatchObject({
      databaseDirectUrl: undefined,
      databasePrepare: true,
    });
    for (const no of ['false', '0', 'no']) {
      expect(loadConfig({ DATABASE_URL: URL, DATABASE_PREPARE: no }).databasePrepare).toBe(false);
    }
    expect(loadConfig({ DATABASE_URL: URL, DATABASE_PREPARE: 'true' }).databasePrepare).toBe(true);
    expect(loadConfig({ DATABASE_URL: URL, DATABASE_PREPARE: '' }).databasePrepare).toBe(true);
    expect(() => loadConfig({ DATABASE_URL: URL, DATABASE_PREPARE: 'off' })).toThrow(
      /DATABASE_PREPARE/,
    );
  });

  it('takes a direct URL beside DATABASE_URL, never without it', () => {
    expect(
      loadConfig({ DATABASE_URL: URL, DATABASE_DIRECT_URL: DIRECT, DATABASE_PREPARE: 'false' }),
    ).toMatchObject({ databaseUrl: URL, databaseDirectUrl: DIRECT, databasePrepare: false });
    expect(() => loadConfig({ DATABASE_URL: URL, DATABASE_DIRECT_URL: 'mysql://x' })).toThrow(
      'DATABASE_DIRECT_URL: must be a postgres:// or postgresql:// URL',
    );
    expect(() => loadConfig({ DATABASE_DIRECT_URL: DIRECT })).toThrow(
      /DATABASE_DIRECT_URL: .*set DATABASE_URL too/,
    );
  });

  it('opens the database as configured: the pool through DATABASE_URL, sessions direct', () => {
    const config = loadConfig({
      DATABASE_URL: URL,
      DATABASE_DIRECT_URL: DIRECT,
      DATABASE_PREPARE: 'false',
      DATA_DIR: '/d',
    });
    expect(configuredDatabase(config)).toEqual({
      url: URL,
      directUrl: DIRECT,
      prepare: false,
      dataDir: '/d',
    });
  });
});

describe('callbacks against a real provider', () => {
  const real = { PROVIDER_BASE_URL: 'https://api.provider.example' };

  it.each([
    ['unset', {}],
    ['blank', { CALLBACK_TOKEN: '   ' }],
    ['with CALLBACKS_OPEN=false', { CALLBACKS_OPEN: 'false' }],
  ])('refuses to start with CALLBACK_TOKEN %s, saying how to fix it', (_, env) => {
    let error: unknown;
    try {
      loadConfig({ ...real, ...env });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems).toHaveLength(1);
    expect((error as ConfigError).problems[0]?.variable).toBe('CALLBACK_TOKEN');
    expect((error as ConfigError).message).toMatch(/CALLBACK_TOKEN: must be set/);
    expect((error as ConfigError).message).toContain('CALLBACKS_OPEN=true');
  });

  it('starts with a token, or open when told so explicitly', () => {
    expect(loadConfig({ ...real, CALLBACK_TOKEN: 'secret' })).toMatchObject({
      callbackToken: 'secret',
      callbacksOpen: false,
    });
    expect(loadConfig({ ...real, CALLBACKS_OPEN: 'true' })).toMatchObject({
      callbackToken: undefined,
      callbacksOpen: true,
    });
  });

  it('takes several callback tokens for a rotation: all accepted, the first given out', () => {
    expect(loadConfig({ ...real, CALLBACK_TOKEN: 'new-one, old-one' })).toMatchObject({
      callbackToken: 'new-one',
      callbackTokens: ['new-one', 'old-one'],
    });
  });

  it('reads the speech settings: eSpeak NG and 8 kHz WAV by default, the secret never echoed', () => {
    expect(loadConfig({}).speech).toEqual({
      engine: 'espeak',
      httpUrl: undefined,
      httpLanguages: ['en'],
      format: 'wav8k',
      promptSecret: undefined,
      promptsDir: undefined,
      graceMs: 3_600_000,
    });
    expect(
      loadConfig({
        SPEECH_ENGINE: 'http',
        SPEECH_HTTP_URL: 'https://tts.example/speak',
        SPEECH_HTTP_LANGUAGES: 'en, UK',
        SPEECH_FORMAT: 'mp3',
        PROMPTS_DIR: '/var/prompts',
        PROMPT_GRACE_MINUTES: '5',
      }).speech,
    ).toMatchObject({
      engine: 'http',
      httpUrl: 'https://tts.example/speak',
      httpLanguages: ['en', 'uk'],
      format: 'mp3',
      promptsDir: '/var/prompts',
      graceMs: 300_000,
    });
    expect(() => loadConfig({ SPEECH_ENGINE: 'http' })).toThrow(/SPEECH_HTTP_URL: must be set/);
    const secret = 'a-short-secret-of-31-characters';
    expect(() => loadConfig({ PROMPT_SECRET: secret })).toThrow(/PROMPT_SECRET: must be at least/);
    try {
      loadConfig({ PROMPT_SECRET: secret });
    } catch (error) {
      expect(String((error as Error).message)).not.toContain(secret);
    }
  });

  it('does not ask for a token with the built-in sandbox, which is reached through this server', () => {
    expect(loadConfig({}).callbackToken).toBeUndefined();
  });
});
