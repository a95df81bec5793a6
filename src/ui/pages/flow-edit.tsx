/**
 * The flow editor page (/ui/flows/{id}/edit): the flow's YAML in a textarea with line
 * numbers, its problems (file:line:column, rule, message) and diagram, the flow's tests in a
 * second textarea, and buttons to check, run the tests, replay stored calls, download, and
 * (FLOWS_WRITABLE only) save. Every button is a form submit, so the page works without
 * JavaScript; with it (assets/flow-edit.js) the draft is checked as it is typed.
 *
 * @example
 * <FlowEditPage view={{ id, title, source, tests, since: '7d', check, canSave: false }} />
 */
import type { Child, FC } from 'hono/jsx';
import type { FlowIssue } from '../../flows/index.ts';
import type { FlowTestReport } from '../../flows/testing.ts';
import { Field, Notice } from '../layout.tsx';
import type { DiagramSources } from './flows.tsx';

/** What a draft gives when checked: its problems, and the diagram when it compiles. */
export interface DraftCheck {
  ok: boolean;
  /** the compiled version, when it compiles */
  version: string | null;
  errors: FlowIssue[];
  warnings: FlowIssue[];
  diagram: DiagramSources | null;
}

export interface FlowEditView {
  id: string;
  title: string;
  /** the draft (at first the file's text) */
  source: string;
  /** the tests draft (at first flows/<id>.test.yaml, empty when there is none) */
  tests: string;
  testsExist: boolean;
  /** the replay's `since` field */
  since: string;
  check: DraftCheck;
  canSave: boolean;
  notice?: { error: boolean; text: string } | undefined;
  /** what the last button gave: a test report, a replay report */
  result?: Child;
}

const base = (id: string) => `/ui/flows/${encodeURIComponent(id)}`;

/** The gutter's text: one number per line of the draft. */
function lineNumbers(text: string): string {
  const n = text.split('\n').length;
  return Array.from({ length: n }, (_, i) => String(i + 1)).join('\n');
}

// the gutter and the textarea share one font and line height, so their lines stay level
const EDITOR_STYLE = `
.flow-editor { display: flex; border: 1px solid #6b7280; border-radius: 4px; background: #fff; }
.flow-editor pre.gutter, .flow-editor textarea {
  font: 13px/1.5 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
  margin: 0; padding: 0.5rem; border: 0; height: 32rem; box-sizing: border-box;
}
.flow-editor pre.gutter {
  background: #f3f4f6; color: #4b5563; text-align: right; overflow: hidden;
  user-select: none; min-width: 3.5rem; border-right: 1px solid #d1d5db;
}
.flow-editor textarea { flex: 1; resize: vertical; white-space: pre; overflow: auto; tab-size: 2; }
textarea.tests { font: 13px/1.5 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; width: 100%; box-sizing: border-box; }
.edit-actions { display: flex; flex-wrap: wrap; gap: 0.5rem; align-items: flex-end; margin: 0.75rem 0; }
ul.problems { padding-left: 1.25rem; }
ul.problems li { margin: 0.2rem 0; }
`;

/** One problem: where (a link that puts the cursor there), rule and message. */
const Problem: FC<{ issue: FlowIssue }> = ({ issue }) => (
  <li data-severity={issue.severity}>
    <span class={issue.severity === 'error' ? 'badge bad' : 'badge warn'}>{issue.severity}</span>{' '}
    <a href="#source" data-line={String(issue.line)} data-column={String(issue.column)}>
      {`${issue.file}:${issue.line}:${issue.column}`}
    </a>{' '}
    <code>{issue.rule}</code> {issue.message}
  </li>
);

/** The problems of a draft, errors first. */
export const DraftProblems: FC<{ check: DraftCheck }> = ({ check }) => {
  const all = [...check.errors, ...check.warnings];
  return (
    <>
      <p id="check-status" role="status" aria-live="polite">
        {check.ok
          ? `No errors${check.warnings.length > 0 ? `, ${check.warnings.length} warning${check.warnings.length === 1 ? '' : 's'}` : ''}: version ${check.version?.slice(0, 12) ?? ''}.`
          : `${check.errors.length} error${check.errors.length === 1 ? '' : 's'}: the draft does not compile.`}
      </p>
      <ul id="problems" class="problems" aria-label="Problems in the draft">
        {all.map((issue) => (
          <Problem issue={issue} />
        ))}
      </ul>
    </>
  );
};

