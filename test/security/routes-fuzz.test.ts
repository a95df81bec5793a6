/**
 * The whole route table under attack (issue 21, points 4 and 8): every route the app holds
 * (`app.routes`: the API, the hooks, the console under /ui and the sandbox under /sandbox)
 * gets U+0000, lone surrogates and over-long values in each path parameter and in the query,
 * and bodies (JSON and form) with NUL strings, Object.prototype's key names, 100 000 levels
 * of nesting, 10 000 keys, bytes that are not UTF-8 and wrong content types, then a few
 * random requests made of the shared fuzz generators (test/support/fuzz.ts). No answer may be
 * a 5xx; outside /ui and /sandbox every error is the one envelope with a code of
 * src/errors.ts, listed at its status in the route's /openapi.json operation; a NUL is
 * refused naming its field; nothing reaches Object.prototype.
 *
 * ROUTES below holds an entry for each route (the /v1 ones are test/support/routes.ts's
 * API_ROUTES, shared with test/http/errors-wording.test.ts): it fails when the app has a route
 * without one (or the table one the app no longer has), so a route added later is fuzzed too.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import { ERROR_CODES, httpStatus } from '../../src/errors.ts';
import { MAX_URL_LENGTH } from '../../src/http/input.ts';
import { createSandbox, type Sandbox } from '../../src/sandbox/app.ts';
import { createManualClock } from '../../src/sandbox/clock.ts';
import { buildTestApp, uniq } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';
import {
  body as fuzzBody,
  contentType as fuzzContentType,
  query as fuzzQuery,
  segment,
} from '../support/fuzz.ts';
import { documentedErrors, type OpenApiDoc } from '../support/openapi.ts';
import { API_ROUTES, type RouteEntry, routeTable } from '../support/routes.ts';

const delivery = () => ({
  messageId: uniq('m'),
  deliverystatus: 'delivered',
  timestamp: '2026-01-01T00:00:00Z',
});
const sandboxMessages = () => ({
  messages: [
    { type: 'sms', from: 'Shop', to: '+380501234567', text: 'hi', customerMessageId: uniq('sb') },
  ],
});

/** A flow draft that compiles, for the editor's forms. */
const DRAFT = 'menus:\n  main:\n    intro: hi\n    keys:\n      "1": [hangup]\n';

