/**
 * Contract fixtures: every concrete JSON example of the provider's public documentation,
 * copied into test/provider/docs/ (INDEX.json lists them by page and block; each has a
 * `.meta.json` saying where it came from and what was filled in, and an `.expected.json`
 * saying what Switchboard must make of it), run through the part of Switchboard that meets
 * it:
 *
 * - request / message: validateMessage (the canonical message), toWireMessage (what is
 *   POSTed), POST /v1/messages, and the sandbox's POST /bat/messagelist;
 * - messagelist-response: parseMessagelistResponse, and the provider client reading it;
 * - status-record: parseDeliveryBody, the provider client's status read, and the poller;
 * - status-webhook: parseDeliveryBody, and POST /hooks/delivery read back by GET
 *   /v1/messages/{id};
 * - viber-inbound: POST /hooks/viber read back by GET /v1/inbound;
 * - cascade-request / cascade-response / variables-upload: the cascade validation and parse
 *   (src/provider/cascade.ts), and the sandbox's cascade endpoints;
 * - error-response: the clients reading it, and the sandbox answering in its shape;
 * - chat-request (ChatHub, the chat operator API): POSTed to the sandbox's chat API under
 *   /chat, set up as the meta's `sandbox` says (credentials, clock, operators), and read back;
 * - chat-response: served by a local HTTP server to the chat operator client
 *   (src/provider/chat.ts), asked as the meta's `asked` says, and read back;
 * - fragment: completed as its meta says, then run as the kind it is a fragment of.
 *
 * A fixture whose kind has no runner fails, so nothing is skipped silently. Regenerate
 * INDEX.json with `npx tsx scripts/docs-fixtures-index.ts` after adding a fixture.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { eq } from 'drizzle-orm';
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildIndex, NO_EXAMPLES, PAGES } from '../../scripts/docs-fixtures-index.ts';
import { messages } from '../../src/db/schema/index.ts';
import { AppError } from '../../src/errors.ts';
import { createLogger } from '../../src/logger.ts';
import { DEFAULT_STATUS_MAP, parseDeliveryBody } from '../../src/messages/delivery-parse.ts';
import { pollOnce } from '../../src/messages/poller.ts';
import {
  CASCADE_PATHS,
  checkUploadVariables,
  createCascadeClient,
  parseCascadeResponse,
  validateCascade,
} from '../../src/provider/cascade.ts';
import { type ChatClient, createChatClient } from '../../src/provider/chat.ts';
import { createProviderClient } from '../../src/provider/client.ts';
import { ProviderError } from '../../src/provider/http.ts';
import {
  type Message,
  parseMessagelistResponse,
  toWireMessage,
  validateMessage,
} from '../../src/provider/message.ts';
import { createSandbox, type Sandbox } from '../../src/sandbox/app.ts';
import { createManualClock } from '../../src/sandbox/clock.ts';
import { buildTestApp, type Json, json, phone, readJson } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';
import { recordAccepted } from '../support/dispatched.ts';
import { onlyIf } from '../support/skip.ts';
import { listen } from './helpers.ts';

const HERE = fileURLToPath(new URL('.', import.meta.url));
const DOCS = join(HERE, 'docs');
const PROVIDER_MD = join(HERE, '../../docs/provider.md');
const MIRROR = '/work/.mirror/smsbat+help/repo';

// ---------------------------------------------------------------------------------------
// Loading

const KINDS = [
  'request',
  'message',
  'messagelist-response',
  'status-record',
  'status-webhook',
  'viber-inbound',
  'cascade-request',
  'cascade-response',
  'variables-upload',
  'error-response',
  'chat-request',
  'chat-response',
  'fragment',
] as const;
type Kind = (typeof KINDS)[number];

interface Meta {
  source: { file?: string; url?: string; line?: number; section?: string };
  kind: string;
  fragmentOf?: Kind;
  /** the fragment made whole, as its `completion` says */
  completed?: Json;
  /** for fixtures of messagelist or cascade errors: which client reads it */
  api?: 'messagelist' | 'cascade';
  /** the fixture (variables-upload) whose variables are uploaded before this one is sent */
  uploads?: string;
  /** chat fixtures: the call, `METHOD /path` of the chat operator API */
  endpoint?: string;
  /** chat-request: the sandbox the body is sent to (see chatSandbox) */
  sandbox?: ChatSetup;
  /** chat-response: what the client is asked (see CHAT_CALLS) */
  asked?: Json;
  /** chat-response: the content type the local server answers with (default JSON) */
  servedAs?: string;
  fills?: { placeholder: string; value: string; in?: string }[];
}

/** How a chat-request fixture's sandbox is set up before its body is sent. */
interface ChatSetup {
  /** the sandbox's credentials (login and password for POST /api/company/get-token) */
  credentials?: { login: string; password: string };
  /** the sandbox clock (default CHAT_NOW) */
  now?: string;
  /** how many operators exist first (ids 1..n, created by one synchronize) */
  operators?: number;
  /** status moves made first, operator id -> status */
  statuses?: Record<string, number>;
  /** an operator token issued first, the value of the `$operatorToken` fills made at run time */
  operatorToken?: { id: number; expiresAt: string };
}

