/**
 * The console's page frame and small shared pieces: landmarks (header, nav, main), a skip
 * link, one h1 per page, the stylesheet and scripts served from this process.
 *
 * @example
 * c.html(<Layout title="Flows" section="flows"><p>...</p></Layout>)
 */
import type { Context } from 'hono';
import { raw } from 'hono/html';
import type { Child, FC, PropsWithChildren } from 'hono/jsx';

export type Section =
  | 'home'
  | 'flows'
  | 'calls'
  | 'campaigns'
  | 'messages'
  | 'inbound'
  | 'endpoints'
  | 'try';

/** The console's page frame (routes.tsx `page`): a body in the layout, with its options. */
export type RenderPage = (
  c: Context,
  title: string,
  section: Section | undefined,
  body: Child,
  opts?: { diagram?: boolean; status?: number },
) => Response | Promise<Response>;

const NAV: [Section, string, string][] = [
  ['flows', '/ui/flows', 'Flows'],
  ['calls', '/ui/calls', 'Calls'],
  ['campaigns', '/ui/campaigns', 'Campaigns'],
  ['messages', '/ui/messages', 'Messages'],
  ['inbound', '/ui/inbound', 'Incoming Viber'],
  ['endpoints', '/ui/endpoints', 'Endpoints'],
  ['try', '/ui/try', 'Try a flow'],
];

export interface LayoutProps {
  title: string;
  section?: Section | undefined;
  /** loads the Mermaid bundle (pages with a diagram) */
  diagram?: boolean;
  /** shows the sign-out button (the console has a token) */
  signOut?: boolean;
}

export const Layout: FC<PropsWithChildren<LayoutProps>> = (props) => (
  <>
    {raw('<!DOCTYPE html>')}
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>{`${props.title} · Switchboard console`}</title>
        <link rel="stylesheet" href="/ui/assets/console.css" />
        {props.diagram && <script src="/ui/assets/mermaid.min.js" defer />}
        <script src="/ui/assets/console.js" defer />
      </head>
      <body>
        <a class="skip" href="#main">
          Skip to content
        </a>
        <header class="site">
          <a class="brand" href="/ui">
            Switchboard console
          </a>
          <nav aria-label="Console">
            <ul>
              {NAV.map(([section, href, label]) => (
                <li>
                  <a href={href} aria-current={props.section === section ? 'page' : undefined}>
                    {label}
                  </a>
                </li>
              ))}
            </ul>
          </nav>
          {props.signOut && (
            <form method="post" action="/ui/logout">
              <button type="submit" class="secondary">
                Sign out
              </button>
            </form>
          )}
        </header>
        <main id="main" tabindex={-1}>
          <h1>{props.title}</h1>
          {props.children}
        </main>
      </body>
    </html>
  </>
);

/** A status word with a colour that is never the only cue (the word is always there). */
export const Badge: FC<{ value: string | null | undefined }> = ({ value }) => {
  if (value === null || value === undefined) return <span class="muted">none</span>;
  const tone = ['delivered', 'read', 'ended', 'confirmed', 'succeeded', 'enabled'].includes(value)
    ? 'ok'
    : ['failed', 'rejected', 'expired', 'unreachable', 'disabled', 'failing'].includes(value)
      ? 'bad'
      : ['queued', 'accepted', 'sent', 'in-progress'].includes(value)
        ? 'warn'
        : '';
  return <span class={`badge ${tone}`}>{value}</span>;
};

/** A time as the machine-readable value and a short readable one (UTC). */
export const Time: FC<{ at: string | null | undefined }> = ({ at }) =>
  at ? (
    <time datetime={at}>{at.replace('T', ' ').replace(/\.\d+Z$/, 'Z')}</time>
  ) : (
    <span class="muted">–</span>
  );

/** A labelled input: the label is tied to the control, with an optional hint. */
export const Field: FC<{
  id: string;
  label: string;
  hint?: string;
  children: Child;
}> = (props) => (
  <div class="field">
    <label for={props.id}>{props.label}</label>
    {props.children}
    {props.hint && (
      <span class="hint" id={`${props.id}-hint`}>
        {props.hint}
      </span>
    )}
  </div>
);

export const Notice: FC<PropsWithChildren<{ error?: boolean }>> = (props) => (
  <div class={props.error ? 'notice error' : 'notice'} role={props.error ? 'alert' : 'status'}>
    {props.children}
  </div>
);

/** "Nothing found" as a table would otherwise be empty. */
export const Empty: FC<PropsWithChildren> = (props) => <p class="muted">{props.children}</p>;
