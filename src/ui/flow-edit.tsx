/**
 * The console's flow editor, mounted by src/ui/routes.tsx under its sign-in and same-origin
 * check:
 *
 * - `GET /ui/flows/{id}/edit`: the page (src/ui/pages/flow-edit.tsx), with the file's text;
 * - `POST /ui/flows/{id}/check` (`source`): the draft parsed as `flows/<id>.yaml`. With
 *   `Accept: application/json` (the page's script, as you type) a JSON answer: `ok`,
 *   `version`, `errors` and `warnings` (line, column, rule, message) and the Mermaid source
 *   of its diagram (`diagram.folded`, `diagram.unrolled`, null when it does not compile);
 *   otherwise the page again, with the draft, its problems and diagram;
 * - `POST /ui/flows/{id}/test` (`source`, `tests`): the tests run against the draft;
 * - `POST /ui/flows/{id}/replay` (`source`, `since`): stored calls replayed through the draft;
 * - `POST /ui/flows/{id}/download` (`source`, or `tests` with `what=tests`): the text as a
 *   file (`Content-Disposition: attachment`);
 * - `POST /ui/flows/{id}/save` (`source`, `token`): FLOWS_WRITABLE only, with an admin token
 *   (API_TOKEN, or a token made with the admin scope, checked as the API checks a bearer
 *   token); written as `PUT /v1/flows/{id}` writes (src/http/routes/flow-write.ts), with an
 *   audit row, then a redirect back to the editor.
 *
 * Nothing here writes anything but the save.
 *
 * @example
 * app.route('/', flowEditPages({ db, clock, flows, page, write, apiTokens, tokens }));
 */
import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { type Context, Hono } from 'hono';
import type { Child } from 'hono/jsx';
import type { FlowRegistry } from '../calls/registry.ts';
import { replayFlow, replayTime } from '../calls/replay.ts';
import type { Clock } from '../clock.ts';
import type { Db } from '../db/client.ts';
import { AppError } from '../errors.ts';
import { type LoadedFlow, parseFlowSource } from '../flows/index.ts';
import { runFlowTests } from '../flows/testing.ts';
import {
  ENV_PRINCIPAL,
  type Principal,
  TOKEN_PREFIX,
  type TokenStore,
} from '../http/api-tokens.ts';
import { tokenMatches } from '../http/auth.ts';
import type { AppEnv } from '../http/env.ts';
import {
  auditConsoleFlowWrite,
  type FlowWriteDeps,
  writeFlowSource,
} from '../http/routes/flow-write.ts';
import { allows } from '../http/scopes.ts';
import { flowDiagram } from './diagram.ts';
import type { RenderPage } from './layout.tsx';
import {
  type DraftCheck,
  FlowEditPage,
  type FlowEditView,
  FlowTestReportView,
} from './pages/flow-edit.tsx';
import { ReplayReportView } from './pages/flow-replay.tsx';

export interface FlowEditDeps {
  db: Db;
  clock: Clock;
  flows: FlowRegistry;
  page: RenderPage;
  /** where and whether a save writes (FLOWS_DIR, FLOWS_WRITABLE) */
  write: FlowWriteDeps;
  /** API_TOKEN's values: every scope */
  apiTokens: readonly string[];
  /** the tokens made through the API; without it only API_TOKEN can save */
  tokens?: TokenStore | undefined;
}

/** The name a draft is checked under: what its problems say. */
const draftFile = (id: string) => `flows/${id}.yaml`;
const testsFile = (id: string) => `flows/${id}.test.yaml`;

/**
 * A form field as typed. Browsers send a textarea's line breaks as CRLF: the draft is kept
 * with LF, as the flow files are.
 */
function field(form: Record<string, unknown>, name: string): string {
  const v = form[name];
  return typeof v === 'string' ? v.replace(/\r\n?/g, '\n') : '';
}

