import { describe, expect, it } from 'vitest';
import { signNodeToken, verifyNodeToken } from '../../src/flows/index.ts';

const current = { id: 'k2', key: 'new secret' };
const old = { id: 'k1', key: Buffer.from('old secret') };
const claim = { callId: '0193f1c2-7b4e-7c1a-9f3d-2a6b8c0d1e2f', node: 'main/v2/r1', key: '*' };

describe('node tokens', () => {
  it('verify to what was signed', () => {
    const token = signNodeToken(claim, current);
    expect(token).toMatch(/^v1\.k2\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/);
    expect(verifyNodeToken(token, [current])).toEqual(claim);
  });

  it('keep verifying with an old secret after rotation, by key id', () => {
    const before = signNodeToken(claim, old);
    expect(verifyNodeToken(before, [current, old])).toEqual(claim);
    expect(verifyNodeToken(before, [current])).toBeNull();
    // the same key under another id does not verify
    expect(verifyNodeToken(before, [{ id: 'k3', key: old.key }])).toBeNull();
  });

  it('refuse an altered claim, signature, key id or version', () => {
    const token = signNodeToken(claim, current);
    const [v, kid, payload, sig] = token.split('.') as [string, string, string, string];
    const other = Buffer.from(JSON.stringify({ c: claim.callId, n: 'main', k: '1' })).toString(
      'base64url',
    );
    const flipped = `${sig.slice(0, 10)}${sig[10] === 'A' ? 'B' : 'A'}${sig.slice(11)}`;
    for (const forged of [
      `${v}.${kid}.${other}.${sig}`,
      `${v}.${kid}.${payload}.${flipped}`,
      `${v}.k1.${payload}.${sig}`,
      `v2.${kid}.${payload}.${sig}`,
      `${v}.${kid}.${payload}.${sig}x`,
      `${v}.${kid}.${payload}`,
      '',
      'garbage',
    ]) {
      expect(verifyNodeToken(forged, [current, old]), forged).toBeNull();
    }
    expect(verifyNodeToken(42, [current])).toBeNull();
    expect(verifyNodeToken(undefined, [current])).toBeNull();
  });

  it('refuse a signature spelled non-canonically (same bytes, other text)', () => {
    const token = signNodeToken(claim, current);
    const sig = token.split('.')[3]!;
    // 32 bytes in 43 base64url characters leave 2 spare bits in the last one
    const last = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'.indexOf(
      sig.at(-1)!,
    );
    const alias = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'[last ^ 1]!;
    const twin = `${token.slice(0, -1)}${alias}`;
    expect(Buffer.from(twin.split('.')[3]!, 'base64url')).toEqual(Buffer.from(sig, 'base64url'));
    expect(verifyNodeToken(twin, [current])).toBeNull();
  });

  it('refuse a key id that could not be parsed back', () => {
    expect(() => signNodeToken(claim, { id: 'a.b', key: 'x' })).toThrow(/secret id/);
  });
});
