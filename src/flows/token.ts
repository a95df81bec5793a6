/**
 * Signed tokens for speech-call webhooks. Each key of each node of a call's menu carries one
 * in its tracking webhook body, naming (call, node, key); a forged or altered one fails
 * `verifyNodeToken`, and the key id inside lets secrets rotate: the new one signs, the old
 * ones keep verifying tokens already sent.
 *
 * Format: `v1.<keyId>.<base64url payload>.<base64url HMAC-SHA256 of "v1.<keyId>.<payload>">`.
 *
 * @example
 * const token = signNodeToken({ callId, node: 'main', key: '1' }, { id: 'k2', key: secret });
 * verifyNodeToken(token, [{ id: 'k2', key: secret }, { id: 'k1', key: old }]); // { callId, node: 'main', key: '1' }
 */
import { createHmac, createSecretKey, type KeyObject, timingSafeEqual } from 'node:crypto';

export interface NodeToken {
  callId: string;
  node: string;
  key: string;
}

export interface TokenSecret {
  /** Short id of the secret: letters, digits, `_` or `-`. */
  id: string;
  key: Buffer | string;
}

const VERSION = 'v1';
const KEY_ID = /^[A-Za-z0-9_-]{1,64}$/;

// A call's menu carries one token per (node, key), dozens per call: the secret is imported
// once as a KeyObject instead of on every HMAC (about half the cost of signing a token).
// Keyed by the secret object; a `key` replaced on that object is imported again.
const keyObjects = new WeakMap<TokenSecret, { key: Buffer | string; object: KeyObject }>();

function keyObject(secret: TokenSecret): KeyObject {
  const hit = keyObjects.get(secret);
  if (hit && hit.key === secret.key) return hit.object;
  const object = createSecretKey(
    typeof secret.key === 'string' ? Buffer.from(secret.key, 'utf8') : secret.key,
  );
  keyObjects.set(secret, { key: secret.key, object });
  return object;
}

function mac(secret: TokenSecret, signed: string): Buffer {
  return createHmac('sha256', keyObject(secret)).update(signed).digest();
}

/**
 * A token naming one (call, node, key), signed with `secret`.
 *
 * @example
 * signNodeToken({ callId: 'c1', node: 'main/r1', key: 'wrong' }, { id: 'k1', key: 'secret' })
 * // 'v1.k1.eyJjIjoiYzEi...'
 */
export function signNodeToken(token: NodeToken, secret: TokenSecret): string {
  if (!KEY_ID.test(secret.id))
    throw new Error(`token secret id "${secret.id}" must match ${KEY_ID}`);
  const payload = Buffer.from(
    JSON.stringify({ c: token.callId, n: token.node, k: token.key }),
  ).toString('base64url');
  const signed = `${VERSION}.${secret.id}.${payload}`;
  return `${signed}.${createHmac('sha256', keyObject(secret)).update(signed).digest('base64url')}`;
}

/**
 * The (call, node, key) of a token signed by one of `secrets`; null for anything else.
 *
 * @example
 * verifyNodeToken('v1.k1.bad.sig', secrets) // null
 */
export function verifyNodeToken(token: unknown, secrets: readonly TokenSecret[]): NodeToken | null {
  if (typeof token !== 'string' || token.length > 4096) return null;
  const parts = token.split('.');
  if (parts.length !== 4) return null;
  const [version, keyId, payload, signature] = parts as [string, string, string, string];
  if (version !== VERSION) return null;
  const given = Buffer.from(signature, 'base64url');
  // base64url decoding forgives stray bits and characters; only the canonical spelling counts
  if (given.toString('base64url') !== signature) return null;
  const signed = `${version}.${keyId}.${payload}`;
  let valid = false;
  for (const secret of secrets) {
    if (secret.id !== keyId) continue;
    const expected = mac(secret, signed);
    if (given.length === expected.length && timingSafeEqual(given, expected)) valid = true;
  }
  if (!valid) return null;
  try {
    const data: unknown = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
    if (typeof data !== 'object' || data === null) return null;
    const { c, n, k } = data as Record<string, unknown>;
    if (typeof c !== 'string' || typeof n !== 'string' || typeof k !== 'string') return null;
    return { callId: c, node: n, key: k };
  } catch {
    return null;
  }
}
