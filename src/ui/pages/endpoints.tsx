/**
 * Event endpoint pages: the list, and one endpoint with its recent attempts, a replay button
 * per event and a "replay what failed since" form (both plain form posts, under the
 * console's session and same-origin check).
 */
import type { FC } from 'hono/jsx';
import type { AttemptView } from '../../events/attempts.ts';
import type { EndpointView } from '../../events/endpoints.ts';
import { Badge, Empty, Field, Notice, Time } from '../layout.tsx';

/** What an endpoint is doing now, in one word. */
function stateOf(e: EndpointView): string {
  if (!e.enabled) return 'disabled';
  return e.failingSince ? 'failing' : 'enabled';
}

const Events: FC<{ events: string[] | null }> = ({ events }) =>
  events === null ? <span class="muted">every type</span> : <span>{events.join(', ')}</span>;

export const EndpointsList: FC<{ items: EndpointView[] }> = ({ items }) =>
  items.length === 0 ? (
    <Empty>
      No endpoints yet: add one with <code>POST /v1/endpoints</code> or in ENDPOINTS_FILE.
    </Empty>
  ) : (
    <table>
      <caption>Endpoints, newest first</caption>
      <thead>
        <tr>
          <th scope="col">Endpoint</th>
          <th scope="col">URL</th>
          <th scope="col">Events</th>
          <th scope="col">State</th>
          <th scope="col">Source</th>
          <th scope="col">Failing since</th>
        </tr>
      </thead>
      <tbody>
        {items.map((e) => (
          <tr>
            <td>
              <a href={`/ui/endpoints/${encodeURIComponent(e.id)}`}>
                {e.name ?? <code>{e.id}</code>}
              </a>
            </td>
            <td>
              <code>{e.url}</code>
            </td>
            <td>
              <Events events={e.events} />
            </td>
            <td>
              <Badge value={stateOf(e)} />
            </td>
            <td>{e.source}</td>
            <td>
              <Time at={e.failingSince} />
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );

/** The start of an attempt's answer, or why none came. */
function answerOf(a: AttemptView): string {
  const text = a.error ?? a.responseBody ?? '';
  return text.length > 80 ? `${text.slice(0, 80)}…` : text;
}

export interface EndpointPageProps {
  endpoint: EndpointView;
  attempts: AttemptView[];
  /** the next page of attempts (`?cursor=`), when there is one */
  olderCursor: string | null;
  /** what the last replay did, or why it did not */
  notice?: { error: boolean; text: string } | undefined;
  /** the replay form's default: 24 hours ago, as a datetime-local value (UTC) */
  since: string;
}

export const EndpointPage: FC<EndpointPageProps> = ({
  endpoint: e,
  attempts,
  olderCursor,
  notice,
  since,
}) => (
  <>
    {notice && <Notice error={notice.error}>{notice.text}</Notice>}
    <dl class="facts">
      <dt>Id</dt>
      <dd>
        <code>{e.id}</code>
      </dd>
      <dt>URL</dt>
      <dd>
        <code>{e.url}</code>
      </dd>
      {e.description && (
        <>
          <dt>Description</dt>
          <dd>{e.description}</dd>
        </>
      )}
      <dt>Events</dt>
      <dd>
        <Events events={e.events} />
      </dd>
      <dt>State</dt>
      <dd>
        <Badge value={stateOf(e)} />
        {e.disabledReason && ` (${e.disabledReason})`}
        {e.failingSince && (
          <>
            {' '}
            every attempt failed since <Time at={e.failingSince} />
          </>
        )}
      </dd>
      <dt>Ordered</dt>
      <dd>{e.ordered ? 'yes: one subject at a time' : 'no'}</dd>
      <dt>Rate limit</dt>
      <dd>{e.rateLimit === null ? 'none' : `${e.rateLimit} per second`}</dd>
      <dt>Signing secrets</dt>
      <dd>
        {e.secrets.length}
        {e.secrets.some((s) => s.expiresAt) && (
          <>
            {' '}
            (rotating: the old one stops at{' '}
            <Time at={e.secrets.find((s) => s.expiresAt)?.expiresAt} />)
          </>
        )}
      </dd>
      <dt>Source</dt>
      <dd>{e.source === 'file' ? 'ENDPOINTS_FILE (change it there)' : 'the API'}</dd>
    </dl>

    <h2>Replay what failed</h2>
    <form class="search" method="post" action={`/ui/endpoints/${encodeURIComponent(e.id)}/replay`}>
      <Field
        id="replay-since"
        label="Events since (UTC)"
        hint="exhausted deliveries, and those being retried, of events since then"
      >
        <input
          id="replay-since"
          name="since"
          type="datetime-local"
          value={since}
          required
          aria-describedby="replay-since-hint"
        />
      </Field>
      <button type="submit">Replay failed</button>
    </form>

    <h2>Recent attempts</h2>
    {attempts.length === 0 ? (
      <Empty>No attempts yet.</Empty>
    ) : (
      <table>
        <caption>Requests to this endpoint, newest first</caption>
        <thead>
          <tr>
            <th scope="col">Time</th>
            <th scope="col">Event</th>
            <th scope="col">Status</th>
            <th scope="col">Code</th>
            <th scope="col">Duration</th>
            <th scope="col">Answer</th>
            <th scope="col">Replay</th>
          </tr>
        </thead>
        <tbody>
          {attempts.map((a) => (
            <tr>
              <td>
                <Time at={a.at} />
              </td>
              <td>
                {a.type}
                <br />
                <code>{a.eventId}</code>
              </td>
              <td>
                <Badge value={a.status} />
                {a.trigger === 'replay' && ' (replay)'}
              </td>
              <td>{a.responseStatus ?? '–'}</td>
              <td>{`${a.durationMs} ms`}</td>
              <td>{answerOf(a)}</td>
              <td>
                <form method="post" action={`/ui/events/${a.eventId}/replay`}>
                  <input type="hidden" name="endpoint" value={e.id} />
                  <button
                    type="submit"
                    class="secondary"
                    aria-label={`Replay event ${a.eventId} to this endpoint`}
                  >
                    Replay
                  </button>
                </form>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    )}
    {olderCursor && (
      <p>
        <a href={`/ui/endpoints/${encodeURIComponent(e.id)}?cursor=${olderCursor}`}>
          Older attempts
        </a>
      </p>
    )}
  </>
);
