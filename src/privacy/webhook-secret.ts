/**
 * The secrets that sign and verify speech-call webhook tokens (flows/token.ts).
 *
 * - WEBHOOK_SECRET set: its comma-separated secrets all verify, the first one signs. To
 *   rotate, put the new secret first and keep the old one after it until the calls signed
 *   with it are over.
 * - Unset: a secret is generated once and kept in the `settings` table, so every instance
 *   and every restart signs and verifies with the same one. It keeps verifying after
 *   WEBHOOK_SECRET is set later, so calls in flight survive that change too (to retire it,
 *   delete the `webhook_secret` row of `settings`).
 *
 * Each secret's key id (carried in the token) is derived from the secret itself, so it is
 * stable across restarts and instances without being configured.
 *
 * @example
 * const secrets = await loadWebhookSecrets(db, config);
 * const token = signNodeToken({ callId, node, key }, secrets.signing);
 * verifyNodeToken(token, secrets.verifying);
 */
import { createHash, randomBytes } from 'node:crypto';
import { eq } from 'drizzle-orm';
import type { Config } from '../config.ts';
import type { Queryable } from '../db/client.ts';
import { settings } from '../db/schema/index.ts';
import type { TokenSecret } from '../flows/token.ts';

export interface WebhookSecrets {
  /** signs the tokens of new calls */
  signing: TokenSecret;
  /** every secret a token may have been signed with, the signing one first */
  verifying: TokenSecret[];
}

export const GENERATED_SECRET_KEY = 'webhook_secret';

/**
 * A short, stable id for a secret. It is a hash of the secret under a fixed label, so it says
 * nothing a token's own HMAC does not already say.
 *
 * @example
 * secretKeyId('s3cret') // 'k' followed by 11 base64url characters, the same every time
 */
export function secretKeyId(secret: string): string {
  return `k${createHash('sha256').update('switchboard webhook key id\n').update(secret).digest('base64url').slice(0, 11)}`;
}

function asSecret(value: string): TokenSecret {
  return { id: secretKeyId(value), key: value };
}

/** The generated secret, creating it when no instance has yet. */
async function generatedSecret(db: Queryable, create: boolean): Promise<string | undefined> {
  if (create) {
    // ON CONFLICT DO NOTHING, then read: instances starting together agree on the first one
    await db
      .insert(settings)
      .values({ key: GENERATED_SECRET_KEY, value: randomBytes(32).toString('base64url') })
      .onConflictDoNothing({ target: settings.key });
  }
  const [row] = await db
    .select({ value: settings.value })
    .from(settings)
    .where(eq(settings.key, GENERATED_SECRET_KEY));
  return row?.value;
}

/** Reads (and, with no WEBHOOK_SECRET, creates once) the signing and verifying secrets. */
export async function loadWebhookSecrets(
  db: Queryable,
  config: { webhookSecret?: Config['webhookSecret'] },
): Promise<WebhookSecrets> {
  const configured = [
    ...new Set(
      (config.webhookSecret ?? '')
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s !== ''),
    ),
  ];
  const generated = await generatedSecret(db, configured.length === 0);
  const all = [...new Set([...configured, ...(generated === undefined ? [] : [generated])])].map(
    asSecret,
  );
  const signing = all[0];
  if (!signing) throw new Error('no webhook secret could be read or generated');
  return { signing, verifying: all };
}
