/**
 * A field Switchboard does not know is refused, never dropped: a misspelt `varz` would
 * otherwise start a call without its vars' checks noticing. POST /v1/calls answers 400 naming
 * the field; a batch refuses that call alone (and an unknown field of the batch itself whole);
 * a campaign refuses that row alone.
 */
import { beforeAll, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import { buildTestApp, json, phone, readJson } from '../support/app.ts';
import { describeEachEngine } from '../support/db.ts';

const VARS = { name: 'Ann', date: 'Monday' };

describeEachEngine('unknown fields of calls and campaigns', (ctx) => {
  let app: App;
  beforeAll(() => {
    app = buildTestApp(ctx.database()).app;
  });
  const post = async (path: string, body: unknown) => {
    const res = await app.request(path, json(body));
    return { status: res.status, body: await readJson(res) };
  };

  it('POST /v1/calls: 400 UNKNOWN_FIELD, nothing started', async () => {
    const to = phone();
    const res = await post('/v1/calls', {
      flow: 'appointment-reminder',
      from: 'Clinic',
      to,
      varz: VARS,
    });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({
      code: 'VALIDATION_ERROR',
      details: [expect.objectContaining({ path: 'varz', code: 'UNKNOWN_FIELD' })],
    });
    const listed = await readJson(await app.request(`/v1/calls?to=${encodeURIComponent(to)}`));
    expect(listed.items).toEqual([]);
  });

  it('POST /v1/calls/batch: the call with an unknown field alone is rejected', async () => {
    const res = await post('/v1/calls/batch', {
      flow: 'appointment-reminder',
      from: 'Clinic',
      calls: [
        { to: phone(), vars: VARS },
        { to: phone(), vars: VARS, langg: 'uk' },
      ],
    });
    expect(res.status).toBe(202);
    expect(res.body.calls.map((c: { status: string }) => c.status)).toEqual(['queued', 'rejected']);
    expect(res.body.calls[1].error.details[0]).toMatchObject({
      path: 'calls[1].langg',
      code: 'UNKNOWN_FIELD',
    });
    const whole = await post('/v1/calls/batch', {
      flow: 'appointment-reminder',
      from: 'Clinic',
      calls: [{ to: phone(), vars: VARS }],
      windoww: true,
    });
    expect(whole.status).toBe(400);
    expect(whole.body.error.details[0]).toMatchObject({ path: 'windoww', code: 'UNKNOWN_FIELD' });
  });

  it('POST /v1/campaigns: the row with an unknown field alone is rejected', async () => {
    const res = await post('/v1/campaigns', {
      flow: 'appointment-reminder',
      from: 'Clinic',
      recipients: [
        { to: phone(), vars: VARS },
        { to: phone(), name: 'Bob', date: 'Tuesday' },
      ],
    });
    expect(res.status).toBe(201);
    expect(res.body.accepted).toBe(1);
    expect(res.body.rejected[0]).toMatchObject({ row: 1, code: 'VALIDATION_ERROR' });
    expect(res.body.rejected[0].details.map((d: { path: string }) => d.path)).toEqual(
      expect.arrayContaining(['recipients[1].name']),
    );
  });
});