interface Fixture {
  /** path under test/provider/docs without `.json`, e.g. smsbat/status/basic-response */
  id: string;
  body: Json;
  meta: Meta;
  expected: Json;
}

const readJsonFile = (path: string): Json => JSON.parse(readFileSync(path, 'utf8'));

function loadFixtures(): Fixture[] {
  const out: Fixture[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (
        entry.name.endsWith('.json') &&
        !entry.name.endsWith('.meta.json') &&
        !entry.name.endsWith('.expected.json') &&
        path !== join(DOCS, 'INDEX.json')
      ) {
        const base = path.slice(0, -'.json'.length);
        out.push({
          id: relative(DOCS, base),
          body: readJsonFile(path),
          meta: existsSync(`${base}.meta.json`) ? readJsonFile(`${base}.meta.json`) : undefined,
          expected: existsSync(`${base}.expected.json`)
            ? readJsonFile(`${base}.expected.json`)
            : undefined,
        });
      }
    }
  };
  walk(DOCS);
  return out.sort((a, b) => a.id.localeCompare(b.id));
}

const fixtures = loadFixtures();
const byId = new Map(fixtures.map((f) => [f.id, f]));

/** The kind a fixture is run as, and the body run: a fragment's completion, else itself. */
function effective(f: Fixture): { kind: string; body: Json } {
  if (f.meta.kind !== 'fragment') return { kind: f.meta.kind, body: f.body };
  if (f.meta.completed === undefined || f.meta.fragmentOf === undefined) {
    throw new Error(`${f.id}: a fragment needs fragmentOf and completed in its meta`);
  }
  return { kind: f.meta.fragmentOf, body: f.meta.completed };
}

const ofKind = (...kinds: string[]) => fixtures.filter((f) => kinds.includes(effective(f).kind));

/** The variables a fixture's `uploads` names, as the cascade validation asks about them. */
function uploadedOf(f: Fixture) {
  if (!f.meta.uploads) return undefined;
  const upload = byId.get(f.meta.uploads);
  if (!upload) throw new Error(`${f.id}: uploads names ${f.meta.uploads}, which does not exist`);
  const vars = upload.body.variables as { id: number; type: string }[];
  return {
    body: upload.body,
    has: (type: string, id: number) => vars.some((v) => v.type === type && v.id === id),
  };
}

// ---------------------------------------------------------------------------------------
// docs/provider.md anchors (each refusal names the entry that explains it)

function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

