/**
 * The console at /ui: server-rendered pages (hono/jsx) over the same domain reads as the API,
 * readable without client JavaScript; with it, Mermaid diagrams (served from this process),
 * live call updates (server-sent events) and a background keypad.
 *
 * Pages: `/ui` (home), `/ui/flows`, `/ui/flows/{id}`, `/ui/calls` (search: `id`, `to`,
 * `flow`, `outcome`, `state`), `/ui/calls/{id}`, `/ui/calls/{id}/keypad`, `/ui/messages`
 * (search: `ref`, `to`, `status`, `type`, `callId`), `/ui/messages/{ref}`, `/ui/inbound`
 * (`from`), `/ui/endpoints`, `/ui/endpoints/{id}`, `/ui/try`, `/ui/try/{flow}`, `/ui/login`.
 * Also: `POST /ui/endpoints/{id}/replay` and `POST /ui/events/{id}/replay` (replay, in
 * src/ui/endpoints.tsx), `GET /ui/calls/{id}/events` (server-sent events: `call` with the
 * live part of the page and the diagram sources, then `done`), `POST /ui/calls/{id}/keys`
 * (`key=1`: JSON with `Accept: application/json`, else a redirect back), `POST
 * /ui/try/{flow}`, `POST /ui/login`, `POST /ui/logout`,
 * `GET /ui/assets/{console.css,console.js,flow-edit.js,mermaid.min.js}`. The flow editor:
 * `/ui/flows/{id}/edit` and its posts (`check`, `test`, `replay`, `download`, `save`), in
 * src/ui/flow-edit.tsx. A flow's versions: `/ui/flows/{id}/versions` and
 * `/ui/flows/{id}/compare?from=&to=` (src/ui/pages/flow-versions.tsx). Campaigns:
 * `/ui/campaigns`, `/ui/campaigns/{id}`, `/ui/campaigns/{id}/results.csv` and `POST
 * /ui/campaigns/{id}/{pause,resume,cancel}` (src/ui/pages/campaigns.tsx). A flow's spoken
 * prompt with vars typed in: `GET /ui/flows/{id}/say?node=&lang=&var.{name}=` (the audio,
 * rendered now and not stored).
 *
 * @example
 * app.route('/ui', consoleRoutes({ config, db, flows, calls, sandbox, spoken }));
 */

