/**
 * Forgetting one person in the sandbox: every message, call, cascade message, callback (and
 * its pending retries), incoming Viber message, script, scripted reachability, uploaded
 * variable and bot user that mentions their number, in any form it is written
 * (src/privacy/redact.ts, the same rule as Switchboard's erasure), and every callback about
 * one of those messages. Lifecycles of forgotten messages stop: nothing more is sent about
 * them. Used by `Sandbox.erase`, `DELETE /_control/subjects/{phone}`, and Switchboard's own
 * `DELETE /v1/subjects/{phone}` when the sandbox is built in, since the sandbox keeps its own
 * copies of what Switchboard sent.
 *
 * @example
 * eraseFromSandbox(ctx, '+380501234567') // { messages: 2, calls: 1, callbacks: 7, ... }
 */
import { z } from 'zod';
import { phoneMentions } from '../privacy/redact.ts';
import type { SandboxContext } from './context.ts';

const count = (description: string) => z.number().int().min(0).meta({ description });

/** How many records of each kind the sandbox forgot. */
export const SandboxErasure = z.object({
  messages: count('messages and their fallbacks (speech calls included)'),
  calls: count('of those messages, speech calls'),
  cascade: count('cascade messages'),
  callbacks: count('callbacks and webhooks it made, sent or still retried'),
  inbound: count('incoming Viber messages it played'),
  scripts: count('scripts not used yet'),
  botUsers: count('uploaded bot users'),
  other: count('scripted cascade reachability and uploaded cascade variables'),
});
export type SandboxErasure = z.infer<typeof SandboxErasure>;

/** Every record of each kind, summed: what Switchboard's erasure report counts. */
export function erasedInSandbox(erasure: SandboxErasure): number {
  const { calls: _partOfMessages, ...kinds } = erasure;
  return Object.values(kinds).reduce((a, b) => a + b, 0);
}

/** Forgets `phone` (E.164, checked by the caller) everywhere in the sandbox. */
export function eraseFromSandbox(
  ctx: Pick<SandboxContext, 'messages' | 'cascade' | 'sender' | 'inbound' | 'scripts' | 'bots'>,
  phone: string,
): SandboxErasure {
  const mentions = phoneMentions(phone);
  const messages = ctx.messages.forget(mentions);
  const cascade = ctx.cascade.forget(mentions);
  // a docs-dialect status webhook names the message only, not the number
  const ids = new Set([...messages, ...cascade.messages].map((m) => m.messageId));
  const callbacks = ctx.sender.forget(
    (r) => (r.messageId !== undefined && ids.has(r.messageId)) || mentions(r.body),
  );
  return {
    messages: messages.length,
    calls: messages.filter((m) => m.call !== undefined).length,
    cascade: cascade.messages.length,
    callbacks,
    inbound: ctx.inbound.forget(mentions),
    scripts: ctx.scripts.forget(mentions),
    botUsers: ctx.bots.forget(mentions),
    other: cascade.other,
  };
}