function providerMdAnchors(): Set<string> {
  const text = readFileSync(PROVIDER_MD, 'utf8');
  const anchors = new Set<string>();
  for (const m of text.matchAll(/^#{1,6}\s+(.+?)\s*(?:\{#([\w-]+)\})?\s*$/gm)) {
    anchors.add(m[2] ?? slug(m[1] ?? ''));
  }
  for (const m of text.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) anchors.add(m[1] ?? '');
  return anchors;
}

function expectExplained(f: Fixture): void {
  const ref = f.expected.explainedBy as string | undefined;
  expect(ref, `${f.id}: a refusal names its docs/provider.md entry`).toMatch(
    /^docs\/provider\.md#.+/,
  );
  expect(existsSync(PROVIDER_MD), 'docs/provider.md exists').toBe(true);
  const anchor = ref!.split('#')[1]!;
  expect([...providerMdAnchors()], `docs/provider.md has the entry #${anchor}`).toContain(anchor);
}

function expectRefusal(
  f: Fixture,
  error: { code: string; details: { path: string; code: string }[] },
): void {
  const codes = [f.expected.code].flat() as string[];
  expect(codes, `${f.id}: top-level code`).toContain(error.code);
  for (const c of (f.expected.detailCodes ?? []) as string[]) {
    expect(error.details.map((d) => d.code)).toContain(c);
  }
  for (const p of (f.expected.detailPaths ?? []) as string[]) {
    expect(error.details.map((d) => d.path)).toContain(p);
  }
  expectExplained(f);
}

// ---------------------------------------------------------------------------------------
// Stub provider for the clients: answers every request with one body

const TO = '+380501234567';
const PROVIDER = 'http://provider.test';

function stubFetch(status: number, body: unknown, only?: string): typeof fetch {
  return (async (input: string | URL | Request) => {
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    if (only !== undefined && new URL(url).pathname !== only) {
      return new Response(JSON.stringify({ error: { code: 'NOT_FOUND', message: url } }), {
        status: 404,
        headers: { 'content-type': 'application/json' },
      });
    }
    return new Response(JSON.stringify(body), {
      status,
      headers: { 'content-type': 'application/json' },
    });
  }) as typeof fetch;
}

const noRetry = { retry: { maxRetries: 0, maxRateLimitRetries: 0 } };

function messagingClient(status: number, body: unknown, only?: string) {
  return createProviderClient({
    baseUrl: PROVIDER,
    auth: { apiKey: 'k' },
    fetch: stubFetch(status, body, only),
    ...noRetry,
  });
}

const SMS: Message = { from: 'Acme', to: TO, type: 'sms', text: 'hi' } as Message;

// ---------------------------------------------------------------------------------------
// Runners, by kind: what Switchboard makes of the body itself

/** The message list of a request or message fixture: what is sent. */
const messagesOf = (kind: string, body: Json): Json[] =>
  kind === 'message' ? [body] : (body.messages as Json[]);

function runMessages(f: Fixture, kind: 'request' | 'message', body: Json): void {
  const list = messagesOf(kind, body);
  const results = list.map((m) => validateMessage(m));
  if (f.expected.ok === false) {
    const refused = results.find((r) => !r.ok);
    expect(refused, `${f.id}: refused`).toBeDefined();
    if (refused && !refused.ok) expectRefusal(f, refused.error);
    return;
  }
  const canonical = kind === 'message' ? [f.expected.canonical] : f.expected.canonical;
  const wire =
    f.expected.wire === undefined ? canonical : [f.expected.wire].flat(kind === 'message' ? 0 : 1);
  expect(results).toHaveLength(canonical.length);
  results.forEach((r, i) => {
    expect(r.ok ? undefined : r.error, `${f.id}: message ${i} accepted`).toBeUndefined();
    if (!r.ok) return;
    expect(r.message, `${f.id}: canonical message ${i}`).toEqual(canonical[i]);
    expect(toWireMessage(r.message), `${f.id}: wire message ${i}`).toEqual(wire[i]);
    const parts = kind === 'message' ? [f.expected.parts] : f.expected.parts;
    if (parts?.[i] !== undefined) expect(r.parts, `${f.id}: SMS parts`).toBe(parts[i]);
  });
}

async function runMessagelistResponse(f: Fixture, body: Json): Promise<void> {
  expect(parseMessagelistResponse(body)).toEqual(f.expected.parsed);
  const client = messagingClient(200, body);
  const [read] = await client.sendMessagelist([SMS]);
  expect(read, `${f.id}: as the client reads it`).toEqual(f.expected.parsed);
}

/** parseDeliveryBody's reading of a status record or webhook, in the expected file's terms. */
function deliveryReading(f: Fixture, body: Json): Json {
  const parsed = parseDeliveryBody('application/json', JSON.stringify(body));
  expect(parsed.problems, `${f.id}: read without problems`).toEqual([]);
  // the record's own status, then one event per channel of its extendedStatuses
  const whole = parsed.events.filter((e) => !e.perChannel);
  expect(whole, `${f.id}: one status for the whole message`).toHaveLength(1);
  const e = whole[0]!;
  const perChannel = parsed.events.filter((e) => e.perChannel);
  const channels =
    perChannel.length > 0
      ? Object.fromEntries(perChannel.map((c) => [c.channel, c.rawStatus]))
      : undefined;
  return {
    messageId: e.providerMessageIds[0],
    status: e.status,
    rawStatus: e.rawStatus,
    ...(channels !== undefined && { channels }),
    ...(f.expected.at !== undefined && { at: e.at?.toISOString() }),
  };
}

async function runStatusRecord(f: Fixture, body: Json): Promise<void> {
  expect(deliveryReading(f, body)).toEqual(f.expected);
  // the poller's read: GET /bat/message/{messageId} answered with the record as the docs
  // show it (a fragment as it is: the poller knows which message it asked about)
  const id = f.expected.messageId as string;
  const client = messagingClient(200, f.body, `/bat/message/${id}`);
  const answer = await client.getMessage(id);
  expect(answer.status, `${f.id}: the status word the client reads`).toBe(f.expected.rawStatus);
}

function runStatusWebhook(f: Fixture, body: Json): void {
  expect(deliveryReading(f, body)).toEqual(f.expected);
}

const CASCADE_FORMS: Record<string, string> = {
  array: 'endpoint-array',
  messages: 'messages-object',
};

function runCascadeRequest(f: Fixture, body: Json): void {
  const uploaded = uploadedOf(f);
  let result: { form: string; messages: unknown[] } | undefined;
  let error: AppError | undefined;
  try {
    result = validateCascade(body, uploaded ? { uploaded: uploaded.has } : {});
  } catch (err) {
    if (!(err instanceof AppError)) throw err;
    error = err;
  }
  if (f.expected.ok === false) {
    expect(error, `${f.id}: refused`).toBeDefined();
    if (error) expectRefusal(f, error);
    return;
  }
  expect(error?.details, `${f.id}: accepted`).toBeUndefined();
  expect({ form: CASCADE_FORMS[result!.form] ?? result!.form, messages: result!.messages }).toEqual(
    { form: f.expected.form, messages: f.expected.messages },
  );
}

function runCascadeResponse(f: Fixture, body: Json): void {
  expect(parseCascadeResponse(body)).toEqual(f.expected.results);
}

function runVariablesUpload(f: Fixture, body: Json): void {
  const checked = checkUploadVariables(body);
  expect(checked.ok ? undefined : checked.details, `${f.id}: accepted`).toBeUndefined();
  if (checked.ok) expect(checked.variables).toEqual(f.expected.variables);
}

async function runErrorResponse(f: Fixture, body: Json): Promise<void> {
  const { httpStatus, code, message } = f.expected as {
    httpStatus: number;
    code: string;
    message: string;
  };
  const attempt =
    f.meta.api === 'cascade'
      ? createCascadeClient({
          baseUrl: PROVIDER,
          auth: { apiKey: 'k' },
          fetch: stubFetch(httpStatus, body),
          ...noRetry,
        }).send([
          { id: 'e-1', fromName: 'Acme', toPhone: TO, messageType: 'transaction', text: 'hi' },
        ])
      : messagingClient(httpStatus, body).sendMessagelist([SMS]);
  const err = await attempt.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ProviderError);
  const pe = err as ProviderError;
  expect(pe.status).toBe(httpStatus);
  expect(pe.body).toEqual(body);
  expect(pe.message, `${f.id}: the error names the provider's code and message`).toContain(
    `${code}: ${message}`,
  );
}

