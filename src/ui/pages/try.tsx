/**
 * "Try a flow": the form that starts a sandbox call, the keypad that plays the callee, and
 * the prompt of the menu the callee is in (console.js swaps and plays it as the call moves).
 */
import type { FC } from 'hono/jsx';
import type { ErrorDetail } from '../../errors.ts';
import type { CompiledFlow, LoadedFlow } from '../../flows/index.ts';
import { Empty, Field, Notice } from '../layout.tsx';

export const NO_SANDBOX =
  'The built-in sandbox is not running here (PROVIDER_BASE_URL is set, so calls go to the real provider); trying a flow needs it.';

export const TryList: FC<{ flows: LoadedFlow[] }> = ({ flows }) => {
  const ready = flows.filter((f) => f.compiled);
  return ready.length === 0 ? (
    <Empty>No flow compiles, so there is nothing to try.</Empty>
  ) : (
    <>
      <p>
        Start a call in the sandbox, then play the callee on an on-screen keypad: the path, the
        outcome and the follow-up messages appear as they happen.
      </p>
      <ul>
        {ready.map((f) => (
          <li>
            <a href={`/ui/try/${encodeURIComponent(f.id)}`}>{`Try ${f.id}`}</a>
            {f.compiled?.title && <span class="muted">{` (${f.compiled.title})`}</span>}
          </li>
        ))}
      </ul>
    </>
  );
};

export interface TryValues {
  to: string;
  from: string;
  lang: string;
  vars: Record<string, string>;
}

const inputType = (type: string) =>
  type === 'phone'
    ? 'tel'
    : type === 'number' || type === 'integer'
      ? 'number'
      : type === 'date'
        ? 'date'
        : type === 'url'
          ? 'url'
          : 'text';

export const TryForm: FC<{
  flow: CompiledFlow;
  values: TryValues;
  errors: ErrorDetail[];
  message?: string | undefined;
}> = ({ flow, values, errors, message }) => {
  const errorOf = (path: string) => errors.find((e) => e.path === path)?.message;
  const described = (id: string, path: string, hint?: boolean) =>
    [hint ? `${id}-hint` : '', errorOf(path) ? `${id}-error` : ''].filter(Boolean).join(' ') ||
    undefined;
  const FieldError: FC<{ id: string; path: string }> = (p) => {
    const text = errorOf(p.path);
    return text ? (
      <span class="hint error-text" id={`${p.id}-error`}>
        {text}
      </span>
    ) : null;
  };
  return (
    <>
      {message && (
        <Notice error>
          <p>{message}</p>
          {errors.length > 0 && (
            <ul>
              {errors.map((e) => (
                <li>{`${e.path || 'request'}: ${e.message}`}</li>
              ))}
            </ul>
          )}
        </Notice>
      )}
      <form
        class="stack"
        method="post"
        action={`/ui/try/${encodeURIComponent(flow.id)}`}
        aria-label={`Start a sandbox call of ${flow.id}`}
      >
        <Field
          id="try-to"
          label="Call this number"
          hint="E.164. The sandbox plays this callee: any script queued there for the number is replaced."
        >
          <input
            id="try-to"
            name="to"
            type="tel"
            required
            value={values.to}
            aria-invalid={errorOf('to') ? 'true' : undefined}
            aria-describedby={described('try-to', 'to', true)}
          />
        </Field>
        <FieldError id="try-to" path="to" />
        <Field id="try-from" label="Caller id (sender)">
          <input
            id="try-from"
            name="from"
            required
            value={values.from}
            aria-invalid={errorOf('from') ? 'true' : undefined}
            aria-describedby={described('try-from', 'from')}
          />
        </Field>
        <FieldError id="try-from" path="from" />
        {flow.languages.length > 1 && (
          <Field id="try-lang" label="Language">
            <select id="try-lang" name="lang">
              {flow.languages.map((l) => (
                <option value={l} selected={values.lang === l}>
                  {l}
                </option>
              ))}
            </select>
          </Field>
        )}
        {Object.keys(flow.params).length > 0 && (
          <fieldset>
            <legend>Vars</legend>
            {Object.entries(flow.params).map(([name, p]) => {
              const id = `try-var-${name}`;
              const path = `vars.${name}`;
              const required = !p.optional && p.default === undefined;
              return (
                <>
                  <Field
                    id={id}
                    label={`${name}${required ? '' : ' (optional)'}`}
                    hint={
                      p.description ??
                      `${p.type}${p.default !== undefined ? `, default ${String(p.default)}` : ''}`
                    }
                  >
                    {p.type === 'boolean' ? (
                      <select
                        id={id}
                        name={`var.${name}`}
                        aria-describedby={described(id, path, true)}
                      >
                        <option value="">{required ? 'choose' : 'not given'}</option>
                        <option value="true" selected={values.vars[name] === 'true'}>
                          true
                        </option>
                        <option value="false" selected={values.vars[name] === 'false'}>
                          false
                        </option>
                      </select>
                    ) : (
                      <input
                        id={id}
                        name={`var.${name}`}
                        type={inputType(p.type)}
                        required={required}
                        step={p.type === 'number' ? 'any' : undefined}
                        value={values.vars[name] ?? ''}
                        aria-invalid={errorOf(path) ? 'true' : undefined}
                        aria-describedby={described(id, path, true)}
                      />
                    )}
                  </Field>
                  <FieldError id={id} path={path} />
                </>
              );
            })}
          </fieldset>
        )}
        <div>
          <button type="submit">Start the call</button>
        </div>
      </form>
    </>
  );
};

