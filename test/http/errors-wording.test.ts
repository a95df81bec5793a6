/**
 * One error vocabulary, written for people (issue 22, point 2): every /v1 route gets a wide
 * set of bad inputs (each field of a valid body replaced by values of every JSON type, fields
 * missing and unknown, odd path parameters and queries, broken JSON, then random requests of
 * the shared generators, test/support/fuzz.ts) and every answer is checked: an error is the
 * one envelope with a code of ERROR_CODES, each detail has a code of DETAIL_CODES, and no
 * message, top-level, per detail or in a batch's per-item results, holds a validator's own
 * wording ("Invalid input: expected string, received number", "Too small", "NaN", ...).
 *
 * API_ROUTES (test/support/routes.ts, shared with test/security/routes-fuzz.test.ts) holds an
 * entry for each /v1 route the app has (a test fails on one without), so a route added later
 * is probed too.
 */
import fc from 'fast-check';
import { beforeAll, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import { DETAIL_CODES, ERROR_CODES } from '../../src/errors.ts';
import { buildTestApp, phone } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';
import { body as fuzzBody, query as fuzzQuery, segment } from '../support/fuzz.ts';
import { API_ROUTES, type RouteEntry, routeTable, validCall } from '../support/routes.ts';

const TOKEN = 'errors-wording-token-0123456789abcdef';
// the /v1 routes and a valid request each (one table, shared with the route fuzzer)
const ROUTES = API_ROUTES;
const call = validCall;

/** A validator's words: none may reach a client. */
const VALIDATOR_WORDING =
  /invalid input|invalid option|invalid (string|number|discriminator|key in|value in)|expected|received|too small|too big|unrecognized key|\bNaN\b|\bundefined\b|\[object /i;

/** Values of every JSON type, and the odd ones validators trip on. */
const BAD_VALUES: unknown[] = [
  5,
  -1,
  0.5,
  1e308,
  '',
  ' ',
  'x'.repeat(300),
  'NaN',
  'not-a-date',
  true,
  null,
  [],
  [1, 'a'],
  {},
  { a: 1 },
];
const BAD_QUERY = [
  '',
  '-1',
  '0',
  '1.5',
  'abc',
  'NaN',
  '1e999',
  'not-a-date',
  '2026-13-45',
  'x'.repeat(300),
];

/** Each path into a JSON value, leaves and containers alike (not the root). */
function paths(v: unknown, at: (string | number)[] = []): (string | number)[][] {
  const here = at.length > 0 ? [at] : [];
  if (Array.isArray(v)) return [...here, ...v.flatMap((x, i) => paths(x, [...at, i]))];
  if (v && typeof v === 'object')
    return [...here, ...Object.entries(v).flatMap(([k, x]) => paths(x, [...at, k]))];
  return here;
}

/** A copy of `v` with the value at `path` replaced, or removed (`undefined`). */
function withValue(v: unknown, path: (string | number)[], value: unknown): unknown {
  const copy = structuredClone(v) as Record<string | number, unknown>;
  let at = copy;
  for (const k of path.slice(0, -1)) at = at[k] as Record<string | number, unknown>;
  if (value === undefined) {
    if (Array.isArray(at)) at.splice(path.at(-1) as number, 1);
    else delete at[path.at(-1)!];
  } else at[path.at(-1)!] = value;
  return copy;
}

interface Probe {
  label: string;
  url: string;
  init: RequestInit;
}

const fill = (pattern: string, values: Record<string, string>) =>
  pattern.replace(/:(\w+)/g, (_, n: string) => encodeURIComponent(values[n] ?? 'x'));

function probes(key: string, entry: RouteEntry): Probe[] {
  const [method, pattern] = key.split(' ') as [string, string];
  const base = fill(pattern, entry.params ?? {});
  const out: Probe[] = [];
  const send = (init: RequestInit = {}) => ({ method, ...init });
  for (const name of Object.keys(entry.params ?? {})) {
    for (const v of ['x', ' ', 'NaN', '-1', 'x'.repeat(300), '00000000-0000']) {
      out.push({
        label: `:${name}=${v.slice(0, 20)}`,
        url: fill(pattern, { ...entry.params, [name]: v }),
        init: send(),
      });
    }
  }
  for (const q of [...(entry.query ?? []), 'unknown']) {
    for (const v of BAD_QUERY) {
      out.push({
        label: `?${q}=${v.slice(0, 20)}`,
        url: `${base}?${q}=${encodeURIComponent(v)}`,
        init: send(),
      });
    }
    out.push({ label: `?${q} twice`, url: `${base}?${q}=1&${q}=2`, init: send() });
  }
  if (!entry.json) return out;
  const json = (body: string) => send({ body, headers: { 'content-type': 'application/json' } });
  const sample = entry.json();
  for (const path of paths(sample)) {
    const where = path.join('.');
    out.push({
      label: `${where} missing`,
      url: base,
      init: json(JSON.stringify(withValue(sample, path, undefined))),
    });
    for (const v of BAD_VALUES) {
      out.push({
        label: `${where} = ${JSON.stringify(v).slice(0, 20)}`,
        url: base,
        init: json(JSON.stringify(withValue(sample, path, v))),
      });
    }
  }
  out.push({
    label: 'unknown field',
    url: base,
    init: json(JSON.stringify({ ...sample, surprise: 1 })),
  });
  for (const body of ['', '{}', '[]', 'null', '5', '"x"', '{"a":', '{\n  "a": 1,\n}', "{'a': 1}"]) {
    out.push({ label: `body ${body.slice(0, 12)}`, url: base, init: json(body) });
  }
  return out;
}

type Envelope = { code?: unknown; message?: unknown; details?: unknown };

/** Every error object in an answer: the envelope's, and each per-item result's in a batch. */
function errorsIn(body: unknown): Envelope[] {
  const out: Envelope[] = [];
  const walk = (v: unknown, key: string | undefined) => {
    if (Array.isArray(v)) for (const x of v) walk(x, undefined);
    else if (v && typeof v === 'object') {
      if (key === 'error') out.push(v as Envelope);
      for (const [k, x] of Object.entries(v)) walk(x, k);
    }
  };
  walk(body, undefined);
  return out;
}

/** A message less what it quotes: the client's own input, echoed ("no flow \"NaN\""). */
const unquoted = (message: string) => message.replace(/"(?:[^"\\]|\\.)*"/g, '""');

const worded = (message: unknown) =>
  typeof message === 'string' && !VALIDATOR_WORDING.test(unquoted(message));

function problems(error: Envelope): string[] {
  const found: string[] = [];
  if (!ERROR_CODES.includes(error.code as never))
    found.push(`code ${String(error.code)} not in ERROR_CODES`);
  if (!worded(error.message)) found.push(`message ${JSON.stringify(error.message)}`);
  if (!Array.isArray(error.details)) return [...found, 'no details list'];
  for (const d of error.details as { path?: unknown; code?: unknown; message?: unknown }[]) {
    if (!DETAIL_CODES.includes(d.code as never))
      found.push(`detail code ${String(d.code)} not in DETAIL_CODES`);
    if (!worded(d.message)) found.push(`detail ${String(d.path)}: ${JSON.stringify(d.message)}`);
  }
  return found;
}

describeEachEngine('error codes and messages on every /v1 route', (ctx) => {
  let app: App;
  beforeAll(() => {
    // a token of its own: a token made by the probes of POST /v1/tokens would close /v1
    app = buildTestApp(ctx.database(), { env: { API_TOKEN: TOKEN } }).app;
  });
  const ask = (url: string, init: RequestInit = {}) =>
    app.request(url, {
      ...init,
      headers: { authorization: `Bearer ${TOKEN}`, ...(init.headers as Record<string, string>) },
    });

  const v1Routes = () => routeTable(app).filter((k) => k.split(' ')[1]!.startsWith('/v1/'));

  it('has an entry for every /v1 route, and none for a route the app does not have', () => {
    const table = v1Routes();
    expect(
      table.filter((k) => !(k in ROUTES)),
      'add each to API_ROUTES in test/support/routes.ts',
    ).toEqual([]);
    expect(Object.keys(ROUTES).filter((k) => !table.includes(k))).toEqual([]);
  });

  async function check(key: string, probe: Probe, failures: string[]) {
    const res = await ask(probe.url, probe.init);
    const text = await res.text();
    const fail = (why: string) =>
      failures.push(`${key} [${probe.label}]: ${why} -> ${res.status} ${text.slice(0, 300)}`);
    if (res.status >= 500) return fail('a 5xx');
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      return fail('not JSON');
    }
    const errors = errorsIn(body);
    if (res.status >= 400 && errors.length === 0) return fail('no error envelope');
    for (const error of errors) for (const p of problems(error)) fail(p);
  }

  it('answers every bad input with known codes and sentences for people', async () => {
    const failures: string[] = [];
    let count = 0;
    for (const [key, entry] of Object.entries(ROUTES)) {
      for (const probe of probes(key, entry)) {
        await check(key, probe, failures);
        count++;
      }
    }
    expect(count).toBeGreaterThan(500);
    expect(failures).toEqual([]);
  }, 180_000);

  it('answers random requests of the shared generators the same way', async () => {
    const failures: string[] = [];
    const request = fc.record({ body: fuzzBody, param: segment, query: fuzzQuery });
    for (const key of Object.keys(ROUTES)) {
      const [method, pattern] = key.split(' ') as [string, string];
      for (const r of fc.sample(request, { numRuns: 10, seed: 22 })) {
        const path = pattern.replace(/:\w+/g, () => encodeURIComponent(r.param));
        const url = `${path}${r.query ? `?${r.query}` : ''}`;
        const init: RequestInit =
          method === 'GET' || method === 'DELETE'
            ? { method }
            : { method, body: r.body, headers: { 'content-type': 'application/json' } };
        await check(
          key,
          { label: `random ${JSON.stringify(r).slice(0, 120)}`, url, init },
          failures,
        );
      }
    }
    expect(failures).toEqual([]);
  }, 120_000);

  it('says where a body that is not JSON breaks: line and column, in the message and a detail', async () => {
    const res = await ask('/v1/calls', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{\n  "flow": "appointment-reminder",\n  "to": +380501234567\n}',
    });
    expect(res.status).toBe(400);
    const { error } = (await res.json()) as { error: Envelope };
    expect(error.code).toBe('MALFORMED_JSON');
    expect(error.message).toMatch(/line 3, column 9/);
    expect(error.details).toEqual([
      { path: 'body', code: 'JSON_SYNTAX', message: expect.any(String), line: 3, column: 9 },
    ]);
  });

  it('refuses a number for a string param, naming vars.name and the rule, and stores nothing', async () => {
    const res = await ask('/v1/calls', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ...call(), vars: { name: 5, date: 'Monday' } }),
    });
    expect(res.status).toBe(400);
    const { error } = (await res.json()) as { error: Envelope };
    expect(error.code).toBe('INVALID_VARS');
    expect(error.details).toEqual([
      {
        path: 'vars.name',
        code: 'INVALID_TYPE',
        message: 'a string param takes a string, not a number',
      },
    ]);
  });

  it('answers a language the flow does not speak with INVALID_LANGUAGE, alone and in a batch', async () => {
    const alone = await ask('/v1/calls', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ...call(), lang: 'fr' }),
    });
    expect(alone.status).toBe(400);
    const { error } = (await alone.json()) as { error: Envelope };
    expect(error.code).toBe('INVALID_LANGUAGE');
    expect(error.details).toEqual([
      expect.objectContaining({ path: 'lang', code: 'UNKNOWN_LANGUAGE' }),
    ]);
    const batch = await ask('/v1/calls/batch', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        flow: 'appointment-reminder',
        from: 'Clinic',
        calls: [
          { to: phone(), vars: { name: 'Ann', date: 'Mon' } },
          { to: phone(), vars: { name: 'Bob', date: 'Mon' }, lang: 'fr' },
        ],
      }),
    });
    expect(batch.status).toBe(202);
    const { calls } = (await batch.json()) as { calls: { error?: Envelope }[] };
    expect(calls[1]?.error?.code).toBe('INVALID_LANGUAGE');
  });
});