// ChatHub: the chat operator client reads each documented answer, served over HTTP

const COMPANY_TOKEN = 'company-token';
/** The clock of chat fixtures whose meta names no time (any time does for them). */
const CHAT_NOW = '2025-01-24T12:00:00Z';
const COMPANY_LOGIN = '/api/company/get-token';

/** What the client is asked, by endpoint, with the meta's `asked`. */
const CHAT_CALLS: Record<string, (chat: ChatClient, asked: Json) => Promise<unknown>> = {
  [`POST ${COMPANY_LOGIN}`]: (chat) => chat.companyToken(),
  'POST /api/operator/get-token': (chat, a) => chat.getOperatorToken(a.id, a.expiresAt),
  'POST /api/operator/validate-token': (chat, a) => chat.validateToken(a.token),
  'GET /api/operator': (chat, a) => chat.listOperators(a.organizationId),
  'POST /api/operator/synchronize': (chat, a) => chat.synchronizeOperators(a.operators),
  'GET /api/company/organization': (chat) => chat.getOrganization(),
};

const endpointOf = (f: Fixture): [method: string, path: string] => {
  const [method, path] = (f.meta.endpoint ?? '').split(' ');
  if (!method || !path) throw new Error(`${f.id}: a chat fixture names its endpoint`);
  return [method, path];
};

async function runChatResponse(f: Fixture, body: Json): Promise<void> {
  const [method, path] = endpointOf(f);
  const call = CHAT_CALLS[f.meta.endpoint!];
  if (!call) throw new Error(`${f.id}: no client call for ${f.meta.endpoint}`);
  const seen: { method: string; path: string; headers: Record<string, string>; body: unknown }[] =
    [];
  const app = new Hono();
  app.all('*', async (c) => {
    const text = await c.req.text();
    seen.push({
      method: c.req.method,
      path: c.req.path,
      headers: c.req.header(),
      body: text === '' ? undefined : JSON.parse(text),
    });
    if (c.req.method !== method || c.req.path !== path) return c.body(null, 404);
    const h = c.req.header();
    const token = h.authorization?.replace(/^Bearer /, '') ?? h['x-authorization-key'];
    if (path !== COMPANY_LOGIN && token !== COMPANY_TOKEN) return c.body(null, 401);
    return c.body(JSON.stringify(body), 200, {
      'content-type': f.meta.servedAs ?? 'application/json; charset=utf-8',
    });
  });
  const server = await listen(app);
  try {
    const asked = f.meta.asked ?? {};
    const now = Date.parse(asked.now ?? CHAT_NOW);
    const chat = createChatClient({
      baseUrl: server.url,
      auth:
        path === COMPANY_LOGIN
          ? { login: asked.login, password: asked.password }
          : { companyToken: COMPANY_TOKEN },
      clock: { now: () => now },
      ...noRetry,
    });
    const read = await call(chat, asked).then(
      (value) => ({ ok: true as const, value }),
      (error: unknown) => ({ ok: false as const, error }),
    );
    if (f.expected.ok === false) {
      expect(read.ok, `${f.id}: refused`).toBe(false);
      const err = (read as { error: { code?: string; kind?: string } }).error;
      expect([f.expected.code].flat()).toContain(err.code ?? err.kind);
      expectExplained(f);
      return;
    }
    expect(read.ok ? undefined : read.error, `${f.id}: read`).toBeUndefined();
    expect((read as { value: unknown }).value, `${f.id}: as the client reads it`).toEqual(
      f.expected.read,
    );
    const asks = seen.filter((r) => r.method === method && r.path === path);
    expect(asks, `${f.id}: one ${f.meta.endpoint}`).toHaveLength(1);
    if (f.expected.sent !== undefined) {
      expect(asks[0]!.body, `${f.id}: the body the client sends`).toEqual(f.expected.sent);
    }
    for (const [name, value] of Object.entries((f.expected.headers ?? {}) as object)) {
      expect(asks[0]!.headers[name], `${f.id}: header ${name}`).toBe(
        String(value).replace('{company-token}', COMPANY_TOKEN),
      );
    }
  } finally {
    await server.close();
  }
}

