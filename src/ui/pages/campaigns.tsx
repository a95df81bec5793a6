/**
 * Campaigns in the console (docs/campaigns.md): the list with each one's progress, and one
 * campaign with its facts, recipients by state, results by outcome as a bar chart, the
 * pause / resume / cancel buttons its state allows, its first results linked to their calls,
 * and its results as a CSV download (the API's CSV needs an Accept header a link cannot send).
 *
 * Routes (`campaignPages`, mounted by routes.tsx): `GET /ui/campaigns` (`state`, `cursor`),
 * `GET /ui/campaigns/{id}` (`changed`, `refused`: what the redirect after a post says),
 * `GET /ui/campaigns/{id}/results.csv`, `POST /ui/campaigns/{id}/{pause,resume,cancel}`
 * (same-origin only, like every console post; answered with a redirect to the campaign).
 *
 * @example
 * app.route('/', campaignPages({ db, clock, page }));
 */
import { Hono } from 'hono';
import type { FC } from 'hono/jsx';
import { stream } from 'hono/streaming';
import {
  campaignResults,
  campaignResultsCsv,
  getCampaign,
  listCampaigns,
} from '../../campaigns/read.ts';
import { changeCampaignState } from '../../campaigns/scheduler.ts';
import {
  CAMPAIGN_STATES,
  type CampaignView,
  RECIPIENT_STATES,
  type RecipientResult,
} from '../../campaigns/schemas.ts';
import type { Clock } from '../../clock.ts';
import type { Db } from '../../db/client.ts';
import { AppError } from '../../errors.ts';
import { auditConsoleWrite, auditItems } from '../../http/audit.ts';
import type { AppEnv } from '../../http/env.ts';
import { Badge, Empty, Notice, type RenderPage, Time } from '../layout.tsx';

/** Results rows shown on a campaign's page; the CSV has them all. */
export const SHOWN_RESULTS = 100;

const ACTIONS = ['pause', 'resume', 'cancel'] as const;
type Action = (typeof ACTIONS)[number];
const ACTION_LABEL: Record<Action, string> = { pause: 'Pause', resume: 'Resume', cancel: 'Cancel' };
const ACTION_DONE: Record<Action, string> = {
  pause: 'Paused: no new calls start (or messages go); those in progress finish.',
  resume: 'Resumed, at its pace from now.',
  cancel: 'Cancelled: recipients not yet called will not be.',
};
/** Recipients that will not be called again. */
const FINAL = ['done', 'skipped', 'cancelled'] as const;

const campaignUrl = (id: string) => `/ui/campaigns/${encodeURIComponent(id)}`;
const count = (byState: Record<string, number>, states: readonly string[]) =>
  states.reduce((n, s) => n + (byState[s] ?? 0), 0);
/** A bar's width as a share of `total`, for CSS (the number is always there as text). */
const width = (n: number, total: number) =>
  `width: ${total > 0 ? Math.round((n / total) * 1000) / 10 : 0}%`;

/** What a campaign's state lets the console do to it (as changeCampaignState allows). */
export function actionsFor(state: CampaignView['state']): Action[] {
  if (state === 'scheduled' || state === 'running') return ['pause', 'cancel'];
  if (state === 'paused') return ['resume', 'cancel'];
  return [];
}

/** "n of N done": recipients that will not be called again, as a native progress bar. */
export const CampaignProgress: FC<{ campaign: CampaignView }> = ({ campaign }) => {
  const total = campaign.recipients;
  const byState = campaign.progress.byState;
  const final = count(byState, FINAL);
  const dropped = count(byState, ['skipped', 'cancelled']);
  const label = `${final} of ${total} done${dropped > 0 ? ` (${dropped} skipped or cancelled)` : ''}`;
  return (
    <span class="campaign-progress">
      <progress max={Math.max(total, 1)} value={final} aria-label={label} />
      <span>{label}</span>
    </span>
  );
};

