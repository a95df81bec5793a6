/**
 * The per-call token signer (`nodeTokenSigner`, which `signNodeToken` uses too): whatever the
 * call id, node and key, its tokens verify to exactly their claim, and only with their secret.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { nodeTokenSigner, signNodeToken, verifyNodeToken } from '../../src/flows/index.ts';

const secret = { id: 'k2', key: 'new secret' };
const old = { id: 'k1', key: Buffer.from('old secret') };
// call ids, node names and keys are text: any well-formed string (a lone surrogate has no UTF-8)
const text = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 12 }).filter((s) => Buffer.from(s).toString() === s),
  fc.uuid().map((u) => u.toLowerCase()),
  fc.constantFrom('', '"', '\\', 'main/v2/r1', 'меню', '😀', '\u0000', 'timeout', '#'),
);

describe('nodeTokenSigner', () => {
  it('signs tokens that verify to their claim', () => {
    fc.assert(
      fc.property(text, text, text, fc.constantFrom(secret, old), (callId, node, key, s) => {
        const token = nodeTokenSigner(callId, s)(node, key);
        expect(token).toMatch(/^v2\.k[12]\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{22}$/);
        const claim = { callId, node, key };
        expect(verifyNodeToken(token, [secret, old])).toEqual(claim);
        expect(verifyNodeToken(token, [{ id: s.id, key: 'other' }])).toBeNull();
        expect(verifyNodeToken(signNodeToken(claim, s), [secret, old])).toEqual(claim);
      }),
      { numRuns: 2000 },
    );
  });

  it('names its own call, node and key in each token', () => {
    const a = nodeTokenSigner('0193f1c2-7b4e-7c1a-9f3d-2a6b8c0d1e2f', secret);
    const b = nodeTokenSigner('0193f1c2-7b4e-7c1a-9f3d-2a6b8c0d1e30', secret);
    const tokens = [a('main', '1'), a('main', '2'), a('main/r1', '1'), b('main', '1')];
    expect(new Set(tokens).size).toBe(4);
    expect(verifyNodeToken(tokens[2], [secret])).toEqual({
      callId: '0193f1c2-7b4e-7c1a-9f3d-2a6b8c0d1e2f',
      node: 'main/r1',
      key: '1',
    });
  });

  it('refuses a key id that could not be parsed back', () => {
    expect(() => nodeTokenSigner('c1', { id: 'a.b', key: 'x' })).toThrow(/secret id/);
  });
});
