/**
 * "Replay before release" in the console: a flow's stored calls replayed through a draft
 * (pasted in a textarea, prefilled with the current file, or uploaded), and the report of
 * where they would differ (src/calls/replay.ts). `ReplayReportView` is the report alone, for
 * any page that shows one (the flow editor embeds it).
 *
 * Routes (`flowReplayPages`, mounted by routes.tsx): `GET /ui/flows/{id}/replay` (the form)
 * and `POST /ui/flows/{id}/replay/run` (the form again, with the report under it).
 *
 * @example
 * <ReplayReportView report={await replayFlow(db, { flowId, compiled, since })} />
 */
import { Hono } from 'hono';
import type { FC } from 'hono/jsx';
import type { FlowRegistry } from '../../calls/registry.ts';
import {
  compileReplayDraft,
  type FlowReplayReport,
  REPLAY_SKIP_REASONS,
  type ReplayedCall,
  type ReplayFollowUp,
  type ReplayStep,
  replayFlow,
  replayPeriod,
} from '../../calls/replay.ts';
import type { Clock } from '../../clock.ts';
import type { Db } from '../../db/client.ts';
import { AppError, type ErrorDetail } from '../../errors.ts';
import type { AppEnv } from '../../http/env.ts';
import { Empty, Field, Notice, type RenderPage } from '../layout.tsx';

const step = (s: ReplayStep | null) =>
  s === null ? 'nothing (the call ends)' : `${s.node}:${s.key}${s.input ? ` (${s.input})` : ''}`;
const steps = (list: ReplayStep[]) => (list.length === 0 ? '(no key)' : list.map(step).join(' → '));
const outcome = (o: string | null) => o ?? '(none)';
const followUps = (list: ReplayFollowUp[]) =>
  list.length === 0 ? '(none)' : list.map((f) => `${f.type}: ${f.text ?? '(no text)'}`).join('; ');

const SKIP_WORDS: Record<(typeof REPLAY_SKIP_REASONS)[number], string> = {
  'events-removed': 'events removed by retention',
  'texts-removed': 'follow-up texts removed by retention',
  erased: 'follow-up erased',
  'follow-up-rejected': 'follow-up refused when queued',
  'input-unknown': 'silence and wrong key not told apart',
  'vars-refused': 'vars the draft refuses',
  'language-missing': 'language the draft lacks',
};

const Counts: FC<{ title: string; counts: Record<string, number> }> = ({ title, counts }) => {
  const entries = Object.entries(counts).sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
  return (
    <div>
      <h4>{title}</h4>
      {entries.length === 0 ? (
        <Empty>none</Empty>
      ) : (
        <ul>
          {entries.map(([name, n]) => (
            <li>{`${name}: ${n}`}</li>
          ))}
        </ul>
      )}
    </div>
  );
};

const CallDiff: FC<{ call: ReplayedCall }> = ({ call }) => (
  <li data-call={call.id}>
    <a href={`/ui/calls/${call.id}`}>{call.id}</a>
    <span class="muted">{` ${call.createdAt} · keys ${call.inputs.join(',') || '(none)'}`}</span>
    <ul>
      {call.path && (
        <li>
          {`path parts at step ${call.path.partsAt.step}: ${step(call.path.partsAt.before)} before, ${step(call.path.partsAt.after)} after`}
          <br />
          <span class="muted">{`before ${steps(call.path.before)}; after ${steps(call.path.after)}`}</span>
        </li>
      )}
      {call.outcome && (
        <li>{`outcome ${outcome(call.outcome.before)} → ${outcome(call.outcome.after)}`}</li>
      )}
      {call.followUps && (
        <li>
          {`follow-ups: before ${followUps(call.followUps.before)}; after ${followUps(call.followUps.after)}`}
        </li>
      )}
      {call.menuDifferences && (
        <li class="error-text">{`the draft's menu and machine disagree: ${call.menuDifferences.join('; ')}`}</li>
      )}
    </ul>
  </li>
);