/** Every route, as "METHOD /path" with Hono's `:param` patterns. */
const ROUTES: Record<string, RouteEntry> = {
  'GET /healthz': {},
  'GET /readyz': {},
  'GET /metrics': {},
  'GET /openapi.json': {},
  'GET /docs': {},
  'GET /docs/assets/init.js': {},
  'GET /docs/assets/:file': { params: { file: 'swagger-ui.css' } },
  ...API_ROUTES,
  'POST /hooks/delivery': { json: delivery, query: ['token'] },
  'POST /hooks/viber': {
    json: () => ({
      idUuid: uniq('v'),
      alphaName: 'Bot',
      phoneNumber: '380501234567',
      text: 'hi',
      dt: '2026-01-01T00:00:00Z',
    }),
    query: ['token'],
  },
  'POST /hooks/speechcall': {
    json: () => ({ from: 'Clinic', to: '+380501234567', mid: 'm', action: { token: 'v1.x' } }),
  },
  // rendered prompts, fetched by the provider (src/http/routes/prompts.ts)
  'GET /prompts/:file': { params: { file: 'q9y1V0xk2b7M0aPqRs8tUv3w.wav' } },
  // the console
  'GET /ui': {},
  'GET /ui/login': { query: ['next'] },
  'POST /ui/login': { form: { token: 'wrong', next: '/ui' } },
  'POST /ui/logout': { form: {} },
  'GET /ui/assets/:file': { params: { file: 'console.js' } },
  'GET /ui/flows': {},
  'GET /ui/flows/:id': { params: { id: 'appointment-reminder' } },
  'GET /ui/flows/:id/say': {
    params: { id: 'appointment-reminder' },
    query: ['node', 'lang', 'var.name', 'var.date'],
  },
  'GET /ui/calls': { query: ['state', 'flow', 'cursor'] },
  'GET /ui/calls/:id': {
    params: { id: '00000000-0000-4000-8000-000000000000' },
    query: ['error', 'pressed'],
  },
  'GET /ui/calls/:id/keypad': { params: { id: '00000000-0000-4000-8000-000000000000' } },
  'GET /ui/calls/:id/events': { params: { id: '00000000-0000-4000-8000-000000000000' } },
  'POST /ui/calls/:id/keys': {
    params: { id: '00000000-0000-4000-8000-000000000000' },
    form: { key: '1' },
  },
  // campaigns (src/ui/pages/campaigns.tsx)
  'GET /ui/campaigns': { query: ['state', 'cursor'] },
  'GET /ui/campaigns/:id': {
    params: { id: '00000000-0000-4000-8000-000000000000' },
    query: ['changed', 'refused', 'action'],
  },
  'GET /ui/campaigns/:id/results.csv': { params: { id: '00000000-0000-4000-8000-000000000000' } },
  'POST /ui/campaigns/:id/pause': {
    params: { id: '00000000-0000-4000-8000-000000000000' },
    form: {},
  },
  'POST /ui/campaigns/:id/resume': {
    params: { id: '00000000-0000-4000-8000-000000000000' },
    form: {},
  },
  'POST /ui/campaigns/:id/cancel': {
    params: { id: '00000000-0000-4000-8000-000000000000' },
    form: {},
  },
  'GET /ui/messages': { query: ['to', 'status', 'type', 'cursor'] },
  'GET /ui/messages/:ref': { params: { ref: 'order-1' } },
  'GET /ui/inbound': { query: ['from', 'cursor'] },
  'GET /ui/endpoints': {},
  'GET /ui/endpoints/:id': {
    params: { id: 'ep_x' },
    query: ['cursor', 'replayed', 'more', 'error'],
  },
  'POST /ui/endpoints/:id/replay': { params: { id: 'ep_x' }, form: { since: '2026-01-01T00:00' } },
  'POST /ui/events/:id/replay': {
    params: { id: 'evt_0193f1c27b4e7c1a9f3d2a6b8c0d1e2f' },
    form: { endpoint: 'ep_x' },
  },
  // the flow editor; saving is off here (FLOWS_WRITABLE unset), so nothing is written
  'GET /ui/flows/:id/edit': { params: { id: 'appointment-reminder' }, query: ['saved'] },
  'POST /ui/flows/:id/check': { params: { id: 'appointment-reminder' }, form: { source: DRAFT } },
  'POST /ui/flows/:id/test': {
    params: { id: 'appointment-reminder' },
    form: {
      source: DRAFT,
      tests: 'cases:\n  - name: one\n    keys: [1]\n    expect: { ended: true }\n',
    },
  },
  'POST /ui/flows/:id/replay': {
    params: { id: 'appointment-reminder' },
    form: { source: DRAFT, since: '7d' },
  },
  // replay before release: a draft over the flow's stored calls (src/ui/pages/flow-replay.tsx)
  'GET /ui/flows/:id/replay': { params: { id: 'appointment-reminder' } },
  'POST /ui/flows/:id/replay/run': {
    params: { id: 'appointment-reminder' },
    form: { source: DRAFT, since: '7d' },
  },
  'POST /ui/flows/:id/download': {
    params: { id: 'appointment-reminder' },
    form: { source: DRAFT, tests: '', what: 'tests' },
  },
  'POST /ui/flows/:id/save': {
    params: { id: 'appointment-reminder' },
    form: { source: DRAFT, token: 'not-a-token' },
  },
  // a flow's versions and two of them compared
  'GET /ui/flows/:id/versions': { params: { id: 'appointment-reminder' } },
  'GET /ui/flows/:id/compare': { params: { id: 'appointment-reminder' }, query: ['from', 'to'] },
  'GET /ui/try': {},
  'GET /ui/try/:flow': { params: { flow: 'appointment-reminder' } },
  'POST /ui/try/:flow': {
    params: { flow: 'appointment-reminder' },
    form: { to: '+380501234567', from: 'Clinic', name: 'Ann', date: 'Mon' },
  },
  // the sandbox: the provider's routes, then its control API
  'POST /sandbox/bat/messagelist': { json: sandboxMessages },
  'GET /sandbox/bat/message/:messageId': { params: { messageId: 'm-1' } },
  'POST /sandbox/api/CascadeMessage/send_message/async': {
    json: () => ({ from: 'Shop', to: '+380501234567', text: 'hi' }),
  },
  'POST /sandbox/api/CascadeMessage/send_message/tg-viber/async': {
    json: () => ({ from: 'Shop', to: '+380501234567', text: 'hi' }),
  },
  'POST /sandbox/api/items': { json: () => ({ items: [{ phone: '+380501234567' }] }) },
  'POST /sandbox/api/tg_bot/:token': { params: { token: 't' }, json: () => ({ text: 'hi' }) },
  'POST /sandbox/api/viber_bot/:token': { params: { token: 't' }, json: () => ({ text: 'hi' }) },
  'POST /sandbox/chat/api/company/get-token': { json: () => ({ login: 'l', password: 'p' }) },
  'GET /sandbox/chat/api/company/organization': {},
  'POST /sandbox/chat/api/operator/get-token': { json: () => ({ login: 'l', password: 'p' }) },
  'POST /sandbox/chat/api/operator/validate-token': { json: () => ({ token: 't' }) },
  'GET /sandbox/chat/api/operator': {},
  'POST /sandbox/chat/api/operator/synchronize': { json: () => ({ operators: [] }) },
  'POST /sandbox/chat/api/operator/status': { json: () => ({ status: 'online' }) },
  'GET /sandbox/_control': {},
  'POST /sandbox/_control/reset': { json: () => ({}) },
  'GET /sandbox/_control/options': {},
  'POST /sandbox/_control/options': { json: () => ({ duplicateRate: 0 }) },
  'GET /sandbox/_control/scripts': {},
  'POST /sandbox/_control/scripts': { json: () => ({ to: '+380501234567', keys: ['1'] }) },
  'DELETE /sandbox/_control/scripts': { query: ['to'] },
  'GET /sandbox/_control/messages': { query: ['to', 'status'] },
  'GET /sandbox/_control/messages/:id': { params: { id: 'm-1' } },
  'GET /sandbox/_control/calls': {},
  'POST /sandbox/_control/calls/:ref/keys': {
    params: { ref: 'c-1' },
    json: () => ({ keys: ['1'] }),
  },
  'GET /sandbox/_control/callbacks': {},
  'POST /sandbox/_control/viber/inbound': { json: () => ({ from: '+380501234567', text: 'hi' }) },
  'GET /sandbox/_control/viber/inbound': {},
  'GET /sandbox/_control/cascade': {},
  'GET /sandbox/_control/cascade/reachable': {},
  'POST /sandbox/_control/cascade/reachable': {
    json: () => ({ phone: '+380501234567', reachable: true }),
  },
  'GET /sandbox/_control/faults': {},
  'POST /sandbox/_control/faults': { json: () => ({ kind: 'error', status: 503, count: 0 }) },
  'DELETE /sandbox/_control/faults': {},
  'GET /sandbox/_control/bots': {},
  'GET /sandbox/_control/chat/operators': {},
  'GET /sandbox/_control/clock': {},
  'POST /sandbox/_control/clock/advance': { json: () => ({ ms: 0 }) },
  'DELETE /sandbox/_control/subjects/:phone': { params: { phone: '+380501234567' } },
};

