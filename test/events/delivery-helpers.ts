/**
 * For the delivery worker's tests: a real receiver on 127.0.0.1 that checks every request
 * with the `standardwebhooks` package (at the test clock's time), a clock that moves only when
 * told, and endpoints, events and deliveries inserted directly.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { eq } from 'drizzle-orm';
import { Webhook } from 'standardwebhooks';
import { vi } from 'vitest';
import type { Clock } from '../../src/clock.ts';
import type { Db } from '../../src/db/client.ts';
import {
  deliveryAttempts,
  endpoints,
  eventDeliveries,
  outgoingEvents,
} from '../../src/db/schema/index.ts';
import { newEndpointSecret } from '../../src/events/sign.ts';
import { uuidv7 } from '../../src/ids.ts';

/** A clock that stands still until a test moves it. */
export function stillClock(
  start: Date,
): Clock & { advance(ms: number): void; set(at: Date): void } {
  let now = start.getTime();
  return {
    now: () => new Date(now),
    advance(ms) {
      now += ms;
    },
    set(at) {
      now = at.getTime();
    },
  };
}

export interface Received {
  id: string;
  headers: IncomingHttpHeaders;
  body: string;
  /** verified with the endpoint's secret by standardwebhooks */
  verified: boolean;
}

export interface Answer {
  status: number;
  headers?: Record<string, string>;
  body?: string;
  /** never answer (a timeout) */
  hang?: boolean;
}

export interface Receiver {
  url: string;
  received: Received[];
  close(): Promise<void>;
}

/**
 * An HTTP receiver; `answer` decides each response. Requests are verified with `secret()` at
 * `clock`'s time (standardwebhooks refuses a timestamp 5 minutes from its own clock).
 */
export async function receiver(
  secret: () => string,
  clock: Clock,
  answer: (r: Received, n: number) => Answer = () => ({ status: 200 }),
): Promise<Receiver> {
  const received: Received[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const headers = req.headers;
      let verified = false;
      const spy = vi.spyOn(Date, 'now').mockReturnValue(clock.now().getTime());
      try {
        new Webhook(secret()).verify(body, headers as Record<string, string>);
        verified = true;
      } catch {
        verified = false;
      } finally {
        spy.mockRestore();
      }
      const r = { id: String(headers['webhook-id']), headers, body, verified };
      received.push(r);
      const a = answer(r, received.length);
      if (a.hang) return;
      res.writeHead(a.status, a.headers).end(a.body ?? 'ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    received,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

let seq = 0;

export async function insertEndpoint(
  db: Db,
  opts: {
    url: string;
    ordered?: boolean;
    rateLimit?: number | null;
    eventTypes?: string[] | null;
    secrets?: { secret: string; expiresAt: string | null }[];
  },
): Promise<{ id: string; secret: string }> {
  const secret = newEndpointSecret();
  const id = `ep_test${++seq}_${Math.random().toString(36).slice(2, 8)}`;
  await db.insert(endpoints).values({
    id,
    url: opts.url,
    ordered: opts.ordered ?? false,
    rateLimit: opts.rateLimit ?? null,
    eventTypes: opts.eventTypes ?? null,
    secrets: opts.secrets ?? [{ secret, expiresAt: null }],
  });
  return { id, secret: opts.secrets?.[0]?.secret ?? secret };
}

/** An event and one pending delivery of it to each endpoint, due at `at`. */
export async function insertEvent(
  db: Db,
  endpointIds: string[],
  opts: { at: Date; subject?: string; type?: string; data?: unknown },
): Promise<{ eventId: string; deliveryIds: number[] }> {
  const eventId = uuidv7(opts.at.getTime());
  const subject = opts.subject ?? `call:${eventId}`;
  await db.insert(outgoingEvents).values({
    id: eventId,
    type: opts.type ?? 'call.ended',
    subject,
    data: opts.data ?? { callId: eventId, outcome: 'done', note: 'é ✓' },
    createdAt: opts.at,
  });
  const rows = await db
    .insert(eventDeliveries)
    .values(endpointIds.map((endpointId) => ({ eventId, endpointId, subject, nextAt: opts.at })))
    .returning({ id: eventDeliveries.id });
  return { eventId, deliveryIds: rows.map((r) => r.id) };
}

export async function deliveryRow(db: Db, id: number) {
  const [row] = await db.select().from(eventDeliveries).where(eq(eventDeliveries.id, id));
  if (!row) throw new Error(`no delivery ${id}`);
  return row;
}

export async function attemptsOf(db: Db, deliveryId: number) {
  return db
    .select()
    .from(deliveryAttempts)
    .where(eq(deliveryAttempts.deliveryId, deliveryId))
    .orderBy(deliveryAttempts.id);
}

export async function endpointRow(db: Db, id: string) {
  const [row] = await db.select().from(endpoints).where(eq(endpoints.id, id));
  if (!row) throw new Error(`no endpoint ${id}`);
  return row;
}
