/**
 * Our signatures (src/events/sign.ts, node:crypto) checked by the Standard Webhooks reference
 * library, so a receiver using it accepts what Switchboard sends.
 */
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { newEndpointSecret, signatureHeaders, webhookId } from '../../src/events/sign.ts';

const body = JSON.stringify({
  type: 'call.ended',
  timestamp: '2030-01-01T12:00:00.000Z',
  data: { callId: 'c1', text: 'é ✓' },
});

describe('signing', () => {
  it('makes secrets the specification describes: whsec_ and 24 random bytes', () => {
    const a = newEndpointSecret();
    const b = newEndpointSecret();
    expect(a).toMatch(/^whsec_[A-Za-z0-9+/]+={0,2}$/);
    expect(Buffer.from(a.slice('whsec_'.length), 'base64')).toHaveLength(24);
    expect(a).not.toBe(b);
  });

  it('names an event evt_ and its uuid without dashes', () => {
    expect(webhookId('0193F1C2-7B4E-7C1A-9F3D-2A6B8C0D1E2F')).toBe(
      'evt_0193f1c27b4e7c1a9f3d2a6b8c0d1e2f',
    );
  });

  it('signs so that standardwebhooks verifies, with the attempt time in seconds', () => {
    const secret = newEndpointSecret();
    const now = new Date();
    const headers = signatureHeaders([secret], 'evt_1', now, body);
    expect(headers['webhook-id']).toBe('evt_1');
    expect(headers['webhook-timestamp']).toBe(String(Math.floor(now.getTime() / 1000)));
    expect(headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    expect(new Webhook(secret).verify(body, headers)).toEqual(JSON.parse(body));
  });

  it('signs with every secret during a rotation: each one alone verifies', () => {
    const [newer, older] = [newEndpointSecret(), newEndpointSecret()];
    const headers = signatureHeaders([newer, older], 'evt_2', new Date(), body);
    expect(headers['webhook-signature'].split(' ')).toHaveLength(2);
    expect(new Webhook(newer).verify(body, headers)).toEqual(JSON.parse(body));
    expect(new Webhook(older).verify(body, headers)).toEqual(JSON.parse(body));
    expect(() => new Webhook(newEndpointSecret()).verify(body, headers)).toThrow(
      WebhookVerificationError,
    );
  });

  it('fails verification when the body, the id or the time is not what was signed', () => {
    const secret = newEndpointSecret();
    const at = new Date();
    const headers = signatureHeaders([secret], 'evt_3', at, body);
    const wh = new Webhook(secret);
    expect(() => wh.verify(body.replace('c1', 'c2'), headers)).toThrow(WebhookVerificationError);
    expect(() => wh.verify(body, { ...headers, 'webhook-id': 'evt_4' })).toThrow(
      WebhookVerificationError,
    );
    const later = String(Number(headers['webhook-timestamp']) + 1);
    expect(() => wh.verify(body, { ...headers, 'webhook-timestamp': later })).toThrow(
      WebhookVerificationError,
    );
  });

  it('refuses to sign with no secret', () => {
    expect(() => signatureHeaders([], 'evt_5', new Date(), body)).toThrow(/no secret/);
  });
});
