/**
 * Erasure of one person (DELETE /v1/subjects/{phone}): every message to the number, with its
 * events and outbox row; every call to the number with its path, events, timers, held
 * webhooks and the prompts rendered for it (audio with the person's details), and the calls'
 * follow-up messages; its rows in campaigns (its vars) and its contact counts; the Viber messages it sent (and its number in others'); the callbacks
 * still waiting for those messages; the raw callback bodies that mention the number or are
 * about those messages; and, with the built-in sandbox, its copies.
 * "Mention" is any form the number is written in (redact.ts: `+`, `00`, a trunk `0`,
 * separators, URL escapes, a JSON number). Aggregates (flow statistics, flow versions) stay:
 * they hold no one.
 *
 * One transaction, so an erasure is all or nothing, and the ids of what was erased are
 * remembered (hashed, see erased.ts) in it, so a late callback about them is dropped and a
 * read of one of the messages says it was erased, and when.
 *
 * The work is a list of steps over a shared `Subject`: a table added later is erased by
 * adding a step (and its count to `RemovedCounts`).
 *
 * @example
 * const report = await eraseSubject({ db, clock }, '+380501234567');
 * report.removed.messages // 3
 */
import { type SQL, sql } from 'drizzle-orm';
import { z } from 'zod';
import { compactCounts } from '../campaigns/counts.ts';
import type { Clock } from '../clock.ts';
import { type Db, idList, rowsOf, type Tx } from '../db/client.ts';
import { deleteBodies } from '../db/inbox-refs.ts';
import { AppError } from '../errors.ts';
import { DEFAULT_STATUS_MAP, parseDeliveryBody } from '../messages/delivery-parse.ts';
import { isE164 } from '../provider/message.ts';
import { recordErased } from './erased.ts';
import { phoneMentionSql, redactMentions } from './redact.ts';

const count = (description: string) => z.number().int().min(0).meta({ description });

export const RemovedCounts = z
  .object({
    messages: count('messages to the number, and follow-ups of its calls'),
    messageEvents: count('timeline events of those messages'),
    outbox: count('of those messages, the ones not sent yet'),
    pendingEvents: count('delivery events still waiting for one of those messages'),
    calls: count('calls to the number'),
    callEvents: count('their events: the path (keys pressed), outcomes, statuses, timers'),
    callTimers: count('their timers not fired yet'),
    heldWebhooks: count('their key webhooks held for out-of-order arrival'),
    inboundMessages: count('incoming Viber messages from the number'),
    inboundMessagesRedacted: count(
      'incoming messages from others that mention the number, kept with it cut out',
    ),
    rawCallbacks: count('raw callback bodies deleted: about the number and no one else'),
    rawCallbacksRedacted: count(
      'raw callback bodies about others too, kept with the number and its message ids cut out',
    ),
    outgoingEvents: count(
      "events for your endpoints about the number's calls and messages, or mentioning it anywhere in their data, with their deliveries and attempts",
    ),
    prompts: count(
      'spoken prompts of the calls to the number and the pieces of audio rendered for them (their audio too, unless a prompt for someone else has the same words)',
    ),
    campaignRecipients: count(
      "the number's rows in campaigns (its vars, its attempts), and its contact counts for the frequency cap",
    ),
    sandbox: count(
      'records the built-in provider sandbox forgot: its messages, calls, callbacks, incoming messages, scripts and bot users that mention the number (0 against the real provider)',
    ),
  })
  .meta({ id: 'RemovedCounts' });
export type RemovedCounts = z.infer<typeof RemovedCounts>;
export type RemovedKind = keyof RemovedCounts;

export const ErasureReport = z
  .object({
    phone: z.string().meta({ example: '+380501234567' }),
    erasedAt: z.string().meta({ description: 'when the erasure committed (ISO 8601)' }),
    removed: RemovedCounts,
  })
  .meta({ id: 'ErasureReport' });
export type ErasureReport = z.infer<typeof ErasureReport>;

/** What the steps know about the person so far; earlier steps fill it for later ones. */
export interface Subject {
  phone: string;
  callIds: string[];
  /** the calls' own speechcall messages */
  callMessageIds: string[];
  messageIds: string[];
  customerMessageIds: string[];
  providerMessageIds: string[];
  /** raw callbacks (inbox ids) known to be about the person */
  inboxIds: Set<number>;
  /** PROMPTS_DIR files of the calls' prompts whose rows went: removed after the commit */
  promptFiles?: { contentHash: string; ext: string }[];
}