/** What a campaign sends: a link to its flow, or its message's type and text. */
const Sends: FC<{ campaign: CampaignView }> = ({ campaign: c }) =>
  c.flow !== null ? (
    <a href={`/ui/flows/${encodeURIComponent(c.flow)}`}>{c.flow}</a>
  ) : (
    <>
      {`${String(c.message?.type ?? 'message')}: `}
      <q>{String(c.message?.text ?? '')}</q>
    </>
  );

export const CampaignsTable: FC<{ items: CampaignView[] }> = ({ items }) =>
  items.length === 0 ? (
    <Empty>
      No campaign yet: create one with POST /v1/campaigns or `switchboard campaign create`.
    </Empty>
  ) : (
    <table>
      <caption>Campaigns, newest first</caption>
      <thead>
        <tr>
          <th scope="col">Campaign</th>
          <th scope="col">Sends</th>
          <th scope="col">State</th>
          <th scope="col">Created</th>
          <th scope="col">Progress</th>
          <th scope="col" class="num">
            Recipients
          </th>
        </tr>
      </thead>
      <tbody>
        {items.map((c) => (
          <tr data-state={c.state}>
            <td>
              <a href={campaignUrl(c.id)}>{c.name ?? c.id}</a>
            </td>
            <td>
              <Sends campaign={c} />
            </td>
            <td>
              <Badge value={c.state} />
            </td>
            <td>
              <Time at={c.createdAt} />
            </td>
            <td>
              <CampaignProgress campaign={c} />
            </td>
            <td class="num">{c.recipients}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );

/** Rows of label, bar and number: the bar is decoration, the number is the data. */
const BarChart: FC<{ id: string; title: string; rows: [string, number][]; total: number }> = (
  props,
) => (
  <table class="bars" aria-labelledby={props.id}>
    <thead>
      <tr>
        <th scope="col">{props.title}</th>
        <th scope="col" class="num">
          Recipients
        </th>
        <th scope="col">
          <span class="visually-hidden">Share</span>
        </th>
      </tr>
    </thead>
    <tbody>
      {props.rows.map(([label, n]) => (
        <tr data-key={label}>
          <th scope="row">{label}</th>
          <td class="num">{n}</td>
          <td class="bar-cell">
            <span class="bar" style={width(n, props.total)} aria-hidden="true" />
          </td>
        </tr>
      ))}
    </tbody>
  </table>
);

const CampaignFacts: FC<{ campaign: CampaignView }> = ({ campaign: c }) => (
  <dl class="facts">
    <dt>Id</dt>
    <dd>
      <code>{c.id}</code>
    </dd>
    <dt>{c.flow !== null ? 'Flow' : 'Message'}</dt>
    <dd>
      <Sends campaign={c} />
    </dd>
    <dt>From</dt>
    <dd>{c.from}</dd>
    <dt>State</dt>
    <dd>
      <Badge value={c.state} />
    </dd>
    <dt>Starts</dt>
    <dd>
      <Time at={c.startAt} />
    </dd>
    <dt>Pace</dt>
    <dd>
      {`${c.perMinute} ${c.flow !== null ? 'calls' : 'messages'} a minute`}
      {c.maxConcurrent !== null && `, at most ${c.maxConcurrent} at once`}
    </dd>
    <dt>Window</dt>
    <dd>
      {c.window
        ? `${c.window.from}–${c.window.to}${c.window.days ? ` ${c.window.days.join(', ')}` : ' every day'}`
        : 'the project default (CALLING_WINDOW)'}
    </dd>
    <dt>Retry</dt>
    <dd>
      {c.retry.maxAttempts <= 1
        ? 'one attempt'
        : `on ${c.retry.on.join(', ')}, after ${c.retry.after}, ${c.retry.maxAttempts} attempts at most`}
    </dd>
    <dt>Recipients</dt>
    <dd>{c.recipients}</dd>
    <dt>Calls made</dt>
    <dd>{c.progress.attempts}</dd>
    <dt>Created</dt>
    <dd>
      <Time at={c.createdAt} />
    </dd>
    <dt>Finished</dt>
    <dd>
      <Time at={c.finishedAt} />
    </dd>
  </dl>
);

const ResultsTable: FC<{ items: RecipientResult[]; more: boolean }> = ({ items, more }) =>
  items.length === 0 ? (
    <Empty>No recipients.</Empty>
  ) : (
    <table aria-labelledby="results-heading">
      <caption>
        {more
          ? `The first ${items.length} recipients, in the order of the upload`
          : 'Recipients, in the order of the upload'}
      </caption>
      <thead>
        <tr>
          <th scope="col" class="num">
            Line
          </th>
          <th scope="col">To</th>
          <th scope="col">State</th>
          <th scope="col" class="num">
            Attempts
          </th>
          <th scope="col">Outcome</th>
          <th scope="col">Path</th>
          <th scope="col">Follow-ups</th>
          <th scope="col">Reason</th>
          <th scope="col">Attempts</th>
        </tr>
      </thead>
      <tbody>
        {items.map((r) => (
          <tr data-state={r.state}>
            <td class="num">{r.line}</td>
            <td>{r.to}</td>
            <td>
              <Badge value={r.state} />
            </td>
            <td class="num">{r.attempts}</td>
            <td>
              <Badge value={r.outcome} />
            </td>
            <td>{r.path.map((p) => `${p.node}:${p.key}`).join(' ')}</td>
            <td>
              {r.followUps.map((f, i) => (
                <>
                  {i > 0 && ', '}
                  <a href={`/ui/messages/${f.id}`}>{f.type}</a>
                  {` (${f.status})`}
                </>
              ))}
            </td>
            <td>{r.reason ?? ''}</td>
            <td>
              {r.history.map((a, i) => (
                <>
                  {i > 0 && ', '}
                  {a.callId ? (
                    <a href={`/ui/calls/${a.callId}`}>{`attempt ${a.attempt}`}</a>
                  ) : a.messageId ? (
                    <a href={`/ui/messages/${a.messageId}`}>{`attempt ${a.attempt}`}</a>
                  ) : (
                    `attempt ${a.attempt}`
                  )}
                  {` (${a.outcome ?? a.state ?? 'pending'})`}
                </>
              ))}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );

export const CampaignPage: FC<{
  campaign: CampaignView;
  results: RecipientResult[];
  more: boolean;
  notice?: { text: string; error: boolean } | undefined;
}> = ({ campaign: c, results, more, notice }) => {
  const byState = c.progress.byState;
  const outcomes = Object.entries(c.progress.byOutcome).sort((a, b) => b[1] - a[1]);
  const done = byState.done ?? 0;
  return (
    <>
      <p>
        <a href="/ui/campaigns">All campaigns</a>
      </p>
      {notice && <Notice error={notice.error}>{notice.text}</Notice>}
      <CampaignFacts campaign={c} />
      <div class="actions">
        {actionsFor(c.state).map((action) => (
          <form method="post" action={`${campaignUrl(c.id)}/${action}`}>
            <button type="submit" class={action === 'cancel' ? 'secondary' : undefined}>
              {ACTION_LABEL[action]}
            </button>
          </form>
        ))}
        <a class="button" href={`${campaignUrl(c.id)}/results.csv`} download>
          Download the results (CSV)
        </a>
      </div>

      <h2 id="progress-heading">Progress</h2>
      <p>
        <CampaignProgress campaign={c} />
      </p>
      <BarChart
        id="progress-heading"
        title="State"
        rows={RECIPIENT_STATES.map((s) => [s, byState[s] ?? 0])}
        total={c.recipients}
      />

      <h2 id="outcomes-heading">Outcomes</h2>
      {outcomes.length === 0 ? (
        <Empty>No recipient is done yet.</Empty>
      ) : (
        <BarChart id="outcomes-heading" title="Outcome" rows={outcomes} total={done} />
      )}

      <h2 id="results-heading">Results</h2>
      <ResultsTable items={results} more={more} />
      {more && (
        <p>
          <a href={`${campaignUrl(c.id)}/results.csv`}>Every recipient, as CSV</a>
        </p>
      )}
    </>
  );
};

/** The notice a redirect after a post asks for, from known words only (never echoed input). */
function noticeOf(query: Record<string, string>): { text: string; error: boolean } | undefined {
  const changed = ACTIONS.find((a) => a === query.changed);
  if (changed) return { text: ACTION_DONE[changed], error: false };
  const action = ACTIONS.find((a) => a === query.action);
  const state = CAMPAIGN_STATES.find((s) => s === query.refused);
  if (action && state) {
    return { text: `A campaign that is ${state} cannot ${action}.`, error: true };
  }
  return undefined;
}

export function campaignPages(deps: { db: Db; readDb?: Db; clock: Clock; page: RenderPage }) {
  const { db, page } = deps;
  // the pages read through the read replica when there is one; the actions write the primary
  const reads = deps.readDb ?? db;
  const app = new Hono<AppEnv>();

  app.get('/campaigns', async (c) => {
    const state = CAMPAIGN_STATES.find((s) => s === c.req.query('state'));
    const list = await listCampaigns(reads, {
      state,
      cursor: c.req.query('cursor') || undefined,
      limit: 50,
    });
    const next = new URLSearchParams({
      ...(state && { state }),
      ...(list.nextCursor && { cursor: list.nextCursor }),
    });
    return page(
      c,
      'Campaigns',
      'campaigns',
      <>
        <CampaignsTable items={list.items} />
        {list.nextCursor && (
          <p>
            <a href={`/ui/campaigns?${next}`}>Older campaigns</a>
          </p>
        )}
      </>,
    );
  });

  app.get('/campaigns/:id', async (c) => {
    const campaign = await getCampaign(reads, c.req.param('id'));
    const results = await campaignResults(reads, campaign.id, { limit: SHOWN_RESULTS });
    return page(
      c,
      `Campaign ${campaign.name ?? campaign.flow ?? campaign.id}`,
      'campaigns',
      <CampaignPage
        campaign={campaign}
        results={results.items}
        more={results.nextCursor !== null}
        notice={noticeOf(c.req.query())}
      />,
    );
  });

  // the same CSV as GET /v1/campaigns/{id}/results with Accept: text/csv, streamed
  app.get('/campaigns/:id/results.csv', async (c) => {
    const campaign = await getCampaign(reads, c.req.param('id')); // a 404 page before the stream
    c.header('Content-Type', 'text/csv; charset=utf-8');
    c.header('Content-Disposition', `attachment; filename="campaign-${campaign.id}.csv"`);
    return stream(c, async (s) => {
      for await (const chunk of campaignResultsCsv(reads, campaign.id)) await s.write(chunk);
    });
  });

  for (const action of ACTIONS) {
    app.post(`/campaigns/:id/${action}`, async (c) => {
      const id = c.req.param('id');
      const changed = await changeCampaignState(deps, id, action);
      if (!changed) throw new AppError('NOT_FOUND', `no campaign with id "${id}"`);
      const refused = 'refused' in changed;
      // the same audit row as POST /v1/campaigns/{id}/{action}, by the console's session
      await auditConsoleWrite(db, deps.clock, {
        token: 'console',
        route: `/ui/campaigns/{id}/${action}`,
        status: refused ? 409 : 200,
        requestId: c.get('requestId') ?? '',
        changes: refused ? {} : { changed: { campaigns: auditItems([id]) } },
      });
      if (refused) {
        return c.redirect(`${campaignUrl(id)}?refused=${changed.refused}&action=${action}`, 303);
      }
      return c.redirect(`${campaignUrl(id)}?changed=${action}`, 303);
    });
  }
  return app;
}
