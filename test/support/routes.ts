/**
 * The /v1 routes with a valid request each, for the tests that probe every route
 * (test/security/routes-fuzz.test.ts, test/http/errors-wording.test.ts): one table, so a route
 * added later needs one entry here, and each of those tests fails until it has it.
 */
import type { App } from '../../src/app.ts';
import { phone, uniq } from './app.ts';

/** What a prober knows of a route: sample values to start from, then to spoil. */
export interface RouteEntry {
  /** a valid value for each path parameter (default: `x`) */
  params?: Record<string, string>;
  /** the query names the route reads */
  query?: string[];
  /** a valid JSON body, altered field by field */
  json?: () => Record<string, unknown>;
  /** a valid form body (the console's forms) */
  form?: Record<string, string>;
}

const UUID = '00000000-0000-4000-8000-000000000000';

/** A valid `POST /v1/calls` body. */
export const validCall = () => ({
  flow: 'appointment-reminder',
  from: 'Clinic',
  to: phone(),
  vars: { name: 'Ann', date: 'Monday' },
  lang: 'en',
});

/** Every /v1 route, as "METHOD /path" with Hono's `:param` patterns. */
export const API_ROUTES: Record<string, RouteEntry> = {
  'POST /v1/messages': {
    json: () => ({
      messages: [
        { type: 'sms', from: 'Shop', to: phone(), text: 'hi', customerMessageId: uniq('r') },
        {
          type: 'cascade',
          from: 'Shop',
          to: phone(),
          messageType: 'transaction',
          text: 'Hi %name=1%',
          variables: [{ id: 1, type: 'name', value: 'Ann' }],
        },
      ],
    }),
  },
  'GET /v1/messages': {
    query: ['to', 'status', 'type', 'callId', 'since', 'until', 'limit', 'cursor'],
  },
  'GET /v1/messages/:ref': { params: { ref: 'order-1' } },
  'GET /v1/inbound': { query: ['from', 'since', 'until', 'limit', 'cursor'] },
  'DELETE /v1/subjects/:phone': { params: { phone: '+380501234567' } },
  'POST /v1/opt-outs': { json: () => ({ phone: phone() }) },
  'GET /v1/opt-outs': { query: ['limit', 'cursor'] },
  'GET /v1/opt-outs/:phone': { params: { phone: '+380501234567' } },
  'DELETE /v1/opt-outs/:phone': { params: { phone: '+380501234567' } },
  'POST /v1/calls': { json: validCall },
  'POST /v1/calls/batch': {
    json: () => ({
      flow: 'appointment-reminder',
      from: 'Clinic',
      calls: [{ to: phone(), vars: { name: 'Ann', date: 'Mon' }, lang: 'uk' }],
    }),
  },
  'GET /v1/calls': { query: ['flow', 'state', 'to', 'limit', 'cursor'] },
  'GET /v1/calls/:id': { params: { id: UUID } },
  'POST /v1/campaigns': {
    json: () => ({
      flow: 'appointment-reminder',
      from: 'Clinic',
      recipients: [{ to: phone(), vars: { name: 'Ann', date: 'Mon' } }],
      startAt: '2099-01-01T00:00:00Z',
    }),
  },
  'GET /v1/campaigns': { query: ['state', 'limit', 'cursor'] },
  'GET /v1/campaigns/:id': { params: { id: UUID } },
  'GET /v1/campaigns/:id/results': { params: { id: UUID }, query: ['limit', 'cursor'] },
  'POST /v1/campaigns/:id/pause': { params: { id: UUID } },
  'POST /v1/campaigns/:id/resume': { params: { id: UUID } },
  'POST /v1/campaigns/:id/cancel': { params: { id: UUID } },
  'GET /v1/flows': {},
  'GET /v1/flows/:id': { params: { id: 'appointment-reminder' } },
  'GET /v1/flows/:id/stats': { params: { id: 'appointment-reminder' }, query: ['version', 'lang'] },
  // a flow's history: the versions it ran, one of them, two compared (`current`: the file's)
  'GET /v1/flows/:id/versions': { params: { id: 'appointment-reminder' } },
  'GET /v1/flows/:id/versions/:version': {
    params: { id: 'appointment-reminder', version: 'current' },
  },
  'GET /v1/flows/:id/diff': { params: { id: 'appointment-reminder' }, query: ['from', 'to'] },
  // a draft of the flow replayed over the calls of the last week (nothing is changed)
  'POST /v1/flows/:id/replay': {
    params: { id: 'appointment-reminder' },
    json: () => ({
      source:
        'assert: { outcomeOnEveryPath: false }\nmenus:\n  main:\n    intro: hi\n    keys:\n      "1": [hangup]\n',
      since: '7d',
    }),
  },
  // writing is off in the probers' apps (FLOWS_WRITABLE unset): a valid draft is refused, 403
  'PUT /v1/flows/:id': {
    params: { id: 'appointment-reminder' },
    json: () => ({
      source:
        'assert: { outcomeOnEveryPath: false }\nmenus:\n  main:\n    intro: hi\n    keys:\n      "1": [hangup]\n',
    }),
  },
  'POST /v1/tokens': { json: () => ({ name: uniq('r'), scopes: ['read'] }) },
  'GET /v1/tokens': {},
  'DELETE /v1/tokens/:id': { params: { id: UUID } },
  'GET /v1/audit': { query: ['token', 'route', 'since', 'until', 'limit', 'cursor'] },
  'POST /v1/endpoints': {
    json: () => ({
      url: 'https://crm.example.com/hooks',
      name: uniq('ep').toLowerCase(),
      events: ['call.ended'],
      rateLimit: 10,
      ordered: true,
      enabled: true,
      description: 'crm',
    }),
  },
  'GET /v1/endpoints': {},
  'GET /v1/endpoints/:id': { params: { id: 'ep_x' } },
  'PATCH /v1/endpoints/:id': {
    params: { id: 'ep_x' },
    json: () => ({ url: 'https://crm.example.com/hooks', events: null, enabled: false }),
  },
  'DELETE /v1/endpoints/:id': { params: { id: 'ep_x' } },
  'POST /v1/endpoints/:id/secret/rotate': {
    params: { id: 'ep_x' },
    json: () => ({ overlapSeconds: 60 }),
  },
  'GET /v1/endpoints/:id/attempts': {
    params: { id: 'ep_x' },
    query: ['status', 'limit', 'cursor'],
  },
  'GET /v1/endpoints/:id/deliveries': {
    params: { id: 'ep_x' },
    query: ['state', 'limit', 'cursor'],
  },
  'POST /v1/endpoints/:id/replay': {
    params: { id: 'ep_x' },
    json: () => ({ since: '2026-01-01T00:00:00Z' }),
  },
  'POST /v1/events/:id/replay': {
    params: { id: 'evt_0193f1c27b4e7c1a9f3d2a6b8c0d1e2f' },
    json: () => ({ endpoint: 'crm' }),
  },
};

/** The app's routes: handlers by method and path, less middleware (`ALL` on a wildcard). */
export function routeTable(app: App): string[] {
  const keys = new Set<string>();
  for (const r of app.routes) {
    if (r.method === 'ALL' && r.path.endsWith('*')) continue;
    keys.add(`${r.method} ${r.path}`);
  }
  return [...keys].sort();
}
