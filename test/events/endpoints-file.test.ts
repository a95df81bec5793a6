/**
 * ENDPOINTS_FILE (src/events/endpoints-file.ts): parsed with every problem at file:line, the
 * secret taken from the variable the entry names (never quoted in a message), applied so the
 * `file` endpoints match it (created, updated, disabled when gone, their attempts kept),
 * read-only through the API, and applied by the server at start.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eq } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock.ts';
import { deliveryAttempts, endpoints } from '../../src/db/schema/index.ts';
import {
  applyEndpointsFile,
  EndpointsFileError,
  parseEndpointsFile,
  REMOVED_FROM_FILE,
} from '../../src/events/endpoints-file.ts';
import { newEndpointSecret } from '../../src/events/sign.ts';
import { createOutboundPolicy } from '../../src/http/outbound.ts';
import { buildTestApp, json, readJson, uniq } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';
import { startTestServer } from '../support/server.ts';
import { endpointRow, insertEndpoint, insertEvent } from './delivery-helpers.ts';

const SECRET = newEndpointSecret();
const OLD = newEndpointSecret();
const ENV: Record<string, string> = { CRM_SECRET: SECRET, OPS_SECRET: `${SECRET},${OLD}` };
const policy = createOutboundPolicy({ allowPrivate: false });
const deps = { secretFromEnv: (n: string) => ENV[n], checkUrl: policy.check };

const parse = (text: string) => parseEndpointsFile(text, 'endpoints.yaml', deps);

/** The problems of a file that does not parse. */
async function problemsOf(text: string) {
  const err = await parse(text).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(EndpointsFileError);
  return err as EndpointsFileError;
}

describe('ENDPOINTS_FILE parsing', () => {
  it('reads the entries, with each secret from the variable it names', async () => {
    const declared = await parse(
      [
        'endpoints:',
        '  - name: crm',
        '    url: https://crm.example.com/hooks',
        '    events: [call.ended, message.status]',
        '    rateLimit: 5',
        '    ordered: true',
        '    secretEnv: CRM_SECRET',
        '  - name: ops',
        '    url: https://ops.example.com/in',
        '    description: on-call',
        '    enabled: false',
        '    secretEnv: OPS_SECRET',
      ].join('\n'),
    );
    expect(declared.endpoints).toEqual([
      expect.objectContaining({
        name: 'crm',
        events: ['call.ended', 'message.status'],
        rateLimit: 5,
        ordered: true,
        enabled: true,
        secrets: [SECRET],
        line: 2,
      }),
      expect.objectContaining({
        name: 'ops',
        events: null,
        enabled: false,
        description: 'on-call',
        secrets: [SECRET, OLD],
        line: 8,
      }),
    ]);
    expect((await parse('')).endpoints).toEqual([]);
  });

  it('names file:line:column and the field for each problem, all at once', async () => {
    const err = await problemsOf(
      [
        'endpoints:',
        '  - name: crm',
        '    url: ftp://crm.example.com/hooks',
        '    events: [call.ended, call.teleported]',
        '    secretEnv: CRM_SECRET',
        '    secret: whsec_inline',
        '  - name: Not_A_Slug',
        '    url: https://x.example.com/',
        '    secretEnv: CRM_SECRET',
      ].join('\n'),
    );
    const where = err.problems.map((p) => [p.line, p.path]);
    expect(where).toEqual(
      expect.arrayContaining([
        [3, 'endpoints[0].url'],
        [4, 'endpoints[0].events[1]'],
        [6, 'endpoints[0].secret'],
        [7, 'endpoints[1].name'],
      ]),
    );
    expect(err.message).toContain('endpoints.yaml:3:10: endpoints[0].url:');
    expect(err.message).toContain('unknown field "secret"');
    expect(err.message).toContain('call.teleported');
  });

  it('refuses YAML that does not parse, and a name given twice, at their lines', async () => {
    const syntax = await problemsOf('endpoints:\n  - name: crm\n    url: [unclosed\n');
    expect(syntax.problems[0]!.line).toBeGreaterThanOrEqual(3);
    const dup = await problemsOf(
      [
        'endpoints:',
        '  - { name: crm, url: "https://a.example.com/", secretEnv: CRM_SECRET }',
        '  - { name: crm, url: "https://b.example.com/", secretEnv: CRM_SECRET }',
      ].join('\n'),
    );
    expect(dup.problems).toEqual([expect.objectContaining({ line: 3, path: 'endpoints[1].name' })]);
    expect(dup.message).toMatch(/"crm" is the name of an earlier entry/);
  });

  it('names a missing or malformed secret variable, never its value', async () => {
    const missing = await problemsOf(
      'endpoints:\n  - name: crm\n    url: https://crm.example.com/\n    secretEnv: NOPE_SECRET\n',
    );
    expect(missing.problems).toEqual([
      expect.objectContaining({ line: 4, path: 'endpoints[0].secretEnv' }),
    ]);
    expect(missing.message).toMatch(/NOPE_SECRET is not set/);

    ENV.BAD_SECRET = 'hunter2-not-a-secret';
    const bad = await problemsOf(
      'endpoints:\n  - name: crm\n    url: https://crm.example.com/\n    secretEnv: BAD_SECRET\n',
    );
    expect(bad.message).toMatch(/BAD_SECRET is not a secret/);
    expect(bad.message).not.toContain('hunter2');
  });

  it('holds URLs to the outbound policy: a loopback address is refused', async () => {
    const err = await problemsOf(
      'endpoints:\n  - name: crm\n    url: http://127.0.0.1:9000/x\n    secretEnv: CRM_SECRET\n',
    );
    expect(err.problems).toEqual([expect.objectContaining({ line: 3, path: 'endpoints[0].url' })]);
    expect(err.message).toMatch(/loopback/);
    const allowed = await parseEndpointsFile(
      'endpoints:\n  - name: crm\n    url: http://127.0.0.1:9000/x\n    secretEnv: CRM_SECRET\n',
      'endpoints.yaml',
      { ...deps, checkUrl: createOutboundPolicy({ allowPrivate: true }).check },
    );
    expect(allowed.endpoints).toHaveLength(1);
  });
});