type Runner = (f: Fixture, body: Json) => void | Promise<void>;

/** Fixtures the HTTP section registered a case for (filled while tests are collected). */
const HTTP_CASES = new Set<string>();

const RUNNERS: Record<string, Runner> = {
  request: (f, body) => runMessages(f, 'request', body),
  message: (f, body) => runMessages(f, 'message', body),
  'messagelist-response': runMessagelistResponse,
  'status-record': runStatusRecord,
  'status-webhook': runStatusWebhook,
  // nothing reads it outside the hook: the HTTP cases below run it, one per fixture
  'viber-inbound': (f) => {
    expect(HTTP_CASES, `${f.id}: an HTTP case runs it`).toContain(f.id);
  },
  'cascade-request': runCascadeRequest,
  'cascade-response': runCascadeResponse,
  'variables-upload': runVariablesUpload,
  'error-response': runErrorResponse,
  // the sandbox's chat API is what meets a request: the HTTP cases below run it
  'chat-request': (f) => {
    expect(HTTP_CASES, `${f.id}: an HTTP case runs it`).toContain(f.id);
  },
  'chat-response': runChatResponse,
};

function runnerFor(kind: string): Runner {
  const runner = RUNNERS[kind];
  if (!runner) throw new Error(`no runner for kind ${kind}`);
  return runner;
}

// ---------------------------------------------------------------------------------------
// The fixtures themselves

describe('docs fixtures', () => {
  it('there are fixtures, each with its meta and expected result, of a known kind', () => {
    expect(fixtures.length).toBeGreaterThan(0);
    for (const f of fixtures) {
      expect(f.meta, `${f.id}.meta.json`).toBeDefined();
      expect(f.expected, `${f.id}.expected.json`).toBeDefined();
      expect(KINDS, `${f.id}: kind`).toContain(f.meta.kind);
      expect(f.meta.source.file ?? f.meta.source.url, `${f.id}: source`).toBeDefined();
    }
  });

  for (const f of fixtures) {
    it(`${f.id} (${f.meta?.kind ?? 'no meta'})`, async () => {
      const { kind, body } = effective(f);
      await runnerFor(kind)(f, body);
    });
  }
});

// ---------------------------------------------------------------------------------------
// INDEX.json: every example of the listed pages has a fixture

describe('docs fixtures index', () => {
  const indexPath = join(DOCS, 'INDEX.json');
  const index = existsSync(indexPath) ? readJsonFile(indexPath) : undefined;
  const listed = (): string[] => [
    ...(index.blocks as { fixtures: string[] }[]).flatMap((b) => b.fixtures),
    ...(index.other as { fixtures: string[] }[]).flatMap((b) => b.fixtures),
  ];

  it('INDEX.json lists every fixture once, and every fixture it lists exists', () => {
    expect(index, 'test/provider/docs/INDEX.json exists').toBeDefined();
    const names = listed();
    expect(new Set(names).size).toBe(names.length);
    for (const name of names) {
      expect(existsSync(join(DOCS, `${name}.json`)), `${name}.json`).toBe(true);
      expect(existsSync(join(DOCS, `${name}.meta.json`)), `${name}.meta.json`).toBe(true);
      expect(existsSync(join(DOCS, `${name}.expected.json`)), `${name}.expected.json`).toBe(true);
    }
    expect([...names].sort()).toEqual(fixtures.map((f) => f.id).sort());
  });

  it('every block of the pages has a fixture; a page without blocks says why', () => {
    const blocks = index.blocks as { page: string; line: number; fixtures: string[] }[];
    for (const b of blocks) expect(b.fixtures.length, `${b.page}:${b.line}`).toBeGreaterThan(0);
    const without = (index.pagesWithoutExamples as { page: string; why: string }[]).map(
      (p) => p.page,
    );
    expect(without).toEqual(NO_EXAMPLES.map((p) => p.page));
    expect([...new Set(blocks.map((b) => b.page)), ...without].sort()).toEqual([...PAGES].sort());
  });

  it.skipIf(!existsSync(MIRROR))(
    onlyIf(
      existsSync(MIRROR),
      'INDEX.json is current, and every fixture copied from a block is a faithful copy of it',
      `no mirror of smsbat/help at ${MIRROR}`,
    ),
    () => {
      const { index: fresh, problems } = buildIndex(MIRROR, DOCS);
      expect(problems).toEqual([]);
      expect(JSON.parse(JSON.stringify(fresh))).toEqual(index);
    },
  );
});

// ---------------------------------------------------------------------------------------
// Over HTTP: Switchboard's own API and hooks, on a real database