export interface ErasureStep {
  name: string;
  run(tx: Tx, subject: Subject): Promise<Partial<RemovedCounts>>;
}

async function rows<T>(tx: Tx, query: ReturnType<typeof sql>): Promise<T[]> {
  return rowsOf<T>(await tx.execute(query));
}

function addInboxIds(subject: Subject, values: readonly (string | number | null)[]) {
  for (const v of values) {
    const n = Number(v);
    if (v !== null && v !== '' && Number.isSafeInteger(n)) subject.inboxIds.add(n);
  }
}

interface MessageKeys {
  id: string;
  customer_message_id: string;
  provider_message_id: string | null;
}

function addMessages(subject: Subject, found: MessageKeys[]) {
  const known = new Set(subject.messageIds);
  for (const m of found) {
    if (known.has(m.id)) continue;
    known.add(m.id);
    subject.messageIds.push(m.id);
    subject.customerMessageIds.push(m.customer_message_id);
    if (m.provider_message_id) subject.providerMessageIds.push(m.provider_message_id);
  }
}

/**
 * The ids of a number's messages: those sent to it (src/db/schema/message-recipients.ts) and
 * those of its calls, each through an index. Written as one OR over `messages`, the lookup read
 * every message.
 */
export function numberMessageIds(phone: string): SQL {
  return sql`select message_id from message_recipients where "to" = ${phone}
    union all
    select id from messages where call_id in (select call_id from call_recipients where "to" = ${phone})`;
}

/**
 * Locks in the order the others take them: the dispatcher holds outbox rows while it sends and
 * then updates their messages; callbacks lock a message, then its call. Taken in that same
 * order here, an erasure waits for a send or a callback in flight (and they for it) instead of
 * deadlocking with it.
 */
const lockMessagesAndCalls: ErasureStep = {
  name: 'lock messages and calls',
  async run(tx, s) {
    await tx.execute(sql`
      select id from outbox where message_id in (${numberMessageIds(s.phone)})
      order by id for update`);
    addMessages(
      s,
      await rows<MessageKeys>(
        tx,
        sql`select id, customer_message_id, provider_message_id from messages
            where id in (${numberMessageIds(s.phone)})
            order by id for update`,
      ),
    );
    const calls = await rows<{ id: string; message_id: string }>(
      tx,
      sql`select id, message_id from calls
          where id in (select call_id from call_recipients where "to" = ${s.phone})
          order by id for update`,
    );
    s.callIds = calls.map((c) => c.id);
    s.callMessageIds = calls.map((c) => c.message_id);
    if (s.callIds.length > 0) {
      // follow-ups queued between the two statements above: the call locks stop any more
      addMessages(
        s,
        await rows<MessageKeys>(
          tx,
          sql`select id, customer_message_id, provider_message_id from messages
              where call_id in ${idList(s.callIds, 'uuid')} or id in ${idList(s.callMessageIds, 'uuid')}
              order by id for update`,
        ),
      );
    }
    return {};
  },
};

const rememberErased: ErasureStep = {
  name: 'remember erased ids',
  async run(tx, s) {
    // Switchboard's own ids too: GET /v1/messages/{ref} says "erased" for any of them
    await recordErased(tx, 'messageId', s.messageIds);
    await recordErased(tx, 'customerMessageId', s.customerMessageIds);
    await recordErased(tx, 'providerMessageId', s.providerMessageIds);
    await recordErased(tx, 'callId', s.callIds);
    return {};
  },
};

const pendingEvents: ErasureStep = {
  name: 'pending events',
  async run(tx, s) {
    if (s.customerMessageIds.length + s.providerMessageIds.length === 0) return {};
    const gone = await rows<{ inbox_id: string | number }>(
      tx,
      sql`delete from pending_events
          where customer_message_id in ${idList(s.customerMessageIds, 'text')}
             or provider_message_id in ${idList(s.providerMessageIds, 'text')}
          returning inbox_id`,
    );
    addInboxIds(
      s,
      gone.map((r) => r.inbox_id),
    );
    return { pendingEvents: gone.length };
  },
};

/** A step deleting the rows of a per-call table, noting the raw callbacks they point at. */
function perCallTable(
  name: string,
  table: string,
  kind: RemovedKind,
  inboxColumn?: string,
): ErasureStep {
  return {
    name,
    async run(tx, s) {
      if (s.callIds.length === 0) return {};
      const gone = await rows<{ inbox_id: string | number | null }>(
        tx,
        sql`delete from ${sql.identifier(table)} where call_id in ${idList(s.callIds, 'uuid')}
            returning ${sql.raw(inboxColumn ?? 'null')} as inbox_id`,
      );
      addInboxIds(
        s,
        gone.map((r) => r.inbox_id),
      );
      return { [kind]: gone.length };
    },
  };
}

