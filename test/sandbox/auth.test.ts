import { describe, expect, test } from 'vitest';
import {
  checkCascadeAuth,
  checkMessagingAuth,
  DEFAULT_CREDENTIALS,
  parseBasic,
  SandboxCredentials,
} from '../../src/sandbox/auth.ts';

const basic = (u: string, p: string) => `Basic ${Buffer.from(`${u}:${p}`).toString('base64')}`;

describe('messaging auth (seed 5)', () => {
  test('accepts the three methods with the default credentials', () => {
    expect(
      checkMessagingAuth({ authorization: basic('sandbox', 'sandbox') }, DEFAULT_CREDENTIALS),
    ).toEqual({ ok: true, principal: 'login' });
    expect(
      checkMessagingAuth({ 'x-authorization-key': 'sandbox-key' }, DEFAULT_CREDENTIALS),
    ).toEqual({ ok: true, principal: 'api-key' });
    expect(
      checkMessagingAuth({ authorization: basic('@', 'sandbox-key') }, DEFAULT_CREDENTIALS),
    ).toEqual({ ok: true, principal: 'api-key' });
  });

  test.each([
    ['no header', {}],
    ['a wrong password', { authorization: basic('sandbox', 'nope') }],
    ['a wrong key in the header', { 'x-authorization-key': 'nope' }],
    ['a wrong key after @', { authorization: basic('@', 'nope') }],
    ['the password used as a key', { authorization: basic('@', 'sandbox') }],
    [
      'a good key with a bad Basic',
      { 'x-authorization-key': 'sandbox-key', authorization: basic('x', 'y') },
    ],
  ])('refuses %s', (_, headers) => {
    expect(checkMessagingAuth(headers, DEFAULT_CREDENTIALS).ok).toBe(false);
  });

  test('uses configured credentials instead of the defaults', () => {
    const creds = SandboxCredentials.parse({ login: 'me', password: 'pw', apiKey: 'k2' });
    expect(checkMessagingAuth({ authorization: basic('me', 'pw') }, creds).ok).toBe(true);
    expect(checkMessagingAuth({ authorization: basic('sandbox', 'sandbox') }, creds).ok).toBe(
      false,
    );
    expect(checkMessagingAuth({ 'x-authorization-key': 'k2' }, creds).ok).toBe(true);
  });

  test('parseBasic keeps colons in the password and ignores other schemes', () => {
    expect(parseBasic(basic('a', 'b:c'))).toEqual({ user: 'a', pass: 'b:c' });
    expect(parseBasic('Bearer xyz')).toBeUndefined();
  });
});

describe('cascade auth (seed 5)', () => {
  test('accepts any of the three headers', () => {
    expect(checkCascadeAuth({ 'x-authorization-key': 'sandbox-key' }, DEFAULT_CREDENTIALS).ok).toBe(
      true,
    );
    expect(checkCascadeAuth({ 'x-viber-auth-token': 'vb' }, DEFAULT_CREDENTIALS)).toMatchObject({
      ok: true,
      principal: 'viber-bot',
    });
    expect(checkCascadeAuth({ 'x-tg-bot-key': 'tg' }, DEFAULT_CREDENTIALS)).toMatchObject({
      ok: true,
      principal: 'tg-bot',
    });
  });

  test('refuses no header, a wrong API key, and bots outside a configured list', () => {
    expect(checkCascadeAuth({}, DEFAULT_CREDENTIALS).ok).toBe(false);
    expect(checkCascadeAuth({ 'x-authorization-key': 'x' }, DEFAULT_CREDENTIALS).ok).toBe(false);
    const creds = SandboxCredentials.parse({ viberBotTokens: ['vb'], tgBotKeys: ['tg'] });
    expect(checkCascadeAuth({ 'x-viber-auth-token': 'other' }, creds).ok).toBe(false);
    expect(checkCascadeAuth({ 'x-tg-bot-key': 'other' }, creds).ok).toBe(false);
    expect(checkCascadeAuth({ 'x-tg-bot-key': 'tg' }, creds).ok).toBe(true);
  });
});
