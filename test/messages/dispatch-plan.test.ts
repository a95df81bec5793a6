/**
 * The dispatcher's decisions, without a database or a provider: which answer belongs to which
 * claimed message, what a refusal means, what a round sends in which request, and what a
 * failed send does.
 */
import { describe, expect, it } from 'vitest';
import type { Claimed } from '../../src/messages/dispatch-claim.ts';
import {
  afterFailure,
  cascadeOutcomes,
  NO_ANSWER,
  outcomesFrom,
  rejectedOutcome,
  retryDelayMs,
  roundParts,
} from '../../src/messages/dispatch-plan.ts';
import { outcomeJson } from '../../src/messages/dispatch-write.ts';
import type { NormalisedMessagelistResponse } from '../../src/provider/message.ts';

const row = (n: number, over: Partial<Claimed> = {}): Claimed => ({
  outbox_id: String(100 + n),
  message_id: `00000000-0000-7000-8000-00000000000${n}`,
  customer_message_id: `cmid-${n}`,
  type: 'sms',
  role: null,
  attempts: 0,
  ...over,
});

type Answer = NormalisedMessagelistResponse['messages'][number];
const ok = (n: number, over: Partial<Answer> = {}): Answer => ({
  status: 'accepted',
  accepted: true,
  messageId: `p-${n}`,
  customerMessageId: `cmid-${n}`,
  parts: 1,
  ...over,
});
const list = (messages: Answer[], messagelistId = 7): NormalisedMessagelistResponse => ({
  shape: 'sms',
  messagelistId,
  messages,
});

describe('outcomesFrom', () => {
  it('matches answers by order, across the answers of several chunks', () => {
    const rows = [row(1), row(2), row(3)];
    const out = outcomesFrom(rows, [list([ok(1), ok(2)], 7), list([ok(3)], 8)]);
    expect(out).toEqual([
      {
        id: rows[0]!.message_id,
        outboxId: '101',
        role: null,
        status: 'accepted',
        providerMessageId: 'p-1',
        messagelistId: 7,
        parts: 1,
        error: null,
        text: null,
      },
      expect.objectContaining({ providerMessageId: 'p-2', messagelistId: 7 }),
      expect.objectContaining({
        id: rows[2]!.message_id,
        providerMessageId: 'p-3',
        messagelistId: 8,
      }),
    ]);
  });

  it('takes an answer without a customerMessageId in its place', () => {
    const out = outcomesFrom([row(1)], [list([ok(1, { customerMessageId: undefined })])]);
    expect(out[0]).toMatchObject({ status: 'accepted', providerMessageId: 'p-1' });
  });

  it('matches reordered answers by customerMessageId; a message no answer names is rejected', () => {
    const rows = [row(1), row(2), row(3)];
    const out = outcomesFrom(rows, [list([ok(3), ok(2)])]);
    expect(out.map((o) => [o.status, o.providerMessageId])).toEqual([
      ['rejected', null],
      ['accepted', 'p-2'],
      ['accepted', 'p-3'],
    ]);
    expect(out[0]).toEqual(rejectedOutcome(rows[0]!, NO_ANSWER));
    expect(out[0]!.error).toEqual({
      code: 'NO_ANSWER',
      message: 'the provider answered without this message',
    });
  });

  it('never takes the answer in its place when that answer names another message', () => {
    // row 1's place holds row 2's answer, and row 2 is answered there too: not two ids for one
    const out = outcomesFrom([row(1), row(2)], [list([ok(2)])]);
    expect(out.map((o) => [o.status, o.providerMessageId])).toEqual([
      ['rejected', null],
      ['accepted', 'p-2'],
    ]);
  });

  it('reads a DUPLICATE_CUSTOMER_MESSAGE_ID refusal as sent, under the id it names', () => {
    const duplicate = (existingMessageId?: string): Answer => ({
      status: 'rejected',
      accepted: false,
      customerMessageId: 'cmid-1',
      error: { code: 'DUPLICATE_CUSTOMER_MESSAGE_ID', message: 'already sent' },
      ...(existingMessageId !== undefined && { existingMessageId }),
    });
    const [named] = outcomesFrom([row(1)], [list([duplicate('p-first')])]);
    expect(named).toEqual({
      id: row(1).message_id,
      outboxId: '101',
      role: null,
      status: 'accepted',
      providerMessageId: 'p-first',
      messagelistId: 7,
      parts: null,
      error: null,
      text: null,
      resent: true,
    });
    const [unnamed] = outcomesFrom([row(1)], [list([duplicate()])]);
    expect(unnamed).toMatchObject({ status: 'accepted', providerMessageId: null, resent: true });
  });

  it('keeps a rejection with its code', () => {
    const [out] = outcomesFrom(
      [row(1, { role: 'call' })],
      [
        list([
          {
            status: 'rejected',
            accepted: false,
            customerMessageId: 'cmid-1',
            error: { code: 'INVALID_RECIPIENT', message: 'no such number' },
          },
        ]),
      ],
    );
    expect(out).toMatchObject({
      status: 'rejected',
      role: 'call',
      providerMessageId: null,
      error: { code: 'INVALID_RECIPIENT', message: 'no such number' },
    });
  });

  it("keeps a flash call's answer: the code, caller id, pattern and ttl", () => {
    const answer = ok(1, { text: '4321', callerId: '+380123454321', pattern: '***4321', ttl: 60 });
    const [flash] = outcomesFrom([row(1, { type: 'flashcall' })], [list([answer])]);
    expect(flash).toMatchObject({
      text: '4321',
      flash: { callerId: '+380123454321', pattern: '***4321', ttl: 60 },
    });
    // the same fields on another type's answer are not a flash call's
    const [sms] = outcomesFrom([row(1)], [list([answer])]);
    expect(sms).toMatchObject({ text: null });
    expect(sms).not.toHaveProperty('flash');
  });
});