describeEachEngine('docs fixtures over HTTP', (ctx) => {
  let app: ReturnType<typeof buildTestApp>['app'];
  const db = () => ctx.database().db;
  beforeAll(() => {
    app = buildTestApp(ctx.database()).app;
  });

  /** A message of Switchboard's whose provider messageId is the fixture's (and no other's). */
  async function messageKnownAs(f: Fixture, status = 'accepted'): Promise<string> {
    const providerMessageId = f.expected.messageId as string;
    // a record with per-channel words is about a message with a fallback: Viber, then SMS
    const message = f.expected.channels
      ? {
          from: 'Acme',
          to: phone(),
          type: 'viber_trans',
          text: 'docs fixture',
          fallback: { type: 'sms', text: 'docs fixture' },
        }
      : { from: 'Acme', to: phone(), type: 'sms', text: 'docs fixture' };
    const res = await app.request('/v1/messages', json({ messages: [message] }));
    expect(res.status).toBe(202);
    const id = (await readJson(res)).messages[0].id as string;
    await db()
      .update(messages)
      .set({ providerMessageId: null })
      .where(eq(messages.providerMessageId, providerMessageId));
    // given as the dispatch gives it (with its key), then moved to `status`
    await recordAccepted(db(), [{ id, providerMessageId }], new Date());
    await db().update(messages).set({ status }).where(eq(messages.id, id));
    return id;
  }

  const view = async (id: string) => readJson(await app.request(`/v1/messages/${id}`));

  /** The timeline shows the canonical status, with the provider's word kept beside it. */
  function expectOnTimeline(v: Json, f: Fixture, source: string): void {
    // the message's own events (a channel's events carry detail.perChannel)
    const events = (v.timeline as Json[]).filter(
      (e) => e.source === source && e.status === f.expected.status && !e.detail?.perChannel,
    );
    expect(events.length, `${f.id}: a ${source} event with status ${f.expected.status}`).toBe(1);
    if (f.expected.rawStatus !== f.expected.status) {
      expect(JSON.stringify(events[0].detail ?? {})).toContain(`"${f.expected.rawStatus}"`);
    }
  }

  for (const f of ofKind('status-webhook')) {
    it(`${f.id}: POST /hooks/delivery, matched by messageId, read back`, async () => {
      const { body } = effective(f);
      const id = await messageKnownAs(f);
      const res = await app.request('/hooks/delivery', json(body));
      expect(res.status).toBe(200);
      expect(await readJson(res)).toMatchObject({ events: 1, matched: 1, problems: [] });
      const v = await view(id);
      expect(v.status).toBe(f.expected.status);
      expectOnTimeline(v, f, 'callback');
    });
  }

  for (const f of ofKind('status-record')) {
    it(`${f.id}: the poller reads it for the message it asked about`, async () => {
      const id = await messageKnownAs(f);
      const later = new Date(Date.now() + 3_600_000);
      await pollOnce(
        {
          db: db(),
          provider: messagingClient(200, f.body, `/bat/message/${f.expected.messageId}`),
          clock: { now: () => later },
          logger: createLogger('silent'),
          statusMap: DEFAULT_STATUS_MAP,
        },
        { afterMs: 1000, everyMs: 1000 },
      );
      const v = await view(id);
      expect(v.status).toBe(f.expected.status);
      if (f.expected.status !== 'accepted') expectOnTimeline(v, f, 'poll');
      // per-channel words are kept on the timeline, not only inside the raw answer
      for (const [channel, word] of Object.entries((f.expected.channels ?? {}) as object)) {
        const kept = JSON.stringify(
          (v.timeline as Json[]).map((e) => {
            const { response: _raw, ...detail } = (e.detail ?? {}) as Json;
            return { ...e, detail };
          }),
        );
        expect(kept, `${f.id}: ${channel} ${word} on the timeline`).toContain(`"${channel}"`);
        expect(kept, `${f.id}: ${channel} ${word} on the timeline`).toContain(`"${word}"`);
      }
    });
  }

  for (const f of ofKind('viber-inbound')) {
    HTTP_CASES.add(f.id);
    it(`${f.id}: POST /hooks/viber, listed by GET /v1/inbound, stored once`, async () => {
      const { body } = effective(f);
      const list = async () =>
        (
          await readJson(
            await app.request(`/v1/inbound?from=${encodeURIComponent(f.expected.from)}`),
          )
        ).items as Json[];
      const res = await app.request('/hooks/viber', json(body));
      expect(res.status).toBe(200);
      expect(await readJson(res)).toMatchObject({ problems: [] });
      expect(await list()).toEqual([expect.objectContaining(f.expected)]);
      // the same message again, written differently (another raw body): still one
      const again = await app.request('/hooks/viber', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body, null, 2),
      });
      expect(again.status).toBe(200);
      expect(await list()).toHaveLength(1);
    });
  }

  for (const f of ofKind('request', 'message')) {
    it(`${f.id}: POST /v1/messages`, async () => {
      const { kind, body } = effective(f);
      const res = await app.request('/v1/messages', json({ messages: messagesOf(kind, body) }));
      if (f.expected.ok === false) {
        const answer = await readJson(res);
        const statuses = res.status === 202 ? answer.messages.map((m: Json) => m.status) : [];
        expect(res.status === 400 || statuses.includes('rejected'), JSON.stringify(answer)).toBe(
          true,
        );
        return;
      }
      const answer = await readJson(res);
      expect(res.status, JSON.stringify(answer)).toBe(202);
      for (const m of answer.messages)
        expect(m, JSON.stringify(m)).toMatchObject({ status: 'queued' });
    });
  }
});

