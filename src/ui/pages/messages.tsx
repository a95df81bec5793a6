/** Message pages (search, one message: what was sent, its timeline) and incoming Viber messages. */
import type { FC } from 'hono/jsx';
import { MESSAGE_STATUSES } from '../../messages/status.ts';
import type { MessageSummary, MessageView, SentFallback } from '../../messages/views.ts';
import { MESSAGE_TYPES } from '../../provider/message.ts';
import { Badge, Empty, Field, Time } from '../layout.tsx';

export interface MessageQuery {
  ref?: string | undefined;
  to?: string | undefined;
  status?: string | undefined;
  type?: string | undefined;
  callId?: string | undefined;
}

export const MessageSearch: FC<{ q: MessageQuery }> = ({ q }) => (
  <search aria-label="Search messages">
    <form class="search" method="get" action="/ui/messages">
      <Field id="msg-ref" label="Message id" hint="Switchboard id, customerMessageId or messageId">
        <input
          id="msg-ref"
          name="ref"
          value={q.ref ?? ''}
          size={38}
          aria-describedby="msg-ref-hint"
          autocomplete="off"
        />
      </Field>
      <Field id="msg-to" label="Phone">
        <input id="msg-to" name="to" type="tel" value={q.to ?? ''} placeholder="+380501234567" />
      </Field>
      <Field id="msg-status" label="Status">
        <select id="msg-status" name="status">
          <option value="">any</option>
          {MESSAGE_STATUSES.map((s) => (
            <option value={s} selected={q.status === s}>
              {s}
            </option>
          ))}
        </select>
      </Field>
      <Field id="msg-type" label="Type">
        <input id="msg-type" name="type" value={q.type ?? ''} list="msg-types" placeholder="sms" />
      </Field>
      <datalist id="msg-types">
        {/* cascade messages are stored with their own type */}
        {[...MESSAGE_TYPES, 'cascade'].map((t) => (
          <option value={t} />
        ))}
      </datalist>
      <Field id="msg-call" label="Call id">
        <input id="msg-call" name="callId" value={q.callId ?? ''} size={38} autocomplete="off" />
      </Field>
      <button type="submit">Search</button>
    </form>
  </search>
);

