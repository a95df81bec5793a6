/**
 * Flow pages: the list, and one flow with its diagram, params, prompts (to listen to),
 * checks and counts.
 */
import { basename } from 'node:path';
import type { FC } from 'hono/jsx';
import type { FlowStats } from '../../calls/read.ts';
import {
  FLOW_KEYS,
  type FlowKey,
  keyLabel,
  type LoadedFlow,
  nodeLabel,
} from '../../flows/index.ts';
import type { NodeCounts } from '../diagram.ts';
import { Empty, Field, Notice } from '../layout.tsx';
import { IntroText } from './calls.tsx';

export const FlowsList: FC<{ flows: LoadedFlow[] }> = ({ flows }) =>
  flows.length === 0 ? (
    <Empty>No flows: put YAML files in the flows directory.</Empty>
  ) : (
    <table>
      <caption>Flows in the flows directory</caption>
      <thead>
        <tr>
          <th scope="col">Flow</th>
          <th scope="col">Title</th>
          <th scope="col">Version</th>
          <th scope="col" class="num">
            Menus
          </th>
          <th scope="col">Params</th>
          <th scope="col">Checks</th>
        </tr>
      </thead>
      <tbody>
        {flows.map((f) => (
          <tr>
            <td>
              <a href={`/ui/flows/${encodeURIComponent(f.id)}`}>{f.id}</a>
            </td>
            <td>{f.compiled?.title ?? f.definition?.title ?? ''}</td>
            <td>
              {f.compiled ? (
                <code>{f.compiled.version.slice(0, 12)}</code>
              ) : (
                <span class="muted">not compiled</span>
              )}
            </td>
            <td class="num">
              {f.compiled
                ? `${f.compiled.sourceMenus.length} (${f.compiled.menuCount} unrolled)`
                : Object.keys(f.definition?.menus ?? {}).length}
            </td>
            <td>{Object.keys(f.compiled?.params ?? f.definition?.params ?? {}).join(', ')}</td>
            <td>
              <CheckSummary flow={f} />
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );

const CheckSummary: FC<{ flow: LoadedFlow }> = ({ flow }) => {
  const e = flow.errors.length;
  const w = flow.warnings.length;
  if (e === 0 && w === 0) return <span class="badge ok">ok</span>;
  return (
    <span class={e > 0 ? 'badge bad' : 'badge warn'}>
      {`${e} error${e === 1 ? '' : 's'}, ${w} warning${w === 1 ? '' : 's'}`}
    </span>
  );
};

export interface DiagramSources {
  /** one box per menu as written */
  folded: string;
  /** every provider menu: the copies that retries and rounds unroll into */
  unrolled: string;
}

/**
 * The diagram: drawn by the browser from Mermaid source, which is what shows without
 * JavaScript (the tables on the page hold the same numbers).
 */
export const DiagramBox: FC<{ sources: DiagramSources; label: string; call?: boolean }> = (
  props,
) => (
  <section aria-labelledby="diagram-heading">
    <h2 id="diagram-heading">Diagram</h2>
    <ul class="legend" aria-label="Legend">
      {props.call ? (
        <>
          <li>
            <span class="swatch visited" aria-hidden="true" />
            menus the call went through (taken keys are thick)
          </li>
          <li>
            <span class="swatch current" aria-hidden="true" />
            where the call waits now
          </li>
        </>
      ) : (
        <>
          <li>each menu: visits, and visits that dropped off (no key came back)</li>
          <li>each key: how many calls took it, in brackets</li>
          <li>
            <span class="swatch dropped" aria-hidden="true" />
            menus with drop-offs
          </li>
        </>
      )}
    </ul>
    <div class="diagram" data-diagram="folded" data-label={props.label}>
      <pre>{props.sources.folded}</pre>
    </div>
    <details>
      <summary>Every provider menu: the copies that retries and rounds unroll into</summary>
      <div class="diagram" data-diagram="unrolled" data-label={`${props.label}, unrolled`}>
        <pre>{props.sources.unrolled}</pre>
      </div>
    </details>
  </section>
);

const IssueList: FC<{ flow: LoadedFlow }> = ({ flow }) => {
  const issues = [...flow.errors, ...flow.warnings];
  if (issues.length === 0) return <p>Every check passes.</p>;
  return (
    <table>
      <caption>Problems found by the checks</caption>
      <thead>
        <tr>
          <th scope="col">Severity</th>
          <th scope="col">Where</th>
          <th scope="col">Rule</th>
          <th scope="col">Message</th>
        </tr>
      </thead>
      <tbody>
        {issues.map((i) => (
          <tr>
            <td>
              <span class={i.severity === 'error' ? 'badge bad' : 'badge warn'}>{i.severity}</span>
            </td>
            <td>
              <code>{`${basename(i.file)}:${i.line}:${i.column}`}</code>
              {i.path && (
                <>
                  {' '}
                  <code>{i.path}</code>
                </>
              )}
            </td>
            <td>
              <code>{i.rule}</code>
            </td>
            <td>{i.message}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
};

const CountTable: FC<{ caption: string; what: string; counts: Record<string, number> }> = (
  props,
) => {
  const rows = Object.entries(props.counts).sort((a, b) => b[1] - a[1]);
  if (rows.length === 0) return <p class="muted">{`${props.caption}: none yet.`}</p>;
  return (
    <table>
      <caption>{props.caption}</caption>
      <thead>
        <tr>
          <th scope="col">{props.what}</th>
          <th scope="col" class="num">
            Calls
          </th>
        </tr>
      </thead>
      <tbody>
        {rows.map(([k, n]) => (
          <tr>
            <td>{k}</td>
            <td class="num">{n}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
};

/**
 * What a node's `wrong` count was made of: ` (silence 3, key 7: 1)`; calls placed before the
 * two were recorded apart are `either`.
 */
function wrongBreakdown(total: number, inputs: Record<string, number> | undefined): string {
  if (!inputs) return '';
  const parts: string[] = [];
  let told = 0;
  // silence first, then the keys in keypad order
  const order = (input: string) => (input === 'timeout' ? -1 : FLOW_KEYS.indexOf(input as FlowKey));
  for (const [input, n] of Object.entries(inputs).sort(([a], [b]) => order(a) - order(b))) {
    parts.push(input === 'timeout' ? `silence: ${n}` : `key ${input}: ${n}`);
    told += n;
  }
  if (total > told) parts.push(`either: ${total - told}`);
  return ` (${parts.join(', ')})`;
}

/** One distinct prompt of a flow in one language, with the nodes that play it. */
export interface FlowPromptRow {
  /** node ids, in menu order */
  nodes: string[];
  lang: string;
  /** `say: <text>`, or the URL or provider id as written */
  label: string;
  /** a recorded URL or provider id (not spoken by Switchboard) */
  recorded?: string;
  /** a spoken prompt without params: the same-origin path of its shared audio */
  audio?: string;
  /** a spoken prompt with params: the form's inputs, defaults filled in */
  params?: Array<{ name: string; type: string; value: string }>;
}

/**
 * The flow's prompts: a shared spoken one plays here; one with params has a small form that
 * asks GET /ui/flows/{id}/say for it with the vars typed (console.js plays the answer in
 * place; without it the browser opens the audio). Recorded audio is named, not linked.
 */
const FlowPrompts: FC<{ flowId: string; rows: FlowPromptRow[] | undefined }> = ({
  flowId,
  rows,
}) => (
  <>
    <h2 id="flow-prompts-heading">Prompts</h2>
    {!rows ? (
      <p class="muted">Spoken prompts cannot be played here (no speech engine).</p>
    ) : rows.length === 0 ? (
      <Empty>This flow has no prompts.</Empty>
    ) : (
      <table aria-labelledby="flow-prompts-heading">
        <thead>
          <tr>
            <th scope="col">Menus</th>
            <th scope="col">Language</th>
            <th scope="col">Prompt</th>
            <th scope="col">Listen</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((r, i) => (
            <tr>
              <td>
                <code>{r.nodes.join(', ')}</code>
              </td>
              <td>{r.lang}</td>
              <td>{r.recorded === undefined ? r.label : <IntroText intro={r.recorded} />}</td>
              <td>
                {r.audio && (
                  // biome-ignore lint/a11y/useMediaCaption: the Prompt column is its transcript
                  <audio
                    controls
                    preload="none"
                    src={r.audio}
                    aria-label={`Prompt of ${r.nodes[0]} in ${r.lang}`}
                  />
                )}
                {r.params && (
                  <form
                    class="search"
                    method="get"
                    action={`/ui/flows/${encodeURIComponent(flowId)}/say`}
                    data-say=""
                    aria-label={`Hear the prompt of ${r.nodes[0]} in ${r.lang} with these vars`}
                  >
                    <input type="hidden" name="node" value={r.nodes[0]} />
                    <input type="hidden" name="lang" value={r.lang} />
                    {r.params.map((p) => (
                      <Field id={`say-${i}-${p.name}`} label={p.name}>
                        <input
                          id={`say-${i}-${p.name}`}
                          name={`var.${p.name}`}
                          value={p.value}
                          size={14}
                        />
                      </Field>
                    ))}
                    <button type="submit">Play</button>
                  </form>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    )}
  </>
);

export const FlowPage: FC<{
  flow: LoadedFlow;
  stats: FlowStats;
  diagram: DiagramSources | null;
  counts: Map<string, NodeCounts>;
  canTry: boolean;
  /** undefined: no speech engine to play spoken prompts with */
  prompts?: FlowPromptRow[] | undefined;
}> = ({ flow, stats, diagram, counts, canTry, prompts }) => {
  const c = flow.compiled;
  const params = Object.entries(c?.params ?? {});
  return (
    <>
      <dl class="facts">
        <dt>Id</dt>
        <dd>
          <code>{flow.id}</code>
        </dd>
        <dt>File</dt>
        <dd>
          <code>{basename(flow.file)}</code>
        </dd>
        <dt>Version</dt>
        <dd>{c ? <code>{c.version}</code> : <span class="muted">not compiled</span>}</dd>
        <dt>Languages</dt>
        <dd>{c?.languages.join(', ') ?? '–'}</dd>
        <dt>Menus</dt>
        <dd>
          {c ? `${c.sourceMenus.join(', ')} (${c.menuCount} provider menus after unrolling)` : '–'}
        </dd>
        <dt>Calls started</dt>
        <dd>{stats.started}</dd>
      </dl>
      <p>
        <a href={`/ui/calls?flow=${encodeURIComponent(flow.id)}`}>Calls of this flow</a>
        {' · '}
        <a href={`/ui/flows/${encodeURIComponent(flow.id)}/versions`}>
          Versions and their statistics
        </a>
        {' · '}
        <a href={`/ui/flows/${encodeURIComponent(flow.id)}/edit`}>Edit this flow</a>
        {canTry && c && (
          <>
            {' · '}
            <a href={`/ui/try/${encodeURIComponent(flow.id)}`}>Try this flow</a>
          </>
        )}
      </p>
      {diagram ? (
        <DiagramBox sources={diagram} label={`Diagram of flow ${flow.id} with visit counts`} />
      ) : (
        <Notice error>This flow does not compile, so there is no diagram; see the checks.</Notice>
      )}

      <h2>Params</h2>
      {params.length === 0 ? (
        <p>This flow takes no params.</p>
      ) : (
        <table>
          <caption>Vars a call must (or may) give</caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Type</th>
              <th scope="col">Required</th>
              <th scope="col">Default</th>
              <th scope="col">Description</th>
            </tr>
          </thead>
          <tbody>
            {params.map(([name, p]) => (
              <tr>
                <td>
                  <code>{name}</code>
                </td>
                <td>{p.type}</td>
                <td>{p.optional || p.default !== undefined ? 'no' : 'yes'}</td>
                <td>{p.default === undefined ? '' : String(p.default)}</td>
                <td>{p.description ?? ''}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}

      {c && <FlowPrompts flowId={flow.id} rows={prompts} />}

      <h2>Checks</h2>
      <IssueList flow={flow} />

      <h2>Counts</h2>
      {c && (
        <table>
          <caption>Per menu node (the same numbers as on the diagram)</caption>
          <thead>
            <tr>
              <th scope="col">Node</th>
              <th scope="col" class="num">
                Visits
              </th>
              <th scope="col" class="num">
                Dropped
              </th>
              <th scope="col">Keys taken</th>
            </tr>
          </thead>
          <tbody>
            {c.nodes.map((n) => {
              const k = counts.get(n.id);
              const wrongInputs = stats.nodes[n.id]?.wrongInputs;
              const keys = Object.entries(k?.keys ?? {})
                .map(([key, v]) =>
                  key === 'wrong'
                    ? `${keyLabel('wrong')}: ${v}${wrongBreakdown(v ?? 0, wrongInputs)}`
                    : `${key}: ${v}`,
                )
                .join(', ');
              return (
                <tr>
                  <th scope="row">
                    <code>{nodeLabel(n)}</code>
                  </th>
                  <td class="num">{k?.visits ?? 0}</td>
                  <td class="num">{k?.dropped ?? 0}</td>
                  <td>{keys || <span class="muted">none</span>}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
      <CountTable caption="Outcomes" what="Outcome" counts={stats.outcomes} />
      <CountTable caption="Calls that failed" what="Status" counts={stats.failures} />
    </>
  );
};