describe('cascadeOutcomes', () => {
  it('accepts each row its result answers, and rejects the ones left without', () => {
    const out = cascadeOutcomes([row(1), row(2)], [{ messageId: 'c-1' } as never]);
    expect(out.map((o) => [o.status, o.providerMessageId, o.error])).toEqual([
      ['accepted', 'c-1', null],
      ['rejected', null, NO_ANSWER],
    ]);
  });
});

describe('roundParts', () => {
  it('sends a round without cascades as one list of its stored text, unparsed', () => {
    const rows = [row(1), row(2)];
    const payloads = '{"type":"sms","text":"a"},{"type":"sms","text":"b"}';
    expect(roundParts(rows, payloads)).toEqual([
      { what: 'messagelist', rows, body: { text: payloads } },
    ]);
  });

  it('sends cascades apart, one part per endpoint, the rest as one parsed list', () => {
    const rows = [
      row(1),
      row(2, { type: 'cascade' }),
      row(3, { type: 'cascade' }),
      row(4),
      row(5, { type: 'cascade' }),
    ];
    const payloads = [
      { type: 'sms', text: 'a' },
      { type: 'cascade', id: 'cmid-2', text: 'b' },
      { type: 'cascade', id: 'cmid-3', text: 'c', endpoint: 'batch' },
      { type: 'sms', text: 'd' },
      { type: 'cascade', id: 'cmid-5', text: 'e', endpoint: 'general' },
    ]
      .map((p) => JSON.stringify(p))
      .join(',');
    const parts = roundParts(rows, payloads);
    expect(parts).toEqual([
      {
        what: 'messagelist',
        rows: [rows[0], rows[3]],
        body: {
          messages: [
            { type: 'sms', text: 'a' },
            { type: 'sms', text: 'd' },
          ],
        },
      },
      {
        what: 'cascade',
        endpoint: 'general',
        rows: [rows[1], rows[4]],
        messages: [
          { type: 'cascade', id: 'cmid-2', text: 'b' },
          { type: 'cascade', id: 'cmid-5', text: 'e', endpoint: 'general' },
        ],
      },
      {
        what: 'cascade',
        endpoint: 'batch',
        rows: [rows[2]],
        messages: [{ type: 'cascade', id: 'cmid-3', text: 'c', endpoint: 'batch' }],
      },
    ]);
  });
});

describe('afterFailure', () => {
  it('retries rows with attempts left and gives up on the others, with the reason', () => {
    const { retry, givenUp } = afterFailure(
      [row(1, { attempts: 0 }), row(2, { attempts: 2 })],
      3,
      'provider unreachable',
    );
    expect(retry.map((c) => c.customer_message_id)).toEqual(['cmid-1']);
    expect(givenUp).toEqual([
      rejectedOutcome(row(2), {
        code: 'DISPATCH_FAILED',
        message: 'gave up after 3 attempts: provider unreachable',
      }),
    ]);
  });

  it('backs off doubling from a second, at most a minute', () => {
    expect([0, 1, 2, 5, 6, 20].map(retryDelayMs)).toEqual([
      1000, 2000, 4000, 32_000, 60_000, 60_000,
    ]);
  });
});

describe('outcomeJson', () => {
  it('writes full-word keys, no nulls, and the detail only when it says more', () => {
    const [plain, flash] = outcomesFrom(
      [row(1), row(2, { type: 'flashcall' })],
      [list([ok(1), ok(2, { text: '12"34', callerId: '+380123451234' })])],
    );
    expect(JSON.parse(outcomeJson(plain!))).toEqual({
      messageId: row(1).message_id,
      outboxId: '101',
      status: 'accepted',
      providerMessageId: 'p-1',
      messagelistId: 7,
      parts: 1,
    });
    expect(JSON.parse(outcomeJson(flash!))).toEqual({
      messageId: row(2).message_id,
      outboxId: '102',
      status: 'accepted',
      providerMessageId: 'p-2',
      messagelistId: 7,
      parts: 1,
      detail: {
        messageId: 'p-2',
        messagelistId: 7,
        parts: 1,
        text: '12"34',
        callerId: '+380123451234',
      },
    });
    const rejected = rejectedOutcome(row(3), NO_ANSWER);
    expect(JSON.parse(outcomeJson(rejected))).toEqual({
      messageId: row(3).message_id,
      outboxId: '103',
      status: 'rejected',
      error: NO_ANSWER,
      detail: { error: NO_ANSWER },
    });
  });
});
