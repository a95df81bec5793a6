/**
 * A flow's `send:` through every way the provider's docs offer, end to end over real HTTP in
 * both sandbox dialects: an RCS message with a single fallback (docs/api/smsbat/rcs.md) and a
 * message through the cascade API with typed variables (docs/api/cascade/variables.md).
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../../src/server.ts';
import { phone, readJson } from '../support/app.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { eventually, startTestServer } from '../support/server.ts';

const FLOW = `title: Pickup
params:
  name: string
  parcel: string
assert: { outcomeOnEveryPath: false }
menus:
  main:
    intro: "https://cdn.example.com/ivr/en/pickup.mp3"
    keys:
      "1":
        - outcome: rcs
        - send:
            type: rcs
            text: "Parcel {{parcel}} is ready, {{name}}"
            messageData:
              buttons:
                - text: Directions
                  action: { type: openUrl, url: "https://example.com/branch" }
            fallback: { type: sms, text: "Parcel {{parcel}} is ready" }
        - hangup
      "2":
        - outcome: cascade
        - send:
            type: cascade
            messageType: transaction
            text: "Hi %name=1%, parcel %name=2% is ready"
            variables:
              - { id: 1, type: name, value: "{{name}}" }
              - { id: 2, type: name, value: "{{parcel}}" }
        - hangup
`;

for (const dialect of ['docs', 'compact'] as const) {
  describe(`a flow's send: through RCS and the cascade (${dialect})`, () => {
    let dir: string;
    let db: TestDatabase;
    let server: RunningServer;
    beforeAll(async () => {
      dir = await mkdtemp(join(tmpdir(), 'switchboard-flows-'));
      await writeFile(join(dir, 'pickup.yaml'), FLOW);
      db = await createTestDatabase('pglite');
      server = await startTestServer(db.database, {
        env: { FLOWS_DIR: dir, SANDBOX_DIALECT: dialect },
      });
    });
    afterAll(async () => {
      await server?.stop();
      await db?.drop();
      await rm(dir, { recursive: true, force: true });
    });

    for (const [key, type, text] of [
      ['1', 'rcs', 'Parcel P-1 is ready, Ann'],
      ['2', 'cascade', 'Hi Ann, parcel P-1 is ready'],
    ] as const) {
      it(`key ${key}: a ${type} follow-up, delivered`, async () => {
        const to = phone();
        const scripted = await fetch(`${server.url}/sandbox/_control/scripts`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ to, keys: [key] }),
        });
        expect(scripted.status).toBe(201);
        const res = await fetch(`${server.url}/v1/calls`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            flow: 'pickup',
            to,
            from: 'Acme',
            vars: { name: 'Ann', parcel: 'P-1' },
          }),
        });
        expect(res.status, JSON.stringify(await readJson(res.clone()))).toBe(202);
        const { id } = await readJson(res);
        const call = await eventually(
          async () => {
            const c = await readJson(await fetch(`${server.url}/v1/calls/${id}`));
            const f = c.messages.find((m: { role: string }) => m.role === 'follow-up');
            return c.state === 'ended' && f?.status === 'delivered' && c;
          },
          20_000,
          `the ${type} follow-up delivered`,
        );
        expect(call.outcome).toBe(type);
        const followUp = call.messages.find((m: { role: string }) => m.role === 'follow-up');
        expect(followUp.type).toBe(type);
        expect(followUp.to).toBe(to);
        // what the provider received, rendered
        const message = await readJson(await fetch(`${server.url}/v1/messages/${followUp.id}`));
        const sent =
          type === 'rcs'
            ? server.sandbox!.messages.list({ customerMessageId: followUp.customerMessageId })
            : (await readJson(await fetch(`${server.url}/sandbox/_control/cascade`))).filter(
                (c: { messageId: string }) => c.messageId === message.providerMessageId,
              );
        expect(sent).toHaveLength(1);
        expect(JSON.stringify(sent[0])).toContain(text);
      });
    }
  });
}