const kind = (path: string) =>
  path === '/ui' || path.startsWith('/ui/')
    ? 'console'
    : path.startsWith('/sandbox/')
      ? 'sandbox'
      : path.startsWith('/hooks/')
        ? 'hook'
        : 'api';

const paramNames = (pattern: string) => [...pattern.matchAll(/:(\w+)/g)].map((m) => m[1]!);

/** The pattern with each parameter replaced: values are put in as they are (pre-encoded). */
function fill(pattern: string, values: Record<string, string>): string {
  return pattern.replace(/:(\w+)(\{[^}]*\})?/g, (_, name: string) => values[name] ?? 'x');
}

const enc = encodeURIComponent;
const nested = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`;
const nestedObjects = (depth: number) => `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
const manyKeys = (n: number) =>
  Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, i]));
const DEEP = 100_000;
const ODD_KEYS =
  '{"__proto__":{"polluted":1},"constructor":{"prototype":{"polluted":1}},"prototype":{"polluted":1},"toString":"x","hasOwnProperty":"x","valueOf":"x","":"x","a\\u0000b":"x"}';

interface Probe {
  label: string;
  url: string;
  init?: RequestInit;
  /** the detail path a NUL here must be named by (API and console routes) */
  names?: string;
  /** the status it must get everywhere but in the sandbox */
  status?: number;
  /** a callback that must be stored and acknowledged (200) */
  stored?: boolean;
}

/** Each string leaf of a JSON value, with its path as zod writes it (`messages[0].text`). */
function leaves(v: unknown, path: (string | number)[] = []): (string | number)[][] {
  if (typeof v === 'string') return [path];
  if (Array.isArray(v)) return v.flatMap((x, i) => leaves(x, [...path, i]));
  if (v && typeof v === 'object')
    return Object.entries(v).flatMap(([k, x]) => leaves(x, [...path, k]));
  return [];
}

