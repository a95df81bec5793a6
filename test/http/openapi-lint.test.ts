/**
 * /openapi.json is a document tools can use (issue 22, point 8): `redocly lint` with its
 * recommended rules finds no error and no warning in it as a deployment serves it (PUBLIC_URL
 * set: the rules refuse a `localhost` server), every operation has a stable camelCase
 * operationId (SDK generators name their functions by them) and an explicit `security`.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type Json, readJson } from '../support/app.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { onlyIf } from '../support/skip.ts';

const REDOCLY = join(process.cwd(), 'node_modules', '.bin', 'redocly');
const PUBLIC_URL = 'https://switchboard.internal';

interface Problem {
  ruleId: string;
  severity: string;
  message: string;
  location: { pointer: string }[];
}

/** The operations of `doc`, as `METHOD /path` with their objects. */
function operations(doc: Json): [string, Json][] {
  return Object.entries(doc.paths as Record<string, Record<string, Json>>).flatMap(([path, item]) =>
    Object.entries(item).map(([method, op]): [string, Json] => [
      `${method.toUpperCase()} ${path}`,
      op,
    ]),
  );
}

describe('/openapi.json for tools', () => {
  let db: TestDatabase;
  let doc: Json;
  let dir: string;
  beforeAll(async () => {
    db = await createTestDatabase('pglite');
    const { app } = buildTestApp(db.database, { env: { PUBLIC_URL } });
    doc = await readJson(await app.request('/openapi.json'));
    dir = mkdtempSync(join(tmpdir(), 'sb-openapi-'));
  });
  afterAll(async () => {
    await db?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it.skipIf(!existsSync(REDOCLY))(
    onlyIf(
      existsSync(REDOCLY),
      'passes redocly lint --extends recommended with no error and no warning',
      '@redocly/cli is not installed (npm install)',
    ),
    () => {
      const file = join(dir, 'openapi.json');
      writeFileSync(file, JSON.stringify(doc, null, 2));
      const run = spawnSync(
        REDOCLY,
        ['lint', '--extends', 'recommended', '--format', 'json', 'openapi.json'],
        {
          cwd: dir,
          encoding: 'utf8',
          timeout: 60_000,
          // no telemetry, no update check: the test makes no network request
          env: {
            ...process.env,
            REDOCLY_TELEMETRY: 'off',
            REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true',
            NO_COLOR: '1',
          },
        },
      );
      expect(run.error, 'redocly did not run').toBeUndefined();
      const report = JSON.parse(run.stdout) as { problems: Problem[] };
      const problems = report.problems.map(
        (p) => `${p.severity} ${p.ruleId} ${p.location[0]?.pointer}: ${p.message}`,
      );
      expect(problems).toEqual([]);
      expect(run.status).toBe(0);
    },
  );

  it('names the server by PUBLIC_URL and gives the license', () => {
    expect(doc.servers).toEqual([{ url: PUBLIC_URL, description: expect.any(String) }]);
    expect(doc.info.license.name).toBe('MIT');
  });

  it('gives every operation a unique camelCase operationId that starts with a verb', () => {
    const ids = operations(doc).map(([, op]) => op.operationId as string);
    for (const [where, op] of operations(doc)) {
      expect(op.operationId, where).toMatch(
        /^(get|list|send|start|erase|create|revoke|receive|update|delete|rotate|replay)[A-Z][A-Za-z]*$/,
      );
    }
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('documents the Idempotency-Key header on every POST under /v1, and nowhere else', () => {
    for (const [where, op] of operations(doc)) {
      const header = ((op.parameters ?? []) as Json[]).find(
        (p) => p.in === 'header' && p.name === 'Idempotency-Key',
      );
      const expected = where.startsWith('POST /v1/');
      expect(Boolean(header), where).toBe(expected);
      if (expected) expect(header.required, where).toBe(false);
    }
  });

  it('documents the read-replica headers: reads under /v1 take the written LSN and say where they read, writes give it', () => {
    for (const [where, op] of operations(doc)) {
      if (!where.includes(' /v1/')) continue;
      const read = where.startsWith('GET ') || where.startsWith('HEAD ');
      const param = ((op.parameters ?? []) as Json[]).find(
        (p) => p.in === 'header' && p.name === 'Switchboard-Written-Lsn',
      );
      expect(Boolean(param), where).toBe(read);
      const ok = Object.entries(op.responses as Record<string, Json>).filter(([s]) =>
        s.startsWith('2'),
      );
      expect(ok.length, where).toBeGreaterThan(0);
      for (const [status, response] of ok) {
        const name = read ? 'Switchboard-Read-From' : 'Switchboard-Written-Lsn';
        expect(response.headers?.[name], `${where} ${status}`).toBeDefined();
      }
    }
    // an LSN as the server parses it
    const lsn = new RegExp(
      doc.paths['/v1/messages'].post.responses['202'].headers['Switchboard-Written-Lsn'].schema
        .pattern,
    );
    expect(lsn.test('16/B374D848')).toBe(true);
    expect(lsn.test('16-B374D848')).toBe(false);
  });

  it('says of every operation what it needs: a scope, a callback token, or nothing ([])', () => {
    for (const [where, op] of operations(doc)) {
      expect(Array.isArray(op.security), `${where} has no security`).toBe(true);
    }
    expect(doc.paths['/healthz'].get.security).toEqual([]);
    expect(doc.paths['/v1/messages'].post.security).toEqual([{ apiBearer: ['send'] }]);
  });
});
