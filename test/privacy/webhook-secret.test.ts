/**
 * Speech-call token secrets: WEBHOOK_SECRET (the first signs, all verify) or, unset, one
 * generated once and kept in the database. Then through real routes: a token from one call
 * presented on another, an altered token, and a rotation during which old calls keep working
 * while the new secret signs new calls.
 */
import { eq } from 'drizzle-orm';
import { beforeAll, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import { messages, settings } from '../../src/db/schema/index.ts';
import { signNodeToken, verifyNodeToken } from '../../src/flows/token.ts';
import {
  GENERATED_SECRET_KEY,
  loadWebhookSecrets,
  secretKeyId,
} from '../../src/privacy/webhook-secret.ts';
import { buildTestApp, json, phone, readJson } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';

describeEachEngine('webhook secrets', (ctx) => {
  const db = () => ctx.database().db;

  it('generates one secret when none is configured, once, for every instance', async () => {
    const [a, b, c] = await Promise.all([
      loadWebhookSecrets(db(), { webhookSecret: undefined }),
      loadWebhookSecrets(db(), { webhookSecret: undefined }),
      loadWebhookSecrets(db(), { webhookSecret: undefined }),
    ]);
    expect(a!.signing).toEqual(b!.signing);
    expect(a!.signing).toEqual(c!.signing);
    expect(a!.verifying).toEqual([a!.signing]);
    const [row] = await db().select().from(settings).where(eq(settings.key, GENERATED_SECRET_KEY));
    expect(row?.value).toBe(a!.signing.key);
    expect(String(a!.signing.key).length).toBeGreaterThanOrEqual(40);
    // after a restart: the same
    expect(await loadWebhookSecrets(db(), {})).toEqual(a);
  });

  it('signs with the first configured secret and verifies with all, the generated one too', async () => {
    const generated = await loadWebhookSecrets(db(), {});
    const secrets = await loadWebhookSecrets(db(), { webhookSecret: ' new-secret , old-secret,' });
    expect(secrets.signing).toEqual({ id: secretKeyId('new-secret'), key: 'new-secret' });
    expect(secrets.verifying.map((s) => s.key)).toEqual([
      'new-secret',
      'old-secret',
      generated.signing.key,
    ]);
    // a call signed before WEBHOOK_SECRET was set still verifies after
    const before = signNodeToken({ callId: 'c1', node: 'main', key: '1' }, generated.signing);
    expect(verifyNodeToken(before, secrets.verifying)).toEqual({
      callId: 'c1',
      node: 'main',
      key: '1',
    });
  });

  it('derives stable, distinct key ids that do not show the secret', () => {
    expect(secretKeyId('s3cret')).toBe(secretKeyId('s3cret'));
    expect(secretKeyId('s3cret')).not.toBe(secretKeyId('s3cret2'));
    expect(secretKeyId('s3cret')).toMatch(/^k[A-Za-z0-9_-]{11}$/);
    expect(secretKeyId('s3cret')).not.toContain('s3cret');
  });
});

describeEachEngine('speech-call tokens through the routes', (ctx) => {
  let before: App; // WEBHOOK_SECRET=old
  let after: App; // WEBHOOK_SECRET=new,old
  let onlyNew: App; // WEBHOOK_SECRET=new (the old one retired)

  async function appWith(webhookSecret: string) {
    const secrets = await loadWebhookSecrets(ctx.database().db, { webhookSecret });
    return buildTestApp(ctx.database(), { secrets }).app;
  }

  /** Starts a call and returns what its menu's first key webhook would carry. */
  async function startCall(app: App) {
    const to = phone();
    const res = await app.request(
      '/v1/calls',
      json({
        flow: 'appointment-reminder',
        to,
        from: 'Clinic',
        vars: { name: 'Ann', date: 'Monday' },
      }),
    );
    expect(res.status).toBe(202);
    const call = await readJson(res);
    const [row] = await ctx
      .database()
      .db.select({ payload: messages.payload })
      .from(messages)
      .where(eq(messages.id, call.messageId));
    const menu = (row!.payload as { menu: { dtmfActions: Record<string, { body?: unknown }[]> }[] })
      .menu;
    const action = menu[0]!.dtmfActions.d1![0]!.body as { token: string };
    return { id: call.id as string, to, token: action.token };
  }

  const webhook = (app: App, to: string, token: string) =>
    app.request('/hooks/speechcall', json({ from: 'Clinic', to, mid: '', action: { token } }));

  beforeAll(async () => {
    before = await appWith('old-secret-a1b2c3');
    after = await appWith('new-secret-d4e5f6,old-secret-a1b2c3');
    onlyNew = await appWith('new-secret-d4e5f6');
  });

  it('keeps old calls working after a rotation, while the new secret signs new calls', async () => {
    const oldCall = await startCall(before);
    const newCall = await startCall(after);
    expect(oldCall.token.split('.')[1]).toBe(secretKeyId('old-secret-a1b2c3'));
    expect(newCall.token.split('.')[1]).toBe(secretKeyId('new-secret-d4e5f6'));
    expect((await webhook(after, oldCall.to, oldCall.token)).status).toBe(200);
    expect((await webhook(after, newCall.to, newCall.token)).status).toBe(200);
    // an instance not yet rotated knows nothing of the new secret; a retired secret is refused
    expect((await webhook(before, newCall.to, newCall.token)).status).toBe(401);
    const another = await startCall(before);
    expect((await webhook(onlyNew, another.to, another.token)).status).toBe(401);
  });

  it('refuses a token from one call presented on another, and an altered token', async () => {
    const a = await startCall(after);
    const b = await startCall(after);
    const replayed = await webhook(after, b.to, a.token);
    expect(replayed.status).toBe(401);
    expect((await readJson(replayed)).error.code).toBe('UNAUTHORIZED');
    const [v, kid, payload, sig] = a.token.split('.') as [string, string, string, string];
    const forgedPayload = Buffer.from(JSON.stringify({ c: b.id, n: 'main', k: '1' })).toString(
      'base64url',
    );
    for (const altered of [
      `${v}.${kid}.${forgedPayload}.${sig}`,
      `${v}.${kid}.${payload}.${sig.slice(0, -2)}AA`,
      `${v}.kOTHERKEYID0.${payload}.${sig}`,
      '',
    ]) {
      expect((await webhook(after, b.to, altered)).status, altered).toBe(401);
    }
    // the call's own token on its own call is fine
    expect((await webhook(after, a.to, a.token)).status).toBe(200);
  });
});
