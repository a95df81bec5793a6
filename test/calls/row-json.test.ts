/** Rows read as JSON (`to_json`) back as drizzle rows, by the schema's own columns. */
import { getTableColumns } from 'drizzle-orm';
import { expect, it } from 'vitest';
import { jsonRowMapper } from '../../src/calls/row-json.ts';
import { calls, heldWebhooks } from '../../src/db/schema/index.ts';

it('maps a calls row from its to_json form: every column, dates as Date', () => {
  const json = {
    id: '01890000-0000-7000-8000-000000000001',
    flow_id: 'appointment-reminder',
    flow_version: 'v1',
    to: '+380501234567',
    from: 'Clinic',
    lang: 'en',
    vars: { name: 'Ann' },
    state: 'in-progress',
    outcome: null,
    snapshot: { value: 'main', context: { path: [] } },
    message_id: '01890000-0000-7000-8000-000000000002',
    ended_at: null,
    created_at: '2026-01-01T10:00:00.123456+00:00',
    updated_at: '2026-01-01T10:01:00+00:00',
    provider_message_id: 'p-1',
  };
  const row = jsonRowMapper(calls)(json);
  expect(Object.keys(row).sort()).toEqual(Object.keys(getTableColumns(calls)).sort());
  expect(row).toEqual({
    id: json.id,
    flowId: 'appointment-reminder',
    flowVersion: 'v1',
    to: '+380501234567',
    from: 'Clinic',
    lang: 'en',
    vars: { name: 'Ann' },
    state: 'in-progress',
    outcome: null,
    snapshot: { value: 'main', context: { path: [] } },
    messageId: json.message_id,
    endedAt: null,
    createdAt: new Date('2026-01-01T10:00:00.123Z'),
    updatedAt: new Date('2026-01-01T10:01:00Z'),
  });
});

it('maps held webhooks: bigint ids as numbers', () => {
  const row = jsonRowMapper(heldWebhooks)({
    id: '12',
    call_id: '01890000-0000-7000-8000-000000000001',
    inbox_id: 34,
    node: 'reschedule',
    key: '1',
    received_at: '2026-01-01T10:00:00+00:00',
  });
  expect(row).toEqual({
    id: 12,
    callId: '01890000-0000-7000-8000-000000000001',
    inboxId: 34,
    node: 'reschedule',
    key: '1',
    receivedAt: new Date('2026-01-01T10:00:00Z'),
  });
});
