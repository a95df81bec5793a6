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
// Keyed weakly by the secret object, so an entry lives no longer than its secret; a `key`
// replaced on that object is imported again.
const importedSecretKeys = new WeakMap<TokenSecret, { key: Buffer | string; object: KeyObject }>();

function keyObject(secret: TokenSecret): KeyObject {
  const hit = importedSecretKeys.get(secret);
  if (hit && hit.key === secret.key) return hit.object;
  const object = createSecretKey(
    typeof secret.key === 'string' ? Buffer.from(secret.key, 'utf8') : secret.key,
  );
  importedSecretKeys.set(secret, { key: secret.key, object });
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
  return nodeTokenSigner(token.callId, secret)(token.node, token.key);
}

/** Most payload tails kept; past it the cache starts over (a few dozen per flow version). */
const MAX_PAYLOAD_TAILS = 10_000;
// Payload tails by node, then key: the same few dozen for every call of a flow version. Module-
// level, since a tail depends on (node, key) alone, whatever the call or the secret.
const payloadTailsByNode = new Map<string, Map<string, string>>();
let payloadTailCount = 0;

function payloadTail(node: string, key: string): string {
  let byKey = payloadTailsByNode.get(node);
  let tail = byKey?.get(key);
  if (tail !== undefined) return tail;
  tail = Buffer.from(`"n":${JSON.stringify(node)},"k":${JSON.stringify(key)}}`).toString(
    'base64url',
  );
  if (payloadTailCount >= MAX_PAYLOAD_TAILS) {
    payloadTailsByNode.clear();
    payloadTailCount = 0;
    byKey = undefined;
  }
  if (!byKey) {
    byKey = new Map();
    payloadTailsByNode.set(node, byKey);
  }
  byKey.set(key, tail);
  payloadTailCount++;
  return tail;
}

/**
 * Signs the tokens of one call, its part of the payload encoded once. The payload's JSON is
 * padded with spaces after the call id to a multiple of 3 bytes, so its base64url is the
 * call's part followed by the (cached) encoding of the node's and key's: a call's dozens of
 * tokens cost an HMAC each and little else. The spaces are JSON whitespace, which
 * `verifyNodeToken` reads past (tokens signed before them verify as they did).
 *
 * @example
 * const sign = nodeTokenSigner(callId, secret);
 * verifyNodeToken(sign('main', '1'), [secret]); // { callId, node: 'main', key: '1' }
 */
export function nodeTokenSigner(
  callId: string,
  secret: TokenSecret,
): (node: string, key: string) => string {
  if (!KEY_ID.test(secret.id))
    throw new Error(`token secret id "${secret.id}" must match ${KEY_ID}`);
  const json = `{"c":${JSON.stringify(callId)},`;
  const bytes = Buffer.byteLength(json);
  const head = `${VERSION}.${secret.id}.${Buffer.from(json.padEnd(json.length + ((3 - (bytes % 3)) % 3))).toString('base64url')}`;
  const key = keyObject(secret);
  return (node, nodeKey) => {
    const signed = head + payloadTail(node, nodeKey);
    return `${signed}.${createHmac('sha256', key).update(signed).digest('base64url')}`;
  };
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
