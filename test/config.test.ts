import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.ts';

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
    });
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

  it('does not ask for a token with the built-in sandbox, which is reached through this server', () => {
    expect(loadConfig({}).callbackToken).toBeUndefined();
  });
});