/** A replay report: the totals, then each differing and each skipped call. */
export const ReplayReportView: FC<{ report: FlowReplayReport }> = ({ report }) => (
  <div class="stack" data-replay-totals>
    <p>
      {`${report.calls} calls since ${report.since}${report.until ? ` until ${report.until}` : ''}: ${report.replayed} replayed, ${report.same} the same, ${report.differing} differing, ${report.skipped} skipped.`}
      {report.limited && ' The limit stopped the replay before the end of the period.'}
    </p>
    <table>
      <caption>Totals</caption>
      <tbody>
        <tr>
          <th scope="row">Differing path</th>
          <td>{report.differingBy.path}</td>
        </tr>
        <tr>
          <th scope="row">Differing outcome</th>
          <td>{report.differingBy.outcome}</td>
        </tr>
        <tr>
          <th scope="row">Differing follow-ups</th>
          <td>{report.differingBy.followUps}</td>
        </tr>
        {REPLAY_SKIP_REASONS.filter((r) => report.skippedBy[r] > 0).map((r) => (
          <tr>
            <th scope="row">{`Skipped: ${SKIP_WORDS[r]}`}</th>
            <td>{report.skippedBy[r]}</td>
          </tr>
        ))}
        {report.menuMismatches > 0 && (
          <tr>
            <th scope="row">Menu and machine disagree</th>
            <td>{report.menuMismatches}</td>
          </tr>
        )}
      </tbody>
    </table>
    <div class="columns">
      <Counts title="Outcomes before" counts={report.outcomes.before} />
      <Counts title="Outcomes after" counts={report.outcomes.after} />
    </div>
    <h3>Differing calls</h3>
    {report.items.length === 0 ? (
      <Empty>No call would differ.</Empty>
    ) : (
      <ul data-replay-items>
        {report.items.map((c) => (
          <CallDiff call={c} />
        ))}
      </ul>
    )}
    {report.skippedCalls.length > 0 && (
      <>
        <h3>Skipped calls</h3>
        <ul>
          {report.skippedCalls.map((s) => (
            <li>
              <a href={`/ui/calls/${s.id}`}>{s.id}</a>
              {` ${SKIP_WORDS[s.reason]}: ${s.message}`}
            </li>
          ))}
        </ul>
      </>
    )}
    {report.truncated && (
      <p class="muted">Only the first calls are listed; the totals count them all.</p>
    )}
  </div>
);

/** The replay form: the draft (textarea or file) and the period. */
export const ReplayForm: FC<{
  flowId: string;
  source: string;
  since: string;
  message?: string | undefined;
  errors?: ErrorDetail[];
}> = (props) => (
  <>
    {props.message && (
      <Notice error>
        <p>{props.message}</p>
        {(props.errors ?? []).length > 0 && (
          <ul>
            {(props.errors ?? []).map((e) => (
              <li>{e.message}</li>
            ))}
          </ul>
        )}
      </Notice>
    )}
    <p>
      Replays the stored calls of this flow through a draft: each call's keys, silences, statuses
      and timers go through the draft, and the report lists the calls whose path, outcome or
      follow-ups would differ. Nothing is sent or changed.
    </p>
    <form
      class="stack"
      method="post"
      enctype="multipart/form-data"
      action={`/ui/flows/${encodeURIComponent(props.flowId)}/replay/run`}
      aria-label={`Replay calls of ${props.flowId} through a draft`}
    >
      <Field
        id="replay-source"
        label="Draft (YAML)"
        hint="Prefilled with the current file; edit it, or upload a file below."
      >
        <textarea
          id="replay-source"
          name="source"
          rows={24}
          spellcheck={false}
          aria-describedby="replay-source-hint"
        >
          {props.source}
        </textarea>
      </Field>
      <Field id="replay-file" label="Or upload a flow file" hint="Used instead of the text above.">
        <input
          id="replay-file"
          name="file"
          type="file"
          accept=".yaml,.yml"
          aria-describedby="replay-file-hint"
        />
      </Field>
      <Field id="replay-since" label="Calls since" hint="7d, 24h, 30m, 2w or a time (ISO 8601)">
        <input
          id="replay-since"
          name="since"
          required
          value={props.since}
          aria-describedby="replay-since-hint"
        />
      </Field>
      <div>
        <button type="submit">Replay</button>
      </div>
    </form>
  </>
);

const text = (v: unknown): string => (typeof v === 'string' ? v : '');

/** The replay page's routes, under /ui. */
export function flowReplayPages(deps: {
  db: Db;
  clock: Clock;
  flows: FlowRegistry;
  page: RenderPage;
}) {
  const app = new Hono<AppEnv>();
  const find = async (id: string) => {
    const flow = await deps.flows.get(id);
    if (!flow) throw new AppError('NOT_FOUND', `no flow "${id}" in the flows directory`);
    return flow;
  };
  const title = (id: string) => `Replay calls of ${id}`;

  app.get('/flows/:id/replay', async (c) => {
    const flow = await find(c.req.param('id'));
    return deps.page(
      c,
      title(flow.id),
      'flows',
      <ReplayForm flowId={flow.id} source={flow.source} since="7d" />,
    );
  });

  app.post('/flows/:id/replay/run', async (c) => {
    const flow = await find(c.req.param('id'));
    const form = await c.req.parseBody();
    const file = form.file;
    const uploaded = file instanceof File && file.size > 0 ? await file.text() : '';
    const source = uploaded || text(form.source);
    const since = text(form.since).trim() || '7d';
    try {
      const period = replayPeriod({ since }, deps.clock.now());
      const draft = compileReplayDraft(flow.id, source);
      const report = await replayFlow(deps.db, {
        flowId: flow.id,
        compiled: draft.compiled,
        ...period,
      });
      return deps.page(
        c,
        title(flow.id),
        'flows',
        <>
          <ReplayForm flowId={flow.id} source={source} since={since} />
          <section aria-labelledby="replay-report-heading">
            <h2 id="replay-report-heading">Report</h2>
            <ReplayReportView report={report} />
          </section>
        </>,
      );
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      return deps.page(
        c,
        title(flow.id),
        'flows',
        <ReplayForm
          flowId={flow.id}
          source={source}
          since={since}
          message={err.message}
          errors={err.details}
        />,
        { status: 400 },
      );
    }
  });
  return app;
}