function withLeaf(v: unknown, path: (string | number)[], leaf: unknown): unknown {
  const copy = structuredClone(v) as Record<string | number, unknown>;
  let at = copy;
  for (const k of path.slice(0, -1)) at = at[k] as Record<string | number, unknown>;
  at[path.at(-1)!] = leaf;
  return copy;
}

const formatted = (path: (string | number)[]) =>
  path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? p : `.${p}`)).join('');

/** The requests made of one route (see the module comment). */
function probes(key: string, entry: RouteEntry): Probe[] {
  const [method, pattern] = key.split(' ') as [string, string];
  const names = paramNames(pattern);
  const base = fill(
    pattern,
    Object.fromEntries(names.map((n) => [n, enc(entry.params?.[n] ?? 'x')])),
  );
  const params = (n: string, v: string) =>
    fill(
      pattern,
      Object.fromEntries(names.map((m) => [m, m === n ? v : enc(entry.params?.[m] ?? 'x')])),
    );
  const out: Probe[] = [];
  const send = (init: RequestInit = {}) => ({ method, ...init });
  for (const n of names) {
    out.push({
      label: `NUL in :${n}`,
      url: params(n, enc('a\u0000b')),
      init: send(),
      names: `path.${n}`,
      status: 400,
    });
    out.push({ label: `surrogate bytes in :${n}`, url: params(n, '%ED%A0%80'), init: send() });
    out.push({ label: `lone surrogate escape in :${n}`, url: params(n, '%uD800'), init: send() });
    out.push({ label: `long :${n}`, url: params(n, 'x'.repeat(2000)), init: send() });
    out.push({
      label: `over-long :${n}`,
      url: params(n, 'x'.repeat(MAX_URL_LENGTH + 1)),
      init: send(),
      status: 414,
    });
    for (const odd of ['__proto__', 'constructor', 'toString', '..', '%', '%2e%2e%2f']) {
      out.push({ label: `:${n} = ${odd}`, url: params(n, odd === '%' ? '%' : odd), init: send() });
    }
  }
  for (const q of [...(entry.query ?? []), 'x']) {
    out.push({
      label: `NUL in ?${q}`,
      url: `${base}?${q}=a%00b`,
      init: send(),
      names: `query.${q}`,
      status: 400,
    });
    out.push({
      label: `NUL in the name ?${q}`,
      url: `${base}?${q}%00=1`,
      init: send(),
      status: 400,
    });
    out.push({ label: `surrogate bytes in ?${q}`, url: `${base}?${q}=%ED%A0%80`, init: send() });
    out.push({ label: `long ?${q}`, url: `${base}?${q}=${'x'.repeat(4000)}`, init: send() });
  }
  out.push({ label: 'deep query key', url: `${base}?a${'[b]'.repeat(1000)}=1`, init: send() });
  out.push({
    label: 'prototype query keys',
    url: `${base}?__proto__[polluted]=1&constructor[prototype][polluted]=1&__proto__=1`,
    init: send(),
  });
  out.push({
    label: '1000 query keys',
    url: `${base}?${Array.from({ length: 1000 }, (_, i) => `q${i}=1`).join('&')}`,
    init: send(),
  });
  out.push({
    label: 'over-long query',
    url: `${base}?x=${'x'.repeat(MAX_URL_LENGTH)}`,
    init: send(),
    status: 414,
  });
  if (method === 'GET') return out;

  const json = (body: RequestInit['body'], type = 'application/json') =>
    send({ body, headers: { 'content-type': type } });
  const sample = entry.json?.();
  const bodies: [string, RequestInit['body'], string?][] = [
    ['empty JSON', ''],
    ['JSON null', 'null'],
    ['NUL string', '"a\\u0000b"'],
    ['odd keys', ODD_KEYS],
    ['__proto__ alone', '{"__proto__":{"polluted":1}}'],
    ['deep arrays', nested(DEEP)],
    ['deep objects', nestedObjects(DEEP)],
    ['10 000 keys', JSON.stringify(manyKeys(10_000))],
    ['not UTF-8', new Uint8Array([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xc3, 0x28, 0x22, 0x7d])],
    ['broken JSON', '{"a":'],
  ];
  if (sample !== undefined) {
    const text = JSON.stringify(sample);
    bodies.push(['sample as UTF-16', text, 'application/json; charset=utf-16']);
    bodies.push(['sample as text/plain', text, 'text/plain']);
    bodies.push(['sample as XML', text, 'application/xml']);
    bodies.push(['sample as broken multipart', text, 'multipart/form-data; boundary=xyz']);
    bodies.push([
      'sample with 10 000 more keys',
      JSON.stringify({ ...manyKeys(10_000), ...(sample as object) }),
    ]);
    bodies.push(['sample with odd keys', `${ODD_KEYS.slice(0, -1)},${text.slice(1)}`]);
    // the delivery and Viber hooks store anything (the speech-call hook judges its token first)
    const stored = pattern === '/hooks/delivery' || pattern === '/hooks/viber';
    for (const path of leaves(sample)) {
      const where = formatted(path);
      out.push({
        label: `NUL at ${where}`,
        url: base,
        init: json(JSON.stringify(withLeaf(sample, path, 'a\u0000b'))),
        names: where,
        stored,
      });
      out.push({
        label: `lone surrogate at ${where}`,
        url: base,
        init: json(JSON.stringify(withLeaf(sample, path, '\uD800'))),
        names: where,
        stored,
      });
      const marker = '"__deep__"';
      const deep = JSON.stringify(withLeaf(sample, path, '__deep__')).replace(marker, nested(DEEP));
      out.push({ label: `deep at ${where}`, url: base, init: json(deep), stored });
      const odd = JSON.stringify(withLeaf(sample, path, '__odd__')).replace('"__odd__"', ODD_KEYS);
      out.push({ label: `odd keys at ${where}`, url: base, init: json(odd), stored });
    }
  }
  for (const [label, body, type] of bodies) out.push({ label, url: base, init: json(body, type) });
  const form = (body: string) => json(body, 'application/x-www-form-urlencoded');
  const fields = entry.form ?? { a: '1' };
  for (const name of Object.keys(fields)) {
    const spoiled = new URLSearchParams({ ...fields, [name]: 'a\u0000b' }).toString();
    out.push({ label: `form NUL in ${name}`, url: base, init: form(spoiled) });
  }
  out.push({ label: 'form deep key', url: base, init: form(`a${'[b]'.repeat(DEEP / 10)}=1`) });
  out.push({
    label: 'form prototype keys',
    url: base,
    init: form('__proto__[polluted]=1&constructor[prototype][polluted]=1&__proto__=1'),
  });
  out.push({
    label: 'form 10 000 keys',
    url: base,
    init: form(Array.from({ length: 10_000 }, (_, i) => `f${i}=1`).join('&')),
  });
  out.push({ label: 'form not UTF-8', url: base, init: form('a=%C3%28&b=%ZZ') });
  return out;
}

