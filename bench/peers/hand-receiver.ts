/**
 * Peer of part (a): the delivery receiver a team would write by hand instead of Switchboard.
 * Hono on @hono/node-server and postgres.js (its default pool of 10, statements prepared),
 * one INSERT per callback into a table of its own, deduplicated by the callback's eventId,
 * then 200. It checks the callback token as Switchboard does and nothing else: no timeline, no
 * status move, no group commit. Run as a child of `npm run bench` (PORT=0, DATABASE_URL: the
 * bench database; it prints its port as the server does).
 */
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import postgres from 'postgres';

const url = process.env.DATABASE_URL;
if (!url) throw new Error('DATABASE_URL is required');
const token = process.env.CALLBACK_TOKEN ?? '';
const sql = postgres(url, { max: 10, onnotice: () => {} });

await sql`
  create table if not exists peer_delivery_callbacks (
    event_id text primary key,
    message_id text not null,
    status text not null,
    at timestamptz,
    body jsonb not null,
    received_at timestamptz not null default now()
  )`;

interface Callback {
  eventId?: string;
  customerMessageId?: string;
  messageId?: string;
  status?: string;
  timestamp?: string;
}

const app = new Hono();
app.post('/hooks/delivery', async (c) => {
  if (c.req.header('x-callback-token') !== token) return c.json({ error: 'unauthorized' }, 401);
  const body = (await c.req.json()) as Callback;
  if (!body.eventId || !body.status) return c.json({ error: 'bad callback' }, 400);
  await sql`
    insert into peer_delivery_callbacks (event_id, message_id, status, at, body)
    values (${body.eventId}, ${body.customerMessageId ?? body.messageId ?? ''}, ${body.status},
            ${body.timestamp ?? null}, ${sql.json(body as postgres.JSONValue)})
    on conflict (event_id) do nothing`;
  return c.json({ received: true });
});

const server = serve(
  { fetch: app.fetch, port: Number(process.env.PORT ?? 0), hostname: '127.0.0.1' },
  (info) => {
    console.log(JSON.stringify({ port: info.port, msg: 'listening' }));
  },
);
process.once('SIGTERM', () => {
  server.close();
  void sql.end({ timeout: 5 }).then(() => process.exit(0));
});
