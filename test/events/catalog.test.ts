/**
 * The catalog as published: docs/events.md has a section per type whose example is valid
 * data of that type, and its table lists exactly EVENT_TYPES; /openapi.json has one
 * `webhooks` entry per type whose body is `{ type, timestamp, data }`.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REFRESH_MS } from '../../src/events/subscriptions.ts';
import { EVENT_CATALOG, EVENT_TYPES, type EventType } from '../../src/events/types.ts';
import { buildTestApp, type Json, readJson } from '../support/app.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';

const DOC = readFileSync('docs/events.md', 'utf8');

/** The first ```json block after `### \`type\`` in the doc. */
function exampleOf(type: string): unknown {
  const start = DOC.indexOf(`### \`${type}\``);
  if (start < 0) return undefined;
  const block = /```json\n([\s\S]*?)```/.exec(DOC.slice(start));
  return block ? JSON.parse(block[1]!) : undefined;
}

describe('docs/events.md', () => {
  it('lists exactly the catalog in its table', () => {
    const table = [...DOC.matchAll(/^\| `([a-z.]+)` \| `[^`]+` \|/gm)].map((m) => m[1]);
    expect(table).toEqual(EVENT_TYPES);
    for (const type of EVENT_TYPES) {
      expect(DOC).toContain(`| \`${type}\` | \`${EVENT_CATALOG[type].subject}\` |`);
    }
  });

  it.each(EVENT_TYPES)('gives a valid example of %s', (type: EventType) => {
    const example = exampleOf(type);
    expect(example, `no example for ${type}`).toBeDefined();
    const parsed = EVENT_CATALOG[type].data.safeParse(example);
    expect(parsed.error?.issues ?? []).toEqual([]);
  });

  it('says how soon, at worst, another instance sees a new endpoint', () => {
    expect(DOC).toContain(`within **${REFRESH_MS / 1000} seconds**`);
  });
});

describe('/openapi.json webhooks', () => {
  let db: TestDatabase;
  let doc: Json;
  beforeAll(async () => {
    db = await createTestDatabase('pglite');
    doc = await readJson(await buildTestApp(db.database).app.request('/openapi.json'));
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('has one POST per type, its body the envelope of that type, with the signature headers', () => {
    expect(Object.keys(doc.webhooks)).toEqual(EVENT_TYPES);
    for (const type of EVENT_TYPES) {
      const op = doc.webhooks[type].post;
      expect(op.parameters.map((p: Json) => [p.in, p.name, p.required])).toEqual([
        ['header', 'webhook-id', true],
        ['header', 'webhook-timestamp', true],
        ['header', 'webhook-signature', true],
      ]);
      const ref = op.requestBody.content['application/json'].schema.$ref as string;
      const body = doc.components.schemas[ref.split('/').pop()!];
      expect(body.required).toEqual(['type', 'timestamp', 'data']);
      expect(body.properties.type.enum ?? [body.properties.type.const]).toEqual([type]);
      expect(body.properties.data.$ref).toMatch(/^#\/components\/schemas\/\w+EventData$/);
    }
  });
});
