/**
 * The dispatcher's decisions, pure: what a round sends in which request (`roundParts`), what
 * the provider's answers mean for each claimed message (`outcomesFrom`, `cascadeOutcomes`),
 * and what a failed send does (`afterFailure`). No I/O here: `dispatch-write.ts` renders the
 * outcomes to SQL, `dispatcher.ts` sends and orders the steps.
 *
 * @example
 * outcomesFrom(claimed, [{ shape: 'sms', messagelistId: 7, messages: [{ status: 'accepted', accepted: true, messageId: 'p1' }] }])
 * // [{ id: claimed[0].message_id, status: 'accepted', providerMessageId: 'p1', messagelistId: 7, ... }]
 */
import type { CascadeResult } from '../provider/cascade.ts';
import type { Message, NormalisedMessagelistResponse } from '../provider/message.ts';
import type { CascadeEndpoint, StoredCascade } from './cascade.ts';
import type { Claimed } from './dispatch-claim.ts';

/** What the provider's answer means for one claimed message: the row the writer records. */
export interface Outcome {
  /** the message's id */
  id: string;
  /** the outbox row that goes with it */
  outboxId: number | string;
  role: string | null;
  status: 'accepted' | 'rejected';
  providerMessageId: string | null;
  messagelistId: number | null;
  parts: number | null;
  error: unknown;
  /** flashcall: the code the provider chose (the condensed interface's answer) */
  text: string | null;
  /** flashcall: the number that calls, its pattern and validity (flashcall.md's answer) */
  flash?: { callerId?: string; pattern?: string; ttl?: number };
  /** the provider already had it: this send repeated one whose answer was lost */
  resent?: boolean;
}

export interface DispatchError {
  code: string;
  message: string;
}

export const NO_ANSWER: DispatchError = {
  code: 'NO_ANSWER',
  message: 'the provider answered without this message',
};

export const CASCADE_UNAVAILABLE: DispatchError = {
  code: 'CASCADE_UNAVAILABLE',
  message: 'no cascade client: the cascade API needs PROVIDER_API_KEY',
};

export function rejectedOutcome(c: Claimed, error: DispatchError): Outcome {
  return {
    id: c.message_id,
    outboxId: c.outbox_id,
    role: c.role,
    status: 'rejected',
    providerMessageId: null,
    messagelistId: null,
    parts: null,
    error,
    text: null,
  };
}

type Answer = NormalisedMessagelistResponse['messages'][number];

/**
 * The outcome of each claimed row from the messagelist answers (one per chunk sent, each in
 * request order): answer i is for row i, unless the provider reordered or left some out, when
 * the customerMessageIds match them. A refusal as DUPLICATE_CUSTOMER_MESSAGE_ID is a resend of
 * one the provider already has: read as accepted.
 */
export function outcomesFrom(
  claimed: readonly Claimed[],
  responses: readonly NormalisedMessagelistResponse[],
): Outcome[] {
  const flat: Answer[] = [];
  const listIds: (number | null)[] = [];
  for (const r of responses) {
    const messagelistId = r.messagelistId ?? null;
    for (const m of r.messages) {
      flat.push(m);
      listIds.push(messagelistId);
    }
  }
  let byCmid: Map<string, number> | undefined;
  const indexOf = (c: Claimed, i: number): number => {
    const inPlace = flat[i];
    if (inPlace !== undefined && inPlace.customerMessageId === c.customer_message_id) return i;
    if (byCmid === undefined) {
      byCmid = new Map();
      for (let j = 0; j < flat.length; j++) {
        const key = flat[j]!.customerMessageId;
        if (key !== undefined) byCmid.set(key, j);
      }
    }
    const named = byCmid.get(c.customer_message_id);
    if (named !== undefined) return named;
    // no answer names it: the one in its place, unless that one names another message (whose
    // answer it is: taking it gave two messages one provider id)
    return inPlace !== undefined && inPlace.customerMessageId === undefined ? i : -1;
  };
  // a plain loop, fields read where they are: this runs for every message of every batch
  const outcomes: Outcome[] = new Array(claimed.length);
  for (let i = 0; i < claimed.length; i++) {
    const c = claimed[i]!;
    const k = indexOf(c, i);
    const answer = flat[k];
    if (answer === undefined) {
      outcomes[i] = rejectedOutcome(c, NO_ANSWER);
    } else if (!answer.accepted && answer.error?.code === 'DUPLICATE_CUSTOMER_MESSAGE_ID') {
      // a resend after an interrupted dispatch: the provider has it already, under the id it
      // names (the condensed interface names it; the docs' answer does not, and then the
      // message's id stays unknown: docs/provider.md, "What the docs leave open")
      outcomes[i] = {
        id: c.message_id,
        outboxId: c.outbox_id,
        role: c.role,
        status: 'accepted',
        providerMessageId: answer.existingMessageId ?? null,
        messagelistId: listIds[k]!,
        parts: answer.parts ?? null,
        error: null,
        text: null,
        resent: true,
      };
    } else {
      outcomes[i] = {
        id: c.message_id,
        outboxId: c.outbox_id,
        role: c.role,
        status: answer.accepted ? 'accepted' : 'rejected',
        providerMessageId: answer.messageId ?? null,
        messagelistId: listIds[k]!,
        parts: answer.parts ?? null,
        error: answer.error ?? null,
        text: c.type === 'flashcall' && answer.text ? answer.text : null,
      };
      if (
        c.type === 'flashcall' &&
        (answer.callerId ?? answer.pattern ?? answer.ttl) !== undefined
      ) {
        const flash: NonNullable<Outcome['flash']> = {};
        if (answer.callerId !== undefined) flash.callerId = answer.callerId;
        if (answer.pattern !== undefined) flash.pattern = answer.pattern;
        if (answer.ttl !== undefined) flash.ttl = answer.ttl;
        outcomes[i]!.flash = flash;
      }
    }
  }
  return outcomes;
}