/**
 * Checks a draft as `flows/<id>.yaml`: its problems, and its diagram when it compiles.
 *
 * @example
 * checkFlowDraft('appointment-reminder', source).errors[0] // { line: 19, column: 7, rule: 'INVALID_KEY', ... }
 */
export function checkFlowDraft(id: string, source: string): DraftCheck & { flow: LoadedFlow } {
  const flow = parseFlowSource(source, draftFile(id), { id });
  const c = flow.compiled;
  return {
    flow,
    ok: c !== null,
    version: c?.version ?? null,
    errors: flow.errors,
    warnings: flow.warnings,
    diagram: c
      ? {
          folded: flowDiagram(c, { folded: true }).source,
          unrolled: flowDiagram(c).source,
        }
      : null,
  };
}

/**
 * A draft compiled to be played (its tests, a replay) as `flows test` and `flows simulate`
 * do: its `assert:` section unchecked, so a failing assertion does not hide what the cases say.
 */
function playableDraft(id: string, source: string): LoadedFlow {
  return parseFlowSource(source, draftFile(id), { id, assertions: false });
}

export function flowEditPages(deps: FlowEditDeps) {
  const { db, clock, flows, page } = deps;
  const app = new Hono<AppEnv>();

  const find = async (id: string) => {
    const flow = await flows.get(id);
    if (!flow) throw new AppError('NOT_FOUND', `no flow "${id}" in the flows directory`);
    return flow;
  };

  /** The flow's tests file beside it, or undefined when it has none. */
  const readTests = async (flow: LoadedFlow): Promise<string | undefined> =>
    readFile(join(dirname(flow.file), `${flow.id}.test.yaml`), 'utf8').catch(() => undefined);

  /** Who a token given in the form is, checked as the API checks a bearer token. */
  const principalOf = async (given: string): Promise<Principal | undefined> => {
    if (tokenMatches(given, deps.apiTokens)) return ENV_PRINCIPAL;
    if (deps.tokens && given.startsWith(TOKEN_PREFIX)) return deps.tokens.authenticate(given);
    return undefined;
  };

  const render = async (
    c: Context,
    flow: LoadedFlow,
    values: { source: string; tests?: string; since?: string },
    extra: { notice?: FlowEditView['notice']; result?: Child; status?: number } = {},
  ) => {
    const stored = await readTests(flow);
    const view: FlowEditView = {
      id: flow.id,
      title: flow.compiled?.title ?? flow.definition?.title ?? flow.id,
      source: values.source,
      tests: values.tests ?? stored ?? '',
      testsExist: stored !== undefined,
      since: values.since ?? '7d',
      check: checkFlowDraft(flow.id, values.source),
      canSave: deps.write.writable,
      notice: extra.notice,
      result: extra.result,
    };
    return page(c, `Edit flow ${flow.id}`, 'flows', <FlowEditPage view={view} />, {
      diagram: true,
      status: extra.status ?? 200,
    });
  };

  /** The posted form: the draft, the tests draft and the replay's `since`. */
  const posted = async (c: Context) => {
    const flow = await find(c.req.param('id') ?? '');
    const form = await c.req.parseBody();
    const values = {
      source: field(form, 'source'),
      tests: field(form, 'tests'),
      since: field(form, 'since').trim() || '7d',
    };
    return { flow, form, values };
  };

  app.get('/flows/:id/edit', async (c) => {
    const flow = await find(c.req.param('id'));
    const saved = c.req.query('saved');
    return render(
      c,
      flow,
      { source: flow.source },
      {
        notice:
          saved && /^[0-9a-f]{1,64}$/.test(saved)
            ? {
                error: false,
                text: `Saved ${draftFile(flow.id)} (version ${saved.slice(0, 12)}). This instance runs it from the next call; other instances do not see it.`,
              }
            : undefined,
      },
    );
  });

  app.post('/flows/:id/check', async (c) => {
    const { flow, values } = await posted(c);
    if ((c.req.header('accept') ?? '').includes('application/json')) {
      const { flow: _draft, ...check } = checkFlowDraft(flow.id, values.source);
      return c.json(check, 200);
    }
    return render(c, flow, values);
  });

  app.post('/flows/:id/test', async (c) => {
    const { flow, values } = await posted(c);
    const draft = playableDraft(flow.id, values.source);
    if (!draft.compiled) {
      return render(c, flow, values, {
        notice: { error: true, text: 'The draft has errors: fix them before running its tests.' },
        status: 400,
      });
    }
    const report = runFlowTests(draft.compiled, values.tests, testsFile(flow.id));
    return render(c, flow, values, { result: <FlowTestReportView report={report} /> });
  });

  app.post('/flows/:id/replay', async (c) => {
    const { flow, values } = await posted(c);
    const draft = playableDraft(flow.id, values.source);
    if (!draft.compiled) {
      return render(c, flow, values, {
        notice: { error: true, text: 'The draft has errors: fix them before replaying calls.' },
        status: 400,
      });
    }
    const since = replayTime(values.since, clock.now());
    if (!since) {
      return render(c, flow, values, {
        notice: {
          error: true,
          text: `"Calls since" must be like 7d, 24h or 30m, or a date and time; got "${values.since}".`,
        },
        status: 400,
      });
    }
    const report = await replayFlow(db, { flowId: flow.id, compiled: draft.compiled, since });
    return render(c, flow, values, {
      result: (
        <section aria-labelledby="replay-result-heading" data-replay-report>
          <h2 id="replay-result-heading">Replay report</h2>
          <ReplayReportView report={report} />
        </section>
      ),
    });
  });

  app.post('/flows/:id/download', async (c) => {
    const { flow, form, values } = await posted(c);
    const tests = form.what === 'tests';
    const name = tests ? `${flow.id}.test.yaml` : `${flow.id}.yaml`;
    return c.body(tests ? values.tests : values.source, 200, {
      'Content-Type': 'application/yaml; charset=utf-8',
      'Content-Disposition': `attachment; filename="${name}"`,
      'Cache-Control': 'no-store',
    });
  });

  app.post('/flows/:id/save', async (c) => {
    const { flow, form, values } = await posted(c);
    const refuse = (status: number, text: string) =>
      render(c, flow, values, { notice: { error: true, text }, status });
    if (!deps.write.writable) {
      return refuse(
        403,
        'Saving is off on this instance (FLOWS_WRITABLE is not set): download the draft and change the flow in version control.',
      );
    }
    const given = typeof form.token === 'string' ? form.token.trim() : '';
    const principal = given ? await principalOf(given) : undefined;
    if (!principal) {
      return refuse(
        401,
        given
          ? 'That token is not valid: saving needs API_TOKEN or a token with the admin scope.'
          : 'Saving needs an administration token: API_TOKEN or a token with the admin scope.',
      );
    }
    const audit = (status: number, created = false) =>
      auditConsoleFlowWrite(db, clock, {
        principal,
        id: flow.id,
        status,
        requestId: c.get('requestId') ?? '',
        created,
      });
    if (!allows(principal.scopes, 'admin')) {
      await audit(403);
      return refuse(
        403,
        `The token "${principal.name}" has no admin scope: saving a flow needs one that has.`,
      );
    }
    try {
      const written = await writeFlowSource(deps.write, flow.id, values.source);
      await audit(200, written.created);
      const version = written.flow.compiled?.version ?? '';
      return c.redirect(
        `/ui/flows/${encodeURIComponent(flow.id)}/edit?saved=${encodeURIComponent(version)}`,
        303,
      );
    } catch (err) {
      if (!(err instanceof AppError) || err.code !== 'INVALID_FLOW') throw err;
      await audit(400);
      return refuse(400, `${err.message}: see the problems below.`);
    }
  });

  return app;
}