// ---------------------------------------------------------------------------------------
// The sandbox: takes every documented request, answers as the docs show

describe('docs fixtures in the sandbox', () => {
  const KEY = { 'X-Authorization-Key': 'sandbox-key' };
  let sandbox: Sandbox | undefined;
  afterAll(async () => {
    await sandbox?.close();
  });
  const fresh = async (): Promise<Sandbox> => {
    await sandbox?.close();
    sandbox = createSandbox({ clock: createManualClock() });
    return sandbox;
  };
  const post = (s: Sandbox, path: string, body: unknown, headers: Record<string, string> = KEY) =>
    s.app.request(path, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });

  for (const f of ofKind('request', 'message')) {
    it(`${f.id}: POST /bat/messagelist`, async () => {
      const { kind, body } = effective(f);
      const s = await fresh();
      const res = await post(s, '/bat/messagelist', { messages: messagesOf(kind, body) });
      const answer = await readJson(res);
      if (f.expected.ok === false) {
        const refused =
          res.status !== 200 || answer.messages.some((m: Json) => m.status === 'rejected');
        expect(refused, JSON.stringify(answer)).toBe(true);
        return;
      }
      expect(res.status, JSON.stringify(answer)).toBe(200);
      expect(Number.isInteger(answer.messagelistId)).toBe(true);
      for (const m of answer.messages)
        expect(m, JSON.stringify(m)).toMatchObject({ status: 'accepted' });
      if (f.expected.sandbox) expect(answer).toMatchObject(f.expected.sandbox);
    });
  }

  for (const f of ofKind('variables-upload')) {
    it(`${f.id}: POST /api/items`, async () => {
      const s = await fresh();
      const res = await post(s, '/api/items', effective(f).body);
      expect(res.status, await res.clone().text()).toBe(200);
    });
  }

  for (const f of ofKind('cascade-request')) {
    it(`${f.id}: POST ${CASCADE_PATHS.general}`, async () => {
      const { body } = effective(f);
      const s = await fresh();
      const uploaded = uploadedOf(f);
      if (uploaded) expect((await post(s, '/api/items', uploaded.body)).status).toBe(200);
      const res = await post(s, CASCADE_PATHS.general, body);
      const answer = await readJson(res);
      if (f.expected.ok === false) {
        expect(res.status, JSON.stringify(answer)).toBe(400);
        return;
      }
      expect(res.status, JSON.stringify(answer)).toBe(200);
      const results = parseCascadeResponse(answer);
      const sent = (Array.isArray(body) ? body : body.messages) as Json[];
      expect(results).toHaveLength(sent.length);
      if (Array.isArray(body)) {
        // send.md: the answer is an array, trackinId the message's own id
        expect(Array.isArray(answer)).toBe(true);
        expect(results!.map((r) => r.trackingId)).toEqual(sent.map((m) => m.id));
      }
    });
  }

  for (const f of ofKind('error-response')) {
    it(`${f.id}: the sandbox's request-level errors have this shape`, async () => {
      const s = await fresh();
      const path = f.meta.api === 'cascade' ? CASCADE_PATHS.general : '/bat/messagelist';
      const res = await post(s, path, { messages: [] }, {});
      expect(res.status).toBe(401);
      const answer = await readJson(res);
      expect(Object.keys(answer)).toEqual(['error']);
      expect(answer.error).toMatchObject({ code: expect.any(String), message: expect.any(String) });
      // what the docs show, nothing more
      const shown = Object.keys(f.body.error as object);
      for (const key of Object.keys(answer.error)) expect(shown).toContain(key);
      expect(Object.keys(f.body)).toEqual(['error']);
    });
  }
});

// ---------------------------------------------------------------------------------------
// The sandbox's chat API (ChatHub, under /chat): takes every documented request