/** The outcome of each cascade row from the cascade client's results, in request order. */
export function cascadeOutcomes(
  rows: readonly Claimed[],
  results: readonly CascadeResult[],
): Outcome[] {
  return rows.map((c, i): Outcome => {
    const r = results[i];
    if (!r) return rejectedOutcome(c, NO_ANSWER);
    return {
      id: c.message_id,
      outboxId: c.outbox_id,
      role: c.role,
      status: 'accepted',
      providerMessageId: r.messageId,
      messagelistId: null,
      parts: null,
      error: null,
      text: null,
    };
  });
}

/** One request of a round. */
export type RoundPart =
  | {
      what: 'messagelist';
      rows: Claimed[];
      /**
       * `text`: the round's stored payloads as they are (the part is the whole round), sent
       * unparsed when the sender can; `messages`: the part's messages, parsed.
       */
      body: { text: string } | { messages: Message[] };
    }
  | { what: 'cascade'; endpoint: CascadeEndpoint; rows: Claimed[]; messages: StoredCascade[] };

/**
 * What a round sends: its messages as one messagelist, their stored text as it is; and, when
 * the round holds cascade messages (rare: only then is the text parsed), those apart, one part
 * per cascade endpoint they name. Each part fails or succeeds on its own.
 */
export function roundParts(claimed: Claimed[], payloads: string): RoundPart[] {
  if (!claimed.some((c) => c.type === 'cascade')) {
    return [{ what: 'messagelist', rows: claimed, body: { text: payloads } }];
  }
  const parsed = JSON.parse(`[${payloads}]`) as Record<string, unknown>[];
  const list: Claimed[] = [];
  const listMessages: Message[] = [];
  const byEndpoint = new Map<CascadeEndpoint, { rows: Claimed[]; messages: StoredCascade[] }>();
  claimed.forEach((c, i) => {
    if (c.type !== 'cascade') {
      list.push(c);
      listMessages.push(parsed[i] as unknown as Message);
      return;
    }
    const stored = parsed[i] as unknown as StoredCascade;
    const endpoint = stored.endpoint ?? 'general';
    const group = byEndpoint.get(endpoint) ?? { rows: [], messages: [] };
    group.rows.push(c);
    group.messages.push(stored);
    byEndpoint.set(endpoint, group);
  });
  const parts: RoundPart[] = [];
  if (list.length > 0) {
    parts.push({ what: 'messagelist', rows: list, body: { messages: listMessages } });
  }
  for (const [endpoint, group] of byEndpoint) {
    parts.push({ what: 'cascade', endpoint, ...group });
  }
  return parts;
}

/** How long a row waits after its `attempts`-th failed send: doubling, at most a minute. */
export function retryDelayMs(attempts: number): number {
  return Math.min(60_000, 1000 * 2 ** Math.min(attempts, 6));
}

/**
 * After a part's send failed: the rows to try again later, and the outcomes of those that
 * used their last attempt (rejected, DISPATCH_FAILED).
 */
export function afterFailure(
  rows: readonly Claimed[],
  maxAttempts: number,
  message: string,
): { retry: Claimed[]; givenUp: Outcome[] } {
  const retry: Claimed[] = [];
  const givenUp: Outcome[] = [];
  for (const c of rows) {
    if (c.attempts + 1 < maxAttempts) {
      retry.push(c);
    } else {
      givenUp.push(
        rejectedOutcome(c, {
          code: 'DISPATCH_FAILED',
          message: `gave up after ${maxAttempts} attempts: ${message}`,
        }),
      );
    }
  }
  return { retry, givenUp };
}