const calls: ErasureStep = {
  name: 'calls',
  async run(tx, s) {
    if (s.callIds.length === 0) return {};
    const gone = await rows<{ id: string }>(
      tx,
      sql`delete from calls where id in ${idList(s.callIds, 'uuid')} returning id`,
    );
    return { calls: gone.length };
  },
};

const messageEvents: ErasureStep = {
  name: 'message events',
  async run(tx, s) {
    if (s.messageIds.length === 0) return {};
    const gone = await rows<{ inbox_id: string | null }>(
      tx,
      sql`delete from message_events where message_id in ${idList(s.messageIds, 'uuid')}
          returning detail->>'inboxId' as inbox_id`,
    );
    addInboxIds(
      s,
      gone.map((r) => r.inbox_id),
    );
    return { messageEvents: gone.length };
  },
};

const outbox: ErasureStep = {
  name: 'outbox',
  async run(tx, s) {
    if (s.messageIds.length === 0) return {};
    const gone = await rows<{ id: unknown }>(
      tx,
      sql`delete from outbox where message_id in ${idList(s.messageIds, 'uuid')} returning id`,
    );
    return { outbox: gone.length };
  },
};

const messages: ErasureStep = {
  name: 'messages',
  async run(tx, s) {
    if (s.messageIds.length === 0) return {};
    const gone = await rows<{ id: string }>(
      tx,
      sql`delete from messages where id in ${idList(s.messageIds, 'uuid')} returning id`,
    );
    return { messages: gone.length };
  },
};

/**
 * Events for the user's endpoints (src/events/): those about the number's calls and messages
 * (their subject), and any other that mentions the number in its data (an incoming message
 * from it, or quoting it), deleted whole with their deliveries and attempts: an event is a
 * copy sent out, not a record anyone reads here. The mention test reads every event's data,
 * as the inbound messages' does. The deliveries have no foreign key to cascade through
 * (src/db/schema/endpoints.ts): they go by a second statement. The first waits for a replay
 * holding one of the events (src/events/replay.ts); the second's snapshot sees what it queued.
 */
const outgoingEvents: ErasureStep = {
  name: 'outgoing events',
  async run(tx, s) {
    const subjects = [
      ...s.callIds.map((id) => `call:${id}`),
      ...s.messageIds.map((id) => `message:${id}`),
    ];
    const gone = await rows<{ id: string }>(
      tx,
      sql`delete from outgoing_events
          where subject in ${idList(subjects, 'text')}
            or ${phoneMentionSql(sql`data::text`, s.phone)}
          returning id`,
    );
    if (gone.length > 0) {
      // their attempts go with them (that foreign key cascades)
      await tx.execute(
        sql`delete from event_deliveries where event_id in ${idList(
          gone.map((r) => r.id),
          'uuid',
        )}`,
      );
    }
    return { outgoingEvents: gone.length };
  },
};

const inboundMessages: ErasureStep = {
  name: 'inbound messages',
  async run(tx, s) {
    // the sender as Viber wrote it: with or without the +, or in any other form
    const gone = await rows<{ inbox_id: string | number }>(
      tx,
      sql`delete from inbound_messages where ${phoneMentionSql(sql`"from"`, s.phone)}
          returning inbox_id`,
    );
    addInboxIds(
      s,
      gone.map((r) => r.inbox_id),
    );
    // others' messages that mention the number (a friend's, in the text) stay, without it
    const mentioning = await rows<{ id: string; text: string | null; data: string | null }>(
      tx,
      sql`select id, text, data::text as data from inbound_messages
          where ${phoneMentionSql(sql`(coalesce(text, '') || ' ' || coalesce(data::text, ''))`, s.phone)}
          order by id for update`,
    );
    const phones = [s.phone];
    for (const row of mentioning) {
      const text = row.text === null ? null : redactMentions(row.text, { phones });
      const data = row.data === null ? null : redactMentions(row.data, { phones });
      await tx.execute(
        sql`update inbound_messages set text = ${text}, data = ${data}::jsonb where id = ${row.id}`,
      );
    }
    return { inboundMessages: gone.length, inboundMessagesRedacted: mentioning.length };
  },
};

interface InboxRow {
  id: string | number;
  kind: string;
  content_type: string | null;
  body: string | null;
}

