/**
 * The audit log (issue 21, point 7): every changing /v1 request made with a valid token (or on
 * an open API) leaves one row, written before the answer, with the token's name, the route,
 * the status and what was created or removed (ids and counts, never a phone number); GETs and
 * requests without a valid token leave none; GET /v1/audit reads the rows back, a page at a
 * time. The changing routes are taken from the app's own table: one added later without a
 * case here fails.
 */
import { copyFileSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { beforeAll, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import { rowsOf } from '../../src/db/client.ts';
import { recordEvents } from '../../src/events/record.ts';
import { webhookId } from '../../src/events/sign.ts';
import { MAX_AUDIT_IDS } from '../../src/http/audit.ts';
import type { RouteScope } from '../../src/http/scopes.ts';
import { buildTestApp, json, phone, readJson, uniq } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';

const ENV = 'env-token-audit-5e21';
// a public address written as an IP: the outbound policy checks it without a name lookup
const RECEIVER = 'https://93.184.216.34/hooks/switchboard';

const bearer = (token: string, init: RequestInit = {}): RequestInit => ({
  ...init,
  headers: { ...(init.headers as Record<string, string>), authorization: `Bearer ${token}` },
});

const sms = (to: string, extra: Record<string, unknown> = {}) => ({
  from: 'Acme',
  to,
  type: 'sms',
  text: 'hello',
  ...extra,
});

interface Case {
  /** the request: made with the token named `token` */
  request(token: string): Promise<[string, RequestInit]>;
  status: number;
  /** checks the row's `changes` against the answer */
  changes(changes: Record<string, unknown>, answer: Record<string, unknown>): void;
}

describeEachEngine('the audit log', (ctx) => {
  let app: App;
  let routes: RouteScope[];
  let writer: { name: string; token: string };

  const auditRows = async () =>
    rowsOf<{ n: number }>(
      await ctx.database().db.execute(sql`select count(*)::int as n from audit_log`),
    )[0]?.n ?? 0;

  const newest = async (token: string) => {
    const page = await readJson(
      await app.request(`/v1/audit?token=${encodeURIComponent(token)}&limit=1`, bearer(ENV)),
    );
    return page.items[0];
  };

  const made = async (scopes: string[]) => {
    const name = uniq('writer');
    const res = await app.request('/v1/tokens', bearer(ENV, json({ name, scopes })));
    expect(res.status).toBe(201);
    return { name, token: (await readJson(res)).token as string };
  };

  beforeAll(async () => {
    // PUT /v1/flows/{id} writes a flow: into a copy of flows/, never the repository's
    const flowsDir = mkdtempSync(join(tmpdir(), 'sb-audit-flows-'));
    for (const name of readdirSync('flows').filter((n) => n.endsWith('.yaml'))) {
      copyFileSync(join('flows', name), join(flowsDir, name));
    }
    ({ app, routes } = buildTestApp(ctx.database(), {
      env: { API_TOKEN: ENV, FLOWS_DIR: flowsDir, FLOWS_WRITABLE: 'true' },
    }));
    writer = await made(['send', 'admin']);
  });

  /** An endpoint made through the API, for the routes under one. */
  const endpoint = async (): Promise<{ id: string; name: string }> => {
    const res = await app.request(
      '/v1/endpoints',
      bearer(ENV, json({ url: RECEIVER, name: uniq('ep') })),
    );
    expect(res.status).toBe(201);
    return readJson(res);
  };

  /** One succeeding request per changing route, and what its row must say. */
  const CASES: Record<string, Case> = {
    'POST /v1/messages': {
      request: async () => [
        '/v1/messages',
        json({ messages: [sms(phone()), sms(phone()), sms('not a number')] }),
      ],
      status: 202,
      changes(changes, answer) {
        const ids = (answer.messages as { id?: string }[]).flatMap((m) => (m.id ? [m.id] : []));
        expect(ids).toHaveLength(2);
        expect(changes).toEqual({
          created: { messages: { count: 2, ids } },
          rejected: { messages: 1 },
        });
      },
    },
    'POST /v1/calls': {
      request: async () => [
        '/v1/calls',
        json({
          flow: 'appointment-reminder',
          to: phone(),
          from: 'Clinic',
          vars: { name: 'Ann', date: 'Monday' },
        }),
      ],
      status: 202,
      changes(changes, answer) {
        expect(changes).toEqual({
          created: {
            calls: { count: 1, ids: [answer.id] },
            messages: { count: 1, ids: [answer.messageId] },
          },
        });
      },
    },
    'POST /v1/calls/batch': {
      request: async () => [
        '/v1/calls/batch',
        json({
          flow: 'appointment-reminder',
          from: 'Clinic',
          calls: [
            { to: phone(), vars: { name: 'Ann', date: 'Monday' } },
            { to: phone(), vars: { name: 'Bob', date: 'Tuesday' } },
            { to: phone(), vars: {} },
          ],
        }),
      ],
      status: 202,
      changes(changes, answer) {
        const ids = (answer.calls as { id?: string }[]).flatMap((c) => (c.id ? [c.id] : []));
        expect(ids).toHaveLength(2);
        expect(changes).toEqual({ created: { calls: { count: 2, ids } }, rejected: { calls: 1 } });
      },
    },
    'DELETE /v1/subjects/{phone}': {
      async request(token) {
        const to = phone();
        const sent = await app.request(
          '/v1/messages',
          bearer(token, json({ messages: [sms(to), sms(to)] })),
        );
        expect(sent.status).toBe(202);
        return [`/v1/subjects/${encodeURIComponent(to)}`, { method: 'DELETE' }];
      },
      status: 200,
      changes(changes, answer) {
        const removed = answer.removed as Record<string, number>;
        expect(removed.messages).toBe(2);
        expect(changes).toEqual({
          removed: Object.fromEntries(Object.entries(removed).map(([k, n]) => [k, { count: n }])),
        });
        // the person's number is in the answer, never in the audit row
        const digits = String(answer.phone).slice(1);
        expect(JSON.stringify(changes)).not.toContain(digits);
      },
    },
    'POST /v1/opt-outs': {
      request: async () => ['/v1/opt-outs', json({ phone: phone() })],
      status: 201,
      changes(changes, answer) {
        expect(changes).toEqual({ created: { optOuts: { count: 1 } } });
        // counted, never named
        expect(JSON.stringify(changes)).not.toContain(String(answer.phone).slice(1));
      },
    },
    'DELETE /v1/opt-outs/{phone}': {
      async request(token) {
        const to = phone();
        const added = await app.request('/v1/opt-outs', bearer(token, json({ phone: to })));
        expect(added.status).toBe(201);
        return [`/v1/opt-outs/${encodeURIComponent(to)}`, { method: 'DELETE' }];
      },
      status: 204,
      changes(changes) {
        expect(changes).toEqual({ removed: { optOuts: { count: 1 } } });
      },
    },
    'POST /v1/campaigns': {
      request: async () => [
        '/v1/campaigns',
        json({
          flow: 'appointment-reminder',
          from: 'Clinic',
          recipients: [{ to: phone(), vars: { name: 'Ann', date: 'Monday' } }, { to: 'nope' }],
          startAt: '2099-01-01T00:00:00Z',
        }),
      ],
      status: 201,
      changes(changes, answer) {
        expect(changes).toEqual({
          created: { campaigns: { count: 1, ids: [answer.id] } },
          rejected: { recipients: 1 },
        });
      },
    },
    ...Object.fromEntries(
      (['pause', 'resume', 'cancel'] as const).map((action) => [
        `POST /v1/campaigns/{id}/${action}`,
        {
          async request(token: string) {
            const made = await app.request(
              '/v1/campaigns',
              bearer(
                token,
                json({
                  flow: 'appointment-reminder',
                  from: 'Clinic',
                  recipients: [{ to: phone(), vars: { name: 'Ann', date: 'Monday' } }],
                  startAt: '2099-01-01T00:00:00Z',
                }),
              ),
            );
            const { id } = await readJson(made);
            // resume needs a paused campaign
            if (action === 'resume') {
              await app.request(`/v1/campaigns/${id}/pause`, bearer(token, { method: 'POST' }));
            }
            return [`/v1/campaigns/${id}/${action}`, { method: 'POST' }] as [string, RequestInit];
          },
          status: 200,
          changes(changes: Record<string, unknown>, answer: Record<string, unknown>) {
            expect(changes).toEqual({ changed: { campaigns: { count: 1, ids: [answer.id] } } });
          },
        } satisfies Case,
      ]),
    ),
    'POST /v1/tokens': {
      request: async () => ['/v1/tokens', json({ name: uniq('audited'), scopes: ['read'] })],
      status: 201,
      changes(changes, answer) {
        expect(changes).toEqual({
          created: { tokens: { count: 1, ids: [answer.id], names: [answer.name] } },
        });
        expect(JSON.stringify(changes)).not.toContain(String(answer.token));
      },
    },
    'POST /v1/endpoints': {
      request: async () => ['/v1/endpoints', json({ url: RECEIVER, name: uniq('crm') })],
      status: 201,
      changes(changes, answer) {
        expect(changes).toEqual({
          created: { endpoints: { count: 1, ids: [answer.id], names: [answer.name] } },
        });
        expect(JSON.stringify(changes)).not.toContain(String(answer.secret));
      },
    },
    'PATCH /v1/endpoints/{id}': {
      request: async () => [
        `/v1/endpoints/${(await endpoint()).id}`,
        json({ description: 'the CRM' }, { method: 'PATCH' }),
      ],
      status: 200,
      changes(changes, answer) {
        expect(changes).toEqual({
          changed: { endpoints: { count: 1, ids: [answer.id], names: [answer.name] } },
        });
      },
    },
    'DELETE /v1/endpoints/{id}': {
      request: async () => [`/v1/endpoints/${(await endpoint()).id}`, { method: 'DELETE' }],
      status: 200,
      changes(changes, answer) {
        expect(changes).toEqual({
          removed: { endpoints: { count: 1, ids: [answer.id], names: [answer.name] } },
        });
      },
    },
    'POST /v1/endpoints/{id}/secret/rotate': {
      request: async () => [
        `/v1/endpoints/${(await endpoint()).id}/secret/rotate`,
        json({ overlapSeconds: 60 }),
      ],
      status: 200,
      changes(changes, answer) {
        expect(changes).toEqual({ changed: { endpointSecrets: { count: 1, ids: [answer.id] } } });
        expect(JSON.stringify(changes)).not.toContain(String(answer.secret));
      },
    },
    'POST /v1/events/{id}/replay': {
      async request() {
        const { id, name } = await endpoint();
        await ctx.database().db.transaction((tx) =>
          recordEvents(tx, [
            {
              type: 'call.ended',
              subject: 'call:c1',
              data: { callId: 'c1' },
              at: new Date(),
              endpoint: name,
            },
          ]),
        );
        const [event] = rowsOf<{ id: string }>(
          await ctx.database().db.execute(sql`select e.id from outgoing_events e
            join event_deliveries d on d.event_id = e.id where d.endpoint_id = ${id}`),
        );
        return [`/v1/events/${webhookId(event!.id)}/replay`, json({})];
      },
      status: 202,
      changes(changes, answer) {
        const ids = (answer.requeued as { deliveryId: number }[]).map((r) => String(r.deliveryId));
        expect(ids).toHaveLength(1);
        expect(changes).toEqual({ changed: { deliveries: { count: 1, ids } } });
      },
    },
    'POST /v1/flows/{id}/replay': {
      request: async () => [
        '/v1/flows/appointment-reminder/replay',
        json({
          source:
            'assert: { outcomeOnEveryPath: false }\nmenus:\n  main:\n    intro: hi\n    keys:\n      "1": [hangup]\n',
          since: '7d',
        }),
      ],
      status: 200,
      changes(changes) {
        // it only reads: the row records who replayed, and that nothing changed
        expect(changes).toEqual({});
      },
    },
    'POST /v1/endpoints/{id}/replay': {
      request: async () => [
        `/v1/endpoints/${(await endpoint()).id}/replay`,
        json({ since: new Date(Date.now() - 3_600_000).toISOString() }),
      ],
      status: 202,
      changes(changes) {
        // nothing failed on a new endpoint: the row says so
        expect(changes).toEqual({ changed: { deliveries: { count: 0 } } });
      },
    },
    'PUT /v1/flows/{id}': {
      request: async () => [
        '/v1/flows/appointment-reminder',
        json(
          { source: readFileSync('flows/appointment-reminder.yaml', 'utf8') },
          { method: 'PUT' },
        ),
      ],
      status: 200,
      changes(changes, answer) {
        expect(answer.created).toBe(false);
        // the flow's id, never its text
        expect(changes).toEqual({
          changed: { flows: { count: 1, ids: ['appointment-reminder'] } },
        });
      },
    },
    'DELETE /v1/tokens/{id}': {
      async request() {
        const res = await app.request(
          '/v1/tokens',
          bearer(ENV, json({ name: uniq('doomed'), scopes: ['read'] })),
        );
        return [`/v1/tokens/${(await readJson(res)).id}`, { method: 'DELETE' }];
      },
      status: 200,
      changes(changes, answer) {
        expect(changes).toEqual({
          removed: { tokens: { count: 1, ids: [answer.id], names: [answer.name] } },
        });
      },
    },
  };

  it('writes one row per changing route, with the token name, route, status, request id and changes', async () => {
    const changing = routes.filter((r) => r.method !== 'GET');
    expect(changing.length).toBeGreaterThan(0);
    for (const route of changing) {
      const key = `${route.method} ${route.path}`;
      const c = CASES[key];
      expect(c, `${key} changes something: add a case for it to CASES`).toBeDefined();
      if (!c) continue;
      const [path, init] = await c.request(writer.token);
      const before = await auditRows();
      const res = await app.request(path, bearer(writer.token, init));
      expect(res.status, key).toBe(c.status);
      // a 204 has no body
      const answer = res.status === 204 ? {} : await readJson(res);
      expect(await auditRows(), key).toBe(before + 1);
      const row = await newest(writer.name);
      expect(row, key).toMatchObject({
        token: writer.name,
        method: route.method,
        route: route.path,
        status: c.status,
        requestId: res.headers.get('x-request-id'),
      });
      c.changes(row.changes, answer);
    }
    for (const key of Object.keys(CASES)) {
      expect(
        changing.map((r) => `${r.method} ${r.path}`),
        key,
      ).toContain(key);
    }
  });

  it('names API_TOKEN by that name', async () => {
    const res = await app.request('/v1/messages', bearer(ENV, json({ messages: [sms(phone())] })));
    expect(res.status).toBe(202);
    expect(await newest('API_TOKEN')).toMatchObject({
      token: 'API_TOKEN',
      requestId: res.headers.get('x-request-id'),
    });
  });

  it('lists the ids only when there are few; the counts always', async () => {
    const many = Array.from({ length: MAX_AUDIT_IDS + 1 }, () => sms(phone()));
    const res = await app.request('/v1/messages', bearer(writer.token, json({ messages: many })));
    expect(res.status).toBe(202);
    expect((await newest(writer.name)).changes).toEqual({
      created: { messages: { count: MAX_AUDIT_IDS + 1 } },
      rejected: { messages: 0 },
    });
  });

  it('writes refused and failed attempts by a known token, with no changes', async () => {
    const reader = await made(['read']);
    const refused = await app.request(
      '/v1/messages',
      bearer(reader.token, json({ messages: [sms(phone())] })),
    );
    expect(refused.status).toBe(403);
    expect(await newest(reader.name)).toMatchObject({
      route: '/v1/messages',
      status: 403,
      changes: {},
    });
    const invalid = await app.request(
      '/v1/subjects/not-a-number',
      bearer(writer.token, { method: 'DELETE' }),
    );
    expect(invalid.status).toBe(400);
    expect(await newest(writer.name)).toMatchObject({
      route: '/v1/subjects/{phone}',
      status: 400,
      changes: {},
    });
  });

  it('writes nothing for GETs, requests without a valid token, or paths no route answers', async () => {
    const before = await auditRows();
    for (const route of routes.filter((r) => r.method === 'GET')) {
      const path = route.path.replace(/\{[^}]+\}/g, 'nothing-here');
      await app.request(path, bearer(ENV));
    }
    await app.request('/v1/messages', json({ messages: [sms(phone())] }));
    await app.request('/v1/messages', bearer('sb_unknown', json({ messages: [sms(phone())] })));
    await app.request('/v1/no-such-route', bearer(ENV, { method: 'POST' }));
    expect(await auditRows()).toBe(before);
  });

  it('reads the log newest first, filtered by token and time, a page at a time', async () => {
    const mine = await made(['send']);
    const requestIds: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await app.request(
        '/v1/messages',
        bearer(mine.token, json({ messages: [sms(phone())] })),
      );
      requestIds.push(res.headers.get('x-request-id') ?? '');
    }
    const q = `/v1/audit?token=${encodeURIComponent(mine.name)}`;
    const first = await readJson(await app.request(`${q}&limit=2`, bearer(ENV)));
    expect(first.items.map((r: { requestId: string }) => r.requestId)).toEqual([
      requestIds[2],
      requestIds[1],
    ]);
    expect(first.nextCursor).toEqual(expect.any(String));
    const second = await readJson(
      await app.request(`${q}&limit=2&cursor=${first.nextCursor}`, bearer(ENV)),
    );
    expect(second.items.map((r: { requestId: string }) => r.requestId)).toEqual([requestIds[0]]);
    expect(second.nextCursor).toBeNull();

    const at = first.items[0].at as string;
    const until = await readJson(
      await app.request(`${q}&until=${encodeURIComponent(at)}`, bearer(ENV)),
    );
    expect(until.items.length).toBe(3);
    const future = new Date(Date.parse(at) + 60_000).toISOString();
    const since = await readJson(
      await app.request(`${q}&since=${encodeURIComponent(future)}`, bearer(ENV)),
    );
    expect(since.items).toEqual([]);
    const byRoute = await readJson(
      await app.request(`${q}&route=${encodeURIComponent('/v1/tokens')}`, bearer(ENV)),
    );
    expect(byRoute.items).toEqual([]);
    const sends = await readJson(
      await app.request(`${q}&route=${encodeURIComponent('/v1/messages')}`, bearer(ENV)),
    );
    expect(sends.items).toHaveLength(3);

    for (const bad of [
      'cursor=nope',
      'limit=0',
      'since=yesterday',
      'token=%00',
      'route=%2Fv1%2F%00',
    ]) {
      const res = await app.request(`/v1/audit?${bad}`, bearer(ENV));
      expect(res.status, bad).toBe(400);
      // a NUL is refused before validation, as query.<name> (src/http/input.ts)
      expect((await readJson(res)).error.details[0].path).toMatch(
        new RegExp(`^(query\\.)?${bad.split('=')[0]}$`),
      );
    }
  });

  it('documents GET /v1/audit with its schema', async () => {
    const doc = await readJson(await app.request('/openapi.json'));
    const op = doc.paths['/v1/audit'].get;
    expect(op.security).toEqual([{ apiBearer: ['admin'] }]);
    expect(op.responses[200].content['application/json'].schema.$ref).toBe(
      '#/components/schemas/AuditPage',
    );
    expect(Object.keys(doc.components.schemas.AuditEntry.properties).sort()).toEqual(
      ['at', 'changes', 'id', 'method', 'requestId', 'route', 'status', 'token'].sort(),
    );
    // the query, and the header every read takes (src/http/read-routing.ts)
    expect(op.parameters.map((p: { name: string }) => p.name).sort()).toEqual(
      ['cursor', 'limit', 'route', 'since', 'token', 'until', 'Switchboard-Written-Lsn'].sort(),
    );
  });
});

describeEachEngine('the audit log of an open API', (ctx) => {
  it('names the caller "open", and answers 500 rather than 2xx when the row cannot be written', async () => {
    const { app } = buildTestApp(ctx.database());
    const res = await app.request('/v1/messages', json({ messages: [sms(phone())] }));
    expect(res.status).toBe(202);
    const page = await readJson(await app.request('/v1/audit?token=open'));
    expect(page.items[0]).toMatchObject({ token: 'open', route: '/v1/messages', status: 202 });

    // the table gone: the change is made but cannot be audited, and the answer says so
    await ctx.database().db.execute(sql`alter table audit_log rename to audit_log_away`);
    try {
      const lost = await app.request('/v1/messages', json({ messages: [sms(phone())] }));
      expect(lost.status).toBe(500);
      expect((await readJson(lost)).error).toMatchObject({
        code: 'INTERNAL',
        message: expect.stringContaining('audit row could not be written'),
      });
    } finally {
      await ctx.database().db.execute(sql`alter table audit_log_away rename to audit_log`);
    }
  });
});