import { type Context, Hono } from 'hono';
import { csrf } from 'hono/csrf';
import { HTTPException } from 'hono/http-exception';
import type { Child } from 'hono/jsx';
import { streamSSE } from 'hono/streaming';
import { parsePhoneNumberFromString } from 'libphonenumber-js';
import { CALL_STATES } from '../calls/deps.ts';
import { type CallView, flowStatsOf, getCall, listCalls } from '../calls/read.ts';
import type { FlowRegistry } from '../calls/registry.ts';
import { type StartDeps, startCall } from '../calls/start.ts';
import { type Clock, systemClock } from '../clock.ts';
import type { Config } from '../config.ts';
import type { DatabaseAvailability } from '../db/availability.ts';
import type { Db } from '../db/client.ts';
import { isDatabaseUnavailable } from '../db/errors.ts';
import { AppError, httpStatus } from '../errors.ts';
import {
  type CompiledFlow,
  promptLabel,
  readTextVars,
  templateNames,
  validateVars,
} from '../flows/index.ts';
import type { TokenStore } from '../http/api-tokens.ts';
import { tokenMatches } from '../http/auth.ts';
import { requestOrigin, trustedProxies } from '../http/client-address.ts';
import type { AppEnv } from '../http/env.ts';
import { databaseUnavailable, onError, whileDatabaseUp } from '../http/errors.ts';
import { isUuid } from '../ids.ts';
import { listInbound } from '../messages/inbound.ts';
import { getMessage, listMessages } from '../messages/read.ts';
import { isMessageStatus } from '../messages/status.ts';
import type { SpokenPrompts } from '../speech/spoken.ts';
import { assetRoutes } from './assets.ts';
import {
  clearSessionCookie,
  consoleAuth,
  safeNext,
  sessionCookie,
  setSessionCookie,
} from './auth.ts';
import { callIntros, pinnedFlow, promptPath, spokenWords } from './data.ts';
import { flowDiagram } from './diagram.ts';
import { endpointPages } from './endpoints.tsx';
import { flowEditPages } from './flow-edit.tsx';
import { Layout, Notice, type Section } from './layout.tsx';
import {
  CallFacts,
  CallLive,
  CallPrompts,
  type CallQuery,
  CallSearch,
  CallsTable,
} from './pages/calls.tsx';
import { campaignPages } from './pages/campaigns.tsx';
import { flowReplayPages } from './pages/flow-replay.tsx';
import { flowVersionPages } from './pages/flow-versions.tsx';
import {
  DiagramBox,
  type DiagramSources,
  FlowPage,
  type FlowPromptRow,
  FlowsList,
} from './pages/flows.tsx';
import { HomePage, LoginPage } from './pages/home.tsx';
import { InboundPage, MessagePage, MessageSearch, MessagesTable } from './pages/messages.tsx';
import {
  Keypad,
  NO_SANDBOX,
  NowPlaying,
  NowPlayingMenu,
  TryForm,
  TryList,
  type TryValues,
} from './pages/try.tsx';
import { type SandboxControl, sandboxControl } from './sandbox.ts';
import { consoleSessionStore } from './sessions.ts';
import { signInLimiter } from './sign-in-limit.ts';

export interface ConsoleDeps {
  config: Pick<
    Config,
    'uiTokens' | 'apiTokens' | 'trustedProxies' | 'publicUrl' | 'flowsDir' | 'flowsWritable'
  >;
  db: Db;
  /**
   * what the pages read (a read replica's routed db, src/db/replica.ts; default db): only
   * GET pages reach the replica, and only through it
   */
  readDb?: Db;
  /** sessions' expiry and the sign-in limit's window (default: the system clock) */
  clock?: Clock;
  flows: FlowRegistry;
  /** what POST /v1/calls uses: the console starts calls the same way */
  calls: StartDeps;
  /** the built-in sandbox app; without it (a real provider) there is no "try a flow" */
  sandbox?: Hono | undefined;
  /** how often a live call page reads the call again (default 500 ms) */
  pollMs?: number;
  /** how long one live stream lasts before the browser reconnects (default 10 minutes) */
  streamMs?: number;
  /** the API's made tokens: the flow editor's save takes an admin one (src/ui/flow-edit.tsx) */
  tokens?: TokenStore;
  /** `say:` prompts: the flow page plays them (without it they are shown as text) */
  spoken?: SpokenPrompts;
  /**
   * the database's breaker (src/db/availability.ts): while it is known down, pages answer 503
   * at once; a page that finds it down tells it, as the API does
   */
  availability?: DatabaseAvailability;
}

const OPEN = new Set(['/ui/login', '/ui/logout']);
const KEY_VALUES = new Set([...'0123456789*#', 'timeout', 'hangup']);
const FINAL_MESSAGE = new Set(['delivered', 'read', 'rejected', 'failed', 'expired']);

/** A phone number as calls and messages store it (E.164), or what was typed, compacted. */
function normalizePhone(raw: string): string {
  const parsed = parsePhoneNumberFromString(raw);
  return parsed?.isValid() ? parsed.number : raw.replace(/[\s().-]/g, '');
}

/** Query values, trimmed; empty ones left out (an empty search field means "any"). */
function query<K extends string>(c: Context, names: readonly K[]): Partial<Record<K, string>> {
  const out: Partial<Record<K, string>> = {};
  for (const name of names) {
    const v = c.req.query(name)?.trim();
    if (v) out[name] = v;
  }
  return out;
}

