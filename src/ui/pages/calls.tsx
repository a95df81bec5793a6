/**
 * Call pages: search, the list, and one call with its path, messages, timeline and the
 * prompts its menus play.
 */
import type { FC } from 'hono/jsx';
import { CALL_STATES } from '../../calls/deps.ts';
import type { CallSummary, CallView } from '../../calls/read.ts';
import { type CompiledFlow, keyLabel } from '../../flows/index.ts';
import { promptPath, spokenWords } from '../data.ts';
import { Badge, Empty, Field, Time } from '../layout.tsx';

/**
 * Why a recorded `wrong` step may not say which: a call whose menu was rendered before every
 * unhandled key had its own entry got one `wrong` entry for silence and for such a key, and
 * the provider's webhook carries only that entry's body (docs/provider.md, "Callbacks").
 */
const WRONG_KEY_NOTE =
  'silence, or a key this menu does not handle: this call was placed before the two were recorded apart';

/** A path step's key for people: `1`, `silence`, `7 (not handled here)`. */
const StepKey: FC<{ step: CallView['path'][number] }> = ({ step }) => {
  if (step.key !== 'wrong') return <>{step.key}</>;
  if (step.input === 'timeout') return <span data-input="timeout">silence (no key)</span>;
  if (step.input !== undefined) {
    return <span data-input={step.input}>{step.input} (not handled here)</span>;
  }
  return <span title={WRONG_KEY_NOTE}>{keyLabel('wrong')}</span>;
};

export interface CallQuery {
  id?: string | undefined;
  to?: string | undefined;
  flow?: string | undefined;
  outcome?: string | undefined;
  state?: string | undefined;
}

export const CallSearch: FC<{ q: CallQuery; flows: string[] }> = ({ q, flows }) => (
  <search aria-label="Search calls">
    <form class="search" method="get" action="/ui/calls">
      <Field id="call-id" label="Call id">
        <input id="call-id" name="id" value={q.id ?? ''} size={38} autocomplete="off" />
      </Field>
      <Field id="call-to" label="Phone">
        <input id="call-to" name="to" type="tel" value={q.to ?? ''} placeholder="+380501234567" />
      </Field>
      <Field id="call-flow" label="Flow">
        <select id="call-flow" name="flow">
          <option value="">any</option>
          {flows.map((f) => (
            <option value={f} selected={q.flow === f}>
              {f}
            </option>
          ))}
        </select>
      </Field>
      <Field id="call-outcome" label="Outcome">
        <input id="call-outcome" name="outcome" value={q.outcome ?? ''} placeholder="confirmed" />
      </Field>
      <Field id="call-state" label="State">
        <select id="call-state" name="state">
          <option value="">any</option>
          {CALL_STATES.map((s) => (
            <option value={s} selected={q.state === s}>
              {s}
            </option>
          ))}
        </select>
      </Field>
      <button type="submit">Search</button>
    </form>
  </search>
);

