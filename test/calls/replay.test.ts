/**
 * Replay before release (issue 24, point 4): real calls are started and advanced through the
 * app (signed speech webhooks, delivery callbacks, a durable timer), then replayed through
 * the same flow (nothing differs) and through changed ones: a changed text, a key that now
 * ends the call, a new required param, a language dropped. The report names each differing
 * call, where its path parts, its outcome and follow-ups before and after; the API refuses a
 * bad period, a draft that does not compile (file:line) and an unknown flow. Last, retention
 * removes the calls' events (then their texts): every call is skipped, never guessed at.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import { fireDueTimers } from '../../src/calls/events.ts';
import {
  compileReplayDraft,
  type FlowReplayReport,
  replayFlow,
  replayTime,
} from '../../src/calls/replay.ts';
import { callTimers } from '../../src/db/schema/index.ts';
import { AppError } from '../../src/errors.ts';
import { signNodeToken } from '../../src/flows/index.ts';
import { RETENTION_STEPS, runRetention } from '../../src/privacy/retention.ts';
import { buildTestApp, json, phone, readJson } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';

const FLOW = 'replay-reminder';

/** The flow the calls run on: the README's appointment reminder, without its asserts. */
const REPLAY_FLOW = `title: Replay reminder
params:
  name: string
  date: string
languages: [en, uk]
assert: { outcomeOnEveryPath: false }
menus:
  main:
    intro: { en: "https://cdn.example.com/en/reminder.mp3", uk: "https://cdn.example.com/uk/reminder.mp3" }
    timeout: 8s
    retries: 1
    keys:
      "1": [ { outcome: confirmed }, { send: { type: sms, text: "Thanks {{name}}, see you on {{date}}." } }, hangup ]
      "2": [ { goto: reschedule } ]
    wrong: [ { outcome: no-input }, hangup ]
  reschedule:
    intro: "ivr_651854"
    keys:
      "1": [ { outcome: reschedule-requested }, hangup ]
      "*": [ { goto: main } ]
on:
  failed: [ { send: { type: sms, text: "We could not reach you about {{date}}." } } ]
  noResponse: { after: 30m, do: [ { outcome: no-response } ] }
`;

/** Key 1's text changed; key 2 now ends the call, and reschedule moved to key 9. */
const CHANGED = REPLAY_FLOW.replace(
  'Thanks {{name}}, see you on',
  'Thank you {{name}}! Until',
).replace(
  '"2": [ { goto: reschedule } ]',
  '"2": [ { outcome: callback-requested }, hangup ]\n      "9": [ { goto: reschedule } ]',
);

const VARS = { name: 'Ann', date: 'Monday 10:00' };