describeEachEngine('ENDPOINTS_FILE applied', (ctx) => {
  it('creates, updates and disables file endpoints to match the file; the API cannot change them', async () => {
    const db = ctx.database().db;
    const [crm, ops] = [uniq('crm').toLowerCase(), uniq('ops').toLowerCase()];
    const first = await parse(
      [
        'endpoints:',
        `  - { name: ${crm}, url: "https://crm.example.com/a", events: [call.ended], secretEnv: CRM_SECRET }`,
        `  - { name: ${ops}, url: "https://ops.example.com/", secretEnv: OPS_SECRET }`,
      ].join('\n'),
    );
    expect(await applyEndpointsFile(db, first, systemClock)).toEqual({
      created: [crm, ops],
      updated: [],
      disabled: [],
    });
    const [crmRow] = await db.select().from(endpoints).where(eq(endpoints.name, crm));
    expect(crmRow).toMatchObject({
      source: 'file',
      url: 'https://crm.example.com/a',
      eventTypes: ['call.ended'],
      enabled: true,
      secrets: [{ secret: SECRET, expiresAt: null }],
    });
    const [opsRow] = await db.select().from(endpoints).where(eq(endpoints.name, ops));
    expect(opsRow!.secrets).toEqual([
      { secret: SECRET, expiresAt: null },
      { secret: OLD, expiresAt: null },
    ]);
    // the same file again changes nothing
    expect(await applyEndpointsFile(db, first, systemClock)).toEqual({
      created: [],
      updated: [],
      disabled: [],
    });

    // read-only through the API
    const app = buildTestApp(ctx.database()).app;
    const patch = await app.request(
      `/v1/endpoints/${crm}`,
      json({ enabled: false }, { method: 'PATCH' }),
    );
    expect(patch.status).toBe(409);
    expect((await readJson(patch)).error.code).toBe('ENDPOINT_READ_ONLY');

    // ops gets an attempt, then leaves the file; crm changes its URL
    const { eventId, deliveryIds } = await insertEvent(db, [opsRow!.id], { at: new Date() });
    await db.insert(deliveryAttempts).values({
      deliveryId: deliveryIds[0]!,
      eventId,
      endpointId: opsRow!.id,
      at: new Date(),
      status: 'failed',
      responseStatus: 500,
      durationMs: 3,
    });
    const second = await parse(
      `endpoints:\n  - { name: ${crm}, url: "https://crm.example.com/b", secretEnv: CRM_SECRET }\n`,
    );
    expect(await applyEndpointsFile(db, second, systemClock)).toEqual({
      created: [],
      updated: [crm],
      disabled: [ops],
    });
    expect(await endpointRow(db, crmRow!.id)).toMatchObject({
      url: 'https://crm.example.com/b',
      eventTypes: null,
    });
    expect(await endpointRow(db, opsRow!.id)).toMatchObject({
      enabled: false,
      disabledReason: REMOVED_FROM_FILE,
    });
    const kept = await db
      .select()
      .from(deliveryAttempts)
      .where(eq(deliveryAttempts.endpointId, opsRow!.id));
    expect(kept).toHaveLength(1);

    // back in the file: enabled again, the reason cleared
    await applyEndpointsFile(db, first, systemClock);
    expect(await endpointRow(db, opsRow!.id)).toMatchObject({
      enabled: true,
      disabledReason: null,
    });
  });

  it('refuses a name taken by an endpoint made through the API, naming the entry', async () => {
    const db = ctx.database().db;
    const name = uniq('taken').toLowerCase();
    const { id } = await insertEndpoint(db, { url: 'https://crm.example.com/' });
    await db.update(endpoints).set({ name }).where(eq(endpoints.id, id));
    const declared = await parse(
      `endpoints:\n  - name: ${name}\n    url: https://crm.example.com/\n    secretEnv: CRM_SECRET\n`,
    );
    const err = await applyEndpointsFile(db, declared, systemClock).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EndpointsFileError);
    expect((err as Error).message).toMatch(
      new RegExp(
        `endpoints.yaml:2:5: the name "${name}" is taken by an endpoint made through the API \\(${id}\\)`,
      ),
    );
    expect((await endpointRow(db, id)).source).toBe('api');
  });

  it('is applied by the server at start; a bad file stops the start with file:line', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sb-endpoints-'));
    const file = join(dir, 'endpoints.yaml');
    const name = uniq('start').toLowerCase();
    writeFileSync(
      file,
      `endpoints:\n  - name: ${name}\n    url: https://crm.example.com/\n    secretEnv: START_SECRET\n`,
    );
    const bad = await startTestServer(ctx.database(), { env: { ENDPOINTS_FILE: file } }).catch(
      (e: unknown) => e,
    );
    expect(bad).toBeInstanceOf(EndpointsFileError);
    expect((bad as Error).message).toContain(`${file}:4:16:`);
    expect((bad as Error).message).toContain('START_SECRET is not set');

    const server = await startTestServer(ctx.database(), {
      env: { ENDPOINTS_FILE: file, START_SECRET: SECRET },
    });
    try {
      const res = await fetch(`${server.url}/v1/endpoints/${name}`);
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ name, source: 'file' });
    } finally {
      await server.stop();
    }
  });
});