const KEYS: [string, string][] = [
  ['1', '1'],
  ['2', '2'],
  ['3', '3'],
  ['4', '4'],
  ['5', '5'],
  ['6', '6'],
  ['7', '7'],
  ['8', '8'],
  ['9', '9'],
  ['*', 'star'],
  ['0', '0'],
  ['#', 'hash'],
];

/** Twelve keys and two callee actions; each is a submit button of one form. */
export const Keypad: FC<{ callId: string; status?: string | undefined }> = (props) => (
  <section aria-labelledby="keypad-heading">
    <h2 id="keypad-heading">Keypad</h2>
    <p class="muted">
      You are the callee. Press a key while the call plays a menu (digits, * and # on the keyboard
      work too).
    </p>
    <form method="post" action={`/ui/calls/${props.callId}/keys`} data-keypad="">
      <fieldset>
        <legend>Phone keys</legend>
        <div class="keypad">
          {KEYS.map(([key, name]) => (
            <button
              type="submit"
              name="key"
              value={key}
              aria-label={`Press ${name}`}
              aria-keyshortcuts={key}
            >
              {key}
            </button>
          ))}
        </div>
        <div class="keypad-extra">
          <button type="submit" name="key" value="timeout" class="secondary">
            Stay silent (time out)
          </button>
          <button type="submit" name="key" value="hangup" class="secondary">
            Hang up
          </button>
        </div>
      </fieldset>
    </form>
    <p id="keypad-status" role="status" aria-live="polite">
      {props.status ?? ''}
    </p>
  </section>
);

/**
 * What the callee hears now: the current menu's prompt when Switchboard speaks it. The live
 * stream names each new one (`prompt`); console.js loads it and, once the user has pressed
 * a key (browsers allow sound after a click), plays it. Without JavaScript the page's prompt
 * list has every prompt of the call.
 */
/** The line naming the current menu (sent again by the live stream as it moves). */
export const NowPlayingMenu: FC<{
  node: string | null;
  prompt: string | undefined;
  /** what the prompt says in this call: the audio's transcript */
  words?: string | undefined;
}> = (props) =>
  props.node ? (
    <>
      Menu <code>{props.node}</code>
      {props.prompt
        ? props.words && `: “${props.words}”`
        : ': its prompt is recorded audio or a provider id (see Prompts).'}
    </>
  ) : (
    <>No menu plays now.</>
  );

export const NowPlaying: FC<{
  node: string | null;
  prompt: string | undefined;
  words?: string | undefined;
}> = (props) => (
  <section aria-labelledby="now-playing-heading">
    <h2 id="now-playing-heading">Now playing</h2>
    <p id="now-playing-menu" class="muted">
      <NowPlayingMenu node={props.node} prompt={props.prompt} words={props.words} />
    </p>
    {/* biome-ignore lint/a11y/useMediaCaption: the line above is its transcript */}
    <audio
      controls
      preload="none"
      data-now-playing=""
      aria-labelledby="now-playing-heading"
      aria-describedby="now-playing-menu"
      src={props.prompt}
      hidden={props.prompt ? undefined : true}
    />
  </section>
);