describe("docs fixtures in the sandbox's chat API", () => {
  /** organizations.md's list: the sandbox's organizations for every chat fixture */
  const ORGANIZATIONS = byId.get('chathub/organizations/list-response')?.body as {
    id: number;
    name: string;
  }[];
  /** operators.md's operators are in organization 24: so are the ones made beforehand */
  const OPERATORS_ORG = 24;
  let sandbox: Sandbox | undefined;
  afterAll(async () => {
    await sandbox?.close();
  });

  /** A fresh sandbox set up as a fixture's meta says, over its own chat API. */
  async function chatSandbox(setup: ChatSetup) {
    await sandbox?.close();
    sandbox = createSandbox({
      clock: createManualClock(Date.parse(setup.now ?? CHAT_NOW)),
      organizations: ORGANIZATIONS,
      ...(setup.credentials && { credentials: setup.credentials }),
    });
    const s = sandbox;
    const call = (method: string, path: string, body?: unknown, headers = {}) =>
      s.app.request(`/chat${path}`, {
        method,
        headers: { 'content-type': 'application/json', ...headers },
        ...(body !== undefined && { body: JSON.stringify(body) }),
      });
    // a company token, from the sandbox's own login and password
    const login = await call('POST', COMPANY_LOGIN, {
      login: s.credentials.login,
      password: s.credentials.password,
    });
    expect(login.status).toBe(200);
    const auth = { Authorization: `Bearer ${await readJson(login)}` };
    const n = setup.operators ?? 0;
    if (n > 0) {
      const made = await call(
        'POST',
        '/api/operator/synchronize',
        Array.from({ length: n }, (_, i) => ({
          organizationId: OPERATORS_ORG,
          name: `Operator ${i + 1}`,
        })),
        auth,
      );
      expect(made.status).toBe(200);
      expect((await readJson(made)).map((o: Json) => o.id)).toEqual(
        Array.from({ length: n }, (_, i) => i + 1),
      );
    }
    for (const [id, status] of Object.entries(setup.statuses ?? {})) {
      const moved = await call('POST', '/api/operator/status', { id: Number(id), status }, auth);
      expect(moved.status).toBe(200);
    }
    let operatorToken: string | undefined;
    if (setup.operatorToken) {
      const issued = await call('POST', '/api/operator/get-token', setup.operatorToken, auth);
      expect(issued.status).toBe(200);
      operatorToken = await readJson(issued);
    }
    const operator = async (id: number): Promise<Json> => {
      const list = await call('GET', `/api/operator?organizationId=${OPERATORS_ORG}`, undefined, {
        ...auth,
        Accept: 'text/plain',
      });
      expect(list.status).toBe(200);
      return ((await readJson(list)) as Json[]).find((o) => o.id === id);
    };
    return { call, auth, operatorToken, operator };
  }

  /** The sandbox's answer against the expected file: as a JWT, empty, equal or matching. */
  function expectAnswer(f: Fixture, text: string, e: Json): void {
    if (e.answerIs === 'jwt') {
      expect(JSON.parse(text), `${f.id}: a JSON string holding a JWT`).toMatch(
        /^[\w-]+\.[\w-]+\.[\w-]+$/,
      );
    }
    if (e.answerIs === 'empty') expect(text, `${f.id}: no body`).toBe('');
    if (e.answer !== undefined) expect(JSON.parse(text)).toEqual(e.answer);
    if (e.answerMatches !== undefined) expect(JSON.parse(text)).toMatchObject(e.answerMatches);
  }

  /** The body with the meta's run-time fills made (`$operatorToken`: the token issued first). */
  function filledAtRun(f: Fixture, operatorToken: string | undefined): Json {
    let text = JSON.stringify(f.body);
    for (const fill of (f.meta.fills ?? []).filter((x) => x.in === 'run')) {
      expect(fill.value, `${f.id}: a run-time fill names what it takes`).toBe('$operatorToken');
      expect(operatorToken, `${f.id}: meta.sandbox.operatorToken`).toBeDefined();
      text = text.split(fill.placeholder).join(operatorToken!);
    }
    return JSON.parse(text);
  }

  for (const f of ofKind('chat-request')) {
    HTTP_CASES.add(f.id);
    it(`${f.id}: ${f.meta.endpoint} under /chat`, async () => {
      const [method, path] = endpointOf(f);
      const setup = f.meta.sandbox ?? {};
      const env = await chatSandbox(setup);
      const headers = path === COMPANY_LOGIN ? {} : env.auth;
      const res = await env.call(method, path, f.body, headers);
      const text = await res.text();
      const e = f.expected;
      if (e.ok === false) {
        expect(res.status, text).toBeGreaterThanOrEqual(400);
        expect([e.code].flat()).toContain(JSON.parse(text).error);
        expectExplained(f);
        return;
      }
      expect(res.status, text).toBe(e.httpStatus);
      expectAnswer(f, text, e);
      if (e.operatorAfter) {
        expect(await env.operator(e.operatorAfter.id)).toMatchObject(e.operatorAfter);
      }
      if (e.filled) {
        const again = await env.call(method, path, filledAtRun(f, env.operatorToken), headers);
        const filledText = await again.text();
        expect(again.status, filledText).toBe(e.httpStatus);
        expectAnswer(f, filledText, e.filled);
      }
      if (path === COMPANY_LOGIN && setup.credentials) {
        // the pair is checked, not taken whatever it is: the default pair's sandbox refuses it
        const other = await chatSandbox({});
        expect((await other.call(method, path, f.body)).status).toBe(401);
      }
    });
  }
});
