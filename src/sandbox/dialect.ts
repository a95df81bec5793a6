/**
 * The two dialects the sandbox speaks. Underneath they are one sandbox: the same input
 * (every form `validateMessage` accepts), the same lifecycles, timings, scripts, fallbacks and
 * speech calls. Only what is reported differs:
 *
 * - `docs` (the default): what the provider's public documentation (docs/api/smsbat/*.md)
 *   shows, nothing more: a messagelist answer of send-message.md and flashcall.md, the status
 *   record and status webhook of status.md (`deliverystatus` with the words `scheduled`,
 *   `processing`, `delivered`, `undeliverable`, `permanenterror`; one messageId and one
 *   status for a message and its fallbacks), the error body of send-message.md, and the
 *   incoming Viber message of the help site's incoming-messages page.
 * - `compact`: the condensed interface the sandbox was first built from (callbacks per
 *   message and per fallback with status, customerMessageId, eventId...; `read`; errors as
 *   `{error, message, status}`).
 *
 * This module holds the docs dialect's words and shapes; messages.ts and the routes choose
 * between the two.
 *
 * @example
 * docsWord('sent') // 'processing'
 * flashPattern('+380123456789') // '***456789'
 */
import { z } from 'zod';
import type { LifecycleStatus } from './messages.ts';

export const SandboxDialect = z.enum(['docs', 'compact'], {
  error: (issue) =>
    `the sandbox dialect must be "docs" or "compact" (got ${JSON.stringify(issue.input)})`,
});
export type SandboxDialect = z.infer<typeof SandboxDialect>;
export const DEFAULT_DIALECT: SandboxDialect = 'docs';

/** The docs' delivery status words (status.md, "Delivery Status Values"). */
export type DocsStatus =
  | 'scheduled'
  | 'processing'
  | 'delivered'
  | 'undeliverable'
  | 'permanenterror';
/** A channel's word in a status record: a docs status, or `not_used` for a fallback not tried. */
export type ChannelWord = DocsStatus | 'not_used';

/**
 * The docs word for a sandbox step: accepted -> scheduled, sent -> processing, delivered and
 * read -> delivered (the docs have no `read`), failed -> undeliverable, expired ->
 * permanenterror.
 */
export function docsWord(status: LifecycleStatus): DocsStatus {
  switch (status) {
    case 'accepted':
      return 'scheduled';
    case 'sent':
      return 'processing';
    case 'delivered':
    case 'read':
      return 'delivered';
    case 'failed':
      return 'undeliverable';
    case 'expired':
      return 'permanenterror';
  }
}

/**
 * The type as the compact dialect names it: the condensed interface calls the transactional
 * Viber type `viber_service` (the docs' `viber_trans`).
 */
export function compactType(type: string): string {
  return type === 'viber_trans' ? 'viber_service' : type;
}

/** The type as the docs name it (send-message.md lists `viber_trans`, not `viber_service`). */
export function docsType(type: string): string {
  return type === 'viber_service' ? 'viber_trans' : type;
}

/**
 * The sandbox's price, per message part on every channel, and its currency: the figures of
 * status.md's examples (cost 0.05, USD). A message costs nothing until it is delivered, and
 * nothing when it is not (status.md, "Undeliverable", "Permanent Error": cost 0.00).
 */
export const SANDBOX_RATE = 0.05;
export const SANDBOX_CURRENCY = 'USD';

/** What `parts` parts cost, to a hundredth of a cent. */
export function costOf(parts: number): number {
  return Math.round(SANDBOX_RATE * parts * 10_000) / 10_000;
}

/**
 * The pattern the docs answer for a caller id: asterisks, then the number's last 6 digits
 * (flashcall.md, "Pattern Matching": `+380123456789` -> `***456789`).
 */
export function flashPattern(callerId: string): string {
  return `***${callerId.replace(/\D/g, '').slice(-6)}`;
}

/** The error body of send-message.md, "Error Response". */
export function docsErrorBody(code: string, message: string) {
  return { error: { code, message } };
}

/**
 * An incoming Viber message as the provider posts it (the help site's incoming-messages
 * page): the sender's number in digits without `+`, the business (or bot) name it was
 * written to, and an ISO 8601 time.
 */
export function docsInboundBody(m: {
  messageId: string;
  from: string;
  to: string;
  text: string;
  timestamp: string;
}) {
  return {
    idUuid: m.messageId,
    alphaName: m.to,
    phoneNumber: m.from.replace(/^\+/, ''),
    text: m.text,
    dt: m.timestamp,
  };
}
