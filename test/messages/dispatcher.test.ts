/**
 * The dispatcher against the real sandbox over HTTP: crashes at the worst moment, failures,
 * and several dispatchers at once, with every message sent exactly once.
 */
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { sql } from 'drizzle-orm';
import { Hono } from 'hono';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { systemClock } from '../../src/clock.ts';
import { rowsOf } from '../../src/db/client.ts';
import { createLogger } from '../../src/logger.ts';
import {
  type CascadeSender,
  dispatchOnce,
  type MessagelistSender,
} from '../../src/messages/dispatcher.ts';
import { getMessage } from '../../src/messages/read.ts';
import { submitMessages } from '../../src/messages/submit.ts';
import { createProviderClient, type ProviderClient } from '../../src/provider/client.ts';
import { MAX_ID_LENGTH } from '../../src/provider/message.ts';
import { createSandbox, type Sandbox } from '../../src/sandbox/app.ts';
import { createManualClock } from '../../src/sandbox/clock.ts';
import { listen } from '../provider/helpers.ts';
import { phone, randomId, uniq } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';
import { eventually } from '../support/server.ts';
import { ONE_CONNECTION, onlyIf } from '../support/skip.ts';

const logger = createLogger('silent');

describeEachEngine('dispatcher', (ctx) => {
  let sandbox: Sandbox;
  let server: ReturnType<typeof serve>;
  let client: ProviderClient;
  let baseUrl: string;
  const deps = (provider: MessagelistSender = client) => ({
    db: ctx.database().db,
    provider,
    clock: systemClock,
    logger,
  });
  const submit = async (n: number, to = phone()) => {
    const inputs = Array.from({ length: n }, () => ({
      from: 'Acme',
      to,
      type: 'sms',
      text: 'x',
      customerMessageId: uniq('d'),
    }));
    await submitMessages({ db: ctx.database().db, clock: systemClock }, inputs);
    return inputs.map((i) => i.customerMessageId);
  };
  const sandboxCount = (cmid: string) => sandbox.messages.list({ customerMessageId: cmid }).length;
  const outboxCount = async () =>
    Number(
      rowsOf<{ n: string }>(
        await ctx.database().db.execute(sql`select count(*) as n from outbox`),
      )[0]!.n,
    );

  beforeAll(async () => {
    // the condensed interface's sandbox: its duplicate answer names the first messageId, which
    // the resend test below relies on (the docs' answer does not: see provider-docs.test.ts)
    sandbox = createSandbox({ dialect: 'compact' });
    server = await new Promise((resolve) => {
      const s = serve({ fetch: sandbox.app.fetch, port: 0, hostname: '127.0.0.1' }, () =>
        resolve(s),
      );
    });
    const port = (server.address() as AddressInfo).port;
    baseUrl = `http://127.0.0.1:${port}`;
    client = createProviderClient({ baseUrl, auth: { apiKey: 'sandbox-key' } });
  });
  afterAll(async () => {
    await sandbox?.close();
    await new Promise((r) => server?.close(r));
  });

  it('sends queued messages and records the provider answer', async () => {
    // the file's database is shared by its tests: the outbox holds this test's 3 rows only
    expect(await outboxCount()).toBe(0);
    const cmids = await submit(3);
    const result = await dispatchOnce(deps());
    expect(result).toMatchObject({ claimed: 3, accepted: 3 });
    for (const cmid of cmids) {
      const v = await getMessage(ctx.database().db, cmid);
      expect(v.status).toBe('accepted');
      expect(v.providerMessageId).toEqual(expect.any(String));
      expect(sandboxCount(cmid)).toBe(1);
    }
    expect(await outboxCount()).toBe(0);
  });

  it('cuts a messagelist at its byte budget, in queue order, and says when more waits', async () => {
    const cmids = await submit(4);
    // a budget of one byte: every list holds its first message only (never none)
    const rounds = [];
    for (;;) {
      const r = await dispatchOnce(deps(), { maxBytes: 1 });
      if (r.claimed === 0) break;
      rounds.push(r);
    }
    expect(rounds.map((r) => [r.claimed, r.accepted, r.full])).toEqual([
      [1, 1, true],
      [1, 1, true],
      [1, 1, true],
      [1, 1, false],
    ]);
    const lists = cmids.map((cmid) => {
      expect(sandboxCount(cmid)).toBe(1);
      return sandbox.messages.list({ customerMessageId: cmid })[0]!.messagelistId;
    });
    expect(new Set(lists).size).toBe(4);
    expect([...lists].sort((a, b) => a - b)).toEqual(lists);
    // the budget counts the JSON that is sent, not Postgres's (compressed, binary) jsonb size
    const three = await submit(3);
    const size = async (cmid: string) => {
      const [row] = rowsOf<{ n: number }>(
        await ctx
          .database()
          .db.execute(
            sql`select octet_length(payload::text) as n from messages where customer_message_id = ${cmid}`,
          ),
      );
      return Number(row!.n);
    };
    const sizes = [await size(three[0]!), await size(three[1]!)];
    const budget = sizes[0]! + sizes[1]!;
    expect(await dispatchOnce(deps(), { maxBytes: budget })).toMatchObject({ claimed: 2 });
    expect(await dispatchOnce(deps(), { maxBytes: budget })).toMatchObject({ claimed: 1 });
    // with the default budget the same four go in one list
    const more = await submit(4);
    expect(await dispatchOnce(deps())).toMatchObject({ claimed: 4, accepted: 4, full: false });
    expect(
      new Set(more.map((c) => sandbox.messages.list({ customerMessageId: c })[0]!.messagelistId))
        .size,
    ).toBe(1);
  });

  it('a crash after the provider accepted, before the commit, resends nothing twice', async () => {
    const cmids = await submit(5);
    const crashing: MessagelistSender = {
      async sendMessagelist(messages) {
        await client.sendMessagelist(messages); // the provider has them now...
        throw new Error('process killed'); // ...and the transaction never commits
      },
    };
    await expect(dispatchOnce(deps(crashing))).resolves.toMatchObject({ failed: 5 });
    // the rows are still in the outbox; make them due again and run a healthy dispatcher
    await ctx
      .database()
      .db.execute(sql`update outbox set available_at = now() - interval '1 second'`);
    const second = await dispatchOnce(deps());
    expect(second.accepted).toBe(5);
    for (const cmid of cmids) {
      expect(sandboxCount(cmid)).toBe(1);
      const v = await getMessage(ctx.database().db, cmid);
      expect(v.status).toBe('accepted');
      const dispatch = v.timeline.find((e) => e.source === 'dispatch');
      expect(dispatch?.detail).toMatchObject({ resent: true, messageId: v.providerMessageId });
      expect(sandbox.messages.list({ customerMessageId: cmid })[0]!.messageId).toBe(
        v.providerMessageId,
      );
    }
  });

  it('matches answers out of order by customerMessageId; one left out is rejected', async () => {
    const cmids = await submit(4);
    // the provider answers in reverse order, and says nothing about the first message
    const shuffling: MessagelistSender = {
      async sendMessagelist(messages) {
        const [response] = await client.sendMessagelist(messages);
        const answered = response!.messages.filter((m) => m.customerMessageId !== cmids[0]);
        return [{ ...response!, messages: answered.reverse() }];
      },
    };
    const result = await dispatchOnce(deps(shuffling));
    expect(result).toMatchObject({ accepted: 3, rejected: 1 });
    const first = await getMessage(ctx.database().db, cmids[0]!);
    expect(first.status).toBe('rejected');
    expect(first.timeline.find((e) => e.source === 'dispatch')?.detail).toEqual({
      error: { code: 'NO_ANSWER', message: 'the provider answered without this message' },
    });
    for (const cmid of cmids.slice(1)) {
      const v = await getMessage(ctx.database().db, cmid);
      const sent = sandbox.messages.list({ customerMessageId: cmid })[0]!;
      expect(v).toMatchObject({ status: 'accepted', providerMessageId: sent.messageId, parts: 1 });
      expect(v.timeline.find((e) => e.source === 'dispatch')?.detail).toEqual({
        messageId: sent.messageId,
        messagelistId: sent.messagelistId,
        parts: 1,
      });
    }
    expect(await outboxCount()).toBe(0);
  });

  it('takes an answer whose messageId is too long to be an id, without that id', async () => {
    // a B-tree entry holds at most 2704 bytes: before this the dispatch's write failed on
    // messages' provider id index, every round again
    const cmids = await submit(2);
    const rewriting = createProviderClient({
      baseUrl,
      auth: { apiKey: 'sandbox-key' },
      fetch: async (input, init) => {
        const res = await fetch(input, init);
        const body = (await res.json()) as { messages: { messageId?: string }[] };
        body.messages[0]!.messageId = randomId(4000);
        body.messages[1]!.messageId = 'x'.repeat(MAX_ID_LENGTH);
        return new Response(JSON.stringify(body), {
          status: res.status,
          headers: { 'content-type': 'application/json' },
        });
      },
    });
    const result = await dispatchOnce(deps(rewriting));
    expect(result).toMatchObject({ accepted: 2, rejected: 0 });
    const [first, second] = await Promise.all(
      cmids.map((cmid) => getMessage(ctx.database().db, cmid)),
    );
    expect(first).toMatchObject({ status: 'accepted' });
    expect(first!.providerMessageId ?? null).toBeNull();
    // at the limit it is an id like any other
    expect(second).toMatchObject({
      status: 'accepted',
      providerMessageId: 'x'.repeat(MAX_ID_LENGTH),
    });
    expect(await outboxCount()).toBe(0);
  });

  it('puts a failed send back with a backoff, and gives up after the last attempt', async () => {
    const cmids = await submit(2);
    const down: MessagelistSender = {
      sendMessagelist: async () => {
        throw new Error('provider unreachable');
      },
    };
    const first = await dispatchOnce(deps(down), { maxAttempts: 2 });
    expect(first).toMatchObject({ claimed: 2, failed: 2 });
    const rows = rowsOf<{ attempts: number; last_error: string; due: boolean }>(
      await ctx
        .database()
        .db.execute(sql`select attempts, last_error, available_at > now() as due from outbox`),
    );
    expect(rows).toHaveLength(2);
    expect(
      rows.every((r) => r.attempts === 1 && r.due && r.last_error === 'provider unreachable'),
    ).toBe(true);
    // not due yet: nothing is claimed
    expect((await dispatchOnce(deps(down), { maxAttempts: 2 })).claimed).toBe(0);
    await ctx
      .database()
      .db.execute(sql`update outbox set available_at = now() - interval '1 second'`);
    const last = await dispatchOnce(deps(down), { maxAttempts: 2 });
    expect(last).toMatchObject({ rejected: 2, failed: 0 });
    for (const cmid of cmids) {
      const v = await getMessage(ctx.database().db, cmid);
      expect(v.status).toBe('rejected');
      expect(v.error).toMatchObject({ code: 'DISPATCH_FAILED' });
    }
    expect(await outboxCount()).toBe(0);
  });

  it("a long Retry-After puts the round's rows back until then, no attempt counted, without waiting in its transaction", async () => {
    // a sandbox whose messaging bucket holds one request a minute: its second answers 429 with
    // Retry-After: 60 (src/sandbox/http.ts), as the provider does past its limit
    const sandboxClock = createManualClock();
    const limited = createSandbox({
      dialect: 'compact',
      clock: sandboxClock,
      rateLimits: { messaging: { perSecond: 1 / 60, burst: 1 } },
    });
    const limitedServer = await listen(limited.app);
    try {
      // the client's time is the test's: every wait it would make is recorded, none is made
      let now = 1_000_000;
      const sleeps: number[] = [];
      const provider = createProviderClient({
        baseUrl: limitedServer.url,
        auth: { apiKey: 'sandbox-key' },
        clock: { now: () => now },
        sleep: async (ms: number) => {
          sleeps.push(ms);
          now += ms;
        },
      });
      const outbox = async () =>
        rowsOf<{ attempts: number; last_error: string | null; wait_s: number }>(
          await ctx.database().db.execute(sql`
            select attempts, last_error,
              extract(epoch from available_at - now())::float8 as wait_s
            from outbox order by id`),
        );
      const sent = () => limited.messages.list({}).length;

      await submit(2);
      expect(await dispatchOnce(deps(provider))).toMatchObject({ claimed: 2, accepted: 2 });
      await submit(3);
      const limitedRound = await dispatchOnce(deps(provider));
      expect(limitedRound).toMatchObject({ claimed: 3, accepted: 0, rejected: 0, failed: 3 });
      expect(sleeps).toEqual([]); // the 60 s were not waited, in the transaction or anywhere
      expect(sent()).toBe(2);
      const rows = await outbox();
      expect(rows).toHaveLength(3);
      for (const r of rows) {
        expect(r.attempts).toBe(0); // a 429 is "not processed": not one of maxAttempts
        expect(r.last_error).toMatch(/HTTP 429/);
        expect(r.wait_s).toBeGreaterThan(55);
        expect(r.wait_s).toBeLessThanOrEqual(60);
      }
      // not due: nothing claimed. A new message is claimed, and not even sent while the
      // provider holds requests back (the client's limiter keeps its Retry-After)
      expect((await dispatchOnce(deps(provider))).claimed).toBe(0);
      await submit(1);
      expect(await dispatchOnce(deps(provider))).toMatchObject({ claimed: 1, failed: 1 });
      expect(sent()).toBe(2);
      expect((await outbox()).map((r) => r.attempts)).toEqual([0, 0, 0, 0]);

      // a minute later (the client's, the sandbox's and the database's), all four go
      now += 60_000;
      await sandboxClock.advance(60_000);
      await ctx
        .database()
        .db.execute(sql`update outbox set available_at = now() - interval '1 second'`);
      expect(await dispatchOnce(deps(provider))).toMatchObject({ claimed: 4, accepted: 4 });
      expect(sent()).toBe(6);
      expect(await outboxCount()).toBe(0);
      expect(sleeps).toEqual([]);
    } finally {
      await limited.close();
      await limitedServer.close();
    }
  });

  it('a provider that never answers: the round gives up at its deadline, the rows back with a backoff; a part not begun is put back uncounted', async () => {
    // takes every request and answers none, as a provider whose network went quiet
    const silent = new Hono();
    let arrived = 0;
    silent.post('*', () => {
      arrived++;
      return new Promise<Response>(() => {});
    });
    const silentServer = await listen(silent);
    try {
      const provider = createProviderClient({
        baseUrl: silentServer.url,
        auth: { apiKey: 'sandbox-key' },
      });
      const cascadeSends: number[] = [];
      const cascade: CascadeSender = {
        send: async (messages) => {
          cascadeSends.push(messages.length);
          return [];
        },
      };
      await submit(2);
      await submitMessages({ db: ctx.database().db, clock: systemClock }, [
        {
          type: 'cascade',
          from: 'Shop',
          to: phone(),
          messageType: 'transaction',
          text: 'Hi %name=1%',
          variables: [{ id: 1, type: 'name', value: 'Ann' }],
          customerMessageId: uniq('c'),
        },
      ]);
      // the client alone would wait 30 s an attempt, four attempts
      const round = await dispatchOnce({ ...deps(provider), cascade }, { sendDeadlineMs: 300 });
      expect(round).toMatchObject({ claimed: 3, accepted: 0, rejected: 0, failed: 3 });
      expect(arrived).toBe(1); // the messagelist, once: the deadline passed in its first attempt
      expect(cascadeSends).toEqual([]); // never begun
      const rows = rowsOf<{ type: string; attempts: number; last_error: string; wait_s: number }>(
        await ctx.database().db.execute(sql`
          select m.type, o.attempts, o.last_error,
            extract(epoch from o.available_at - now())::float8 as wait_s
          from outbox o join messages m on m.id = o.message_id order by o.id`),
      );
      expect(rows.map((r) => [r.type, r.attempts])).toEqual([
        ['sms', 1],
        ['sms', 1],
        ['cascade', 0],
      ]);
      for (const r of rows.filter((r) => r.type === 'sms')) {
        expect(r.last_error).toBe("no answer within the round's 300 ms for its sends");
        expect(r.wait_s).toBeGreaterThan(0); // the first retry's backoff
      }
      const [notBegun] = rows.filter((r) => r.type === 'cascade');
      expect(notBegun!.last_error).toBe("not sent: the round's 300 ms for its sends had passed");
      expect(notBegun!.wait_s).toBeLessThanOrEqual(0); // due at once, for the next round
    } finally {
      await silentServer.close();
      await ctx.database().db.execute(sql`delete from outbox`);
    }
  });

  // two connections at once: real Postgres only (PGlite runs one transaction at a time)
  it.runIf(ctx.engine === 'postgres')(
    onlyIf(
      ctx.engine === 'postgres',
      'Postgres ends a round whose process stopped mid-send: its rows are free again, and nothing is lost',
      ONE_CONNECTION,
    ),
    async () => {
      const cmids = await submit(2);
      const claimable = async () =>
        rowsOf<{ n: number }>(
          await ctx.database().db.execute(sql`
            select count(*)::int as n from (select 1 from outbox for update skip locked) o`),
        )[0]!.n;
      // a send that outlives every bound of this process, as a stalled or lost process does
      let release!: () => void;
      const stalled = new Promise<void>((r) => {
        release = r;
      });
      let sending!: () => void;
      const inFlight = new Promise<void>((r) => {
        sending = r;
      });
      const stuck: MessagelistSender = {
        sendMessagelist: async () => {
          sending();
          await stalled;
          return [];
        },
      };
      // the round fails as soon as Postgres closes its connection, while its send still runs
      const round = dispatchOnce(deps(stuck), { idleTimeoutMs: 500 }).then(
        () => 'committed',
        (err: unknown) => err,
      );
      await inFlight;
      expect(await claimable()).toBe(0); // held by the round
      await eventually(async () => (await claimable()) === 2, 10_000, 'Postgres to end the round');
      release();
      expect(await round).toMatchObject({ code: 'CONNECTION_CLOSED' });
      // the rows as they were: sent by the next round, once each
      expect(await dispatchOnce(deps())).toMatchObject({ claimed: 2, accepted: 2 });
      for (const cmid of cmids) expect(sandboxCount(cmid)).toBe(1);
    },
  );

  it('with a lease, sends outside its transaction: the database serves others meanwhile, and a row taken meanwhile is not recorded', async () => {
    const cmids = await submit(3);
    // a provider that answers only when the test says: the round is mid-send until then
    let release!: () => void;
    const answered = new Promise<void>((r) => {
      release = r;
    });
    let sending!: () => void;
    const inFlight = new Promise<void>((r) => {
      sending = r;
    });
    const held: MessagelistSender = {
      sendMessagelist: async (messages) => {
        sending();
        await answered;
        return client.sendMessagelist(messages);
      },
    };
    const round = dispatchOnce(deps(held), { leaseMs: 60_000 });
    await inFlight;
    // mid-send: no transaction holds the database (on PGlite, its one connection), so these
    // run now; the rows are out of the queue until the lease ends
    const leased = rowsOf<{ id: string; wait_s: number }>(
      await ctx.database().db.execute(sql`
        select id::text, extract(epoch from available_at - now())::float8 as wait_s
        from outbox order by id`),
    );
    expect(leased).toHaveLength(3);
    for (const r of leased) expect(r.wait_s).toBeGreaterThan(50);
    expect((await dispatchOnce(deps())).claimed).toBe(0);
    // a row taken from the queue meanwhile (as an erasure does) is not recorded
    await ctx.database().db.execute(sql`delete from outbox where id = ${leased[0]!.id}::bigint`);
    release();
    expect(await round).toMatchObject({ claimed: 3, accepted: 2, failed: 0 });
    const statuses = await Promise.all(
      cmids.map(async (c) => (await getMessage(ctx.database().db, c)).status),
    );
    expect(statuses.sort()).toEqual(['accepted', 'accepted', 'queued']);
    expect(await outboxCount()).toBe(0);
  });

  it('with a lease, rows whose round died mid-send go again once the lease ends', async () => {
    const cmids = await submit(2);
    let sending!: () => void;
    const inFlight = new Promise<void>((r) => {
      sending = r;
    });
    // a round that never comes back (its process died mid-send)
    const dead: MessagelistSender = {
      sendMessagelist: () => {
        sending();
        return new Promise(() => {});
      },
    };
    void dispatchOnce(deps(dead), { leaseMs: 60_000 });
    await inFlight;
    expect((await dispatchOnce(deps(), { leaseMs: 60_000 })).claimed).toBe(0);
    await ctx
      .database()
      .db.execute(sql`update outbox set available_at = now() - interval '1 second'`);
    expect(await dispatchOnce(deps(), { leaseMs: 60_000 })).toMatchObject({
      claimed: 2,
      accepted: 2,
    });
    for (const cmid of cmids) expect(sandboxCount(cmid)).toBe(1);
    expect(await outboxCount()).toBe(0);
  });

  it('several dispatchers at once send every message exactly once', async () => {
    const cmids = await submit(1200);
    const results = await Promise.all(
      Array.from({ length: 4 }, async () => {
        let sent = 0;
        for (;;) {
          const r = await dispatchOnce(deps(), { batchSize: 100 });
          if (r.claimed === 0) return sent;
          sent += r.accepted + r.rejected;
        }
      }),
    );
    expect(results.reduce((a, b) => a + b, 0)).toBe(1200);
    expect(cmids.every((c) => sandboxCount(c) === 1)).toBe(true);
    expect(await outboxCount()).toBe(0);
  });

  it('one leader at a time; another takes over when it goes', async () => {
    const a = ctx.database().createLeaderLock(4242);
    // b waits for the lock in Postgres after its first try, and says when it has it
    let bAcquired = () => {};
    const bHasIt = new Promise<void>((resolve) => {
      bAcquired = resolve;
    });
    const b = ctx.database().createLeaderLock(4242, () => bAcquired());
    expect(await a.tryAcquire()).toBe(true);
    expect(await a.tryAcquire()).toBe(true);
    if (ctx.engine === 'postgres') {
      expect(await b.tryAcquire()).toBe(false);
      expect(await b.tryAcquire()).toBe(false); // still waiting: asks nothing of its session
      await a.release(); // the leader's connection ends, as when its process dies
      await bHasIt; // told without trying again
      expect(await b.tryAcquire()).toBe(true);
      expect(await b.tryAcquire()).toBe(true);
      expect(await a.tryAcquire()).toBe(false);
    }
    await a.release();
    await b.release();
  });
});
