/**
 * Cascade messages sent through Switchboard (POST /v1/messages, `switchboard send`, a flow's
 * `send:`): a message of `type: "cascade"` written in Switchboard's own words (`from`, `to`,
 * `customerMessageId`, `dtSend`, as every other message) plus the cascade's (`messageType`,
 * `surveyOptions`, `variables`, `fallback`) and the endpoint to use. It is checked by the
 * cascade client's rules, stored in the endpoint's form (send.md: `id`, `fromName`,
 * `toPhone`, `scheduledSent`), and sent by the dispatcher through the cascade client, which
 * uploads its variables first.
 *
 * @example
 * validateCascadeInput({ type: 'cascade', from: 'Acme', to: '+380501234567', messageType: 'transaction', text: 'Hi %name=1%', variables: [{ id: 1, type: 'name', value: 'Ann' }] })
 * // { ok: true, message: { type: 'cascade', id: '', fromName: 'Acme', toPhone: '+380501234567', ... } }
 */
import { z } from 'zod';
import type { ErrorDetail } from '../errors.ts';
import {
  CASCADE_PATHS,
  checkCascade,
  type EndpointCascadeMessage,
  type EndpointCascadeMessageInput,
} from '../provider/cascade.ts';

export type CascadeEndpoint = keyof typeof CASCADE_PATHS;

/** What is stored for a cascade message: the endpoint's form, and which endpoint. */
export type StoredCascade = EndpointCascadeMessage & {
  type: 'cascade';
  endpoint?: CascadeEndpoint;
};

/** Switchboard's field names and the endpoint's (send.md "Parameters"). */
export const FIELD_NAMES = {
  customerMessageId: 'id',
  from: 'fromName',
  to: 'toPhone',
  dtSend: 'scheduledSent',
} as const;
const BACK = Object.fromEntries(
  Object.entries(FIELD_NAMES).map(([ours, theirs]) => [theirs, ours]),
);

const Shape = z.looseObject({
  type: z.literal('cascade'),
  endpoint: z
    .enum(Object.keys(CASCADE_PATHS) as [CascadeEndpoint, ...CascadeEndpoint[]], {
      error: `endpoint must be ${Object.keys(CASCADE_PATHS).join(' or ')}`,
    })
    .optional(),
});

export type CascadeCheck =
  | { ok: true; message: StoredCascade }
  | { ok: false; details: ErrorDetail[] };

/**
 * Checks a `type: "cascade"` message and answers it in the stored form; detail paths name
 * Switchboard's fields (`to`, not `toPhone`). Without a customerMessageId the `id` is a
 * placeholder: the one given when the message is stored replaces it.
 */
export function validateCascadeInput(input: Record<string, unknown>): CascadeCheck {
  const shape = Shape.safeParse(input);
  if (!shape.success) {
    return {
      ok: false,
      details: shape.error.issues.map((i) => ({
        path: i.path.join('.'),
        code: 'INVALID_ENDPOINT',
        message: i.message,
      })),
    };
  }
  const endpointForm: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(input)) {
    if (k === 'type' || k === 'endpoint' || v === undefined) continue;
    endpointForm[(FIELD_NAMES as Record<string, string>)[k] ?? k] = v;
  }
  // the id is the customerMessageId, given when the message is stored; a placeholder here
  endpointForm.id ??= 'pending';
  const checked = checkCascade([endpointForm]);
  if (!checked.ok) {
    return {
      ok: false,
      details: checked.details.map((d) => ({
        ...d,
        path: d.path.replace(/^\[0\]\.?/, '').replace(/^[A-Za-z]+/, (f) => BACK[f] ?? f),
      })),
    };
  }
  // the endpoint's form: the mapping always writes toPhone, which tells the form apart
  const message = checked.messages[0] as EndpointCascadeMessage;
  const stored: StoredCascade = { type: 'cascade', ...message };
  if (shape.data.endpoint !== undefined) stored.endpoint = shape.data.endpoint;
  return { ok: true, message: stored };
}

/** The message as the cascade client takes it: the stored form without Switchboard's fields. */
export function toCascadeWire(stored: StoredCascade): EndpointCascadeMessageInput {
  const { type: _type, endpoint: _endpoint, ...wire } = stored;
  return wire as EndpointCascadeMessageInput;
}