function formString(form: Record<string, unknown>, name: string): string {
  const v = form[name];
  return typeof v === 'string' ? v.trim() : '';
}

const wantsJson = (c: Context) => (c.req.header('accept') ?? '').includes('application/json');

/** A call is over for the live view once it ended and every message has its final status. */
function settled(call: CallView): boolean {
  return (
    (call.state === 'ended' || call.state === 'failed') &&
    call.messages.every((m) => FINAL_MESSAGE.has(m.status))
  );
}

function callDiagrams(compiled: CompiledFlow, call: CallView): DiagramSources {
  const opts = {
    call: {
      path: call.path,
      node: call.node,
      ended: call.state === 'ended' || call.state === 'failed',
    },
  };
  return {
    folded: flowDiagram(compiled, { ...opts, folded: true }).source,
    unrolled: flowDiagram(compiled, opts).source,
  };
}

/** The menu a call's callee is in now: none once the call is over. */
const playing = (call: CallView) =>
  call.state === 'ended' || call.state === 'failed' ? null : call.node;

/**
 * What the callee hears now: the menu, its prompt's same-origin path if Switchboard speaks
 * it, and its words with the call's vars (the transcript).
 */
function nowPlaying(compiled: CompiledFlow | undefined, intros: readonly string[], call: CallView) {
  const node = playing(call);
  const found = node === null ? undefined : compiled?.nodes.find((n) => n.id === node);
  const prompt = found && promptPath(intros[found.index] ?? '');
  return { node, prompt, words: prompt && spokenWords(found, call.lang, call.vars) };
}

/**
 * A flow's prompts, one row per distinct prompt and language (retries and rounds repeat
 * them): a spoken one without params with its shared audio's path, one with params with the
 * inputs of a preview form (defaults filled in), recorded ones as written.
 */
function flowPrompts(compiled: CompiledFlow, spoken: SpokenPrompts): FlowPromptRow[] {
  const rows = new Map<string, FlowPromptRow>();
  for (const node of compiled.nodes) {
    for (const [lang, intro] of Object.entries(node.intro)) {
      const key = `${lang}\0${JSON.stringify(intro)}`;
      const seen = rows.get(key);
      if (seen) {
        seen.nodes.push(node.id);
        continue;
      }
      const row: FlowPromptRow = { nodes: [node.id], lang, label: promptLabel(intro) };
      if (typeof intro === 'string') row.recorded = intro;
      else if (intro.say.includes('{{')) {
        row.params = [...new Set(templateNames(intro.say))].map((name) => {
          const p = compiled.params[name];
          const value = p?.default === undefined ? '' : String(p.default);
          return { name, type: p?.type ?? 'string', value };
        });
      } else {
        try {
          row.audio = promptPath(spoken.plan(intro, lang, {}).url);
        } catch {
          // nothing to say (an empty text): the row shows the text alone
        }
      }
      rows.set(key, row);
    }
  }
  return [...rows.values()];
}

const PRESS_ERRORS: Record<string, string> = {
  'not-found': 'The sandbox has not got this call yet; press again in a moment.',
  'not-live': 'This call plays scripted keys, so the keypad cannot press keys on it.',
  ended: 'The call has ended.',
  'bad-key': 'That is not a key of the keypad.',
  'no-sandbox': NO_SANDBOX,
};