/**
 * /v1 probes carry an admin and send token: POST /v1/tokens makes tokens, and once one exists
 * the API is closed to a request without one (routes after it would answer 401 to every probe).
 */
function apiHeaders(init: RequestInit | undefined, token: string): RequestInit {
  return {
    ...init,
    headers: {
      authorization: `Bearer ${token}`,
      ...(init?.headers as Record<string, string>),
    },
  };
}

function consoleHeaders(init: RequestInit | undefined): RequestInit {
  // the console takes same-origin form posts only (hono/csrf): the fuzzer is same-origin
  return {
    ...init,
    headers: { origin: 'http://localhost', ...(init?.headers as Record<string, string>) },
  };
}

describeEachEngine('the whole route table, fuzzed', (ctx) => {
  let app: App;
  let sandbox: Sandbox;
  // what /openapi.json lists for each route (issue 22, point 2): every code the fuzzer gets
  // back must be there, at its status
  let documented: Map<string, Set<string>>;
  let token: string;
  beforeAll(async () => {
    sandbox = createSandbox({ clock: createManualClock() });
    app = buildTestApp(ctx.database(), { sandbox: sandbox.app }).app;
    const made = await app.request('/v1/tokens', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: uniq('fuzz'), scopes: ['admin', 'send'] }),
    });
    expect(made.status).toBe(201);
    token = ((await made.json()) as { token: string }).token;
    documented = documentedErrors(
      (await (await app.request('/openapi.json')).json()) as OpenApiDoc,
    );
  });
  afterAll(async () => {
    await sandbox?.close();
  });

  it('has an entry for every route in the app, and none for a route it does not have', () => {
    const table = routeTable(app);
    const missing = table.filter((k) => !(k in ROUTES));
    const stale = Object.keys(ROUTES).filter((k) => !table.includes(k));
    expect(
      missing,
      `routes without a fuzz entry: add each to ROUTES in test/security/routes-fuzz.test.ts, or a /v1 route to API_ROUTES in test/support/routes.ts (its path parameters, the query names it reads, a valid body)`,
    ).toEqual([]);
    expect(stale, 'ROUTES entries for routes the app no longer has: remove them').toEqual([]);
  });

  async function check(key: string, probe: Probe, failures: string[]) {
    const where = kind(probe.url.split('?')[0]!);
    const init =
      where === 'console'
        ? consoleHeaders(probe.init)
        : where === 'api'
          ? apiHeaders(probe.init, token)
          : probe.init;
    const res = await app.request(probe.url, init);
    const text = await res.text();
    const fail = (why: string) =>
      failures.push(`${key} [${probe.label}]: ${why} -> ${res.status} ${text.slice(0, 200)}`);
    if (res.status >= 500) return fail('a 5xx');
    if (({} as Record<string, unknown>).polluted !== undefined) {
      delete (Object.prototype as Record<string, unknown>).polluted;
      return fail('Object.prototype polluted');
    }
    if (where === 'sandbox') return;
    // a callback is kept whatever its fields hold (its raw body stored, then acknowledged)
    if (probe.stored && res.status !== 200) return fail('a callback not stored');
    if (
      probe.status !== undefined &&
      !(where === 'hook' && probe.status === 400) &&
      res.status !== probe.status
    ) {
      return fail(`expected ${probe.status}`);
    }
    if (where === 'console' && res.status < 400) return;
    if (res.status < 400) return;
    let error: { code?: unknown; details?: { path?: unknown }[] } | undefined;
    try {
      error = (JSON.parse(text) as { error?: typeof error }).error;
    } catch {
      if (where === 'console') return; // a page
      return fail('not the JSON envelope');
    }
    if (!error || !ERROR_CODES.includes(error.code as never) || !Array.isArray(error.details)) {
      return fail('not the envelope with a code of src/errors.ts');
    }
    if (httpStatus(error.code as (typeof ERROR_CODES)[number]) !== res.status)
      return fail(`status not httpStatus(${String(error.code)})`);
    // ROUTE_NOT_FOUND: the request reached no operation (a `..` parameter walked out of it)
    const operation = documented.get(key.replace(/(:\w+)\{[^}]*\}/g, '$1'));
    if (where !== 'console' && !key.includes(' /docs') && !key.endsWith(' /openapi.json')) {
      if (!operation) return fail('no operation in /openapi.json');
      if (error.code !== 'ROUTE_NOT_FOUND' && !operation.has(`${res.status} ${error.code}`)) {
        return fail(`${String(error.code)} is not listed in its /openapi.json operation`);
      }
    }
    if (
      probe.names &&
      error.code === 'INVALID_ENCODING' &&
      error.details[0]?.path !== probe.names
    ) {
      return fail(`INVALID_ENCODING not naming ${probe.names}`);
    }
  }

  it('answers every probe of every route below 500, in the envelope, naming the field', async () => {
    const failures: string[] = [];
    for (const key of routeTable(app)) {
      const entry = ROUTES[key];
      if (!entry) continue; // reported by the coverage test
      for (const probe of probes(key, entry)) await check(key, probe, failures);
    }
    expect(failures).toEqual([]);
  }, 120_000);

  it('answers random requests of the shared generators below 500 on every route', async () => {
    const failures: string[] = [];
    const request = fc.record({
      body: fuzzBody,
      contentType: fuzzContentType,
      params: fc.array(segment, { minLength: 3, maxLength: 3 }),
      query: fuzzQuery,
    });
    for (const key of routeTable(app)) {
      const [method, pattern] = key.split(' ') as [string, string];
      const names = paramNames(pattern);
      const samples = fc.sample(request, { numRuns: 8, seed: 21 });
      for (const r of samples) {
        const path = fill(
          pattern,
          Object.fromEntries(names.map((n, i) => [n, enc(r.params[i] ?? 'x')])),
        );
        const url = `${path}${r.query ? `?${r.query}` : ''}`;
        const init: RequestInit =
          method === 'GET'
            ? {}
            : {
                method,
                body: r.body,
                headers: r.contentType ? { 'content-type': r.contentType } : {},
              };
        await check(
          key,
          { label: `random ${JSON.stringify(r).slice(0, 200)}`, url, init },
          failures,
        );
      }
    }
    expect(failures).toEqual([]);
  }, 120_000);
});