/**
 * Raw bodies: those known to be about the person, and those that mention the number (a scan:
 * erasures are rare, and a plain read blocks no one). A body about no one else is deleted;
 * one that also carries others' events keeps them, with the person cut out.
 */
const rawCallbacks: ErasureStep = {
  name: 'raw callbacks',
  async run(tx, s) {
    const mentioning = await rows<{ id: string | number }>(
      tx,
      sql`select id from inbox where ${phoneMentionSql(sql`body`, s.phone)}`,
    );
    addInboxIds(
      s,
      mentioning.map((r) => r.id),
    );
    if (s.inboxIds.size === 0) return {};
    const ids = [...s.inboxIds];
    const found = await rows<InboxRow>(
      tx,
      sql`select id, kind, content_type, body from inbox where id in ${idList(ids, 'bigint')}
          order by id for update`,
    );
    // rows still needed by someone else's inbound message or held webhook
    const shared = new Set(
      (
        await rows<{ inbox_id: string | number }>(
          tx,
          sql`select inbox_id from inbound_messages where inbox_id in ${idList(ids, 'bigint')}
              union select inbox_id from held_webhooks where inbox_id in ${idList(ids, 'bigint')}`,
        )
      ).map((r) => Number(r.inbox_id)),
    );
    const cmids = new Set(s.customerMessageIds);
    const pmids = new Set(s.providerMessageIds);
    const onlyAboutSubject = (row: InboxRow): boolean => {
      if (shared.has(Number(row.id))) return false;
      if (row.kind !== 'delivery' || row.body === null) return true;
      const { events } = parseDeliveryBody(
        row.content_type ?? undefined,
        row.body,
        DEFAULT_STATUS_MAP,
      );
      return events.every(
        (e) =>
          (e.customerMessageId !== undefined && cmids.has(e.customerMessageId)) ||
          e.providerMessageIds.some((p) => pmids.has(p)),
      );
    };
    const toDelete: number[] = [];
    let redacted = 0;
    for (const row of found) {
      if (onlyAboutSubject(row)) {
        toDelete.push(Number(row.id));
        continue;
      }
      const body =
        row.body === null
          ? null
          : redactMentions(row.body, {
              phones: [s.phone],
              ids: [...s.customerMessageIds, ...s.providerMessageIds],
            });
      if (body !== row.body) {
        await tx.execute(sql`update inbox set body = ${body} where id = ${Number(row.id)}`);
        redacted++;
      }
    }
    if (toDelete.length > 0) {
      // with what pointed at them (no foreign key cascades) and their dedup keys: a hash of the
      // body is about the person too
      await deleteBodies(tx, (id) => sql`${id} in ${idList(toDelete, 'bigint')}`);
    }
    return { rawCallbacks: toDelete.length, rawCallbacksRedacted: redacted };
  },
};

/**
 * The steps, in order: locks and ids first, then the rows that point at others (events,
 * outbox, per-call rows) before the rows they point at, and raw bodies last, when every row
 * that could still need one is gone.
 */
/**
 * The prompts rendered for the person's calls (src/speech/prompts.ts: their name, their
 * appointment): each call's uses, then the audio no other use refers to. Audio the same
 * words gave someone else, or a shared prompt, stays with its other uses.
 */
const callPrompts: ErasureStep = {
  name: 'call prompts',
  async run(tx, s) {
    if (s.callIds.length === 0) return {};
    // one row per use removed (audio null), then one per audio removed with it
    // the calls' spoken prompts (their texts hold the person's details), then their pieces
    const compositions = (
      await rows<{ id: number }>(
        tx,
        sql`delete from prompt_compositions where call_id in ${idList(s.callIds, 'uuid')} returning id`,
      )
    ).length;
    const gone = await rows<{ content_hash: string | null; ext: string; in_file: boolean }>(
      tx,
      sql`with uses as (
            delete from prompt_uses where call_id in ${idList(s.callIds, 'uuid')}
            returning content_hash),
          audio as (
            delete from prompt_audio a
            where a.content_hash in (select content_hash from uses)
              and not exists (select 1 from prompt_uses u
                where u.content_hash = a.content_hash
                  and (u.call_id is null or u.call_id not in ${idList(s.callIds, 'uuid')}))
            returning a.content_hash, a.ext, a.body is null as in_file)
          select null as content_hash, '' as ext, false as in_file from uses
          union all
          select content_hash, ext, in_file from audio`,
    );
    s.promptFiles = gone.flatMap((g) =>
      g.content_hash !== null && g.in_file ? [{ contentHash: g.content_hash, ext: g.ext }] : [],
    );
    return { prompts: compositions + gone.filter((g) => g.content_hash === null).length };
  },
};

