/**
 * A flow's versions in the console (src/calls/flow-history.ts): the versions Switchboard ran,
 * and two of them compared: the source diff, the compiled menus' changes, and the counters
 * side by side with their rates (% of calls per outcome, % hung up per node), in total and
 * per language, so a team sees whether a change made more people confirm or hang up.
 *
 * Routes (`flowVersionPages`, mounted by routes.tsx): `GET /ui/flows/{id}/versions` (the
 * list, with a form to pick two) and `GET /ui/flows/{id}/compare?from=&to=` (`current` is
 * the file's version; `to` defaults to it).
 *
 * @example
 * app.route('/', flowVersionPages({ db, flows, page }));
 */
import { Hono } from 'hono';
import type { Child, FC } from 'hono/jsx';
import {
  diffFlowVersions,
  FLOW_VERSION_PATTERN,
  type FlowDiff,
  type FlowVersionList,
  flowHasRun,
  listFlowVersions,
  type StatsSideBySide,
} from '../../calls/flow-history.ts';
import type { FlowRegistry } from '../../calls/registry.ts';
import type { Db } from '../../db/client.ts';
import { AppError } from '../../errors.ts';
import type { CompiledAction } from '../../flows/index.ts';
import type { AppEnv } from '../../http/env.ts';
import { Empty, type RenderPage, Time } from '../layout.tsx';

const short = (version: string) => version.slice(0, 8);
const percent = (share: number | null) =>
  share === null ? '–' : `${(Math.round(share * 1000) / 10).toFixed(1)}%`;
const flowUrl = (id: string) => `/ui/flows/${encodeURIComponent(id)}`;

const VersionPicker: FC<{ list: FlowVersionList; from?: string; to?: string }> = (props) => {
  const { list } = props;
  const option = (v: FlowVersionList['items'][number], selected: string | undefined) => (
    <option value={v.current ? 'current' : v.version} selected={selected === v.version}>
      {`${v.version}${v.current ? ' (current file)' : ''}`}
    </option>
  );
  const older = list.items.find((v) => !v.current)?.version;
  return (
    <form method="get" action={`${flowUrl(list.flow)}/compare`}>
      <label>
        {'From '}
        <select name="from">{list.items.map((v) => option(v, props.from ?? older))}</select>
      </label>{' '}
      <label>
        {'to '}
        <select name="to">
          {list.items.map((v) => option(v, props.to ?? list.current ?? undefined))}
        </select>
      </label>{' '}
      <button type="submit">Compare</button>
    </form>
  );
};