export function consoleRoutes(deps: ConsoleDeps) {
  const { db, flows } = deps;
  const reads = deps.readDb ?? db;
  const tokens = deps.config.uiTokens.length > 0 ? deps.config.uiTokens : deps.config.apiTokens;
  const sandbox: SandboxControl | undefined = deps.sandbox && sandboxControl(deps.sandbox);
  const pollMs = deps.pollMs ?? 500;
  const streamMs = deps.streamMs ?? 10 * 60_000;
  const clock = deps.clock ?? systemClock;
  const sessions = consoleSessionStore({ db, clock, tokens });
  const signIns = signInLimiter(clock);
  const proxies = trustedProxies(deps.config.trustedProxies);
  const app = new Hono<AppEnv>();

  const page = (
    c: Context,
    title: string,
    section: Section | undefined,
    body: Child,
    opts: { diagram?: boolean; status?: number } = {},
  ) =>
    c.html(
      <Layout
        title={title}
        section={section}
        diagram={opts.diagram ?? false}
        signOut={tokens.length > 0}
      >
        {body}
      </Layout>,
      (opts.status ?? 200) as 200,
    );

  app.onError((err, c) => {
    if (err instanceof AppError) {
      const status = httpStatus(err.code);
      return page(
        c,
        status === 404 ? 'Not found' : 'Cannot show this',
        undefined,
        <Notice error>{err.message}</Notice>,
        { status },
      );
    }
    if (err instanceof HTTPException) return err.getResponse();
    if (isDatabaseUnavailable(err)) {
      databaseUnavailable(err, c as Context<AppEnv>, deps.availability);
      return page(
        c,
        'Database unavailable',
        undefined,
        <Notice error>
          The database is not answering. This page works again once it is back: retry shortly.
        </Notice>,
        { status: 503 },
      );
    }
    return onError(err, c as Context<AppEnv>);
  });

  // assets before the token check: the sign-in page is styled too, and they hold no data
  app.route('/', assetRoutes());
  // every page after them needs the database (sign-in checks sessions there)
  if (deps.availability) app.use('*', whileDatabaseUp(deps.availability));
  app.use(
    '*',
    consoleAuth(tokens, sessions, (path) => OPEN.has(path)),
  );
  // cookies make form posts from other sites a risk: only same-origin posts are taken. Behind a
  // TLS-terminating proxy the request URL says http: PUBLIC_URL's origin counts as ours too.
  const publicOrigin = new URL(deps.config.publicUrl).origin;
  app.use(
    '*',
    csrf({
      origin: (origin, c) => origin === new URL(c.req.url).origin || origin === publicOrigin,
    }),
  );

  app.get('/login', (c) =>
    page(c, 'Sign in', undefined, <LoginPage next={safeNext(c.req.query('next'))} />),
  );
  app.post('/login', async (c) => {
    const form = await c.req.parseBody();
    const token = formString(form, 'token');
    const next = safeNext(formString(form, 'next'));
    if (tokens.length === 0) return c.redirect(next, 303);
    const origin = requestOrigin(c, proxies);
    // a locked-out address is not told whether its token was right, or guessing would go on
    const wait = signIns.retryAfter(origin.address);
    if (wait > 0) {
      c.header('Retry-After', String(wait));
      return page(c, 'Sign in', undefined, <LoginPage next={next} retryAfter={wait} />, {
        status: 429,
      });
    }
    // every token is compared in constant time; the session names the one that matched
    const match = tokens.find((t) => tokenMatches(token, [t]));
    if (match === undefined) {
      signIns.fail(origin.address);
      return page(c, 'Sign in', undefined, <LoginPage next={next} failed />, { status: 401 });
    }
    setSessionCookie(c, await sessions.open(match), origin.secure);
    return c.redirect(next, 303);
  });
  app.post('/logout', async (c) => {
    await sessions.revoke(sessionCookie(c));
    clearSessionCookie(c, requestOrigin(c, proxies).secure);
    return c.redirect('/ui/login', 303);
  });

  app.get('/', async (c) => {
    const [all, recent] = await Promise.all([flows.list(), listCalls(reads, { limit: 10 })]);
    return page(
      c,
      'Switchboard console',
      'home',
      <HomePage flows={all} calls={recent.items} canTry={sandbox !== undefined} />,
    );
  });

  app.get('/flows', async (c) =>
    page(c, 'Flows', 'flows', <FlowsList flows={await flows.list()} />),
  );

  app.get('/flows/:id', async (c) => {
    const id = c.req.param('id');
    const flow = await flows.get(id);
    if (!flow) throw new AppError('NOT_FOUND', `no flow "${id}" in the flows directory`);
    const stats = await flowStatsOf(reads, id);
    const diagram = flow.compiled ? flowDiagram(flow.compiled, { stats }) : undefined;
    const folded = flow.compiled && flowDiagram(flow.compiled, { stats, folded: true });
    return page(
      c,
      `Flow ${flow.compiled?.title ?? flow.definition?.title ?? flow.id}`,
      'flows',
      <FlowPage
        flow={flow}
        stats={stats}
        diagram={diagram && folded ? { folded: folded.source, unrolled: diagram.source } : null}
        counts={diagram?.counts ?? new Map()}
        canTry={sandbox !== undefined}
        prompts={flow.compiled && deps.spoken ? flowPrompts(flow.compiled, deps.spoken) : undefined}
      />,
      { diagram: diagram !== undefined },
    );
  });

  // a spoken prompt with the vars typed on the flow page: rendered now, never stored
  app.get('/flows/:id/say', async (c) => {
    const id = c.req.param('id');
    const flow = await flows.get(id);
    if (!flow) throw new AppError('NOT_FOUND', `no flow "${id}" in the flows directory`);
    if (!flow.compiled) throw new AppError('INVALID_FLOW', `flow "${id}" does not compile`);
    if (!deps.spoken) throw new AppError('NOT_FOUND', 'there is no speech engine here');
    const nodeId = c.req.query('node') ?? '';
    const lang = c.req.query('lang') ?? '';
    const node = flow.compiled.nodes.find((n) => n.id === nodeId);
    if (!node) throw new AppError('NOT_FOUND', `flow "${id}" has no menu node "${nodeId}"`);
    const prompt = Object.hasOwn(node.intro, lang) ? node.intro[lang] : undefined;
    if (prompt === undefined) {
      throw new AppError('INVALID_LANGUAGE', `flow "${id}" has no language "${lang}"`);
    }
    if (typeof prompt === 'string') {
      throw new AppError('VALIDATION_ERROR', `node "${nodeId}" plays recorded audio in "${lang}"`);
    }
    // only the prompt's own params are asked for: the rest of the flow's may stay empty
    const names = new Set(templateNames(prompt.say));
    const given: Record<string, string> = {};
    for (const [k, v] of Object.entries(c.req.queries())) {
      if (k.startsWith('var.') && names.has(k.slice(4)) && v[0] !== undefined && v[0] !== '') {
        given[k.slice(4)] = v[0];
      }
    }
    const params = Object.fromEntries(
      Object.entries(flow.compiled.params).filter(([name]) => names.has(name)),
    );
    const checked = validateVars({ ...flow.compiled, params }, readTextVars(params, given));
    if (!checked.ok) {
      throw new AppError('INVALID_VARS', 'these vars do not fit the prompt', checked.details);
    }
    const audio = await deps.spoken.preview(prompt, lang, checked.vars);
    c.header('Content-Type', audio.contentType);
    c.header('Cache-Control', 'no-store');
    c.header('X-Content-Type-Options', 'nosniff');
    return c.body(audio.body as Uint8Array<ArrayBuffer>, 200);
  });

  app.get('/calls', async (c) => {
    const q: CallQuery = query(c, ['id', 'to', 'flow', 'outcome', 'state'] as const);
    const all = (await flows.list()).map((f) => f.id);
    const notices: Child[] = [];
    if (q.id) {
      if (isUuid(q.id)) {
        const found = await getCall(reads, q.id).catch(() => undefined);
        if (found) return c.redirect(`/ui/calls/${found.id}`, 303);
      }
      notices.push(<Notice error>{`No call has the id "${q.id}".`}</Notice>);
    }
    const state = (CALL_STATES as readonly string[]).includes(q.state ?? '') ? q.state : undefined;
    const result = await listCalls(reads, {
      flow: q.flow,
      to: q.to ? normalizePhone(q.to) : undefined,
      outcome: q.outcome,
      state,
      cursor: c.req.query('cursor') || undefined,
      limit: 50,
    });
    const next = new URLSearchParams(
      Object.entries({ ...q, id: undefined, cursor: result.nextCursor ?? undefined }).filter(
        (e): e is [string, string] => typeof e[1] === 'string',
      ),
    );
    return page(
      c,
      'Calls',
      'calls',
      <>
        <CallSearch q={q} flows={all} />
        {notices}
        <CallsTable calls={result.items} caption="Calls, newest first" />
        {result.nextCursor && (
          <p>
            <a href={`/ui/calls?${next}`}>Older calls</a>
          </p>
        )}
      </>,
    );
  });

  const callPage = async (c: Context, keypad: boolean) => {
    const call = await getCall(reads, c.req.param('id') ?? '');
    const compiled = await pinnedFlow(reads, flows, call.flow, call.flowVersion);
    const intros = await callIntros(reads, call.id);
    const error = c.req.query('error');
    const status = c.req.query('pressed')
      ? `Pressed ${c.req.query('pressed')}.`
      : error
        ? (PRESS_ERRORS[error] ?? '')
        : undefined;
    const live = !settled(call);
    return page(
      c,
      keypad ? `Trying ${call.flow}` : `Call to ${call.to}`,
      keypad ? 'try' : 'calls',
      <>
        <div class="columns">
          <div>
            {compiled ? (
              <DiagramBox
                sources={callDiagrams(compiled, call)}
                label={`Diagram of flow ${call.flow} with this call's path`}
                call
              />
            ) : (
              <Notice error>The flow version of this call is not stored any more.</Notice>
            )}
          </div>
          <div>
            {keypad &&
              (sandbox ? (
                <>
                  <Keypad callId={call.id} status={status} />
                  <NowPlaying {...nowPlaying(compiled, intros, call)} />
                </>
              ) : (
                <Notice error>{NO_SANDBOX}</Notice>
              ))}
            {!keypad && sandbox && live && (
              <p>
                <a href={`/ui/calls/${call.id}/keypad`}>Open the keypad for this call</a>
              </p>
            )}
            <h2>Call</h2>
            <CallFacts call={call} />
          </div>
        </div>
        <section
          aria-label="Progress of the call"
          data-live={live ? `/ui/calls/${call.id}/events` : undefined}
          data-state={call.state}
        >
          <CallLive call={call} />
          {live && (
            <noscript>
              <p>
                <a href={`/ui/calls/${call.id}${keypad ? '/keypad' : ''}`}>Reload this page</a> to
                see what happened since.
              </p>
            </noscript>
          )}
        </section>
        <CallPrompts call={call} intros={intros} compiled={compiled} />
      </>,
      { diagram: compiled !== undefined },
    );
  };
  app.get('/calls/:id', (c) => callPage(c, false));
  app.get('/calls/:id/keypad', (c) => callPage(c, true));

  // Live updates: Postgres is the only state, so the stream reads the call again every
  // pollMs and sends the page's live part when it changed; any instance can serve it.
  app.get('/calls/:id/events', async (c) => {
    const first = await getCall(reads, c.req.param('id'));
    const compiled = await pinnedFlow(reads, flows, first.flow, first.flowVersion);
    // the menu as sent does not change: its intros are read once
    const intros = await callIntros(reads, first.id);
    const signal = c.req.raw.signal;
    return streamSSE(
      c,
      async (stream) => {
        const until = Date.now() + streamMs;
        let last = '';
        let call = first;
        while (!stream.aborted && !stream.closed && !signal.aborted && Date.now() < until) {
          const now = nowPlaying(compiled, intros, call);
          const data = JSON.stringify({
            state: call.state,
            outcome: call.outcome,
            html: String(await (<CallLive call={call} />).toString()),
            diagrams: compiled ? callDiagrams(compiled, call) : null,
            // the keypad page's "now playing": the menu the callee is in, and its prompt
            prompt: now.prompt ?? null,
            now: String(await (<NowPlayingMenu {...now} />).toString()),
          });
          if (data !== last) {
            await stream.writeSSE({ event: 'call', data });
            last = data;
          }
          if (settled(call)) {
            await stream.writeSSE({ event: 'done', data: '{}' });
            return;
          }
          await stream.sleep(pollMs);
          call = await getCall(reads, call.id);
        }
      },
      async () => {}, // the browser went away or the database is closing: nothing to tell
    );
  });

  app.post('/calls/:id/keys', async (c) => {
    const id = c.req.param('id');
    const form = await c.req.parseBody();
    const key = formString(form, 'key');
    const answer = (ok: boolean, code: string, status: 202 | 400 | 404 | 409) => {
      const message = ok ? `Pressed ${key}.` : (PRESS_ERRORS[code] ?? code);
      if (wantsJson(c)) return c.json({ ok, key, message }, status);
      const q = ok ? `pressed=${encodeURIComponent(key)}` : `error=${code}`;
      return c.redirect(`/ui/calls/${id}/keypad?${q}`, 303);
    };
    if (!sandbox) return answer(false, 'no-sandbox', 409);
    if (!KEY_VALUES.has(key)) return answer(false, 'bad-key', 400);
    const call = await getCall(db, id);
    const own = call.messages.find((m) => m.role === 'call');
    if (!own) return answer(false, 'not-found', 404);
    // the dispatcher hands a new call to the sandbox within moments: wait that long for it
    const until = Date.now() + 3000;
    for (;;) {
      const pressed = await sandbox.pressKeys(own.customerMessageId, [key]);
      if (pressed.ok) return answer(true, '', 202);
      if (pressed.status !== 404 || Date.now() > until) {
        const code =
          pressed.code === 'NOT_LIVE'
            ? 'not-live'
            : pressed.code === 'CALL_ENDED'
              ? 'ended'
              : 'not-found';
        return answer(false, code, pressed.status === 404 ? 404 : 409);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  });

  app.get('/messages', async (c) => {
    const q = query(c, ['ref', 'to', 'status', 'type', 'callId'] as const);
    const notices: Child[] = [];
    if (q.ref) {
      const found = await getMessage(reads, q.ref).catch(() => undefined);
      if (found) return c.redirect(`/ui/messages/${found.id}`, 303);
      notices.push(<Notice error>{`No message has the id "${q.ref}".`}</Notice>);
    }
    const result = await listMessages(reads, {
      to: q.to ? normalizePhone(q.to) : undefined,
      status: q.status && isMessageStatus(q.status) ? q.status : undefined,
      type: q.type,
      callId: q.callId && isUuid(q.callId) ? q.callId : undefined,
      cursor: c.req.query('cursor') || undefined,
      limit: 50,
    });
    const next = new URLSearchParams(
      Object.entries({ ...q, ref: undefined, cursor: result.nextCursor ?? undefined }).filter(
        (e): e is [string, string] => typeof e[1] === 'string',
      ),
    );
    return page(
      c,
      'Messages',
      'messages',
      <>
        <MessageSearch q={q} />
        {notices}
        <MessagesTable items={result.items} />
        {result.nextCursor && (
          <p>
            <a href={`/ui/messages?${next}`}>Older messages</a>
          </p>
        )}
      </>,
    );
  });

  app.get('/messages/:ref', async (c) => {
    const message = await getMessage(reads, c.req.param('ref'));
    return page(c, `Message to ${message.to}`, 'messages', <MessagePage message={message} />);
  });

  app.get('/inbound', async (c) => {
    const from = c.req.query('from')?.trim() || undefined;
    const result = await listInbound(reads, {
      from: from ? normalizePhone(from) : undefined,
      limit: 100,
    });
    return page(
      c,
      'Incoming Viber messages',
      'inbound',
      <InboundPage items={result.items} from={from} />,
    );
  });

  app.get('/try', async (c) =>
    page(
      c,
      'Try a flow',
      'try',
      sandbox ? <TryList flows={await flows.list()} /> : <Notice error>{NO_SANDBOX}</Notice>,
    ),
  );

  const tryFlow = async (id: string) => {
    const flow = await flows.get(id);
    if (!flow) throw new AppError('NOT_FOUND', `no flow "${id}" in the flows directory`);
    if (!flow.compiled) throw new AppError('INVALID_FLOW', `flow "${id}" does not compile`);
    return flow.compiled;
  };
  const tryForm = (c: Context, compiled: CompiledFlow, values: TryValues, error?: AppError) =>
    page(
      c,
      `Try ${compiled.id}`,
      'try',
      sandbox ? (
        <TryForm
          flow={compiled}
          values={values}
          errors={error?.details ?? []}
          message={error?.message}
        />
      ) : (
        <Notice error>{NO_SANDBOX}</Notice>
      ),
      { status: error ? 400 : 200 },
    );

  app.get('/try/:flow', async (c) => {
    const compiled = await tryFlow(c.req.param('flow'));
    return tryForm(c, compiled, {
      to: '+380501234567',
      from: 'Sandbox',
      lang: compiled.languages[0] ?? '',
      vars: {},
    });
  });

  app.post('/try/:flow', async (c) => {
    const compiled = await tryFlow(c.req.param('flow'));
    if (!sandbox) return tryForm(c, compiled, { to: '', from: '', lang: '', vars: {} });
    const form = await c.req.parseBody();
    const values: TryValues = {
      to: formString(form, 'to'),
      from: formString(form, 'from'),
      lang: formString(form, 'lang'),
      vars: Object.fromEntries(
        Object.keys(compiled.params)
          .map((name) => [name, formString(form, `var.${name}`)] as const)
          .filter(([, v]) => v !== ''),
      ),
    };
    const to = normalizePhone(values.to);
    try {
      await sandbox.armLiveCall(to);
      const started = await startCall(deps.calls, {
        flow: compiled.id,
        to,
        from: values.from,
        // a form's fields are text: each read by its param's type (src/flows/vars.ts)
        vars: readTextVars(compiled.params, values.vars),
        ...(values.lang && { lang: values.lang }),
      });
      return c.redirect(`/ui/calls/${started.id}/keypad`, 303);
    } catch (err) {
      await sandbox.disarm(to);
      if (err instanceof AppError) return tryForm(c, compiled, values, err);
      throw err;
    }
  });

  // stored calls replayed through a draft of a flow (src/ui/pages/flow-replay.tsx)
  app.route('/', flowReplayPages({ db, clock, flows, page }));
  // a flow's versions and two of them compared (src/ui/pages/flow-versions.tsx)
  app.route('/', flowVersionPages({ db: reads, flows, page }));
  // campaigns: list, progress, pause / resume / cancel, results CSV (src/ui/pages/campaigns.tsx)
  app.route('/', campaignPages({ db, readDb: reads, clock, page }));
  // event endpoints, their attempts and replay (src/ui/endpoints.tsx)
  app.route('/', endpointPages({ db, clock, page }));
  // the flow editor: check, test, replay, download, save (src/ui/flow-edit.tsx)
  app.route(
    '/',
    flowEditPages({
      db,
      clock,
      flows,
      page,
      write: { flows, dir: deps.config.flowsDir, writable: deps.config.flowsWritable },
      apiTokens: deps.config.apiTokens,
      tokens: deps.tokens,
    }),
  );

  // an HTML answer for any other path under /ui
  app.all('*', (c) =>
    page(c, 'Not found', undefined, <Notice error>There is no such console page.</Notice>, {
      status: 404,
    }),
  );
  return app;
}
