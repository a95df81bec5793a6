/**
 * Signing events the Standard Webhooks way, so that a receiver can check any request with the
 * `standardwebhooks` package (or twenty lines of its own): HMAC-SHA256 over
 * `${webhook-id}.${webhook-timestamp}.${body}`, keyed with the base64-decoded part of the
 * endpoint's `whsec_...` secret, sent as `v1,<base64>`. During a rotation overlap the request
 * carries one signature per live secret, space-separated, and each one alone verifies.
 *
 * node:crypto only: the tests check these signatures with the package, independently.
 *
 * @example
 * const secret = newEndpointSecret(); // 'whsec_...' (24 random bytes)
 * const headers = signatureHeaders([secret], webhookId(event.id), new Date(), body);
 * // { 'webhook-id': 'evt_0193...', 'webhook-timestamp': '1893456000', 'webhook-signature': 'v1,K5oZ...=' }
 */
import { createHmac, randomBytes } from 'node:crypto';

const PREFIX = 'whsec_';

export type SignatureHeaders = Record<
  'webhook-id' | 'webhook-timestamp' | 'webhook-signature',
  string
>;

/** A new endpoint secret: `whsec_` and 24 random bytes in base64 (the specification's minimum). */
export function newEndpointSecret(): string {
  return `${PREFIX}${randomBytes(24).toString('base64')}`;
}

/** The `webhook-id` of an event: `evt_` and its uuid without dashes; the same on every attempt. */
export function webhookId(eventUuid: string): string {
  return `evt_${eventUuid.replaceAll('-', '').toLowerCase()}`;
}

/** The HMAC key of a `whsec_...` secret (the base64 after the prefix). */
function keyOf(secret: string): Buffer {
  const key = Buffer.from(
    secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret,
    'base64',
  );
  if (key.length === 0) throw new Error('an endpoint secret is empty');
  return key;
}

/**
 * The three headers of one attempt. `timestamp` is the attempt's time (not the event's): the
 * receiver refuses one too far from its own clock, which is what stops a replayed request.
 * One signature per secret, newest first as given.
 */
export function signatureHeaders(
  secrets: readonly string[],
  id: string,
  timestamp: Date,
  body: string,
): SignatureHeaders {
  if (secrets.length === 0) throw new Error('no secret to sign with');
  const seconds = Math.floor(timestamp.getTime() / 1000);
  const signed = `${id}.${seconds}.${body}`;
  const signatures = secrets.map(
    (s) => `v1,${createHmac('sha256', keyOf(s)).update(signed, 'utf8').digest('base64')}`,
  );
  return {
    'webhook-id': id,
    'webhook-timestamp': String(seconds),
    'webhook-signature': signatures.join(' '),
  };
}