export const FlowVersionsView: FC<{ list: FlowVersionList }> = ({ list }) => {
  const outcomes = [...new Set(list.items.flatMap((v) => Object.keys(v.outcomes)))].sort();
  return (
    <>
      <p>
        <a href={flowUrl(list.flow)}>Back to the flow</a>
      </p>
      {list.items.length === 0 ? (
        <Empty>No version of this flow ran yet, and its file does not compile.</Empty>
      ) : (
        <table>
          <caption>Versions, newest first (rates: of the calls started on the version)</caption>
          <thead>
            <tr>
              <th scope="col">Version</th>
              <th scope="col">First call</th>
              <th scope="col">Newest call kept</th>
              <th scope="col" class="num">
                Calls
              </th>
              {outcomes.map((o) => (
                <th scope="col" class="num">
                  {o}
                </th>
              ))}
              <th scope="col">Source</th>
              <th scope="col">Compare</th>
            </tr>
          </thead>
          <tbody>
            {list.items.map((v, i) => {
              const previous = list.items.slice(i + 1).find((p) => p.runs);
              return (
                <tr data-version={v.version}>
                  <td>
                    <code>{v.version}</code>
                    {v.current && <span class="badge ok">current file</span>}
                  </td>
                  <td>
                    {v.firstRunAt ? <Time at={v.firstRunAt} /> : <span class="muted">none</span>}
                  </td>
                  <td>
                    {v.lastCallAt ? <Time at={v.lastCallAt} /> : <span class="muted">none</span>}
                  </td>
                  <td class="num">{v.started}</td>
                  {outcomes.map((o) => {
                    const n = v.outcomes[o] ?? 0;
                    return (
                      <td class="num">
                        {`${n} (${percent(v.started > 0 ? n / v.started : null)})`}
                      </td>
                    );
                  })}
                  <td>
                    {v.hasSource ? 'kept' : <span class="muted">not kept (ran before 0012)</span>}
                  </td>
                  <td>
                    {previous ? (
                      <a
                        href={`${flowUrl(list.flow)}/compare?from=${previous.version}&to=${v.current ? 'current' : v.version}`}
                      >{`with ${short(previous.version)}`}</a>
                    ) : (
                      <span class="muted">first</span>
                    )}
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
      {list.unversioned.started > 0 && (
        <p class="muted">{`${list.unversioned.started} calls were counted before counters were kept per version; they are in no row.`}</p>
      )}
      {list.items.length > 1 && (
        <>
          <h2>Compare two versions</h2>
          <VersionPicker list={list} />
        </>
      )}
    </>
  );
};

/** Two counts and their rates, from → to. */
const Pair: FC<{ from: string; to: string }> = (p) => (
  <>
    <td class="num">{p.from}</td>
    <td class="num">{p.to}</td>
  </>
);

const countAndShare = (c: { count: number; share: number | null }) =>
  `${c.count} (${percent(c.share)})`;

const SideBySide: FC<{ stats: StatsSideBySide; caption: string }> = ({ stats, caption }) => {
  const outcomes = Object.entries(stats.outcomes);
  const failures = Object.entries(stats.failures);
  const nodes = Object.entries(stats.nodes);
  return (
    <>
      <table>
        <caption>{`${caption}: calls and outcomes (rates: of the calls started)`}</caption>
        <thead>
          <tr>
            <th scope="col" />
            <th scope="col" class="num">
              from
            </th>
            <th scope="col" class="num">
              to
            </th>
          </tr>
        </thead>
        <tbody>
          <tr>
            <th scope="row">calls started</th>
            <Pair from={String(stats.started.from)} to={String(stats.started.to)} />
          </tr>
          {outcomes.map(([name, s]) => (
            <tr data-outcome={name}>
              <th scope="row">{`outcome ${name}`}</th>
              <Pair from={countAndShare(s.from)} to={countAndShare(s.to)} />
            </tr>
          ))}
          {failures.map(([name, s]) => (
            <tr>
              <th scope="row">{`failed: ${name}`}</th>
              <Pair from={countAndShare(s.from)} to={countAndShare(s.to)} />
            </tr>
          ))}
        </tbody>
      </table>
      <table>
        <caption>{`${caption}: per node (hung up: of the node's visits)`}</caption>
        <thead>
          <tr>
            <th scope="col">Node</th>
            <th scope="col" class="num">
              visits from
            </th>
            <th scope="col" class="num">
              visits to
            </th>
            <th scope="col" class="num">
              hung up from
            </th>
            <th scope="col" class="num">
              hung up to
            </th>
            <th scope="col">keys from</th>
            <th scope="col">keys to</th>
          </tr>
        </thead>
        <tbody>
          {nodes.map(([id, n]) => {
            const keys = (k: Record<string, number> | undefined) =>
              k && Object.keys(k).length > 0
                ? Object.entries(k)
                    .map(([key, count]) => `${key}: ${count}`)
                    .join(', ')
                : '–';
            const side = (f: (typeof n)['from']) =>
              f
                ? { visits: String(f.visits), hung: `${f.hangups} (${percent(f.hangupsPerVisit)})` }
                : null;
            const a = side(n.from);
            const b = side(n.to);
            return (
              <tr data-node={id}>
                <th scope="row">
                  <code>{id}</code>
                </th>
                <td class="num">{a?.visits ?? 'absent'}</td>
                <td class="num">{b?.visits ?? 'absent'}</td>
                <td class="num">{a?.hung ?? '–'}</td>
                <td class="num">{b?.hung ?? '–'}</td>
                <td>{n.from ? keys(n.from.keys) : '–'}</td>
                <td>{n.to ? keys(n.to.keys) : '–'}</td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </>
  );
};

const json = (v: unknown) => JSON.stringify(v);

/** A key's actions as a person reads them: `outcome confirmed, send sms "Thanks…", hang up`. */
function actionsText(actions: unknown): string {
  if (!Array.isArray(actions)) return json(actions);
  return (actions as CompiledAction[])
    .map((a) => {
      switch (a.type) {
        case 'outcome':
          return `outcome ${a.name}`;
        case 'send':
          return `send ${a.message.type}${'text' in a.message && a.message.text ? ` "${a.message.text}"` : ''}`;
        case 'goto':
          return `go to ${a.node}`;
        case 'hangup':
          return 'hang up';
        case 'webhook':
          return `webhook ${a.url}`;
        case 'notify':
          return `notify ${a.endpoint}`;
        default:
          return json(a);
      }
    })
    .join(', ');
}

const MenuChanges: FC<{ menus: FlowDiff['menus'] }> = ({ menus }) => {
  const items: Child[] = [];
  for (const id of menus.added) items.push(<li>{`node ${id} added`}</li>);
  for (const id of menus.removed) items.push(<li>{`node ${id} removed`}</li>);
  // the unrolled copies of one menu (retries, rounds) mostly change alike: one item for them
  const alike = new Map<string, { nodes: string[]; parts: string[] }>();
  for (const ch of menus.changed) {
    const parts: string[] = [];
    for (const [lang, c] of Object.entries(ch.intro ?? {}))
      parts.push(`intro (${lang}): ${c.from ?? 'none'} → ${c.to ?? 'none'}`);
    if (ch.timeoutMs)
      parts.push(`timeout: ${ch.timeoutMs.from ?? '–'} ms → ${ch.timeoutMs.to ?? '–'} ms`);
    for (const [key, c] of Object.entries(ch.keys ?? {}))
      parts.push(
        c.from === null
          ? `key ${key} added: ${actionsText(c.to)}`
          : c.to === null
            ? `key ${key} removed (was ${actionsText(c.from)})`
            : `key ${key}: ${actionsText(c.from)} → ${actionsText(c.to)}`,
      );
    for (const [key, c] of Object.entries(ch.limits ?? {}))
      parts.push(`round limit on key ${key}: ${c.from ?? 'none'} → ${c.to ?? 'none'}`);
    const sameAs = `${ch.menu}\u0000${parts.join('\u0000')}`;
    const group = alike.get(sameAs);
    if (group) group.nodes.push(ch.node);
    else alike.set(sameAs, { nodes: [ch.node], parts });
  }
  for (const { nodes, parts } of alike.values()) {
    items.push(
      <li data-changed={nodes[0]}>
        {nodes.length === 1
          ? `node ${nodes[0]} changed`
          : `nodes ${nodes.join(', ')} changed alike (${nodes.length} copies of one menu)`}
        <ul>
          {parts.map((p) => (
            <li>{p}</li>
          ))}
        </ul>
      </li>,
    );
  }
  for (const p of menus.params.added) items.push(<li>{`param ${p} added`}</li>);
  for (const p of menus.params.removed) items.push(<li>{`param ${p} removed`}</li>);
  for (const p of menus.params.changed)
    items.push(<li>{`param ${p.name}: ${json(p.from)} → ${json(p.to)}`}</li>);
  for (const l of menus.languages.added) items.push(<li>{`language ${l} added`}</li>);
  for (const l of menus.languages.removed) items.push(<li>{`language ${l} removed`}</li>);
  return items.length === 0 ? (
    <Empty>{`The compiled menus are the same (${menus.unchanged} nodes).`}</Empty>
  ) : (
    <>
      <ul>{items}</ul>
      <p class="muted">{`${menus.unchanged} nodes unchanged.`}</p>
    </>
  );
};

const label = (v: FlowDiff['from']) => `${v.version}${v.current ? ' (current file)' : ''}`;

export const FlowCompareView: FC<{ diff: FlowDiff; list: FlowVersionList }> = ({ diff, list }) => (
  <>
    <p>
      <a href={`${flowUrl(diff.flow)}/versions`}>All versions</a>
      {' · '}
      <a href={flowUrl(diff.flow)}>Back to the flow</a>
    </p>
    <p>
      {'From '}
      <code>{label(diff.from)}</code>
      {' to '}
      <code>{label(diff.to)}</code>
    </p>
    <VersionPicker list={list} from={diff.from.version} to={diff.to.version} />
    <h2>Source</h2>
    {diff.source.patch === null ? (
      <Empty>{diff.source.note ?? 'No source to compare.'}</Empty>
    ) : diff.source.hunks.length === 0 ? (
      <Empty>The files are the same.</Empty>
    ) : (
      <>
        <p>{`${diff.source.added} lines added, ${diff.source.removed} removed.`}</p>
        <pre data-diff="source">{diff.source.patch}</pre>
      </>
    )}
    <h2>Menus</h2>
    <MenuChanges menus={diff.menus} />
    <h2>Statistics side by side</h2>
    <SideBySide stats={diff.stats} caption="All languages" />
    {Object.entries(diff.stats.languages).map(([lang, stats]) => (
      <section data-lang={lang}>
        <h3>{`Language ${lang}`}</h3>
        <SideBySide stats={stats} caption={`Language ${lang}`} />
      </section>
    ))}
  </>
);

export function flowVersionPages(deps: { db: Db; flows: FlowRegistry; page: RenderPage }) {
  const app = new Hono<AppEnv>();
  // a flow with neither a file nor a version run is unknown; its history outlives the file
  const known = async (id: string) => {
    const file = await deps.flows.get(id);
    if (!file && !(await flowHasRun(deps.db, id)))
      throw new AppError('NOT_FOUND', `no flow "${id}" in the flows directory`);
    return file;
  };

  app.get('/flows/:id/versions', async (c) => {
    const id = c.req.param('id');
    const list = await listFlowVersions(deps.db, id, await known(id));
    return deps.page(c, `Versions of ${id}`, 'flows', <FlowVersionsView list={list} />);
  });

  app.get('/flows/:id/compare', async (c) => {
    const id = c.req.param('id');
    const from = c.req.query('from') ?? '';
    const to = c.req.query('to') || 'current';
    for (const [field, v] of [
      ['from', from],
      ['to', to],
    ] as const) {
      if (!FLOW_VERSION_PATTERN.test(v)) {
        const message = `${field} must be a version (16 hex digits, as the versions page lists) or current`;
        throw new AppError('VALIDATION_ERROR', message, [
          { path: field, code: 'INVALID_FORMAT', message },
        ]);
      }
    }
    const file = await known(id);
    const [diff, list] = await Promise.all([
      diffFlowVersions(deps.db, id, from, to, file),
      listFlowVersions(deps.db, id, file),
    ]);
    return deps.page(
      c,
      `Compare versions of ${id}`,
      'flows',
      <FlowCompareView diff={diff} list={list} />,
    );
  });
  return app;
}
