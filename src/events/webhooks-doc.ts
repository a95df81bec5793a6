/**
 * The event catalog in the OpenAPI document: one top-level `webhooks` entry (OpenAPI 3.1) per
 * type, a POST Switchboard makes to the user's endpoint with the body `{ type, timestamp,
 * data }` and the three Standard Webhooks headers. Generated from EVENT_CATALOG, so the
 * document, the typed client and the catalog cannot disagree.
 *
 * @example
 * registerEventWebhooks(app.openAPIRegistry); // once, before the document is built
 */
import type { OpenAPIHono } from '@hono/zod-openapi';
import { z } from 'zod';
import { REQUEST_TIMEOUT_MS } from './schedule.ts';
import { EVENT_CATALOG, EVENT_TYPES, type EventType } from './types.ts';

export const EVENTS_TAG = {
  name: 'events',
  description:
    'events Switchboard sends to your endpoints (Standard Webhooks: signed, retried, replayable); see docs/events.md',
};

const HEADERS = z.object({
  'webhook-id': z.string().meta({
    description:
      'the event id (`evt_` and 32 hex digits): the same on every attempt and replay; deduplicate by it',
    example: 'evt_0193f1c27b4e7c1a9f3d2a6b8c0d1e2f',
  }),
  'webhook-timestamp': z.string().meta({
    description: 'seconds since the epoch when this attempt was signed; part of what is signed',
    example: '1735732800',
  }),
  'webhook-signature': z.string().meta({
    description:
      '`v1,<base64 HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<body>">`, with the endpoint\'s secret (after `whsec_`, base64-decoded); several space-separated while a rotated secret still signs',
    example: 'v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=',
  }),
});

/** `message.status` -> `MessageStatus` (the schema and operation names). */
function pascal(type: string): string {
  return type
    .split(/[._]/)
    .map((w) => w.charAt(0).toUpperCase() + w.slice(1))
    .join('');
}

/** The body of one type: `{ type, timestamp, data }`. */
function envelope(type: EventType) {
  const info = EVENT_CATALOG[type];
  return z
    .object({
      type: z.literal(type),
      timestamp: z.string().meta({
        description: 'when the event was recorded (ISO 8601): the same on every attempt',
        example: '2025-01-01T12:00:00.000Z',
      }),
      data: info.data,
    })
    .meta({ id: `${pascal(type)}Event`, description: info.description });
}

/** Adds one `webhooks` entry per event type to `registry`. */
export function registerEventWebhooks(registry: OpenAPIHono['openAPIRegistry']): void {
  for (const type of EVENT_TYPES) {
    const info = EVENT_CATALOG[type];
    registry.registerWebhook({
      method: 'post',
      path: type,
      operationId: `receive${pascal(type)}Event`,
      tags: [EVENTS_TAG.name],
      summary: `${type} (version ${info.version})`,
      description: `${info.description}\n\nSubject (the unit of ordering): \`${info.subject}\`. Answer any 2xx within ${REQUEST_TIMEOUT_MS / 1000} seconds to acknowledge; anything else is retried (docs/events.md).`,
      security: [],
      request: {
        headers: HEADERS,
        body: { required: true, content: { 'application/json': { schema: envelope(type) } } },
      },
      responses: {
        200: { description: 'received (any 2xx)' },
        400: { description: 'refused: retried on the schedule, like any other non-2xx answer' },
      },
    });
  }
}
