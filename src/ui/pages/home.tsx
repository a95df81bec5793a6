/** The console's front page and its sign-in form. */
import type { FC } from 'hono/jsx';
import type { CallSummary } from '../../calls/read.ts';
import type { LoadedFlow } from '../../flows/index.ts';
import { Empty, Field, Notice } from '../layout.tsx';
import { CallsTable } from './calls.tsx';

export const HomePage: FC<{ flows: LoadedFlow[]; calls: CallSummary[]; canTry: boolean }> = (
  props,
) => (
  <>
    <p>
      Flows as diagrams with their counts, calls and messages with their timelines, incoming Viber
      messages{props.canTry ? ', and a keypad to try a flow in the sandbox' : ''}.
    </p>
    <h2>Flows</h2>
    {props.flows.length === 0 ? (
      <Empty>No flows yet.</Empty>
    ) : (
      <ul>
        {props.flows.map((f) => (
          <li>
            <a href={`/ui/flows/${encodeURIComponent(f.id)}`}>{f.id}</a>
            {f.errors.length > 0 && <span class="badge bad">does not compile</span>}
          </li>
        ))}
      </ul>
    )}
    <h2>Recent calls</h2>
    <CallsTable calls={props.calls} caption="The ten newest calls" />
    <p>
      <a href="/ui/calls">Search calls</a>
    </p>
  </>
);

function minutes(seconds: number): string {
  const n = Math.ceil(seconds / 60);
  return n === 1 ? '1 minute' : `${n} minutes`;
}

/** `failed`: the token was wrong; `retryAfter`: seconds this address is locked out for. */
export const LoginPage: FC<{ next: string; failed?: boolean; retryAfter?: number }> = (props) => (
  <>
    {props.failed && <Notice error>That token is not valid.</Notice>}
    {props.retryAfter !== undefined && (
      <Notice error>
        {`Too many failed sign-ins from your address. Try again in ${minutes(props.retryAfter)}.`}
      </Notice>
    )}
    <p>This console needs the console token (UI_TOKEN, or API_TOKEN when no UI_TOKEN is set).</p>
    <form class="stack" method="post" action="/ui/login" aria-label="Sign in">
      <input type="hidden" name="next" value={props.next} />
      <Field id="login-token" label="Token">
        <input
          id="login-token"
          name="token"
          type="password"
          required
          autocomplete="current-password"
          aria-invalid={props.failed ? 'true' : undefined}
        />
      </Field>
      <div>
        <button type="submit">Sign in</button>
      </div>
    </form>
  </>
);