describeEachEngine('replay before release', (ctx) => {
  let app: App;
  let built: ReturnType<typeof buildTestApp>;
  let dir: string;
  const ids: Record<string, string> = {};
  const db = () => ctx.database().db;

  const start = async (body: Record<string, unknown> = {}) => {
    const res = await app.request(
      '/v1/calls',
      json({ flow: FLOW, from: 'Clinic', to: phone(), vars: VARS, ...body }),
    );
    const started = await readJson(res);
    expect(res.status, JSON.stringify(started)).toBe(202);
    return started as { id: string; customerMessageId: string };
  };
  const press = async (callId: string, node: string, key: string) => {
    const res = await app.request(
      '/hooks/speechcall',
      json({
        from: 'Clinic',
        mid: 'm',
        action: { token: signNodeToken({ callId, node, key }, built.calls.signingSecret) },
      }),
    );
    expect(res.status).toBe(200);
  };
  const status = async (customerMessageId: string, value: string) => {
    const res = await app.request('/hooks/delivery', json({ customerMessageId, status: value }));
    expect(res.status).toBe(200);
  };
  const replay = async (body: Record<string, unknown>, flow = FLOW) => {
    const res = await app.request(`/v1/flows/${flow}/replay`, json(body));
    return { status: res.status, body: await readJson(res) };
  };
  const report = async (source: string, extra: Record<string, unknown> = {}) => {
    const r = await replay({ source, since: '1h', ...extra });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    return r.body as FlowReplayReport;
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sb-replay-flows-'));
    writeFileSync(join(dir, `${FLOW}.yaml`), REPLAY_FLOW);
    built = buildTestApp(ctx.database(), { env: { FLOWS_DIR: dir } });
    app = built.app;

    // confirmed by key 1, with its SMS
    ids.confirmed = (await start()).id;
    await press(ids.confirmed, 'main', '1');
    // 2 then 1: reschedule requested
    ids.rescheduled = (await start()).id;
    await press(ids.rescheduled, 'main', '2');
    await press(ids.rescheduled, 'reschedule', '1');
    // a wrong key (7), then 1 on the retry
    ids.wrongThenOne = (await start({ vars: { name: 'Bo', date: 'Tuesday' } })).id;
    await press(ids.wrongThenOne, 'main', '7');
    await press(ids.wrongThenOne, 'main/r1', '1');
    // the call message failed: the on: failed SMS
    const failed = await start();
    ids.failed = failed.id;
    await status(failed.customerMessageId, 'failed');
    // in Ukrainian, never answered: its noResponse timer fires
    ids.silent = (await start({ lang: 'uk' })).id;
    await db()
      .update(callTimers)
      .set({ fireAt: new Date(Date.now() - 1000) })
      .where(eq(callTimers.callId, ids.silent));
    while ((await fireDueTimers(built.calls)) > 0) {
      // every due timer of this file's calls fires (the others' are 30 minutes away)
    }
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('the calls ended as the flow says (what the replay compares with)', async () => {
    const outcome = async (id: string) =>
      (await readJson(await app.request(`/v1/calls/${id}`))).outcome;
    expect(await outcome(ids.confirmed!)).toBe('confirmed');
    expect(await outcome(ids.rescheduled!)).toBe('reschedule-requested');
    expect(await outcome(ids.wrongThenOne!)).toBe('confirmed');
    expect(await outcome(ids.silent!)).toBe('no-response');
  });

  it('replays every call through the same flow: all the same', async () => {
    const r = await report(REPLAY_FLOW);
    expect(r).toMatchObject({
      flowId: FLOW,
      calls: 5,
      replayed: 5,
      same: 5,
      differing: 0,
      skipped: 0,
      items: [],
      truncated: false,
      limited: false,
      menuMismatches: 0,
    });
    expect(r.outcomes.before).toEqual(r.outcomes.after);
    expect(r.outcomes.before).toMatchObject({
      confirmed: 2,
      'reschedule-requested': 1,
      'no-response': 1,
    });
  });

  it('reports call by call where a changed flow differs: path, outcome, follow-ups', async () => {
    const r = await report(CHANGED);
    expect(r.version).toBe(compileReplayDraft(FLOW, CHANGED).compiled.version);
    expect(r).toMatchObject({ calls: 5, replayed: 5, same: 2, differing: 3, skipped: 0 });
    expect(r.differingBy).toEqual({ path: 1, outcome: 1, followUps: 2 });
    const byId = new Map(r.items.map((i) => [i.id, i]));
    expect([...byId.keys()].sort()).toEqual(
      [ids.confirmed, ids.rescheduled, ids.wrongThenOne].sort(),
    );
    // key 1's text: same path and outcome, the SMS rendered otherwise
    expect(byId.get(ids.confirmed!)).toMatchObject({
      inputs: ['1'],
      differs: ['followUps'],
      followUps: {
        before: [{ type: 'sms', text: 'Thanks Ann, see you on Monday 10:00.' }],
        after: [{ type: 'sms', text: 'Thank you Ann! Until Monday 10:00.' }],
      },
    });
    expect(byId.get(ids.confirmed!)).not.toHaveProperty('path');
    // the wrong key is replayed as the key it was, with that call's own vars
    expect(byId.get(ids.wrongThenOne!)).toMatchObject({
      inputs: ['7', '1'],
      differs: ['followUps'],
      followUps: { after: [{ type: 'sms', text: 'Thank you Bo! Until Tuesday.' }] },
    });
    // key 2 now ends the call: the paths part at step 2
    expect(byId.get(ids.rescheduled!)).toMatchObject({
      inputs: ['2', '1'],
      differs: ['path', 'outcome'],
      path: {
        before: [
          { node: 'main', key: '2' },
          { node: 'reschedule', key: '1' },
        ],
        after: [{ node: 'main', key: '2' }],
        partsAt: { step: 2, before: { node: 'reschedule', key: '1' }, after: null },
      },
      outcome: { before: 'reschedule-requested', after: 'callback-requested' },
    });
    expect(r.outcomes.after).toMatchObject({ 'callback-requested': 1, confirmed: 2 });
    expect(r.outcomes.after).not.toHaveProperty('reschedule-requested');
  });

  it('skips calls the changed flow cannot take, with the reason, and counts them', async () => {
    const needsMore = REPLAY_FLOW.replace('  date: string\n', '  date: string\n  room: string\n');
    const refused = await report(needsMore);
    expect(refused).toMatchObject({ calls: 5, replayed: 0, skipped: 5 });
    expect(refused.skippedBy['vars-refused']).toBe(5);
    expect(refused.skippedCalls[0]!.message).toContain('room');

    const englishOnly = REPLAY_FLOW.replace('languages: [en, uk]', 'languages: [en]').replace(
      '{ en: "https://cdn.example.com/en/reminder.mp3", uk: "https://cdn.example.com/uk/reminder.mp3" }',
      '"https://cdn.example.com/en/reminder.mp3"',
    );
    const noUk = await report(englishOnly);
    expect(noUk).toMatchObject({ calls: 5, replayed: 4, same: 4, skipped: 1 });
    expect(noUk.skippedBy['language-missing']).toBe(1);
    expect(noUk.skippedCalls).toEqual([
      expect.objectContaining({ id: ids.silent, reason: 'language-missing' }),
    ]);
  });

  it('takes the calls of the period only, and stops at a limit', async () => {
    expect((await report(REPLAY_FLOW, { since: '2999-01-01' })).calls).toBe(0);
    expect((await report(REPLAY_FLOW, { since: '2000-01-01', until: '2000-01-02' })).calls).toBe(0);
    const limited = await report(REPLAY_FLOW, { limit: 2 });
    expect(limited).toMatchObject({ calls: 2, replayed: 2, limited: true });
    expect((await report(REPLAY_FLOW, { limit: 5 })).limited).toBe(false);
    // the same, called in-process with a moment inside the period
    const direct = await replayFlow(db(), {
      flowId: FLOW,
      compiled: compileReplayDraft(FLOW, REPLAY_FLOW).compiled,
      since: new Date(Date.now() - 3_600_000),
    });
    expect(direct).toMatchObject({ calls: 5, same: 5 });
  });

  it('refuses a bad period, a draft that does not compile and an unknown flow', async () => {
    const badSince = await replay({ source: REPLAY_FLOW, since: 'last week' });
    expect(badSince.status).toBe(400);
    expect(badSince.body.error.code).toBe('VALIDATION_ERROR');
    expect(badSince.body.error.details[0]).toMatchObject({ path: 'since' });
    expect(badSince.body.error.details[0].message).toContain('7d');

    const backwards = await replay({
      source: REPLAY_FLOW,
      since: '2025-03-02',
      until: '2025-03-01',
    });
    expect(backwards.status).toBe(400);
    expect(backwards.body.error.details[0]).toMatchObject({ path: 'until' });

    const broken = REPLAY_FLOW.replace('[ { goto: reschedule } ]', '[ { goto: nowhere } ]');
    const invalid = await replay({ source: broken, since: '7d' });
    expect(invalid.status).toBe(400);
    expect(invalid.body.error.code).toBe('INVALID_FLOW');
    const line = broken.split('\n').findIndex((l) => l.includes('nowhere')) + 1;
    expect(invalid.body.error.details).toContainEqual(
      expect.objectContaining({
        code: 'UNKNOWN_MENU',
        message: expect.stringMatching(new RegExp(`^flows/${FLOW}\\.yaml:${line}:\\d+ `)),
      }),
    );

    const unknown = await replay({ source: REPLAY_FLOW, since: '7d' }, 'no-such-flow');
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe('NOT_FOUND');
    expect(unknown.body.error.message).toContain('no-such-flow');

    const noSource = await replay({ since: '7d' });
    expect(noSource.status).toBe(400);
    expect(noSource.body.error.details[0]).toMatchObject({ path: 'source' });
  });

  it('reads a period as a time back from now or an ISO 8601 time', () => {
    const now = new Date('2025-03-08T00:00:00Z');
    expect(replayTime('7d', now)?.toISOString()).toBe('2025-03-01T00:00:00.000Z');
    expect(replayTime('12h', now)?.toISOString()).toBe('2025-03-07T12:00:00.000Z');
    expect(replayTime('2w', now)?.toISOString()).toBe('2025-02-22T00:00:00.000Z');
    expect(replayTime('2025-03-01T09:00:00Z', now)?.toISOString()).toBe('2025-03-01T09:00:00.000Z');
    // outside years 0001 to 9999 (src/instants.ts): Postgres cannot read them back
    for (const bad of ['7', 'd7', 'last week', '2025-13-45', '7y', '', '0000-06-01', '999999w']) {
      expect(replayTime(bad, now), bad).toBeNull();
    }
    expect(() => compileReplayDraft(FLOW, 'menus: [')).toThrow(AppError);
  });

  // last: it removes what the tests above replay
  it('skips the calls whose events retention removed, the timer-only one too', async () => {
    // two days on, with RETENTION_DAYS=1: first only the calls' events go ...
    const later = { now: () => new Date(Date.now() + 2 * 86_400_000) };
    const eventsOnly = RETENTION_STEPS.filter((step) => step.kind === 'callEvents');
    while ((await runRetention(db(), later, 1, 500, eventsOnly)).more) {
      // a batch at a time, until none is left
    }
    const partial = await report(REPLAY_FLOW, { since: '2000-01-01' });
    expect(partial).toMatchObject({ calls: 5, replayed: 0, skipped: 5 });
    expect(partial.skippedBy['events-removed']).toBe(5);
    // the silent call kept no key and no status: its outcome, recorded by the timer, tells
    expect(partial.skippedCalls.find((c) => c.id === ids.silent)?.message).toContain(
      'its outcome event gone',
    );
    // ... then everything retention removes, texts included
    while ((await runRetention(db(), later, 1)).more) {
      // as above
    }
    const all = await report(REPLAY_FLOW, { since: '2000-01-01' });
    expect(all).toMatchObject({ calls: 5, replayed: 0, skipped: 5, items: [] });
    expect(all.skippedBy['events-removed']).toBe(5);
  });
});