/** A test run: the cases, what failed where, and what no case reached. */
export const FlowTestReportView: FC<{ report: FlowTestReport }> = ({ report }) => {
  const uncovered = Object.entries(report.coverage).filter(([, items]) => items.length > 0);
  return (
    <section aria-labelledby="tests-result-heading" data-test-report>
      <h2 id="tests-result-heading">Test report</h2>
      <p>
        <span class={report.failed === 0 && report.errors.length === 0 ? 'badge ok' : 'badge bad'}>
          {`${report.passed} passed, ${report.failed} failed`}
        </span>
        {report.errors.length > 0 &&
          ` · ${report.errors.length} problem${report.errors.length === 1 ? '' : 's'} in the test file`}
      </p>
      {report.errors.length > 0 && (
        <ul class="problems" aria-label="Problems in the test file">
          {report.errors.map((e) => (
            <li>
              <code>{`${e.file}:${e.line}:${e.column}`}</code> {e.message}
            </li>
          ))}
        </ul>
      )}
      {report.cases.length > 0 && (
        <table>
          <caption>Cases</caption>
          <thead>
            <tr>
              <th scope="col">Case</th>
              <th scope="col">Line</th>
              <th scope="col">Result</th>
            </tr>
          </thead>
          <tbody>
            {report.cases.map((c) => (
              <tr data-ok={String(c.ok)}>
                <td>{c.name}</td>
                <td class="num">{c.line}</td>
                <td>
                  {c.ok ? (
                    <span class="badge ok">ok</span>
                  ) : (
                    <>
                      <span class="badge bad">FAIL</span>
                      <ul>
                        {c.failures.map((f) => (
                          <li>{`line ${f.line}: ${f.message}`}</li>
                        ))}
                      </ul>
                    </>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {uncovered.length === 0 ? (
        <p>Every menu, key, action and reaction is reached by some case.</p>
      ) : (
        <dl class="facts" aria-label="Not reached by any case">
          {uncovered.map(([what, items]) => (
            <>
              <dt>{`${what} not reached`}</dt>
              <dd>{items.join(', ')}</dd>
            </>
          ))}
        </dl>
      )}
    </section>
  );
};

export const FlowEditPage: FC<{ view: FlowEditView }> = ({ view }) => {
  const url = base(view.id);
  const file = `flows/${view.id}.yaml`;
  const testsFile = `flows/${view.id}.test.yaml`;
  const diagram = view.check.diagram;
  return (
    <>
      <style>{EDITOR_STYLE}</style>
      <p>
        <a href={url}>Back to the flow</a>
        {' · '}
        <a href={`${url}/replay`}>Replay page</a>
        {' · '}
        <a href={`${url}/versions`}>Versions</a>
      </p>
      <p>
        {`Changes here stay in this page until you download the draft${view.canSave ? ' or save it' : ''}. `}
        {view.canSave
          ? "Saving writes this instance's flows directory only: with several instances, change flows in version control."
          : 'Saving is off on this instance (FLOWS_WRITABLE): download the draft and commit it.'}
      </p>
      {view.notice && <Notice error={view.notice.error}>{view.notice.text}</Notice>}
      {view.result}
      <form method="post" action={`${url}/check`} data-flow-edit={`${url}/check`}>
        <div class="edit-actions">
          <button type="submit">Check</button>
          <button type="submit" class="secondary" formaction={`${url}/download`}>
            Download
          </button>
        </div>
        <div class="columns">
          <div>
            <div class="field">
              <label for="source">{`Flow (${file})`}</label>
              <div class="flow-editor">
                <pre class="gutter" id="source-gutter" aria-hidden="true">
                  {lineNumbers(view.source)}
                </pre>
                <textarea
                  id="source"
                  name="source"
                  rows={30}
                  wrap="off"
                  spellcheck={false}
                  autocomplete="off"
                  aria-describedby="check-status"
                >
                  {/* a textarea drops one leading newline: this one, not the draft's */}
                  {`\n${view.source}`}
                </textarea>
              </div>
            </div>
            <h2 id="problems-heading">Problems</h2>
            <DraftProblems check={view.check} />
          </div>
          <div>
            <h2 id="diagram-heading">Diagram</h2>
            <p class="muted" id="diagram-note">
              {diagram
                ? 'The draft as the callee hears it.'
                : 'The draft does not compile: no diagram.'}
            </p>
            <div
              class="diagram"
              data-edit-diagram="folded"
              data-version={view.check.version ?? ''}
              data-label={`Diagram of the draft of flow ${view.id}`}
            >
              <pre>{diagram?.folded ?? ''}</pre>
            </div>
            <details>
              <summary>Every provider menu: the copies that retries and rounds unroll into</summary>
              <div
                class="diagram"
                data-edit-diagram="unrolled"
                data-version={view.check.version ?? ''}
                data-label={`Diagram of the draft of flow ${view.id}, unrolled`}
              >
                <pre>{diagram?.unrolled ?? ''}</pre>
              </div>
            </details>
          </div>
        </div>

        <h2>Tests</h2>
        <Field
          id="tests"
          label={`Tests (${testsFile})`}
          hint={
            view.testsExist
              ? 'Run against the draft above; edits here are not saved (download them).'
              : `There is no ${testsFile} yet: write cases here and download them.`
          }
        >
          <textarea
            id="tests"
            name="tests"
            class="tests"
            rows={14}
            wrap="off"
            spellcheck={false}
            aria-describedby="tests-hint"
          >
            {`\n${view.tests}`}
          </textarea>
        </Field>
        <div class="edit-actions">
          <button type="submit" formaction={`${url}/test`}>
            Run tests
          </button>
          <button
            type="submit"
            class="secondary"
            formaction={`${url}/download`}
            name="what"
            value="tests"
          >
            Download tests
          </button>
        </div>

        <h2>Replay</h2>
        <p>
          Runs the stored calls of this flow through the draft and shows where they would differ.
        </p>
        <div class="edit-actions">
          <Field
            id="since"
            label="Calls since"
            hint="7d, 24h, 30m, or an ISO 8601 time such as 2025-03-01T09:00:00Z"
          >
            <input id="since" name="since" value={view.since} aria-describedby="since-hint" />
          </Field>
          <button type="submit" formaction={`${url}/replay`}>
            Replay
          </button>
        </div>

        {view.canSave && (
          <>
            <h2>Save</h2>
            <div class="edit-actions">
              <Field
                id="token"
                label="Administration token"
                hint="API_TOKEN or a token with the admin scope; it is not kept."
              >
                <input
                  id="token"
                  name="token"
                  type="password"
                  autocomplete="off"
                  aria-describedby="token-hint"
                />
              </Field>
              <button type="submit" formaction={`${url}/save`}>
                Save to flows/
              </button>
            </div>
          </>
        )}
      </form>
      <script src="/ui/assets/flow-edit.js" defer />
    </>
  );
};
