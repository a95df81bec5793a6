/**
 * What Switchboard sent, as GET /v1/messages/{ref} shows it: the stored payload (the form
 * posted to the provider) read back into the canonical form that POST /v1/messages takes, so
 * a client reads the same shape it wrote whichever spelling it used:
 * - fallbacks always as a `fallbacks` list, each with its own `from` and `to` (the wire writes
 *   a single one as `fallback`, leaving out the message's own from and to);
 * - a cascade in Switchboard's field names (`from`, `to`, `dtSend`; the endpoint's are
 *   `fromName`, `toPhone`, `scheduledSent`), with its own `fallback`;
 * - without `customerMessageId` (the view has it) and a speechcall's `menu` (the compiled
 *   flow with its signed webhook tokens: the flow and the call's path show it).
 * A call's follow-up carries its rendered text: templates are filled before it is stored.
 *
 * @example
 * sentOf({ type: 'viber_trans', from: 'Acme', to: '+380501234567', text: 'Hi', fallback: { type: 'sms', text: 'Hi' } }, 'viber_trans')
 * // { type: 'viber_trans', from: 'Acme', to: '+380501234567', text: 'Hi', fallbacks: [{ type: 'sms', from: 'Acme', to: '+380501234567', text: 'Hi' }] }
 */
import { FIELD_NAMES } from './cascade.ts';
import type { ContentRemoved, SentMessage } from './views.ts';

type Stored = Record<string, unknown>;

const isRecord = (v: unknown): v is Stored =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** The message as sent, or null when the payload holds no words any more (see `removedOf`). */
export function sentOf(payload: unknown, type: string): SentMessage | null {
  if (!isRecord(payload) || payload.redacted !== undefined) return null;
  return type === 'cascade' ? cascadeSent(payload) : listSent(payload, type);
}

/** Why and when the words went, when they did (retention marks the payload `redacted`). */
export function removedOf(payload: unknown, removedAt: Date | null): ContentRemoved | undefined {
  if (!isRecord(payload) || payload.redacted === undefined) return undefined;
  return { reason: 'retention', at: removedAt?.toISOString() ?? null };
}

function listSent(p: Stored, type: string): SentMessage {
  const { customerMessageId: _cmid, menu: _menu, fallback, fallbacks, ...rest } = p;
  const from = str(p.from, '');
  const to = str(p.to, '');
  const out: SentMessage = ordered(rest, type, from, to);
  const list = isRecord(fallback) ? [fallback] : Array.isArray(fallbacks) ? fallbacks : undefined;
  if (list !== undefined) {
    // a fallback's from and to default to the message's (docs/provider.md)
    out.fallbacks = list
      .filter(isRecord)
      .map((f) => ordered(f, str(f.type, ''), str(f.from, from), str(f.to, to)));
  }
  return out;
}

const str = (v: unknown, otherwise: string) => (typeof v === 'string' ? v : otherwise);

/** type, from, to, text and messageData first (jsonb keeps keys by length), then the rest. */
function ordered(fields: Stored, type: string, from: string, to: string): SentMessage {
  const { type: _type, from: _from, to: _to, text, messageData, ...rest } = fields;
  const out: SentMessage = { type, from, to };
  if (text !== undefined) out.text = text as string;
  if (messageData !== undefined) out.messageData = messageData;
  return Object.assign(out, rest);
}

// the endpoint's field names back to Switchboard's (cascade.ts maps them the other way)
const OURS = Object.fromEntries(
  Object.entries(FIELD_NAMES).map(([ours, theirs]) => [theirs, ours]),
) as Record<string, string>;

function cascadeSent(p: Stored): SentMessage {
  const named: Stored = {};
  for (const [key, value] of Object.entries(p)) {
    const name = OURS[key] ?? key;
    if (name !== 'customerMessageId') named[name] = value;
  }
  return ordered(named, 'cascade', str(named.from, ''), str(named.to, ''));
}
