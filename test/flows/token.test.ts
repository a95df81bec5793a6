import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { nodeTokenSigner, signNodeToken, verifyNodeToken } from '../../src/flows/index.ts';

const current = { id: 'k2', key: 'new secret' };
const old = { id: 'k1', key: Buffer.from('old secret') };
const claim = { callId: '0193f1c2-7b4e-7c1a-9f3d-2a6b8c0d1e2f', node: 'main/v2/r1', key: '*' };

describe('node tokens', () => {
  it('verify to what was signed', () => {
    const token = signNodeToken(claim, current);
    expect(token).toMatch(/^v2\.k2\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{22}$/);
    expect(verifyNodeToken(token, [current])).toEqual(claim);
  });

  it('are short: a call id, a menu and a key in under 70 characters', () => {
    // most of a call's menu is its tokens (one per input of every node)
    expect(signNodeToken(claim, current).length).toBeLessThanOrEqual(70);
  });

  it('keep verifying v1 tokens, signed before v2 (calls in progress during an upgrade)', () => {
    const payload = Buffer.from(
      JSON.stringify({ c: claim.callId, n: claim.node, k: claim.key }),
    ).toString('base64url');
    const signed = `v1.k2.${payload}`;
    const v1 = `${signed}.${createHmac('sha256', current.key).update(signed).digest('base64url')}`;
    expect(verifyNodeToken(v1, [current])).toEqual(claim);
    expect(verifyNodeToken(v1, [{ id: 'k2', key: 'other' }])).toBeNull();
    // a v2 tag under a v1 label (or the reverse) is refused
    const v2 = signNodeToken(claim, current).split('.');
    expect(verifyNodeToken(`v1.${v2.slice(1).join('.')}`, [current])).toBeNull();
    expect(verifyNodeToken(`v2.${v1.split('.').slice(1).join('.')}`, [current])).toBeNull();
  });

  it('refuse to sign text that UTF-8 cannot carry (a lone surrogate)', () => {
    expect(() => nodeTokenSigner('\ud800', current)).toThrow(/UTF-8/);
    expect(() => nodeTokenSigner(claim.callId, current)('main\udfff', '1')).toThrow(/UTF-8/);
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
    const other = nodeTokenSigner(claim.callId, current)('main', '1').split('.')[2]!;
    const flipped = `${sig.slice(0, 10)}${sig[10] === 'A' ? 'B' : 'A'}${sig.slice(11)}`;
    for (const forged of [
      `${v}.${kid}.${other}.${sig}`,
      `${v}.${kid}.${payload}.${flipped}`,
      `${v}.k1.${payload}.${sig}`,
      `v1.${kid}.${payload}.${sig}`,
      `v3.${kid}.${payload}.${sig}`,
      `${v}.${kid}.${payload}.${sig}x`,
      `${v}.${kid}.${payload}`,
      `${v}.${kid}.${payload}.${sig.slice(0, 20)}é`,
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
    // 16 bytes in 22 base64url characters leave 4 spare bits in the last one
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