/**
 * The number's rows in campaigns (their vars hold its details: a name, an appointment) with
 * their attempts, and its contact counts. A campaign still running does not call it again: its
 * row is gone. Taken after the messages and calls, the order the scheduler never waits in.
 * Each delete appends a count row to its campaign (migration 0022); a finished campaign is
 * folded by nobody else, so its rows are folded here once they pile up (src/campaigns/counts.ts).
 */
const campaignRows: ErasureStep = {
  name: 'campaign recipients',
  async run(tx, s) {
    const [row] = await rows<{ recipients: number | string; campaigns: string[] | string }>(
      tx,
      sql`with r as (delete from campaign_recipients where phone = ${s.phone}
                     returning id, campaign_id),
            a as (delete from campaign_attempts where recipient_id in (select id from r)),
            c as (delete from contact_counts where phone = ${s.phone})
          select count(*) as recipients,
            coalesce(json_agg(distinct campaign_id), '[]') as campaigns from r`,
    );
    const campaigns = row?.campaigns ?? [];
    await compactCounts(tx, typeof campaigns === 'string' ? JSON.parse(campaigns) : campaigns);
    return { campaignRecipients: Number(row?.recipients ?? 0) };
  },
};

export const ERASURE_STEPS: readonly ErasureStep[] = [
  lockMessagesAndCalls,
  rememberErased,
  pendingEvents,
  perCallTable('held webhooks', 'held_webhooks', 'heldWebhooks', 'inbox_id'),
  perCallTable('call timers', 'call_timers', 'callTimers'),
  perCallTable('call events', 'call_events', 'callEvents', "detail->>'inboxId'"),
  callPrompts,
  calls,
  messageEvents,
  outbox,
  messages,
  campaignRows,
  inboundMessages,
  rawCallbacks,
  outgoingEvents,
];

function noneRemoved(): RemovedCounts {
  return {
    messages: 0,
    messageEvents: 0,
    outbox: 0,
    pendingEvents: 0,
    calls: 0,
    callEvents: 0,
    callTimers: 0,
    heldWebhooks: 0,
    inboundMessages: 0,
    inboundMessagesRedacted: 0,
    rawCallbacks: 0,
    rawCallbacksRedacted: 0,
    outgoingEvents: 0,
    prompts: 0,
    campaignRecipients: 0,
    sandbox: 0,
  };
}

/** What erasure needs: the database, the clock, and the built-in sandbox when there is one. */
export interface ErasureDeps {
  db: Db;
  clock: Clock;
  /** forgets the number in the built-in sandbox, returning how many records went */
  eraseInSandbox?: (phone: string) => number;
  /** removes the PROMPTS_DIR files of erased prompts (src/speech/store.ts), after the commit */
  removePromptFiles?: (files: readonly { contentHash: string; ext: string }[]) => Promise<void>;
}

/**
 * Erases everything Switchboard holds about `phone` (E.164), in one transaction, and says how
 * much of each kind it removed; then, once that is committed, the built-in sandbox's copies.
 * Erasing again finds nothing and reports zeros.
 */
export async function eraseSubject(
  deps: ErasureDeps,
  phone: string,
  steps: readonly ErasureStep[] = ERASURE_STEPS,
): Promise<ErasureReport> {
  if (!isE164(phone)) {
    throw new AppError('VALIDATION_ERROR', 'phone must be a valid E.164 number', [
      { path: 'phone', code: 'INVALID_RECIPIENT', message: 'must be E.164, such as +380501234567' },
    ]);
  }
  const removed = noneRemoved();
  let promptFiles: Subject['promptFiles'];
  await deps.db.transaction(async (tx) => {
    const subject: Subject = {
      phone,
      callIds: [],
      callMessageIds: [],
      messageIds: [],
      customerMessageIds: [],
      providerMessageIds: [],
      inboxIds: new Set(),
    };
    for (const step of steps) {
      const counts = await step.run(tx, subject);
      for (const [kind, n] of Object.entries(counts) as [RemovedKind, number][]) {
        removed[kind] += n;
      }
    }
    promptFiles = subject.promptFiles;
  });
  if (promptFiles?.length && deps.removePromptFiles) await deps.removePromptFiles(promptFiles);
  if (deps.eraseInSandbox) removed.sandbox = deps.eraseInSandbox(phone);
  return { phone, erasedAt: deps.clock.now().toISOString(), removed };
}
