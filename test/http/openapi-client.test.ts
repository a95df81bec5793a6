/**
 * The typed client generated from /openapi.json (issue 22, point 8): clients/ts/schema.d.ts is
 * what `npm run client:generate` writes for the routes as they are (so it cannot drift), and
 * the client built on it (clients/ts/client.ts) sends a message to the running server and
 * reads its timeline, type-checked by tsc like every test.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../../clients/ts/client.ts';
import { generateSchema, SCHEMA_FILE } from '../../clients/ts/generate.ts';
import type { RunningServer } from '../../src/server.ts';
import { phone, uniq } from '../support/app.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { eventually, startTestServer } from '../support/server.ts';

describe('the generated TypeScript client', () => {
  it('is committed as generated from the current routes (npm run client:generate)', async () => {
    const committed = readFileSync(SCHEMA_FILE, 'utf8');
    expect(
      (await generateSchema()) === committed,
      'clients/ts/schema.d.ts differs from /openapi.json: run npm run client:generate and commit it',
    ).toBe(true);
  }, 60_000);

  describe('against the running server', () => {
    let db: TestDatabase;
    let server: RunningServer;
    beforeAll(async () => {
      db = await createTestDatabase('pglite');
      server = await startTestServer(db.database);
    });
    afterAll(async () => {
      await server?.stop();
      await db?.drop();
    });

    it('sends a message and reads its timeline', async () => {
      const api = createClient({ baseUrl: server.url });
      const customerMessageId = uniq('client');
      const sent = await api.POST('/v1/messages', {
        body: {
          messages: [{ type: 'sms', from: 'Shop', to: phone(), text: 'hi', customerMessageId }],
        },
      });
      expect(sent.status).toBe(202);
      const id = sent.data?.messages[0]?.id;
      expect(id).toMatch(/\S/);

      const delivered = await eventually(
        async () => {
          const one = await api.GET('/v1/messages/{ref}', { path: { ref: customerMessageId } });
          const statuses = one.data?.timeline.map((e) => e.status) ?? [];
          return statuses.includes('delivered') ? one.data : undefined;
        },
        10_000,
        'the message delivered',
      );
      expect(delivered.id).toBe(id);
      expect(delivered.timeline[0]?.status).toBe('queued');

      const missing = await api.GET('/v1/messages/{ref}', { path: { ref: uniq('nothing') } });
      expect(missing.status).toBe(404);
      // typed by the document: an error's code is one of those the operation lists
      type Code = NonNullable<typeof missing.error>['code'];
      const listed: Code = 'NOT_FOUND';
      // @ts-expect-error: reading a message never answers CONFLICT, so it is no Code here
      const unlisted: Code = 'CONFLICT';
      expect([listed, unlisted]).toContain(missing.error?.code);
    });
  });
});