export const CallsTable: FC<{ calls: CallSummary[]; caption: string }> = ({ calls, caption }) =>
  calls.length === 0 ? (
    <Empty>No calls match.</Empty>
  ) : (
    <table>
      <caption>{caption}</caption>
      <thead>
        <tr>
          <th scope="col">Started</th>
          <th scope="col">Call</th>
          <th scope="col">Flow</th>
          <th scope="col">To</th>
          <th scope="col">State</th>
          <th scope="col">Outcome</th>
        </tr>
      </thead>
      <tbody>
        {calls.map((c) => (
          <tr>
            <td>
              <Time at={c.createdAt} />
            </td>
            <td>
              <a href={`/ui/calls/${c.id}`}>
                <code>{c.id}</code>
              </a>
            </td>
            <td>
              <a href={`/ui/flows/${encodeURIComponent(c.flow)}`}>{c.flow}</a>
            </td>
            <td>{c.to}</td>
            <td>
              <Badge value={c.state} />
            </td>
            <td>
              <Badge value={c.outcome} />
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );

function describe(detail: unknown): string {
  if (detail === undefined || detail === null) return '';
  if (typeof detail !== 'object') return String(detail);
  return Object.entries(detail as Record<string, unknown>)
    .map(([k, v]) => `${k}: ${typeof v === 'object' ? JSON.stringify(v) : String(v)}`)
    .join(', ');
}

/** The part of a call page that changes while the call runs (sent again by the live stream). */
export const CallLive: FC<{ call: CallView }> = ({ call }) => (
  <>
    <p role="status" aria-live="polite" class="call-status">
      State <Badge value={call.state} />
      {' · '}outcome <Badge value={call.outcome} />
      {call.node && call.state !== 'ended' && call.state !== 'failed' && (
        <>
          {' · '}waiting in <code>{call.node}</code>
        </>
      )}
      {call.endedAt && (
        <>
          {' · '}ended <Time at={call.endedAt} />
        </>
      )}
    </p>

    <h2 id="path-heading">Path</h2>
    {call.path.length === 0 ? (
      <Empty>No key yet.</Empty>
    ) : (
      <table aria-labelledby="path-heading">
        <thead>
          <tr>
            <th scope="col">#</th>
            <th scope="col">Menu</th>
            <th scope="col">Attempt</th>
            <th scope="col">Key</th>
            <th scope="col">At</th>
          </tr>
        </thead>
        <tbody>
          {call.path.map((s, i) => (
            <tr>
              <td class="num">{i + 1}</td>
              <td>
                <code>{s.node}</code>
              </td>
              <td class="num">{s.attempt}</td>
              <td>
                <StepKey step={s} />
              </td>
              <td>
                <Time at={s.at} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    )}

    <h2 id="messages-heading">Messages</h2>
    <table aria-labelledby="messages-heading">
      <thead>
        <tr>
          <th scope="col">Role</th>
          <th scope="col">Type</th>
          <th scope="col">To</th>
          <th scope="col">Status</th>
          <th scope="col">Created</th>
        </tr>
      </thead>
      <tbody>
        {call.messages.map((m) => (
          <tr data-role={m.role} data-type={m.type}>
            <td>
              <a href={`/ui/messages/${encodeURIComponent(m.id)}`}>{m.role}</a>
            </td>
            <td>{m.type}</td>
            <td>{m.to}</td>
            <td>
              <Badge value={m.status} />
              {m.deliveredVia && m.deliveredVia !== m.type && ` via ${m.deliveredVia}`}
            </td>
            <td>
              <Time at={m.createdAt} />
            </td>
          </tr>
        ))}
      </tbody>
    </table>

    <h2 id="timeline-heading">Timeline</h2>
    {call.timeline.length === 0 ? (
      <Empty>Nothing has happened yet.</Empty>
    ) : (
      <table aria-labelledby="timeline-heading">
        <thead>
          <tr>
            <th scope="col">At</th>
            <th scope="col">Event</th>
            <th scope="col">Menu</th>
            <th scope="col">Key</th>
            <th scope="col">Detail</th>
          </tr>
        </thead>
        <tbody>
          {call.timeline.map((e) => (
            <tr>
              <td>
                <Time at={e.at} />
              </td>
              <td>{e.kind}</td>
              <td>{e.node ? <code>{e.node}</code> : ''}</td>
              <td>{e.key ?? ''}</td>
              <td>{describe(e.detail)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    )}
  </>
);

export const CallFacts: FC<{ call: CallView }> = ({ call }) => (
  <dl class="facts">
    <dt>Id</dt>
    <dd>
      <code>{call.id}</code>
    </dd>
    <dt>Flow</dt>
    <dd>
      <a href={`/ui/flows/${encodeURIComponent(call.flow)}`}>{call.flow}</a>{' '}
      <span class="muted">
        version <code>{call.flowVersion.slice(0, 12)}</code>
      </span>
    </dd>
    <dt>To</dt>
    <dd>
      <a href={`/ui/calls?to=${encodeURIComponent(call.to)}`}>{call.to}</a>
    </dd>
    <dt>From</dt>
    <dd>{call.from}</dd>
    <dt>Language</dt>
    <dd>{call.lang}</dd>
    <dt>Vars</dt>
    <dd>
      {Object.keys(call.vars).length === 0 ? (
        <span class="muted">none</span>
      ) : (
        Object.entries(call.vars).map(([k, v]) => (
          <>
            <code>{k}</code>
            {` = ${String(v)}`}
            <br />
          </>
        ))
      )}
    </dd>
    <dt>Started</dt>
    <dd>
      <Time at={call.createdAt} />
    </dd>
  </dl>
);

/** An intro that is not Switchboard's own prompt, as text (the console links nowhere else). */
export const IntroText: FC<{ intro: string }> = ({ intro }) =>
  intro === '' ? (
    <span class="muted">not stored</span>
  ) : /^https?:\/\//i.test(intro) ? (
    <>
      recorded audio: <code>{intro}</code>
    </>
  ) : (
    <>
      provider audio id <code>{intro}</code>
    </>
  );

/**
 * The call's prompts: each distinct intro of its menu, with the menus (index and node) that
 * play it; Switchboard's own prompts (`/prompts/…`, with the call's vars) play here, from
 * this origin. Menus the call went through are marked.
 */
export const CallPrompts: FC<{
  call: CallView;
  intros: string[];
  compiled: CompiledFlow | undefined;
}> = ({ call, intros, compiled }) => {
  if (intros.length === 0) {
    return (
      <section aria-labelledby="prompts-heading">
        <h2 id="prompts-heading">Prompts</h2>
        <Empty>The menu of this call is not stored (any more).</Empty>
      </section>
    );
  }
  const nodes = new Map(compiled?.nodes.map((n) => [n.index, n]) ?? []);
  const played = new Set(call.path.map((s) => s.node));
  const now = call.state === 'ended' || call.state === 'failed' ? null : call.node;
  // one row per distinct intro: retries and rounds often play the same one
  const groups = new Map<string, number[]>();
  intros.forEach((intro, i) => {
    groups.set(intro, [...(groups.get(intro) ?? []), i]);
  });
  return (
    <section aria-labelledby="prompts-heading">
      <h2 id="prompts-heading">Prompts</h2>
      <table aria-labelledby="prompts-heading">
        <thead>
          <tr>
            <th scope="col">Menus</th>
            <th scope="col">Prompt</th>
            <th scope="col">Words</th>
          </tr>
        </thead>
        <tbody>
          {[...groups].map(([intro, indexes]) => {
            const path = promptPath(intro);
            const first = nodes.get(indexes[0]!);
            return (
              <tr data-prompt={path}>
                <td>
                  {indexes.map((i, n) => {
                    const node = nodes.get(i)?.id;
                    const mark =
                      node === now ? ' (now)' : node && played.has(node) ? ' (played)' : '';
                    return (
                      <>
                        {n > 0 && ', '}
                        <code data-played={mark ? 'true' : undefined}>
                          {node ? `${i}: ${node}` : String(i)}
                        </code>
                        {mark}
                      </>
                    );
                  })}
                </td>
                <td>
                  {path ? (
                    // biome-ignore lint/a11y/useMediaCaption: the Words column is its transcript
                    <audio
                      controls
                      preload="none"
                      src={path}
                      aria-label={`Prompt of menu ${first?.id ?? indexes[0]}`}
                    />
                  ) : (
                    <IntroText intro={intro} />
                  )}
                </td>
                <td>{path ? (spokenWords(first, call.lang, call.vars) ?? '') : ''}</td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </section>
  );
};