export const MessagesTable: FC<{ items: MessageSummary[] }> = ({ items }) =>
  items.length === 0 ? (
    <Empty>No messages match.</Empty>
  ) : (
    <table>
      <caption>Messages, newest first</caption>
      <thead>
        <tr>
          <th scope="col">Created</th>
          <th scope="col">Message</th>
          <th scope="col">Type</th>
          <th scope="col">From</th>
          <th scope="col">To</th>
          <th scope="col">Status</th>
          <th scope="col">Call</th>
        </tr>
      </thead>
      <tbody>
        {items.map((m) => (
          <tr>
            <td>
              <Time at={m.createdAt} />
            </td>
            <td>
              <a href={`/ui/messages/${encodeURIComponent(m.id)}`}>
                <code>{m.customerMessageId}</code>
              </a>
            </td>
            <td>{m.type}</td>
            <td>{m.from}</td>
            <td>{m.to}</td>
            <td>
              <Badge value={m.status} />
            </td>
            <td>{m.callId ? <a href={`/ui/calls/${m.callId}`}>call</a> : ''}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );

export const MessagePage: FC<{ message: MessageView }> = ({ message: m }) => (
  <>
    <dl class="facts">
      <dt>Id</dt>
      <dd>
        <code>{m.id}</code>
      </dd>
      <dt>customerMessageId</dt>
      <dd>
        <code>{m.customerMessageId}</code>
      </dd>
      <dt>Provider messageId</dt>
      <dd>{m.providerMessageId ? <code>{m.providerMessageId}</code> : '–'}</dd>
      <dt>Type</dt>
      <dd>{m.type}</dd>
      <dt>From</dt>
      <dd>{m.from}</dd>
      <dt>To</dt>
      <dd>
        <a href={`/ui/messages?to=${encodeURIComponent(m.to)}`}>{m.to}</a>
      </dd>
      <dt>Status</dt>
      <dd>
        <Badge value={m.status} />
        {m.deliveredVia && ` (delivered via ${m.deliveredVia})`}
      </dd>
      <dt>Parts</dt>
      <dd>{m.parts ?? '–'}</dd>
      {m.callId && (
        <>
          <dt>Call</dt>
          <dd>
            <a href={`/ui/calls/${m.callId}`}>
              <code>{m.callId}</code>
            </a>
          </dd>
        </>
      )}
      {m.error !== null && m.error !== undefined && (
        <>
          <dt>Error</dt>
          <dd>
            <code>{JSON.stringify(m.error)}</code>
          </dd>
        </>
      )}
    </dl>
    <h2 id="sent-heading">Sent</h2>
    <SentTable message={m} />
    <h2 id="timeline-heading">Timeline</h2>
    <table aria-labelledby="timeline-heading">
      <thead>
        <tr>
          <th scope="col">At</th>
          <th scope="col">Status</th>
          <th scope="col">Source</th>
          <th scope="col">Stored</th>
          <th scope="col">Detail</th>
        </tr>
      </thead>
      <tbody>
        {m.timeline.map((e) => (
          <tr>
            <td>
              <Time at={e.at} />
            </td>
            <td>
              <Badge value={e.status} />
            </td>
            <td>{e.source}</td>
            <td>
              <Time at={e.receivedAt} />
            </td>
            <td>{e.detail === undefined ? '' : <code>{JSON.stringify(e.detail)}</code>}</td>
          </tr>
        ))}
      </tbody>
    </table>
  </>
);

/** The message and its fallbacks, one row per channel, in the order they are tried. */
const SentTable: FC<{ message: MessageView }> = ({ message: m }) => {
  if (!m.sent) {
    const at = m.contentRemoved?.at;
    return (
      <Empty>
        {'Its texts were removed by retention'}
        {at ? (
          <>
            {' at '}
            <Time at={at} />
          </>
        ) : (
          ' (before the time was recorded)'
        )}
        .
      </Empty>
    );
  }
  const { fallbacks, ...first } = m.sent;
  const channels: SentFallback[] = [first, ...(fallbacks ?? [])];
  return (
    <table aria-labelledby="sent-heading">
      <thead>
        <tr>
          <th scope="col">Channel</th>
          <th scope="col">From</th>
          <th scope="col">To</th>
          <th scope="col">Text</th>
          <th scope="col">Other fields</th>
        </tr>
      </thead>
      <tbody>
        {channels.map(({ type, from, to, text, ...other }, i) => (
          <tr>
            <td>{i === 0 ? type : `${type} (fallback ${i})`}</td>
            <td>{from}</td>
            <td>{to}</td>
            <td>{text ?? <span class="muted">(no text)</span>}</td>
            <td>{Object.keys(other).length > 0 ? <code>{JSON.stringify(other)}</code> : ''}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
};

export interface InboundItem {
  id: string;
  channel: string;
  from: string;
  to: string | null;
  text: string | null;
  at: string;
  receivedAt: string;
}

export const InboundPage: FC<{ items: InboundItem[]; from: string | undefined }> = (props) => (
  <>
    <search aria-label="Search incoming messages">
      <form class="search" method="get" action="/ui/inbound">
        <Field id="in-from" label="From (phone)">
          <input id="in-from" name="from" type="tel" value={props.from ?? ''} />
        </Field>
        <button type="submit">Search</button>
      </form>
    </search>
    {props.items.length === 0 ? (
      <Empty>No incoming messages match.</Empty>
    ) : (
      <table>
        <caption>Incoming Viber messages, newest first</caption>
        <thead>
          <tr>
            <th scope="col">At</th>
            <th scope="col">From</th>
            <th scope="col">To</th>
            <th scope="col">Text</th>
            <th scope="col">Channel</th>
          </tr>
        </thead>
        <tbody>
          {props.items.map((m) => (
            <tr>
              <td>
                <Time at={m.at} />
              </td>
              <td>
                <a href={`/ui/messages?to=${encodeURIComponent(m.from)}`}>{m.from}</a>
              </td>
              <td>{m.to ?? ''}</td>
              <td>{m.text ?? <span class="muted">(no text)</span>}</td>
              <td>{m.channel}</td>
            </tr>
          ))}
        </tbody>
      </table>
    )}
  </>
);
