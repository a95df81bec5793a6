/**
 * Signed tokens for speech-call webhooks. Each key of each node of a call's menu carries one
 * in its tracking webhook body, naming (call, node, key); a forged or altered one fails
 * `verifyNodeToken`, and the key id inside lets secrets rotate: the new one signs, the old
 * ones keep verifying tokens already sent.
 *
 * Format v2 (signed now): `v2.<keyId>.<base64url payload>.<tag>`, the tag the first 22
 * characters of the base64url HMAC-SHA256 of `v2.<keyId>.<payload>` (the MAC truncated to its
 * first 132 bits, as RFC 2104 section 5 allows; cut in its text, which costs nothing more than
 * the whole), the payload binary: a form byte, the call (16 bytes when it is a UUID,
 * else its UTF-8 with a length), zero padding to a multiple of 3 bytes, the node's UTF-8 with
 * a length, then the key's UTF-8. A menu has an entry for every input of every node (156 for
 * the appointment reminder), so the token is most of its size: ~69 characters instead of
 * v1's ~153 (JSON `{"c","n","k"}` with the whole HMAC), which is still verified, so calls
 * started before an upgrade keep working.
 *
 * @example
 * const token = signNodeToken({ callId, node: 'main', key: '1' }, { id: 'k2', key: secret });
 * verifyNodeToken(token, [{ id: 'k2', key: secret }, { id: 'k1', key: old }]); // { callId, node: 'main', key: '1' }
 */
import { createHmac, createSecretKey, type KeyObject, timingSafeEqual } from 'node:crypto';
import { isUuid } from '../ids.ts';

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

const KEY_ID = /^[A-Za-z0-9_-]{1,64}$/;
/** Characters of the base64url HMAC-SHA256 a v2 token keeps: 132 of its 256 bits. */
const TAG_CHARS = 22;
/** The payload's first byte: how the call is written. */
const CALL_UUID = 1;
const CALL_TEXT = 2;

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

/** LEB128: 7 bits a byte, low first, the high bit set on all but the last. */
function lengthPrefix(n: number): number[] {
  const out: number[] = [];
  do {
    out.push((n & 0x7f) | (n > 0x7f ? 0x80 : 0));
    n >>>= 7;
  } while (n > 0);
  return out;
}

function readLength(bytes: Buffer, at: number): [length: number, next: number] | null {
  let n = 0;
  for (let shift = 0; shift < 28; shift += 7) {
    if (at >= bytes.length) return null;
    const b = bytes[at++]!;
    n |= (b & 0x7f) << shift;
    if ((b & 0x80) === 0) return [n, at];
  }
  return null;
}

function utf8(text: string, what: string): Buffer {
  const bytes = Buffer.from(text, 'utf8');
  // a lone surrogate would come back as U+FFFD: a token must name exactly what was signed
  if (bytes.toString('utf8') !== text) throw new Error(`a token's ${what} must be UTF-8 text`);
  return bytes;
}

/** The call's part of the payload, padded with zeros to a multiple of 3 bytes. */
function callPart(callId: string): Buffer {
  let head: Buffer;
  if (isUuid(callId) && callId === callId.toLowerCase()) {
    head = Buffer.concat([Buffer.of(CALL_UUID), Buffer.from(callId.replaceAll('-', ''), 'hex')]);
  } else {
    const text = utf8(callId, 'call id');
    head = Buffer.concat([Buffer.of(CALL_TEXT, ...lengthPrefix(text.length)), text]);
  }
  return Buffer.concat([head, Buffer.alloc((3 - (head.length % 3)) % 3)]);
}

/** The (node, key) part of the payload. */
function inputPart(node: string, key: string): Buffer {
  const n = utf8(node, 'node');
  return Buffer.concat([Buffer.of(...lengthPrefix(n.length)), n, utf8(key, 'key')]);
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
  tail = inputPart(node, key).toString('base64url');
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
 * Signs the tokens of one call, its part of the payload encoded once: that part is a multiple
 * of 3 bytes, so the payload's base64url is the call's part followed by the (cached) encoding
 * of the node's and key's, and a call's dozens of tokens cost an HMAC each and little else.
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
  const head = `v2.${secret.id}.${callPart(callId).toString('base64url')}`;
  const key = keyObject(secret);
  return (node, nodeKey) => {
    const signed = head + payloadTail(node, nodeKey);
    const mac = createHmac('sha256', key).update(signed).digest('base64url');
    return `${signed}.${mac.slice(0, TAG_CHARS)}`;
  };
}

/**
 * The (call, node, key) of a token signed by one of `secrets` (v2, or v1 from before it);
 * null for anything else.
 *
 * @example
 * verifyNodeToken('v2.k1.bad.sig', secrets) // null
 */
export function verifyNodeToken(token: unknown, secrets: readonly TokenSecret[]): NodeToken | null {
  if (typeof token !== 'string' || token.length > 4096) return null;
  const parts = token.split('.');
  if (parts.length !== 4) return null;
  const [version, keyId, payload, signature] = parts as [string, string, string, string];
  if (version !== 'v2' && version !== 'v1') return null;
  const signed = `${version}.${keyId}.${payload}`;
  let valid = false;
  if (version === 'v2') {
    // the tag is compared as text: the first 22 characters of the MAC's base64url
    const given = Buffer.from(signature);
    if (given.length !== TAG_CHARS) return null;
    for (const secret of secrets) {
      if (secret.id !== keyId) continue;
      const expected = Buffer.from(mac(secret, signed).toString('base64url').slice(0, TAG_CHARS));
      if (timingSafeEqual(given, expected)) valid = true;
    }
  } else {
    const given = Buffer.from(signature, 'base64url');
    // base64url decoding forgives stray bits and characters; only the canonical spelling counts
    if (given.toString('base64url') !== signature) return null;
    for (const secret of secrets) {
      if (secret.id !== keyId) continue;
      const expected = mac(secret, signed);
      if (given.length === expected.length && timingSafeEqual(given, expected)) valid = true;
    }
  }
  if (!valid) return null;
  return version === 'v2' ? readV2(payload) : readV1(payload);
}

function readV2(payload: string): NodeToken | null {
  const bytes = Buffer.from(payload, 'base64url');
  let at = 1;
  let callId: string;
  if (bytes[0] === CALL_UUID) {
    if (bytes.length < 17) return null;
    const hex = bytes.subarray(1, 17).toString('hex');
    callId = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
    at = 17;
  } else if (bytes[0] === CALL_TEXT) {
    const length = readLength(bytes, at);
    if (!length || length[1] + length[0] > bytes.length) return null;
    callId = bytes.subarray(length[1], length[1] + length[0]).toString('utf8');
    at = length[1] + length[0];
  } else {
    return null;
  }
  at += (3 - (at % 3)) % 3;
  const nodeLength = readLength(bytes, at);
  if (!nodeLength || nodeLength[1] + nodeLength[0] > bytes.length) return null;
  const node = bytes.subarray(nodeLength[1], nodeLength[1] + nodeLength[0]).toString('utf8');
  const key = bytes.subarray(nodeLength[1] + nodeLength[0]).toString('utf8');
  return { callId, node, key };
}

function readV1(payload: string): NodeToken | null {
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
